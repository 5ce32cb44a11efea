// run_subprocess (base/subprocess.h): exit statuses, signals, stdin text,
// captured and streamed output, the output bound, the timeout, forwarded
// signals, the parent-death signal, and fds that must not reach the child.
#include "base/subprocess.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace corral {
namespace {

using namespace std::chrono_literals;

SubprocessOptions shell(const std::string& script) {
  SubprocessOptions o;
  o.argv = {"/bin/sh", "-c", script};
  return o;
}

TEST(Subprocess, ExitStatusIsTheCallersToJudge) {
  auto ok = run_subprocess(shell("exit 0"));
  ASSERT_TRUE(ok.has_value()) << ok.error().to_string();
  EXPECT_TRUE(ok->exited_ok());
  auto three = run_subprocess(shell("exit 3"));
  ASSERT_TRUE(three.has_value()) << three.error().to_string();
  EXPECT_FALSE(three->exited_ok());
  ASSERT_TRUE(WIFEXITED(three->wait_status));
  EXPECT_EQ(WEXITSTATUS(three->wait_status), 3);
  EXPECT_EQ(describe_wait_status(three->wait_status), "exit status 3");
}

TEST(Subprocess, DeathBySignalIsReported) {
  auto r = run_subprocess(shell("kill -TERM $$"));
  ASSERT_TRUE(r.has_value()) << r.error().to_string();
  ASSERT_TRUE(WIFSIGNALED(r->wait_status));
  EXPECT_EQ(WTERMSIG(r->wait_status), SIGTERM);
  EXPECT_EQ(describe_wait_status(r->wait_status), "killed by SIGTERM");
}

TEST(Subprocess, StdinTextStdoutAndStderrApart) {
  SubprocessOptions o = shell("cat; echo to-stderr >&2");
  o.stdin_text = std::string(200000, 'x') + "\nend\n";  // more than a pipe holds
  auto r = run_subprocess(o);
  ASSERT_TRUE(r.has_value()) << r.error().to_string();
  EXPECT_EQ(r->out, *o.stdin_text);
  EXPECT_EQ(r->err, "to-stderr\n");
}

TEST(Subprocess, WithoutStdinTextStdinIsEmpty) {
  auto r = run_subprocess(shell("wc -c"));
  ASSERT_TRUE(r.has_value()) << r.error().to_string();
  EXPECT_EQ(r->out, "0\n");
}

TEST(Subprocess, MergedOutputIsStreamedInOrder) {
  SubprocessOptions o = shell("echo one; echo two >&2; echo three");
  o.merge_stdout = true;
  std::string streamed;
  o.on_stderr = [&](std::string_view chunk) { streamed.append(chunk); };
  auto r = run_subprocess(o);
  ASSERT_TRUE(r.has_value()) << r.error().to_string();
  EXPECT_EQ(streamed, "one\ntwo\nthree\n");
  EXPECT_EQ(r->out, "");
  EXPECT_EQ(r->err, "");
}

TEST(Subprocess, EnvironmentAndDirectoryAreTheGivenOnes) {
  SubprocessOptions o = shell("echo \"$CORRAL_SUBPROCESS_TEST:$HOME:$(pwd)\"");
  o.env = std::vector<std::string>{"CORRAL_SUBPROCESS_TEST=given"};
  o.cwd = "/";
  auto r = run_subprocess(o);
  ASSERT_TRUE(r.has_value()) << r.error().to_string();
  EXPECT_EQ(r->out, "given::/\n");
}

TEST(Subprocess, AFailedExecNamesTheProgramAndGivesTheHint) {
  SubprocessOptions o;
  o.argv = {"no-such-tool", "--version"};
  o.program = "/nonexistent/no-such-tool";
  o.exec_hint = [](int err) { return err == ENOENT ? std::string("install it") : ""; };
  auto r = run_subprocess(o);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().sys_errno, ENOENT);
  EXPECT_EQ(r.error().message.rfind("exec no-such-tool", 0), 0u) << r.error().message;
  EXPECT_EQ(r.error().hint, "install it");

  o.program = "/bin/true";
  o.cwd = "/nonexistent-dir";
  auto in_dir = run_subprocess(o);
  ASSERT_FALSE(in_dir.has_value());
  EXPECT_EQ(in_dir.error().message.rfind("exec no-such-tool (in /nonexistent-dir)", 0), 0u)
      << in_dir.error().message;
}

TEST(Subprocess, OutputPastTheBoundKillsAndFails) {
  SubprocessOptions o = shell("head -c 1000000 /dev/zero; sleep 30");
  o.output_limit = 1000;
  auto r = run_subprocess(o);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(r.error().message, "/bin/sh: output larger than 1000 bytes");

  // The bound holds for a captured stderr too.
  SubprocessOptions e = shell("head -c 1000000 /dev/zero >&2");
  e.output_limit = 1000;
  auto re = run_subprocess(e);
  ASSERT_FALSE(re.has_value());
  EXPECT_EQ(re.error().code, ErrorCode::kResourceExhausted);
}

TEST(Subprocess, TimeoutKillsAndFails) {
  SubprocessOptions o;
  o.argv = {"/bin/sleep", "30"};
  o.timeout = 1000ms;
  auto r = run_subprocess(o);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kTimeout);
  EXPECT_EQ(r.error().message, "/bin/sleep 30: no answer after 1 s (killed)");
}

TEST(Subprocess, TimeoutIsNotHitByAQuickProgram) {
  SubprocessOptions o = shell("echo done");
  o.timeout = 30000ms;
  auto r = run_subprocess(o);
  ASSERT_TRUE(r.has_value()) << r.error().to_string();
  EXPECT_EQ(r->out, "done\n");
}

// The class of leak: any fd of ours that lacks O_CLOEXEC (ours, or one we
// inherited) must not reach the tool; only keep_fd does.
TEST(Subprocess, InheritedFdsDoNotReachTheChild) {
  int leaky = ::open("/dev/null", O_RDONLY);  // deliberately without O_CLOEXEC
  ASSERT_GE(leaky, 0);
  int high = ::fcntl(leaky, F_DUPFD, 60);  // F_DUPFD: no CLOEXEC on the copy either
  ASSERT_GE(high, 0);
  int kept = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(kept, 0);
  // The shell lists its own fds above 2 with builtins only (a pipeline or
  // a command substitution would add fds of its own).
  SubprocessOptions o = shell(
      "i=3; while [ $i -le 200 ]; do [ -e /proc/$$/fd/$i ] && printf '%s ' $i; i=$((i+1)); done");
  o.keep_fd = kept;
  auto r = run_subprocess(o);
  ::close(leaky);
  ::close(high);
  ::close(kept);
  ASSERT_TRUE(r.has_value()) << r.error().to_string();
  EXPECT_LT(high, 200);
  EXPECT_EQ(r->out, std::to_string(kept) + " ")
      << "fds " << leaky << " and " << high << " lack O_CLOEXEC and must not be inherited";
}

TEST(Subprocess, ForwardedSignalsReachTheProcessGroup) {
  ForwardedSignals signals;
  SubprocessOptions o = shell("trap 'echo got-term; exit 7' TERM; echo ready; "
                              "while :; do sleep 0.05; done");
  o.merge_stdout = true;
  o.new_process_group = true;
  o.forward_signals = &signals;
  std::string streamed;
  o.on_stderr = [&](std::string_view chunk) {
    streamed.append(chunk);
    if (streamed == "ready\n") ::raise(SIGTERM);  // recorded and forwarded, we live on
  };
  auto r = run_subprocess(o);
  ASSERT_TRUE(r.has_value()) << r.error().to_string();
  EXPECT_EQ(signals.pending(), SIGTERM);
  ASSERT_TRUE(WIFEXITED(r->wait_status)) << describe_wait_status(r->wait_status);
  EXPECT_EQ(WEXITSTATUS(r->wait_status), 7);
  // The whole group got the signal: when it lands while `sleep` runs, the
  // shell also reports its child's death ("Terminated") before the trap.
  EXPECT_TRUE(streamed == "ready\ngot-term\n" || streamed == "ready\nTerminated\ngot-term\n")
      << streamed;
}

TEST(Subprocess, AToolThatIgnoresAForwardedSignalIsKilledAfterTheGrace) {
  ForwardedSignals signals;
  SubprocessOptions o = shell("trap '' TERM; echo ready; while :; do sleep 0.05; done");
  o.merge_stdout = true;
  o.new_process_group = true;
  o.forward_signals = &signals;
  o.signal_grace = 0s;
  bool raised = false;
  o.on_stderr = [&](std::string_view) {
    if (!raised) ::raise(SIGTERM);
    raised = true;
  };
  auto r = run_subprocess(o);
  ASSERT_TRUE(r.has_value()) << r.error().to_string();
  ASSERT_TRUE(WIFSIGNALED(r->wait_status)) << describe_wait_status(r->wait_status);
  EXPECT_EQ(WTERMSIG(r->wait_status), SIGKILL);
}

bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  std::size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

TEST(Subprocess, TheChildDiesWithTheThreadThatStartedIt) {
  char dir_template[] = "/tmp/corral-subprocess-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string pid_file = std::string(dir_template) + "/pid";
  pid_t helper = ::fork();
  ASSERT_GE(helper, 0);
  if (helper == 0) {
    // The helper runs the tool from a thread, then exits while it runs.
    std::thread([&] {
      SubprocessOptions o = shell("echo $$ > " + pid_file + ".tmp && mv " + pid_file + ".tmp " +
                                  pid_file + " && exec sleep 60");
      o.death_signal = SIGKILL;
      (void)run_subprocess(o);
    }).detach();
    for (int i = 0; i < 1000 && ::access(pid_file.c_str(), F_OK) != 0; ++i) ::usleep(10000);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(helper, &status, 0), helper);
  std::ifstream in(pid_file);
  pid_t tool = 0;
  in >> tool;
  ASSERT_GT(tool, 0) << "the tool never started";
  bool gone = false;
  for (int i = 0; i < 1000 && !(gone = process_gone(tool)); ++i) ::usleep(10000);
  if (!gone) ::kill(tool, SIGKILL);
  EXPECT_TRUE(gone) << "pid " << tool << " outlived the process that started it";
  ::unlink(pid_file.c_str());
  ::rmdir(dir_template);
}

TEST(Subprocess, FindProgramSearchesOnlyAbsoluteDirectories) {
  auto sh = find_program("sh");
  ASSERT_TRUE(sh.has_value());
  EXPECT_EQ(sh->front(), '/');
  EXPECT_FALSE(find_program("corral-no-such-program-anywhere").has_value());
  EXPECT_EQ(find_program("./relative/tool"), "./relative/tool");  // a path is taken as it is
}

}  // namespace
}  // namespace corral
