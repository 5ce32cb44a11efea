// The posture of processes started through the daemon (ADR 0004, ADR
// 0006), checked from the host as host_posture_test.cc does for `corral
// run`: each one under exactly one seccomp filter, with no_new_privs and no
// capability, in the commands' user namespace; the zygote with no
// capability, an empty bounding set and no_new_privs, as a uid of the
// sandbox's namespace that the commands' namespace does not map; and no
// process can signal the zygote, even as root of the sandbox.
#include <gtest/gtest.h>

#include <string>

#include "security/sandbox_procs.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using nlohmann::json;

struct Started {
  std::string sandbox;
  pid_t pid = -1;     // the background process, host pid
  pid_t zygote = -1;  // its parent, host pid
  std::string token;
};

// A sandbox (`spec`) with a background `sleep <token>` found on the host.
Started start_sandbox_with_sleeper(TestDaemon& d, const std::string& spec) {
  Started s;
  s.sandbox = d.create_sandbox(spec);
  if (s.sandbox.empty()) return s;
  Sleeper sl = start_sleeper(d, s.sandbox);
  if (sl.process_id.empty()) ADD_FAILURE() << "background start failed";
  s.pid = sl.pid;
  s.token = sl.token;
  if (s.pid > 0) s.zygote = parent_of(s.pid);
  return s;
}

TEST(DaemonExecPosture, ProcessesAreFilteredAndUnprivilegedTheZygoteHoldsNothing) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("security tests run as root");
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  Started s = start_sandbox_with_sleeper(d, "{}");
  ASSERT_FALSE(s.sandbox.empty());
  ASSERT_GT(s.pid, 0) << "background sleep not found on the host";

  const std::string st = read_text("/proc/" + std::to_string(s.pid) + "/status");
  EXPECT_EQ(status_field(st, "Seccomp"), "2") << st;
  // Exactly one filter: the zygote's, inherited, or (a policy that refuses
  // setns) its own; never two stacked.
  EXPECT_EQ(status_field(st, "Seccomp_filters"), "1") << st;
  EXPECT_EQ(status_field(st, "NoNewPrivs"), "1") << st;
  EXPECT_EQ(status_field(st, "CapEff"), "0000000000000000") << st;
  EXPECT_EQ(status_field(st, "CapPrm"), "0000000000000000") << st;
  EXPECT_EQ(status_field(st, "CapBnd"), "0000000000000000") << st;
  EXPECT_EQ(status_field(st, "CapAmb"), "0000000000000000") << st;
  std::istringstream uids(status_field(st, "Uid"));
  long uid;
  while (uids >> uid) EXPECT_NE(uid, 0) << "a daemon-started process is host root: " << st;

  ASSERT_GT(s.zygote, 0);
  const std::string zs = read_text("/proc/" + std::to_string(s.zygote) + "/status");
  EXPECT_EQ(status_field(zs, "Name"), "corral-zygote") << zs;
  EXPECT_EQ(status_field(zs, "NoNewPrivs"), "1") << zs;
  EXPECT_EQ(status_field(zs, "CapEff"), "0000000000000000") << zs;
  EXPECT_EQ(status_field(zs, "CapPrm"), "0000000000000000") << zs;
  EXPECT_EQ(status_field(zs, "CapBnd"), "0000000000000000") << zs;
  // The last id of the sandbox's block: never host root, and not an id the
  // commands' namespace maps (its map ends one id earlier).
  std::istringstream zuids(status_field(zs, "Uid"));
  long zuid = -1;
  while (zuids >> uid) {
    EXPECT_NE(uid, 0) << "the zygote is host root: " << zs;
    if (zuid < 0) zuid = uid;
    EXPECT_EQ(uid, zuid) << zs;
  }
  std::istringstream map(read_text("/proc/" + std::to_string(s.pid) + "/uid_map"));
  long inside = -1, outside = -1, count = -1;
  map >> inside >> outside >> count;
  EXPECT_EQ(inside, 0);
  EXPECT_GE(zuid, outside + count) << "the commands' namespace maps the zygote's uid";
  // The commands' namespace is not the zygote's.
  char a[64] = {}, b[64] = {};
  ASSERT_GT(readlink(("/proc/" + std::to_string(s.pid) + "/ns/user").c_str(), a, sizeof a - 1), 0);
  ASSERT_GT(readlink(("/proc/" + std::to_string(s.zygote) + "/ns/user").c_str(), b, sizeof b - 1),
            0);
  EXPECT_STRNE(a, b);

  EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + s.sandbox).status, 200);
}

TEST(DaemonExecPosture, RootOfTheSandboxCannotSignalTheZygote) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("security tests run as root");
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  Started s = start_sandbox_with_sleeper(d, R"({"root": true})");
  ASSERT_FALSE(s.sandbox.empty());
  ASSERT_GT(s.zygote, 0) << "background sleep not found on the host";
  // The zygote's pid inside the sandbox: the last NSpid entry.
  const std::string inner = inner_pid(s.zygote);
  ASSERT_FALSE(inner.empty());
  // The same Landlock domain, CAP_KILL in the --root set: only the
  // credentials stand between them (another uid, capabilities in another
  // user namespace), with or without Landlock. Signal 0 probes without
  // harming.
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
