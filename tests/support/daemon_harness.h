// A real `corral serve` for the daemon tests: its own data dir and socket
// (the run dir stays the default, /run/corral: uid blocks and sandbox locks
// are host-wide and must be shared with every other corral), a free
// loopback port, and an HTTP client for it. The destructor destroys every
// sandbox the daemon still has, stops it, and removes its directories.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "http/http_client.h"

namespace corral::testing {

struct HttpReply {
  int status = 0;
  std::string body;
  http::Headers headers;
  nlohmann::json json() const;  // parsed body ({} when it is not JSON)
};

class TestDaemon {
 public:
  // Starts `corral serve` with `extra_args`; `config_yaml` (if any) is
  // written to a file and passed with --config; `extra_env` ("NAME=value")
  // is added to the environment it inherits (a restart keeps it).
  explicit TestDaemon(std::vector<std::string> extra_args = {}, std::string config_yaml = {},
                      std::vector<std::string> extra_env = {});
  ~TestDaemon();
  TestDaemon(const TestDaemon&) = delete;
  TestDaemon& operator=(const TestDaemon&) = delete;

  bool ready() const { return port_ != 0; }
  // Everything the daemon printed so far (stdout and stderr), read all the
  // time by a thread of the harness, so the daemon never blocks on a full
  // pipe and tests can check its whole output.
  std::string output() const;
  // True once the output holds `text`, waiting up to 5 s: the daemon's
  // stdout and stderr pass through separate pipes, so a line on one may
  // arrive after a later line on the other.
  bool wait_output(const std::string& text) const;
  pid_t pid() const { return pid_; }
  std::uint16_t port() const { return port_; }
  const std::string& socket_path() const { return socket_; }
  const std::string& data_dir() const { return data_dir_; }
  std::string api_key() const;  // contents of <data>/api-key
  std::string tcp_url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string unix_url() const { return "unix:" + socket_; }

  // One request on a fresh connection. `via_tcp` adds the bearer key unless
  // `with_key` is false. With no reply (status 0), the body says why: what
  // failed, whether the daemon still runs, and the end of its output.
  HttpReply request(const std::string& method, const std::string& target,
                    const std::string& body = {}, bool via_tcp = false, bool with_key = true,
                    http::Headers headers = {});
  // POST /v1/sandboxes, returns the id ("" on failure, with the reply in *reply).
  std::string create_sandbox(const std::string& body = "{}", HttpReply* reply = nullptr);
  // POST .../exec {"cmd": cmd} and returns the result JSON.
  nlohmann::json exec(const std::string& id, const std::string& cmd);

  // The audit log's records of `type`, in order.
  std::vector<nlohmann::json> audit_records(const std::string& type) const;
  // The same once there are `at_least` of them (appends from the proxy,
  // the broker and the read watch go through the journal), or after 2 s.
  std::vector<nlohmann::json> wait_audit(const std::string& type, std::size_t at_least) const;

  // SIGKILL the daemon (crash tests); restart() then starts it again on
  // the same data dir, socket and port (false if it does not come back).
  bool kill9();
  bool restart();
  // SIGTERM and wait. Returns the wait status (-1: it was not running, or
  // had to be killed after 5 s).
  int stop();

 private:
  bool launch();
  void start_drain();
  void stop_drain();
  std::string why_no_reply(const std::string& what);
  std::vector<std::string> args_;
  std::vector<std::string> env_;  // added to the environment (extra_env)
  std::string dir_, data_dir_, socket_, config_path_;
  mutable std::mutex output_mu_;
  std::string output_;
  std::thread drain_;
  std::atomic<bool> drain_stop_{false};
  // Read by request() on the tests' own threads (why_no_reply) while the test
  // thread kills or restarts the daemon.
  std::atomic<pid_t> pid_{-1};
  std::uint16_t port_ = 0;
  int out_fd_ = -1;
};

}  // namespace corral::testing
