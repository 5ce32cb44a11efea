// `corral run` limits on real sandboxes: timeout (the whole process tree
// dies), memory (OOM kill), process count (fork bomb), writable layer size
// and inodes, and a double-forked daemon that must not outlive the command.
//
// Every workload here stops by itself even if the limit under test were
// broken: sleeps are bounded (or killed by this test by pid, see
// kill_leftovers), loops count, writes are capped by the command itself.
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/paths.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using std::chrono::seconds;
constexpr std::uint64_t kMiB = 1024 * 1024;

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += "  " + e + "\n";
  return s;
}

// Processes this test started (identified by their exact, unique command
// line) that a broken sandbox left on the host: reported by the caller,
// and killed here by pid so a failing run leaves nothing behind.
void kill_leftovers(const std::string& exact_cmdline) {
  for (const std::string& p : host_processes_matching(exact_cmdline, /*exact=*/true)) {
    pid_t pid = static_cast<pid_t>(strtol(p.c_str(), nullptr, 10));
    if (pid > 1) kill(pid, SIGKILL);
  }
}

TEST(run_limits, TimeoutKillsTheWholeTree) {
  // A background child, a child escaped into its own session, and the
  // foreground sleep: all three must die when the timeout hits.
  RunOutcome r = run_sandbox(
      {"--timeout", "2s"},
      {"sh", "-c", "sleep 987654 & (setsid sleep 987654 &) ; sleep 987654"}, {}, seconds(60));
  auto left = host_processes_matching("sleep 987654");
  kill_leftovers("sleep 987654");
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_LT(r.wall, seconds(30));
  ASSERT_TRUE(r.report.is_object()) << r.err;
  EXPECT_EQ(r.report["exit_code"], 124);
  EXPECT_EQ(r.report["limit_hit"], "timeout") << r.report.dump();
  EXPECT_EQ(r.report["timed_out"], true);
  EXPECT_GE(r.report.value("wall_ms", 0), 1900) << r.report.dump();
  EXPECT_LT(r.report.value("wall_ms", 0), 30000) << r.report.dump();
  EXPECT_NE(r.err.find("timed out"), std::string::npos) << r.err;
  EXPECT_TRUE(left.empty()) << "left on the host after the timeout:\n" << join(left);
  expect_sandbox_cleaned_up(r.report, "timeout");
}

TEST(run_limits, MemoryLimitOomKills) {
  // 200 chunks of 1 MiB, each filled (bytes * n writes every byte), kept
  // alive: far over the 64 MiB limit, harmless on the host if it were not.
  const std::string script =
      "import sys\n"
      "chunks = []\n"
      "for i in range(200):\n"
      "    chunks.append(b'x' * (1 << 20))\n"
      "print('allocated', len(chunks))\n";
  RunOutcome r = run_sandbox({"--memory", "64Mi"}, {"python3", "-c", script}, {}, seconds(120));
  if (r.exit_code == 127 && r.report.is_object() && r.report["error"].is_object() &&
      r.report["error"]["stage"] == "exec") {
    CORRAL_SKIP_OR_FAIL("python3 is not in the sandbox's base layer");
  }
  EXPECT_EQ(r.exit_code, 137) << r.err;
  EXPECT_EQ(r.out.find("allocated"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("memory"), std::string::npos) << r.err;
  ASSERT_TRUE(r.report.is_object()) << r.err;
  EXPECT_EQ(r.report["oom_killed"], true) << r.report.dump();
  EXPECT_EQ(r.report["limit_hit"], "memory") << r.report.dump();
  EXPECT_GT(r.report.value("oom_kills", 0), 0) << r.report.dump();
  EXPECT_LE(r.report.value("memory_peak_bytes", std::uint64_t{0}), 64 * kMiB + 4 * kMiB)
      << r.report.dump();
  expect_sandbox_cleaned_up(r.report, "out of memory");
}

TEST(run_limits, ForkBombIsContained) {
  // 200 background sleeps against --pids 32. The sleeps end by themselves
  // after 31.7 s and the timeout ends the run in any case.
  RunOutcome r = run_sandbox(
      {"--pids", "32", "--timeout", "20s"},
      {"sh", "-c", "i=0; while [ $i -lt 200 ]; do sleep 31.7 & i=$((i+1)); done; wait"}, {},
      seconds(60));
  auto left = host_processes_matching("sleep 31.7");
  kill_leftovers("sleep 31.7");
  ASSERT_TRUE(r.report.is_object()) << r.err;
  // Contained: the loop could not start 200 processes, so it stopped early
  // (the shell gives up when fork fails) instead of running into the timeout.
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.exit_code, 124) << "the fork loop was not stopped by the process limit\n" << r.err;
  EXPECT_NE(r.err.find("fork"), std::string::npos) << r.err;
  EXPECT_GT(r.report.value("pids_max_hits", std::uint64_t{0}), 0u)
      << "the report does not show the process limit being hit: " << r.report.dump();
  EXPECT_EQ(r.report["limit_hit"], "pids") << r.report.dump();
  // The host can still fork.
  int status = -1;
  host_sh("/bin/true", &status);
  EXPECT_EQ(status, 0) << "the host cannot run /bin/true after the fork bomb";
  // And the sandbox is gone.
  EXPECT_TRUE(left.empty()) << "left on the host after the fork bomb:\n" << join(left);
  expect_sandbox_cleaned_up(r.report, "fork bomb");
}

TEST(run_limits, DiskLimitGivesEnospcWithoutTouchingHostDisk) {
  // The host file systems a leaking layer could land on.
  const std::vector<std::string> paths = {"/", data_dir(), "/run", run_dir(), "/tmp"};
  std::vector<std::uint64_t> before;
  for (const auto& p : paths) before.push_back(free_disk_bytes(p));

  // head itself stops after 1 GiB; the sandbox then waits (on stdin) so
  // the host's free space is measured while the layer is full. Other tests
  // running in parallel (an image build writes ~180 MiB) move the host's
  // free space too, so the bound is half of what a leaking layer would take.
  CorralProcess corral({"run", "--disk", "64Mi", "--", "sh", "-c",
                        "head -c 1G /dev/zero > /workspace/f; echo head-rc=$?; "
                        "echo written; read x; echo done"});
  ASSERT_TRUE(corral.started());
  bool written = corral.wait_for_stdout("written", std::chrono::seconds(60));
  std::vector<std::uint64_t> during;
  for (const auto& p : paths) during.push_back(free_disk_bytes(p));
  RunOutcome r = corral.wait(seconds(60));
  ASSERT_TRUE(written) << r.out << r.err;

  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("head-rc="), std::string::npos);
  EXPECT_EQ(r.out.find("head-rc=0"), std::string::npos) << "the 1 GiB write succeeded: " << r.out;
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
  for (size_t i = 0; i < paths.size(); ++i) {
    if (before[i] == 0) continue;  // path absent on this host
    std::int64_t shrink = static_cast<std::int64_t>(before[i]) - static_cast<std::int64_t>(during[i]);
    EXPECT_LT(shrink, static_cast<std::int64_t>(512 * kMiB))
        << "free space of " << paths[i] << " shrank by " << shrink / kMiB
        << " MiB while the sandbox's layer was full";
  }
  ASSERT_TRUE(r.report.is_object()) << r.err;
  std::uint64_t used = r.report.value("disk_used_bytes", std::uint64_t{0});
  EXPECT_GE(used, 48 * kMiB) << r.report.dump();
  EXPECT_LE(used, 64 * kMiB) << r.report.dump();
  expect_sandbox_cleaned_up(r.report, "full writable layer");
}

TEST(run_limits, InodeLimitGivesEnospc) {
  RunOutcome r = run_sandbox(
      {"--inodes", "500"},
      {"sh", "-c",
       "i=0; while [ $i -lt 2000 ]; do true > /workspace/f$i || { echo stopped-at=$i; exit 9; }; "
       "i=$((i+1)); done; echo made-all"});
  EXPECT_EQ(r.exit_code, 9) << r.out << r.err;
  EXPECT_EQ(r.out.find("made-all"), std::string::npos) << r.out;
  auto pos = r.out.find("stopped-at=");
  ASSERT_NE(pos, std::string::npos) << r.out;
  long stopped = strtol(r.out.c_str() + pos + 11, nullptr, 10);
  EXPECT_GT(stopped, 0);
  EXPECT_LE(stopped, 500) << "more files than --inodes allows";
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
  expect_sandbox_cleaned_up(r.report, "inode limit");
}

TEST(run_limits, DoubleForkedDaemonDoesNotOutliveTheCommand) {
  RunOutcome r =
      run_sandbox({"--timeout", "60s"}, {"sh", "-c", "(setsid sh -c \"sleep 876543\" &); exit 0"},
                  {}, seconds(90));
  auto left = host_processes_matching("sleep 876543");
  kill_leftovers("sleep 876543");
  kill_leftovers("sh -c sleep 876543");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(r.wall, seconds(10)) << "corral waited for the daemon";
  EXPECT_TRUE(left.empty()) << "daemon left on the host:\n" << join(left);
  ASSERT_TRUE(r.report.is_object()) << r.err;
  EXPECT_TRUE(r.report["limit_hit"].is_null()) << r.report.dump();
  expect_sandbox_cleaned_up(r.report, "double-forked daemon");
}

}  // namespace
}  // namespace corral::testing
