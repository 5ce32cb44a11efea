// `corral run`: the environment and working directory of the command, on
// real sandboxes.
#include <stdlib.h>

#include <string>

#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

// Sets an environment variable in this (host) process for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

TEST(run_env, EnvFlagsAreVisible) {
  RunOutcome r = run_sandbox({"--env", "A=1", "--env", "B=two"},
                             {"sh", "-c", "echo \"A=$A B=$B\""});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "A=1 B=two\n");
  expect_sandbox_cleaned_up(r.report, "--env");
}

TEST(run_env, EnvValueMayContainEqualsAndSpaces) {
  RunOutcome r = run_sandbox({"--env", "C=x=y z"}, {"sh", "-c", "printf '%s\\n' \"$C\""});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "x=y z\n");
}

TEST(run_env, HostEnvironmentIsNotVisible) {
  ScopedEnv canary("CORRAL_TEST_CANARY", "secret-canary-3141");
  RunOutcome r = run_sandbox({}, {"env"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("CORRAL_TEST_CANARY"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("secret-canary-3141"), std::string::npos) << r.out;
  // ctest's own variables do not leak either.
  EXPECT_EQ(r.out.find("CORRAL_BIN"), std::string::npos) << r.out;
  // The documented environment is there.
  EXPECT_NE(r.out.find("HOME=/home/sandbox\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"),
            std::string::npos)
      << r.out;
  expect_sandbox_cleaned_up(r.report, "env");
}

TEST(run_env, DefaultWorkdirIsWorkspace) {
  RunOutcome r = run_sandbox({}, {"pwd"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "/workspace\n");
}

TEST(run_env, WorkspaceIsWritable) {
  RunOutcome r = run_sandbox({}, {"sh", "-c", "echo hello > w && cat /workspace/w"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello\n");
  expect_sandbox_cleaned_up(r.report, "write in /workspace");
}

TEST(run_env, WorkdirFlag) {
  RunOutcome r = run_sandbox({"--workdir", "/tmp"}, {"pwd"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "/tmp\n");
  expect_sandbox_cleaned_up(r.report, "--workdir /tmp");
}

TEST(run_env, MissingWorkdirGives125AtStageWorkdir) {
  RunOutcome r = run_sandbox({"--workdir", "/no/such/dir"}, {"pwd"});
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_EQ(r.out, "");
  ASSERT_TRUE(r.report.is_object());
  EXPECT_EQ(r.report["exit_code"], 125);
  ASSERT_TRUE(r.report["error"].is_object()) << r.report.dump();
  EXPECT_EQ(r.report["error"]["stage"], "workdir") << r.report.dump();
  EXPECT_EQ(r.report["error"]["errno"], "ENOENT") << r.report.dump();
  EXPECT_FALSE(r.report["error"].value("hint", std::string()).empty());
  EXPECT_NE(r.err.find("workdir"), std::string::npos) << r.err;
  expect_sandbox_cleaned_up(r.report, "missing workdir");
}

}  // namespace
}  // namespace corral::testing
