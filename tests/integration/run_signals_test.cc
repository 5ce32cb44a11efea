// Signals sent to the `corral` process while its sandbox runs: SIGTERM,
// SIGINT and SIGHUP end the sandbox (exit 128+N, nothing left behind);
// other signals (SIGUSR1) are forwarded to the command.
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Polls until a process with exactly this command line exists on the host.
bool wait_for_host_process(const std::string& exact_cmdline, milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!host_processes_matching(exact_cmdline, /*exact=*/true).empty()) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return false;
}

void kill_leftovers(const std::string& exact_cmdline) {
  for (const std::string& p : host_processes_matching(exact_cmdline, /*exact=*/true)) {
    pid_t pid = static_cast<pid_t>(strtol(p.c_str(), nullptr, 10));
    if (pid > 1) kill(pid, SIGKILL);
  }
}

struct EndingSignal {
  int sig;
  const char* name;
  const char* sleep_cmdline;  // unique per case, to find it on the host
};

void PrintTo(const EndingSignal& s, std::ostream* os) { *os << s.name; }

class run_signals_ending : public ::testing::TestWithParam<EndingSignal> {};

TEST_P(run_signals_ending, EndsTheSandboxAndItsProcesses) {
  const EndingSignal& p = GetParam();
  const std::string seconds_arg = std::string(p.sleep_cmdline).substr(6);  // after "sleep "
  // --timeout bounds the sleep should the signal be lost.
  CorralProcess corral({"run", "--timeout", "60s", "--", "sleep", seconds_arg});
  ASSERT_TRUE(corral.started());
  bool running = wait_for_host_process(p.sleep_cmdline, milliseconds(20000));
  auto sent_at = std::chrono::steady_clock::now();
  EXPECT_TRUE(corral.send_signal(p.sig));
  RunOutcome r = corral.wait(seconds(60));
  auto took = std::chrono::steady_clock::now() - sent_at;
  auto left = host_processes_matching(p.sleep_cmdline);
  kill_leftovers(p.sleep_cmdline);
  ASSERT_TRUE(running) << "the sandbox's sleep never appeared on the host\n" << r.err;

  EXPECT_EQ(r.exit_code, 128 + p.sig) << r.err;
  EXPECT_LT(took, seconds(5)) << "corral took long to end after " << p.name;
  EXPECT_TRUE(left.empty()) << "still on the host after " << p.name << ": " << left.front();
  ASSERT_TRUE(r.report.is_object()) << r.err;
  EXPECT_EQ(r.report["exit_code"], 128 + p.sig);
  EXPECT_EQ(r.report["signal"], p.name) << r.report.dump();
  EXPECT_TRUE(r.report["limit_hit"].is_null()) << r.report.dump();
  expect_sandbox_cleaned_up(r.report, p.name);
}

INSTANTIATE_TEST_SUITE_P(
    Signals, run_signals_ending,
    ::testing::Values(EndingSignal{SIGTERM, "SIGTERM", "sleep 765431"},
                      EndingSignal{SIGINT, "SIGINT", "sleep 765432"},
                      EndingSignal{SIGHUP, "SIGHUP", "sleep 765433"}),
    [](const ::testing::TestParamInfo<EndingSignal>& info) {
      return std::string(info.param.name);
    });

TEST(run_signals, Usr1IsForwardedToTheCommand) {
  // "ready" is printed once the trap is installed, so the signal cannot
  // arrive before the command can handle it.
  CorralProcess corral({"run", "--timeout", "60s", "--", "sh", "-c",
                        "trap \"echo got-usr1; exit 7\" USR1; echo ready; "
                        "while :; do sleep 0.1; done"});
  ASSERT_TRUE(corral.started());
  bool ready = corral.wait_for_stdout("ready", milliseconds(20000));
  EXPECT_TRUE(corral.send_signal(SIGUSR1));
  RunOutcome r = corral.wait(seconds(60));
  ASSERT_TRUE(ready) << r.out << r.err;
  EXPECT_NE(r.out.find("got-usr1"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 7) << r.err;
  ASSERT_TRUE(r.report.is_object()) << r.err;
  EXPECT_EQ(r.report["exit_code"], 7);
  EXPECT_TRUE(r.report["signal"].is_null()) << r.report.dump();
  EXPECT_EQ(r.report["timed_out"], false);
  expect_sandbox_cleaned_up(r.report, "SIGUSR1 forwarded");
}

TEST(run_signals, Usr2IsForwardedToTheCommand) {
  CorralProcess corral({"run", "--timeout", "60s", "--", "sh", "-c",
                        "trap \"echo got-usr2; exit 8\" USR2; echo ready; "
                        "while :; do sleep 0.1; done"});
  ASSERT_TRUE(corral.started());
  bool ready = corral.wait_for_stdout("ready", milliseconds(20000));
  EXPECT_TRUE(corral.send_signal(SIGUSR2));
  RunOutcome r = corral.wait(seconds(60));
  ASSERT_TRUE(ready) << r.out << r.err;
  EXPECT_NE(r.out.find("got-usr2"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 8) << r.err;
}

}  // namespace
}  // namespace corral::testing
