// `corral task` (issue 15 point 10; docs/cli.md "Tasks", D6) against a real
// `corral serve`, as a user runs it: run pushes a local input, waits and
// saves the output checked against its sha256; running it again finds the
// stored task; outputs never replaces a file; the flags the daemon would
// refuse are refused before anything is sent; a failed command's status
// is the exit status.
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_daemon_fixture.h"
#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

class CliTask : public CliDaemonTest {
 protected:
  CliTask() : CliDaemonTest("cli-task") {}

  // `corral task SUB --url unix:... ARGS...`
  RunOutcome task(const std::string& sub, std::vector<std::string> args) {
    args.insert(args.begin(), {"task", sub, "--url", daemon_->unix_url()});
    return run_corral(args);
  }

  std::string subdir(const std::string& name) {
    std::string d = dir_ + "/" + name;
    EXPECT_EQ(::mkdir(d.c_str(), 0700), 0) << d;
    return d;
  }
};

TEST_F(CliTask, RunSavesTheCheckedOutputAndARepeatFindsTheStoredTask) {
  const std::string input = dir_ + "/words.txt";
  std::ofstream(input) << "to be or not to be\n";
  const std::string out1 = subdir("out1"), out2 = subdir("out2"), out3 = subdir("out3");
  const std::vector<std::string> run = {
      "--id", "cli-run-1", "--input", input + ":/workspace/in.txt", "--output",
      "/workspace/out.txt", "--timeout", "1m", "--memory", "64Mi", "--cwd", "/workspace",
      "--sh", "--", "tr a-z A-Z < in.txt > out.txt"};
  std::vector<std::string> first = run;
  first.insert(first.end() - 3, {"--output-dir", out1});
  RunOutcome r = task("run", first);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(read_host_file(out1 + "/out.txt"), "TO BE OR NOT TO BE\n");
  EXPECT_NE(r.out.find("task cli-run-1: succeeded"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("saved " + out1 + "/out.txt"), std::string::npos) << r.err;

  // The same run again: the stored task, its output saved again.
  std::vector<std::string> again = run;
  again.insert(again.end() - 3, {"--output-dir", out2});
  r = task("run", again);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(read_host_file(out2 + "/out.txt"), "TO BE OR NOT TO BE\n");
  r = task("get", {"cli-run-1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto t = nlohmann::json::parse(r.out);
  EXPECT_EQ(t.value("attempt", 0), 1);
  // The flags went out as given.
  EXPECT_EQ(t["request"].value("cwd", ""), "/workspace") << r.out;
  EXPECT_EQ(t["request"].value("timeout_ms", 0), 60000) << r.out;
  EXPECT_EQ(t["request"]["sandbox"]["limits"].value("memory", ""), "64Mi") << r.out;

  // outputs never replaces a file, and saves into a fresh dir.
  r = task("outputs", {"cli-run-1", "--output-dir", out1});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("remove it"), std::string::npos) << r.err;
  EXPECT_EQ(read_host_file(out1 + "/out.txt"), "TO BE OR NOT TO BE\n");
  r = task("outputs", {"cli-run-1", "--output-dir", out3});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_host_file(out3 + "/out.txt"), "TO BE OR NOT TO BE\n");
}

TEST_F(CliTask, BadFlagsAreRefusedBeforeAnythingIsSent) {
  struct Case {
    std::vector<std::string> args;
    std::string names;
  };
  const std::vector<Case> cases = {
      {{"--timeout", "soon"}, "--timeout"},
      {{"--memory", "lots"}, "--memory"},
      {{"--snapshot", "sometimes"}, "--snapshot"},
      {{"--input", "no-colon"}, "--input"},
      {{"--input", dir_ + "/missing:/workspace/x"}, "--input"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"--id", "cli-bad"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    args.insert(args.end(), {"--", "true"});
    RunOutcome r = task("run", args);
    EXPECT_EQ(r.exit_code, 2) << c.names << ": " << r.err;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << r.err;
  }
  RunOutcome ls = task("ls", {"--json"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_TRUE(nlohmann::json::parse(ls.out)["tasks"].empty()) << ls.out;
}

TEST_F(CliTask, CancelEndsARunningTaskAndTakesOneId) {
  RunOutcome r = task("run", {"--id", "cli-cancel-1", "--no-wait", "--timeout", "10m", "--",
                              "sleep", "300"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "cli-cancel-1\n");
  r = task("cancel", {"cli-cancel-1", "cli-other"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("one task ID at a time"), std::string::npos) << r.err;
  r = task("cancel", {"cli-cancel-1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = task("get", {"cli-cancel-1", "--wait", "60s", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).value("status", ""), "cancelled") << r.out;
  r = task("get", {});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("give its ID"), std::string::npos) << r.err;
}

TEST_F(CliTask, AFailedCommandsStatusIsTheExitStatus) {
  RunOutcome r = task("run", {"--id", "cli-fail-1", "--", "sh", "-c", "exit 3"});
  EXPECT_EQ(r.exit_code, 3) << r.err << r.out;
  EXPECT_NE(r.out.find("failed (exit_code)"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace corral::testing
