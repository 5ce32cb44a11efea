// The test harness itself (tests/support/daemon_harness.cc): the `corral
// serve` that a TestDaemon starts dies with the test process, so a test
// run that is aborted or killed leaks no daemon.
#include "support/daemon_harness.h"
#include "support/proc_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using namespace std::chrono_literals;

// Waits up to `timeout` for the child `pid` to end; its wait status, or
// nothing if it is still running.
std::optional<int> wait_for(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid) return status;
    if (got < 0 && errno != EINTR) return std::nullopt;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(20ms);
  }
}

// This process's children: the processes whose parent it is (their ppid
// in /proc/PID/stat; this kernel has no /proc/self/task/TID/children).
std::set<pid_t> children_of_self() {
  std::set<pid_t> out;
  const pid_t self = getpid();
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    if (proc_parent(static_cast<pid_t>(pid)) == self) out.insert(static_cast<pid_t>(pid));
  }
  closedir(proc);
  return out;
}

std::string describe(pid_t pid) {
  std::string cmd = read_proc_text("/proc/" + std::to_string(pid) + "/cmdline");
  std::replace(cmd.begin(), cmd.end(), '\0', ' ');
  return std::to_string(pid) + " (" + cmd + ")";
}

// PR_SET_PDEATHSIG, set by the harness's child before it execs the daemon,
// survives that exec (corral is neither set-id nor file-capable, and an exec
// by root with a full permitted set gains nothing, so commit_creds keeps it)
// and the daemon never changes its credentials. It fires when the thread
// that forked the daemon ends: here the only thread of "run".
TEST(DaemonHarness, DaemonDiesWithTheTestProcess) {
  // The daemon is reparented here once its parent (the "test run" below)
  // is gone, so this test can wait for it, and reap its helpers.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0) << strerror(errno);
  struct Unreaper {
    ~Unreaper() { prctl(PR_SET_CHILD_SUBREAPER, 0); }
  } unreaper;

  // Children this process already has (from other tests in the same run)
  // are not the daemon's and are left alone.
  const std::set<pid_t> before = children_of_self();

  int report[2];
  ASSERT_EQ(pipe2(report, O_CLOEXEC), 0) << strerror(errno);
  const pid_t run = fork();
  ASSERT_GE(run, 0) << strerror(errno);
  if (run == 0) {
    // A test run that starts a daemon and is then killed: no destructor,
    // no stop().
    close(report[0]);
    auto* d = new TestDaemon();
    std::string line = d->ready() ? std::to_string(d->pid()) + " " + d->data_dir() + "\n" : "0\n";
    (void)!write(report[1], line.data(), line.size());
    raise(SIGKILL);
    _exit(1);
  }
  close(report[1]);
  std::string line;
  char buf[512];
  for (ssize_t n; (n = read(report[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    line.append(buf, static_cast<std::size_t>(n));
  }
  close(report[0]);
  auto run_status = wait_for(run, 60s);
  ASSERT_TRUE(run_status.has_value());
  EXPECT_TRUE(WIFSIGNALED(*run_status) && WTERMSIG(*run_status) == SIGKILL) << *run_status;

  const pid_t daemon = static_cast<pid_t>(std::atol(line.c_str()));
  ASSERT_GT(daemon, 0) << "the daemon did not start: " << line;
  const std::string data_dir =
      line.substr(line.find(' ') + 1, line.find('\n') - line.find(' ') - 1);
  ASSERT_TRUE(data_dir.ends_with("/data")) << line;

  auto daemon_status = wait_for(daemon, 10s);
  if (!daemon_status) {
    // Still running: the harness leaked it. Stop it as TestDaemon would.
    ADD_FAILURE() << "corral serve (pid " << daemon
                  << ") outlived the test process that started it";
    kill(daemon, SIGTERM);
    if (!wait_for(daemon, 10s)) {
      kill(daemon, SIGKILL);
      (void)wait_for(daemon, 10s);
    }
  } else {
    EXPECT_TRUE(WIFSIGNALED(*daemon_status) && WTERMSIG(*daemon_status) == SIGKILL)
        << "wait status " << *daemon_status;
  }

  // The daemon's own helpers die with it and were reparented here: reap
  // them, so nothing is left behind. Only those: waitpid(-1) would also
  // wait for (and reap) children of other tests in this process.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  std::set<pid_t> left;
  for (;;) {
    left.clear();
    for (pid_t pid : children_of_self()) {
      if (before.contains(pid)) continue;
      int status;
      if (waitpid(pid, &status, WNOHANG) == 0) left.insert(pid);
    }
    if (left.empty() || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(20ms);
  }
  std::string names;
  for (pid_t pid : left) names += " " + describe(pid);
  EXPECT_TRUE(left.empty()) << "processes of the killed daemon are still running:" << names;

  // What the destructor would have removed (it never ran).
  host_sh("rm -rf '" + data_dir.substr(0, data_dir.size() - std::string("/data").size()) + "'");
}

// The daemon's output is read all along, not only up to "listening on":
// what it prints on its way out is there too.
TEST(DaemonHarness, OutputHoldsWhatTheDaemonPrintedAfterStartup) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  EXPECT_TRUE(d.wait_output("listening on"));
  EXPECT_EQ(d.output().find("corral serve: stopped"), std::string::npos);
  d.stop();
  std::string out;
  for (int i = 0; i < 50 && out.find("corral serve: stopped") == std::string::npos; ++i) {
    std::this_thread::sleep_for(20ms);
    out = d.output();
  }
  EXPECT_NE(out.find("corral serve: stopped"), std::string::npos) << out;
}

// A daemon that died under a test (a sanitizer abort, a crash) gives a
// reply of status 0 whose body says so, with the end of its output, so a
// failing CI run shows why instead of only "status 0".
TEST(DaemonHarness, ARequestThatGetsNoReplySaysWhy) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(kill(d.pid(), SIGKILL), 0) << strerror(errno);
  std::this_thread::sleep_for(100ms);
  HttpReply r = d.request("GET", "/v1/sandboxes");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.body.find("[no reply: connect"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("died of signal 9"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("listening on"), std::string::npos) << "the output's end: " << r.body;
}

bool mounted_at(const std::string& path) {
  std::ifstream mounts("/proc/self/mounts");
  for (std::string line; std::getline(mounts, line);)
    if (line.find(" " + path + " ") != std::string::npos) return true;
  return false;
}

// A test process killed before its destructors leaves its temp dir, with
// a daemon's secret tmpfs mounted below it. The next test process removes
// both; a live process's dir stays.
TEST(DaemonHarness, TempDirsOfDeadTestProcessesAreSwept) {
  const pid_t gone = fork();
  ASSERT_GE(gone, 0) << strerror(errno);
  if (gone == 0) _exit(0);
  ASSERT_TRUE(wait_for(gone, 10s).has_value());

  const std::string dead = "/tmp/corral-test-sweep-p" + std::to_string(gone) + "-abcdef";
  const std::string live = "/tmp/corral-test-sweep-p" + std::to_string(getpid()) + "-ghijkl";
  const std::string other = "/tmp/corral-test-sweep-nopid-mnopqr";
  for (const auto& d : {dead, live, other}) ASSERT_EQ(mkdir(d.c_str(), 0700), 0) << d;
  const std::string mnt = dead + "/data/secrets";
  host_sh("mkdir -p '" + mnt + "'");
  ASSERT_EQ(mount("corral-test", mnt.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=64k"), 0)
      << strerror(errno);

  sweep_dead_temp_dirs();
  EXPECT_FALSE(mounted_at(mnt)) << "the tmpfs below a dead test's dir is still mounted";
  EXPECT_NE(access(dead.c_str(), F_OK), 0) << "a dead test's dir was left";
  EXPECT_EQ(access(live.c_str(), F_OK), 0) << "a live test's dir was swept";
  EXPECT_EQ(access(other.c_str(), F_OK), 0) << "a dir without an owner was swept";

  if (mounted_at(mnt)) umount2(mnt.c_str(), MNT_DETACH);
  for (const auto& d : {dead, live, other}) host_sh("rm -rf '" + d + "'");
}

}  // namespace
}  // namespace corral::testing
