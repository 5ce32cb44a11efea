// A throwaway PostgreSQL cluster for tests (issue 18): Debian's server
// binaries run as the `postgres` user on a temporary directory, listening
// on a free loopback port only, password (SCRAM) authentication with a
// random password, fsync off (a test's data need not survive a power cut).
// Stopped and removed with the object; never touches a system cluster.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "base/result.h"

namespace corral::testing {

class PgCluster {
 public:
  // kUnavailable (with why) when the server binaries or the postgres user
  // are missing: the caller skips (CORRAL_SKIP_OR_FAIL).
  static Result<std::unique_ptr<PgCluster>> start();
  ~PgCluster();
  PgCluster(const PgCluster&) = delete;
  PgCluster& operator=(const PgCluster&) = delete;

  // One cluster for the whole test process, started on first use and
  // stopped at exit; null (with `why`) when it cannot start.
  static PgCluster* shared(std::string& why);

  // A new empty database; its postgres:// URL (with the password).
  Result<std::string> create_database(const std::string& name);
  // The same with a name of its own ("t1", "t2", ...).
  Result<std::string> fresh_database();
  // The URL of the cluster's default database `postgres`.
  std::string url(const std::string& database = "postgres") const;
  std::uint16_t port() const { return port_; }
  const std::string& password() const { return password_; }

  // Stops the server at once (SIGQUIT: as a crash would) or cleanly
  // (SIGINT), and starts it again on the same port and data.
  Status restart(bool crash);
  void stop(bool crash);
  Status start_server();

 private:
  PgCluster() = default;

  std::string bin_;  // /usr/lib/postgresql/<v>/bin
  std::string dir_;  // temporary: data/, the socket, the password file
  std::string password_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
  int databases_ = 0;
};

}  // namespace corral::testing

// In a test body or SetUp: `url` (a std::string) gets a fresh database of
// the shared cluster; the test skips (fails under CORRAL_MUST_WORK=1) when
// no cluster can start. Includes support/skip.h's macro: gtest's too.
#define CORRAL_FRESH_PG_DATABASE(url)                                  \
  do {                                                                 \
    std::string no_cluster_why;                                        \
    ::corral::testing::PgCluster* shared_cluster =                     \
        ::corral::testing::PgCluster::shared(no_cluster_why);          \
    if (shared_cluster == nullptr)                                     \
      CORRAL_SKIP_OR_FAIL("no PostgreSQL cluster: " + no_cluster_why); \
    auto fresh_url = shared_cluster->fresh_database();                 \
    ASSERT_TRUE(fresh_url) << fresh_url.error().to_string();           \
    (url) = *fresh_url;                                                \
  } while (0)
