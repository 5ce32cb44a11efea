// F3: whatever way a sandbox ends, nothing of it stays on the host:
// residue_bytes 0 and residue empty in the report, no cgroup named after
// the sandbox, nothing in the host's mount table, no lock file, and none of
// its processes. One case per way of ending; each workload stops by itself
// even if the sandbox were broken (bounded sleeps, capped writes).
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

struct EndingCase {
  const char* name;
  std::vector<std::string> opts;
  std::vector<std::string> cmd;
  int expected_exit;
  const char* marker;  // a unique string in the command lines of its processes
};

// Names the case in test listings (instead of a byte dump).
void PrintTo(const EndingCase& c, std::ostream* os) { *os << c.name; }

class run_cleanup : public ::testing::TestWithParam<EndingCase> {};

TEST_P(run_cleanup, NothingLeftOnTheHost) {
  const EndingCase& c = GetParam();
  RunOutcome r = run_sandbox(c.opts, c.cmd, {}, std::chrono::seconds(120));
  auto left = host_processes_matching(c.marker);
  for (const std::string& p : left) {
    // Only processes of this test's sandbox carry the marker; all of them
    // are descendants of the sandbox's sleep commands.
    pid_t pid = static_cast<pid_t>(strtol(p.c_str(), nullptr, 10));
    if (pid > 1 && p.find("sleep") != std::string::npos) kill(pid, SIGKILL);
  }
  EXPECT_EQ(r.exit_code, c.expected_exit) << r.out << r.err;
  ASSERT_TRUE(r.report.is_object()) << r.err;
  EXPECT_FALSE(r.report.value("sandbox_id", std::string()).empty()) << r.report.dump();
  EXPECT_TRUE(left.empty()) << "process left on the host: " << left.front();
  expect_sandbox_cleaned_up(r.report, c.name);
}

INSTANTIATE_TEST_SUITE_P(
    Endings, run_cleanup,
    ::testing::Values(
        EndingCase{"success", {}, {"sh", "-c", "echo data > /workspace/f; sleep 0.0301"}, 0,
                   "sleep 0.0301"},
        EndingCase{"exit_code", {}, {"sh", "-c", "sleep 0.0302; exit 3"}, 3, "sleep 0.0302"},
        EndingCase{"killed_by_signal", {}, {"sh", "-c", "sleep 0.0303; kill -KILL $$"}, 137,
                   "sleep 0.0303"},
        EndingCase{"timeout",
                   {"--timeout", "1s"},
                   {"sh", "-c", "sleep 41.04 & (setsid sleep 41.04 &); sleep 41.04"},
                   124,
                   "sleep 41.04"},
        // tail keeps its whole input (no newline) in memory: 200 MiB, capped
        // by head, against a 48 MiB limit.
        EndingCase{"out_of_memory",
                   {"--memory", "48Mi"},
                   {"sh", "-c", "sleep 0.0305; head -c 200M /dev/zero | tail -n 1 > /dev/null"},
                   137,
                   "sleep 0.0305"},
        EndingCase{"process_limit",
                   {"--pids", "16", "--timeout", "20s"},
                   {"sh", "-c", "i=0; while [ $i -lt 100 ]; do sleep 41.06 & i=$((i+1)); done; wait"},
                   2,
                   "sleep 41.06"},
        EndingCase{"full_disk",
                   {"--disk", "32Mi"},
                   {"sh", "-c", "sleep 0.0307; head -c 100M /dev/zero > /workspace/f; exit 0"},
                   0,
                   "sleep 0.0307"},
        EndingCase{"open_file_in_full_layer",
                   {"--disk", "32Mi"},
                   {"sh", "-c",
                    "head -c 100M /dev/zero > /workspace/f; "
                    "(setsid sleep 41.08 < /workspace/f &); exit 0"},
                   0,
                   "sleep 41.08"},
        EndingCase{"daemon",
                   {},
                   {"sh", "-c", "(setsid sh -c \"sleep 41.09\" &); exit 0"},
                   0,
                   "sleep 41.09"},
        EndingCase{"missing_workdir", {"--workdir", "/no/such/dir"}, {"sleep", "0.0310"}, 125,
                   "sleep 0.0310"},
        EndingCase{"command_not_found", {}, {"corral-no-such-command-0311"}, 127,
                   "corral-no-such-command-0311"}),
    [](const ::testing::TestParamInfo<EndingCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace corral::testing
