// `corral run`: standard streams, exit codes and argument errors, each on a
// real sandbox (or on the real binary refusing to start one). The cleanup
// after every run is checked too (F3).
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

TEST(run_stdio, StdinPassesThroughExactly) {
  // 1 MiB of every byte value (NULs, newlines, high bytes) in a fixed
  // pseudo-random order: cat must give back exactly the same bytes.
  std::string input(1 << 20, '\0');
  std::mt19937 rng(20240611);
  for (char& c : input) c = static_cast<char>(rng() & 0xff);
  RunOutcome r = run_sandbox({}, {"cat"}, input);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.out.size(), input.size());
  EXPECT_TRUE(r.out == input) << "stdout differs from stdin";
  expect_sandbox_cleaned_up(r.report, "cat of 1 MiB");
}

TEST(run_stdio, StdoutAndStderrAreSeparate) {
  RunOutcome r = run_sandbox({}, {"sh", "-c", "echo to-out; echo to-err >&2; echo more-out"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "to-out\nmore-out\n");
  EXPECT_EQ(r.err, "to-err\n");
  expect_sandbox_cleaned_up(r.report, "stdout/stderr");
}

TEST(run_stdio, ExitCodeOfTheCommand) {
  RunOutcome r = run_sandbox({}, {"sh", "-c", "exit 3"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  ASSERT_TRUE(r.report.is_object());
  EXPECT_EQ(r.report["exit_code"], 3);
  EXPECT_TRUE(r.report["signal"].is_null());
  EXPECT_TRUE(r.report["error"].is_null());
  EXPECT_FALSE(r.report.value("sandbox_id", std::string()).empty());
  expect_sandbox_cleaned_up(r.report, "exit 3");
}

TEST(run_stdio, KilledBySignalGives128PlusN) {
  RunOutcome r = run_sandbox({}, {"sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(r.exit_code, 143) << r.err;
  ASSERT_TRUE(r.report.is_object());
  EXPECT_EQ(r.report["exit_code"], 143);
  EXPECT_EQ(r.report["signal"], "SIGTERM") << r.report.dump();
  EXPECT_TRUE(r.report["limit_hit"].is_null());
  expect_sandbox_cleaned_up(r.report, "kill -TERM $$");
}

TEST(run_stdio, CommandNotFoundGives127) {
  RunOutcome r = run_sandbox({}, {"corral-no-such-command-xyz"});
  EXPECT_EQ(r.exit_code, 127) << r.err;
  EXPECT_NE(r.err.find("corral-no-such-command-xyz"), std::string::npos) << r.err;
  ASSERT_TRUE(r.report.is_object());
  EXPECT_EQ(r.report["exit_code"], 127);
  ASSERT_TRUE(r.report["error"].is_object()) << r.report.dump();
  EXPECT_EQ(r.report["error"]["stage"], "exec");
  EXPECT_EQ(r.report["error"]["errno"], "ENOENT");
  expect_sandbox_cleaned_up(r.report, "command not found");
}

TEST(run_stdio, NonExecutableFileGives126) {
  // /etc/hostname exists in every sandbox and is not executable.
  RunOutcome r = run_sandbox({}, {"/etc/hostname"});
  EXPECT_EQ(r.exit_code, 126) << r.err;
  ASSERT_TRUE(r.report.is_object());
  EXPECT_EQ(r.report["exit_code"], 126);
  ASSERT_TRUE(r.report["error"].is_object()) << r.report.dump();
  EXPECT_EQ(r.report["error"]["stage"], "exec");
  EXPECT_EQ(r.report["error"]["errno"], "EACCES");
  expect_sandbox_cleaned_up(r.report, "non-executable file");
}

TEST(run_stdio, BadFlagValueGives125NamingFlagAndValue) {
  RunOutcome r = run_sandbox({"--memory", "2GG"}, {"true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("--memory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("2GG"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(run_stdio, UnknownOptionGives125) {
  RunOutcome r = run_sandbox({"--no-such-option"}, {"true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("--no-such-option"), std::string::npos) << r.err;
}

TEST(run_stdio, ConfigWithUnknownKeyGives125WithFileAndLine) {
  std::string dir = make_temp_dir("run-config");
  std::string path = dir + "/sandbox.yaml";
  {
    std::ofstream out(path);
    out << "# sandbox settings\n"
        << "memory_limit: 1Gi\n"
        << "definitely_not_a_key: 3\n";
  }
  RunOutcome r = run_sandbox({"--config", path}, {"true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find(path + ":3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("definitely_not_a_key"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

TEST(run_stdio, ConfigWithKnownKeysIsApplied) {
  std::string dir = make_temp_dir("run-config");
  std::string path = dir + "/sandbox.yaml";
  {
    std::ofstream out(path);
    out << "hostname: from-config\n";
  }
  RunOutcome r = run_sandbox({"--config", path}, {"uname", "-n"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "from-config\n");
  expect_sandbox_cleaned_up(r.report, "config file");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace corral::testing
