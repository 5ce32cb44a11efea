// The posture of processes started through the daemon (ADR 0004), checked
// from the host as host_posture_test.cc does for `corral run`: each one
// under the seccomp filter (exactly one, inherited from the zygote), with
// no_new_privs and no capability; the zygote itself filtered, with an empty
// bounding set; and, with Landlock's signal scoping, no process can signal
// the zygote even as root of the sandbox (each process has a Landlock domain
// of its own, which the zygote is outside of).
#include <dirent.h>
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "jail/landlock.h"
#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using nlohmann::json;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string field(const std::string& status, const std::string& key) {
  std::istringstream in(status);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::string v = line.substr(key.size() + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  }
  return "";
}

// The host pid of the process whose command line is exactly `argv` joined
// by NULs, or -1.
pid_t find_by_cmdline(const std::string& wanted) {
  DIR* d = opendir("/proc");
  if (d == nullptr) return -1;
  pid_t found = -1;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    if (read_text("/proc/" + std::string(e->d_name) + "/cmdline") == wanted) {
      found = static_cast<pid_t>(pid);
      break;
    }
  }
  closedir(d);
  return found;
}

struct Started {
  std::string sandbox;
  pid_t pid = -1;     // the background process, host pid
  pid_t zygote = -1;  // its parent, host pid
  std::string token;
};

// A sandbox (`spec`) with a background `sleep <token>` found on the host.
Started start_sleeper(TestDaemon& d, const std::string& spec) {
  Started s;
  std::mt19937_64 rng(std::random_device{}());
  s.token = "3600." + std::to_string(rng() % 1000000);
  s.sandbox = d.create_sandbox(spec);
  if (s.sandbox.empty()) return s;
  json body{{"argv", {"sleep", s.token}}};
  HttpReply r = d.request("POST", "/v1/sandboxes/" + s.sandbox + "/processes", body.dump());
  if (r.status != 201) {
    ADD_FAILURE() << "background start: " << r.status << " " << r.body;
    return s;
  }
  const std::string cmdline = std::string("sleep") + '\0' + s.token + '\0';
  for (int i = 0; i < 200 && s.pid < 0; ++i) {
    s.pid = find_by_cmdline(cmdline);
    if (s.pid < 0) usleep(10000);
  }
  if (s.pid > 0)
    s.zygote =
        std::atoi(field(read_text("/proc/" + std::to_string(s.pid) + "/status"), "PPid").c_str());
  return s;
}

TEST(DaemonExecPosture, ProcessesAreFilteredUnprivilegedAndTheZygoteToo) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("security tests run as root");
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  Started s = start_sleeper(d, "{}");
  ASSERT_FALSE(s.sandbox.empty());
  ASSERT_GT(s.pid, 0) << "background sleep not found on the host";

  const std::string st = read_text("/proc/" + std::to_string(s.pid) + "/status");
  EXPECT_EQ(field(st, "Seccomp"), "2") << st;
  // One filter: the zygote's, inherited; not a second copy per process.
  EXPECT_EQ(field(st, "Seccomp_filters"), "1") << st;
  EXPECT_EQ(field(st, "NoNewPrivs"), "1") << st;
  EXPECT_EQ(field(st, "CapEff"), "0000000000000000") << st;
  EXPECT_EQ(field(st, "CapPrm"), "0000000000000000") << st;
  EXPECT_EQ(field(st, "CapBnd"), "0000000000000000") << st;
  EXPECT_EQ(field(st, "CapAmb"), "0000000000000000") << st;
  std::istringstream uids(field(st, "Uid"));
  long uid;
  while (uids >> uid) EXPECT_NE(uid, 0) << "a daemon-started process is host root: " << st;

  ASSERT_GT(s.zygote, 0);
  const std::string zs = read_text("/proc/" + std::to_string(s.zygote) + "/status");
  EXPECT_EQ(field(zs, "Name"), "corral-zygote") << zs;
  EXPECT_EQ(field(zs, "Seccomp"), "2") << "the zygote is not filtered: " << zs;
  EXPECT_EQ(field(zs, "NoNewPrivs"), "1") << zs;
  EXPECT_EQ(field(zs, "CapBnd"), "0000000000000000") << zs;
  // Root of the sandbox's user namespace only: never host root.
  std::istringstream zuids(field(zs, "Uid"));
  while (zuids >> uid) EXPECT_NE(uid, 0) << "the zygote is host root: " << zs;

  EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + s.sandbox).status, 200);
}

TEST(DaemonExecPosture, RootOfTheSandboxCannotSignalTheZygote) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("security tests run as root");
  if (landlock_abi() < 6) CORRAL_SKIP_OR_FAIL("Landlock signal scoping needs Landlock ABI 6");
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  Started s = start_sleeper(d, R"({"root": true})");
  ASSERT_FALSE(s.sandbox.empty());
  ASSERT_GT(s.zygote, 0) << "background sleep not found on the host";
  // The zygote's pid inside the sandbox: the last NSpid entry.
  std::istringstream ns(field(read_text("/proc/" + std::to_string(s.zygote) + "/status"), "NSpid"));
  std::string inner;
  while (ns >> inner) {
  }
  ASSERT_FALSE(inner.empty());
  // Same uid (0 inside), CAP_KILL in the --root set: only Landlock's signal
  // scope stands between them. Signal 0 probes without harming.
  json r =
      d.exec(s.sandbox, "kill -0 " + inner + " 2>&1; echo zygote=$?; kill -0 $$; echo self=$?");
  const std::string out = r.value("stdout", "");
  EXPECT_NE(out.find("self=0"), std::string::npos) << r.dump();
  EXPECT_NE(out.find("zygote=1"), std::string::npos)
      << "a process of the sandbox could signal its zygote: " << r.dump();
  // Refused (EPERM), not missing (ESRCH): the pid was the zygote's.
  EXPECT_NE(out.find("not permitted"), std::string::npos) << r.dump();
  // And the zygote is still there.
  EXPECT_EQ(kill(s.zygote, 0), 0);
  EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + s.sandbox).status, 200);
}

}  // namespace
}  // namespace corral::testing
