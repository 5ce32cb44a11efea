// Two sandboxes at the same time do not see each other (F1, D2, T1
// "cross-task interference"): sandbox A leaves marker files in its /tmp and
// /workspace and keeps running; sandbox B must see neither the files nor
// A's processes, and the host's /tmp must not hold A's marker either.
#include <gtest/gtest.h>

#include "security/probe_session.h"

namespace corral::testing {
namespace {

TEST(Concurrency, SandboxesDoNotSeeEachOther) {
  if (!is_root()) CORRAL_SKIP_OR_FAIL("security tests run as root");
  std::string token = unique_token("marker");
  std::string tmp_marker = "/tmp/" + token;
  std::string ws_marker = "/workspace/" + token;
  BackgroundSandbox a({"--timeout", "60s"}, {"sleep", "20", tmp_marker, ws_marker});
  ASSERT_GT(a.pid(), 0);
  auto sleeping = a.wait_for("sleep", "state", "sleeping", std::chrono::seconds(30));
  ASSERT_TRUE(sleeping.has_value()) << "sandbox A did not start:\n" << a.out() << a.err();
  for (const json& m : parse_lines(a.out())) {
    if (m.value("cmd", "") == "marker") {
      ASSERT_TRUE(m.value("ok", false)) << "A could not write its marker: " << m.dump();
    }
  }
  pid_t a_host_pid = find_workload(a, token);
  ASSERT_GT(a_host_pid, 0) << "A's workload not found on the host";

  ProbeRun b = run_probe({}, {"read", tmp_marker, "+", "read", ws_marker, "+", "ps", "+",
                              "kill0", std::to_string(a_host_pid), "+", "status"});
  ASSERT_EQ(b.outcome.exit_code, 0) << b.describe();
  for (const json& r : b.all("read")) {
    EXPECT_EQ(r.value("ok", true), false) << "B sees A's file: " << r.dump();
    EXPECT_EQ(r.value("errno", json()), "ENOENT") << r.dump();
  }
  // A's workload is "corral_probe sleep 20 /tmp/<token> ..." (B's own
  // command line names the token too, so look for A's).
  for (const json& p : b.all("proc")) {
    EXPECT_EQ(p.value("cmdline", "").find("sleep 20 " + tmp_marker), std::string::npos)
        << "B sees A's process: " << p.dump();
  }
  EXPECT_EQ(b.first("kill0").value("errno", json()), "ESRCH") << b.describe();
  EXPECT_LE(b.first("status").value("visible_pids", 1000), 4) << b.describe();

  // A's /tmp was its own: nothing landed on the host.
  EXPECT_FALSE(path_exists(tmp_marker)) << "A's /tmp marker is on the host";
  if (path_exists(tmp_marker)) unlink(tmp_marker.c_str());

  // A is still running (B did not disturb it), then ends cleanly.
  EXPECT_NE(proc_state(a_host_pid), 0) << "A died while B ran";
  a.stop(SIGTERM, std::chrono::seconds(15));
  EXPECT_TRUE(wait_gone(a_host_pid, std::chrono::seconds(10)));
}

// The same from the other side, with --root in both: root inside one
// sandbox still cannot see or signal the other.
TEST(Concurrency, RootSandboxesDoNotSeeEachOther) {
  if (!is_root()) CORRAL_SKIP_OR_FAIL("security tests run as root");
  std::string token = unique_token("rootmarker");
  BackgroundSandbox a({"--root", "--timeout", "60s"}, {"sleep", "20", "/tmp/" + token});
  ASSERT_TRUE(a.wait_for("sleep", "state", "sleeping", std::chrono::seconds(30)).has_value())
      << a.out() << a.err();
  pid_t a_host_pid = find_workload(a, token);
  ASSERT_GT(a_host_pid, 0);
  ProbeRun b = run_probe({"--root"}, {"read", "/tmp/" + token, "+", "ps", "+", "kill0",
                                      std::to_string(a_host_pid)});
  ASSERT_EQ(b.outcome.exit_code, 0) << b.describe();
  EXPECT_EQ(b.first("read").value("ok", true), false) << b.describe();
  for (const json& p : b.all("proc")) {
    EXPECT_EQ(p.value("cmdline", "").find("sleep 20 /tmp/" + token), std::string::npos)
        << p.dump();
  }
  EXPECT_EQ(b.first("kill0").value("errno", json()), "ESRCH") << b.describe();
  a.stop(SIGTERM, std::chrono::seconds(15));
  EXPECT_TRUE(wait_gone(a_host_pid, std::chrono::seconds(10)));
}

}  // namespace
}  // namespace corral::testing
