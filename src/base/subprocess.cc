#include "base/subprocess.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
// glibc 2.36's <sys/pidfd.h> declares pidfd_open without extern "C" (fixed
// in 2.37); its own includes (fcntl.h, siginfo_t) are already in above.
extern "C" {
#include <sys/pidfd.h>
}

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <sstream>

#include "base/fs.h"
#include "base/scope_guard.h"
#include "base/unique_fd.h"

extern char** environ;

namespace corral {

namespace {

// --- signal forwarding -------------------------------------------------------

volatile sig_atomic_t g_signal = 0;
volatile sig_atomic_t g_child_pgid = 0;

extern "C" void on_forwarded_signal(int sig) {
  int saved_errno = errno;
  g_signal = sig;
  pid_t pgid = g_child_pgid;
  if (pgid > 0) kill(-pgid, sig);  // async-signal-safe
  errno = saved_errno;
}

constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP};
static_assert(std::size(kForwardedSignals) == 3, "ForwardedSignals::old_ has one slot per signal");

// How often the wait loop wakes up when it has no pidfd to wait on, or a
// forwarded signal's grace period to watch.
constexpr int kTickMs = 200;

std::string join_args(const std::vector<std::string>& argv) {
  std::string call;
  for (const auto& a : argv) call += (call.empty() ? "" : " ") + a;
  return call;
}

// Everything the child needs, built before fork: after it, only
// async-signal-safe calls.
struct ChildPlan {
  const char* program = nullptr;
  std::vector<char*> argv;
  std::vector<char*> envp;  // empty: environ
  const char* cwd = nullptr;
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int exec_fd = -1;  // the child writes its errno here if exec fails
  int keep_fd = -1;
  int death_signal = SIGKILL;
  bool new_process_group = false;
  pid_t parent = 0;
  int max_fd = 0;  // for the fallback when close_range cannot mark fds CLOEXEC
};

[[noreturn]] void child_exec(const ChildPlan& p) {
  if (p.new_process_group) setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, p.death_signal);
  if (getppid() != p.parent) _exit(127);  // the parent died before prctl
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD}) sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  // Each source is first moved above 2, so that no dup2 below overwrites
  // another source (a caller started with 0-2 closed gets pipes there).
  int src[3] = {p.stdin_fd, p.stdout_fd, p.stderr_fd};
  for (int& fd : src) {
    if (fd < 3 && (fd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) goto fail;
  }
  for (int i = 0; i < 3; ++i) {
    if (dup2(src[i], i) < 0) goto fail;  // dup2 clears CLOEXEC on the copy
  }
  if (p.cwd != nullptr && chdir(p.cwd) != 0) goto fail;
  // The tool gets 0-2 and keep_fd, none of the fds corral itself inherited
  // or opened without O_CLOEXEC: mmdebstrap hands apt a pipe by number to
  // `sh -c 'cat >&N'`, and dash cannot redirect to an fd above 9, so a
  // caller's stray fds (a shell's, a test runner's) made builds fail with
  // "Bad fd number".
  if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    for (int fd = 3; fd < p.max_fd; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);  // kernel < 5.11
  }
  if (p.keep_fd >= 0 && fcntl(p.keep_fd, F_SETFD, 0) != 0) goto fail;
  execve(p.program, p.argv.data(), p.envp.empty() ? environ : p.envp.data());
fail:
  int e = errno;
  ssize_t ignored = write(p.exec_fd, &e, sizeof e);
  (void)ignored;
  _exit(127);
}

// The read end of the child's stdout or stderr. drain() reads what it holds
// now (non-blocking) into `sink` if set, else into `text` up to the bound;
// `open` turns false at end of file.
struct OutputPipe {
  UniqueFd fd;
  bool open = false;
  std::string* text = nullptr;                                // captured here
  const std::function<void(std::string_view)>* sink = nullptr;  // or streamed
  bool overflow = false;

  void drain(std::size_t limit, char* buf, std::size_t size) {
    while (open) {
      ssize_t n = read(fd.get(), buf, size);
      if (n > 0) {
        auto len = static_cast<std::size_t>(n);
        if (sink != nullptr) {
          if (*sink) (*sink)(std::string_view(buf, len));
        } else if (text->size() + len <= limit) {
          text->append(buf, len);
        } else {
          overflow = true;
        }
        continue;
      }
      if (n == 0) open = false;
      if (n < 0 && errno == EINTR) continue;
      return;  // EAGAIN, EOF or an error
    }
  }
};

}  // namespace

ForwardedSignals::ForwardedSignals() {
  g_signal = 0;
  g_child_pgid = 0;
  struct sigaction sa {};
  sa.sa_handler = on_forwarded_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: poll() returns EINTR promptly
  for (std::size_t i = 0; i < std::size(kForwardedSignals); ++i) {
    sigaction(kForwardedSignals[i], &sa, &old_[i]);
  }
}

ForwardedSignals::~ForwardedSignals() {
  for (std::size_t i = 0; i < std::size(kForwardedSignals); ++i) {
    sigaction(kForwardedSignals[i], &old_[i], nullptr);
  }
  g_child_pgid = 0;
}

int ForwardedSignals::pending() const { return g_signal; }

bool SubprocessResult::exited_ok() const {
  return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    return std::string("killed by SIG") + (name != nullptr ? name : "?");
  }
  return "wait status " + std::to_string(status);
}

std::optional<std::string> find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* env_path = getenv("PATH");
  std::string path = (env_path != nullptr && *env_path != '\0')
                         ? env_path
                         : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  std::istringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty() || dir[0] != '/') continue;  // never the current directory
    std::string candidate = dir;
    if (candidate.back() != '/') candidate.push_back('/');
    candidate += name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

// One function from fork to the reaped child, because the pipes, the pidfd
// and the kill-and-reap guard share every step; the child's own part is
// child_exec() above.
Result<SubprocessResult> run_subprocess(const SubprocessOptions& o) {
  if (o.argv.empty()) return make_error(ErrorCode::kInternal, "run_subprocess: empty argv");
  const std::string call = join_args(o.argv);

  // stdin: the text in a memfd (no pipe to keep fed), or /dev/null.
  UniqueFd in;
  if (o.stdin_text) {
    in.reset(memfd_create("stdin", MFD_CLOEXEC));
    if (!in) return errno_error("memfd_create(stdin)");
    CORRAL_TRY(write_all(in.get(), *o.stdin_text, "memfd stdin"));
    if (lseek(in.get(), 0, SEEK_SET) != 0) return errno_error("lseek(memfd stdin)");
  } else {
    in.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!in) return errno_error("open(/dev/null)");
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return errno_error("pipe2");
  OutputPipe err_pipe{UniqueFd(fds[0]), true};
  UniqueFd err_w(fds[1]);
  OutputPipe out_pipe;
  UniqueFd out_w;
  if (!o.merge_stdout) {
    if (pipe2(fds, O_CLOEXEC) != 0) return errno_error("pipe2");
    out_pipe.fd.reset(fds[0]);
    out_pipe.open = true;
    out_w.reset(fds[1]);
  }
  if (pipe2(fds, O_CLOEXEC) != 0) return errno_error("pipe2");
  UniqueFd exec_r(fds[0]), exec_w(fds[1]);

  ChildPlan plan;
  std::string program = o.program.empty() ? o.argv[0] : o.program;
  plan.program = program.c_str();
  for (const auto& a : o.argv) plan.argv.push_back(const_cast<char*>(a.c_str()));
  plan.argv.push_back(nullptr);
  if (o.env) {
    for (const auto& e : *o.env) plan.envp.push_back(const_cast<char*>(e.c_str()));
    plan.envp.push_back(nullptr);
  }
  plan.cwd = o.cwd.empty() ? nullptr : o.cwd.c_str();
  plan.stdin_fd = in.get();
  plan.stdout_fd = o.merge_stdout ? err_w.get() : out_w.get();
  plan.stderr_fd = err_w.get();
  plan.exec_fd = exec_w.get();
  plan.keep_fd = o.keep_fd;
  plan.death_signal = o.death_signal;
  plan.new_process_group = o.new_process_group;
  plan.parent = getpid();
  plan.max_fd = static_cast<int>(std::clamp(sysconf(_SC_OPEN_MAX), 1024L, 65536L));

  pid_t pid = fork();
  if (pid < 0) return errno_error("fork (to run " + call + ")");
  if (pid == 0) child_exec(plan);

  const bool group = o.new_process_group;
  if (group) setpgid(pid, pid);  // also done by the child; whichever runs first wins
  if (o.forward_signals != nullptr) {
    g_child_pgid = pid;
    if (g_signal != 0) kill(-pid, g_signal);
  }
  auto kill_child = [&] { kill(group ? -pid : pid, SIGKILL); };
  bool reaped = false;
  int status = 0;
  ScopeGuard reap_on_return([&] {
    if (o.forward_signals != nullptr) g_child_pgid = 0;
    if (reaped) return;
    kill_child();
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  });
  in.reset();
  err_w.reset();
  out_w.reset();
  exec_w.reset();

  int exec_errno = 0;
  for (;;) {
    ssize_t n = read(exec_r.get(), &exec_errno, sizeof exec_errno);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof exec_errno)) exec_errno = 0;
    break;
  }
  if (exec_errno != 0) {
    std::string what = "exec " + o.argv[0];
    if (plan.cwd != nullptr) what += " (in " + o.cwd + ")";
    return errno_error(what, exec_errno, o.exec_hint ? o.exec_hint(exec_errno) : "");
  }

  SubprocessResult result;
  err_pipe.sink = o.on_stderr ? &o.on_stderr : nullptr;
  err_pipe.text = &result.err;
  out_pipe.text = &result.out;
  for (OutputPipe* p : {&err_pipe, &out_pipe}) {
    if (p->open) fcntl(p->fd.get(), F_SETFL, fcntl(p->fd.get(), F_GETFL) | O_NONBLOCK);
  }
  UniqueFd pidfd(pidfd_open(pid, 0));  // -1 before Linux 5.3: the loop ticks instead
  const auto start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point signal_seen{};
  bool killed = false, overflow_killed = false;
  char buf[16384];

  for (;;) {
    pollfd pfds[3];
    nfds_t n = 0;
    if (err_pipe.open) pfds[n++] = {err_pipe.fd.get(), POLLIN, 0};
    if (out_pipe.open) pfds[n++] = {out_pipe.fd.get(), POLLIN, 0};
    if (pidfd) pfds[n++] = {pidfd.get(), POLLIN, 0};
    int wait_ms = (pidfd && o.forward_signals == nullptr) ? -1 : kTickMs;
    if (o.timeout.count() > 0) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(
          o.timeout - (std::chrono::steady_clock::now() - start));
      int left_ms = static_cast<int>(std::max<std::int64_t>(0, left.count()));
      wait_ms = wait_ms < 0 ? left_ms : std::min(wait_ms, left_ms);
    }
    if (poll(pfds, n, wait_ms) < 0 && errno != EINTR) return errno_error("poll");
    err_pipe.drain(o.output_limit, buf, sizeof buf);
    out_pipe.drain(o.output_limit, buf, sizeof buf);
    if ((err_pipe.overflow || out_pipe.overflow) && !overflow_killed) {
      kill_child();
      overflow_killed = true;
    }

    const auto now = std::chrono::steady_clock::now();
    if (o.forward_signals != nullptr && g_signal != 0) {
      if (signal_seen == std::chrono::steady_clock::time_point{}) signal_seen = now;
      if (!killed && now - signal_seen > o.signal_grace) {
        kill_child();
        killed = true;
      }
    }
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      reaped = true;
      break;
    }
    if (w < 0 && errno != EINTR) {
      // ECHILD: someone else reaped it (SIGCHLD ignored, or a waitpid(-1)
      // loop); its exit status is unknown, so it did not succeed.
      reaped = true;
      return errno_error("waitpid(" + call + ")", errno,
                         "the caller must not ignore SIGCHLD or reap children it did not start");
    }
    if (o.timeout.count() > 0 && now - start >= o.timeout) {
      return make_error(ErrorCode::kTimeout,
                        call + ": no answer after " +
                            std::to_string(o.timeout.count() / 1000) + " s (killed)");
    }
  }
  // The program is gone; take what its pipes still hold (without waiting
  // for a grandchild that may keep them open).
  err_pipe.drain(o.output_limit, buf, sizeof buf);
  out_pipe.drain(o.output_limit, buf, sizeof buf);
  if (err_pipe.overflow || out_pipe.overflow) {
    return make_error(ErrorCode::kResourceExhausted,
                      o.argv[0] + ": output larger than " + std::to_string(o.output_limit) +
                          " bytes");
  }
  result.wait_status = status;
  return result;
}

}  // namespace corral
