// The host side of `corral run`, in four steps: launch (plan, then the
// launcher sequence of jail/launch.h), supervise (timeout, signals, limit
// events, the pty), classify (exit code and notices) and teardown,
// verified: nothing may be left (F3). The steps inside the sandbox are in
// init_process.cc.
#include "jail/sandbox_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "base/paths.h"
#include "jail/cgroup.h"
#include "jail/launch.h"
#include "jail/sandbox_planner.h"
#include "jail/stdio_relay.h"
#include "jail/tty_relay.h"
#include "netns/sandbox_link.h"
#include "sys/syscalls.h"

namespace corral {

namespace {

using Clock = std::chrono::steady_clock;

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string describe_failure(Stage stage, int err, const char* detail) {
  std::string m = "sandbox setup failed at stage " + std::string(stage_name(stage));
  if (detail != nullptr && detail[0] != '\0') m += " (" + std::string(detail) + ")";
  if (err != 0) {
    m += ": " + std::string(errno_name(err)) + " (" + strerror(err) + ")";
  }
  return m;
}

void set_failure(RunResult& r, Stage stage, int err, std::string message, std::string hint) {
  r.exit_code = 125;
  if (stage == Stage::kExec) r.exit_code = (err == ENOENT) ? 127 : 126;
  r.failure = SetupFailure{stage, err, std::move(message), std::move(hint)};
}

// Mount points of this sandbox that leaked into the host's mount table.
std::vector<std::string> leaked_mounts(const std::string& stage_dir) {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string id, parent, devno, root, mount_point;
    ss >> id >> parent >> devno >> root >> mount_point;
    if (mount_point.rfind(stage_dir, 0) == 0) out.push_back("mount " + mount_point);
  }
  return out;
}

// Cgroups left by launchers that died (kill -9): their lock is free.
void reap_stale_cgroups(CgroupManager& manager, const std::string& locks_dir) {
  auto names = manager.list();
  if (!names) return;
  for (const std::string& name : *names) {
    if (name.rfind("sb-", 0) != 0) continue;
    std::string lock_path = locks_dir + "/" + name + ".lock";
    UniqueFd lock(open(lock_path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
    if (lock && flock(lock.get(), LOCK_EX | LOCK_NB) != 0) continue;  // its launcher is alive
    auto cg = manager.open(name);
    if (!cg) continue;
    if (!lock) {
      // No lock here: maybe a launcher with another CORRAL_RUN_DIR. Only an
      // empty cgroup is certainly stale.
      auto procs = (*cg)->processes();
      if (!procs || !procs->empty()) continue;
    }
    if ((*cg)->destroy()) unlink(lock_path.c_str());
  }
  // Lock files without their cgroup: a launcher of another run dir reaped
  // the empty cgroup of a dead sandbox but cannot see this dir. A free lock
  // is a dead launcher's (create_alive_lock links it into place held).
  DIR* dir = opendir(locks_dir.c_str());
  if (dir == nullptr) return;
  while (const dirent* e = readdir(dir)) {
    const std::string file = e->d_name;
    if (file.rfind("sb-", 0) != 0 || !file.ends_with(".lock")) continue;
    const std::string name = file.substr(0, file.size() - 5);
    if (manager.open(name)) continue;  // the loop above decides about those
    UniqueFd lock(openat(dirfd(dir), file.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
    if (!lock || flock(lock.get(), LOCK_EX | LOCK_NB) != 0) continue;
    (void)unlinkat(dirfd(dir), file.c_str(), 0);
  }
  closedir(dir);
}

// A launch failure, worded as `corral run` has always worded it.
void set_launch_failure(RunResult& r, LaunchError& e) {
  const Error& err = e.error;
  switch (e.step) {
    case LaunchStep::kAliveLock:
    case LaunchStep::kCgroupAttach:
      set_failure(r, e.stage, err.sys_errno, err.message, "");
      break;
    case LaunchStep::kChannels:
      set_failure(r, e.stage, err.sys_errno, err.message + ": " + strerror(err.sys_errno), "");
      break;
    case LaunchStep::kClone:
      set_failure(r, e.stage, err.sys_errno,
                  describe_failure(e.stage, err.sys_errno, err.message.c_str()), err.hint);
      break;
    case LaunchStep::kNetworkLink:
      set_failure(r, e.stage, err.sys_errno, err.message,
                  err.hint.empty() ? std::string(stage_hint(e.stage, err.sys_errno)) : err.hint);
      break;
    case LaunchStep::kCgroup:
    case LaunchStep::kGo:
      set_failure(r, e.stage, err.sys_errno, err.message, err.hint);
      break;
  }
  for (auto& left : e.residue) r.residue.push_back(std::move(left));
}

// The cgroup manager, with the cgroups of dead launchers reaped, then the
// launcher sequence. `cgroups` lives as long as the sandbox's cgroup.
tl::expected<LaunchedInit, LaunchError> launch(const SandboxSpec& spec, PreparedSandbox& prepared,
                                               const RunOptions& options,
                                               std::unique_ptr<CgroupManager>& cgroups) {
  auto manager = CgroupManager::detect();
  if (!manager) {
    Error e = std::move(manager.error());
    e.sys_errno = 0;  // the message says what is missing
    return tl::unexpected<LaunchError>(LaunchError{LaunchStep::kCgroup, Stage::kCgroup, e, {}});
  }
  cgroups = std::move(*manager);
  reap_stale_cgroups(*cgroups, run_dir() + "/sandboxes");
  LaunchOptions launch_options;
  launch_options.cgroups = cgroups.get();
  launch_options.network_ready = options.network_ready;
  return launch_init(spec, prepared, launch_options);
}

// How the sandbox ended, as its supervision saw it.
struct SandboxEnd {
  bool init_alive = true;  // false once init was reaped
  bool got_exit = false;   // wait_status holds the command's end (or init's)
  int wait_status = -1;
  int killed_by_us = 0;  // signal that made us kill the sandbox
};

// Watches a started sandbox until its init ends: relays stdio and the pty,
// forwards signals, kills the sandbox at the timeout or on SIGINT, SIGTERM
// and SIGHUP, and reads init's reports (a setup failure, the command's
// exit, the pty master).
class Supervisor {
 public:
  Supervisor(LaunchedInit& init, StdioRelay& stdio, RunResult& result)
      : init_(init), stdio_(stdio), result_(result) {}

  SandboxEnd run(const sigset_t& handled, std::chrono::milliseconds timeout) {
    UniqueFd sigfd(signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK));
    UniqueFd timer(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
    {
      itimerspec its{};
      auto ms = timeout.count();
      its.it_value.tv_sec = ms / 1000;
      its.it_value.tv_nsec = (ms % 1000) * 1000000;
      timerfd_settime(timer.get(), 0, &its, nullptr);
    }
    while (end_.init_alive) {
      pollfd fds[9] = {{init_.pidfd.get(), POLLIN, 0},
                       {control_open_ ? init_.control.get() : -1, POLLIN, 0},
                       {sigfd.get(), POLLIN, 0},
                       {timer.get(), POLLIN, 0}};
      int nfds = 4;
      const int stdio_at = nfds;
      nfds += stdio_.add_poll_fds(fds + nfds, 3);
      const int tty_at = nfds;
      if (relay_) nfds += relay_->add_poll_fds(fds + nfds, 2);
      if (poll(fds, static_cast<nfds_t>(nfds), -1) < 0 && errno != EINTR) break;
      if (fds[1].revents != 0) read_control();
      stdio_.on_poll(fds + stdio_at);
      if (relay_) relay_->on_poll(fds + tty_at);
      if (fds[2].revents & POLLIN) read_signals(sigfd.get());
      if (fds[3].revents & POLLIN) {
        result_.timed_out = true;
        kill_sandbox();
      }
      if (fds[0].revents & POLLIN) reap_init();
    }
    if (relay_) relay_->drain();
    stdio_.drain();
    return end_;
  }

 private:
  void kill_sandbox() {
    if (end_.init_alive) sys::pidfd_send_signal(init_.pidfd.get(), SIGKILL, nullptr, 0);
  }

  void read_control() {
    for (;;) {
      ControlMessage msg{};
      iovec iov{&msg, sizeof msg};
      alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
      msghdr mh{};
      mh.msg_iov = &iov;
      mh.msg_iovlen = 1;
      mh.msg_control = cbuf;
      mh.msg_controllen = sizeof cbuf;
      ssize_t n = recvmsg(init_.control.get(), &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
      if (n == 0) control_open_ = false;  // init closed its end: stop polling it
      if (n <= 0) return;
      if (msg.type == ControlType::kFailure && !result_.failure) {
        msg.detail[sizeof msg.detail - 1] = '\0';
        Stage stage = static_cast<Stage>(msg.stage);
        std::string message =
            stage == Stage::kExec
                ? std::string(msg.detail) + ": " +
                      (msg.err == ENOENT ? "command not found in the sandbox" : strerror(msg.err))
                : describe_failure(stage, msg.err, msg.detail);
        set_failure(result_, stage, msg.err, message, std::string(stage_hint(stage, msg.err)));
      } else if (msg.type == ControlType::kExited) {
        end_.got_exit = true;
        end_.wait_status = msg.wait_status;
      } else if (msg.type == ControlType::kPtyMaster) {
        cmsghdr* cm = CMSG_FIRSTHDR(&mh);
        if (cm != nullptr && cm->cmsg_type == SCM_RIGHTS) {
          int fd;
          memcpy(&fd, CMSG_DATA(cm), sizeof fd);
          relay_.emplace(UniqueFd(fd));
        }
      }
    }
  }

  void read_signals(int sigfd) {
    signalfd_siginfo si;
    while (read(sigfd, &si, sizeof si) == sizeof si) {
      int sig = static_cast<int>(si.ssi_signo);
      if (sig == SIGCHLD) continue;
      if (sig == SIGWINCH) {
        if (relay_) relay_->sync_window_size();
        continue;
      }
      if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
        end_.killed_by_us = sig;
        kill_sandbox();
      } else {
        kill(init_.pid, sig);  // init forwards it to the command
      }
    }
  }

  void reap_init() {
    int status;
    waitpid(init_.pid, &status, 0);
    end_.init_alive = false;
    read_control();
    if (!end_.got_exit && WIFSIGNALED(status) && !result_.failure && !result_.timed_out &&
        end_.killed_by_us == 0) {
      // init itself died (the OOM killer may pick it): the sandbox ended.
      end_.wait_status = status;
      end_.got_exit = true;
    }
  }

  LaunchedInit& init_;
  StdioRelay& stdio_;
  RunResult& result_;
  std::optional<TtyRelay> relay_;
  bool control_open_ = true;
  SandboxEnd end_;
};

// What happened, in order of precedence: the exit code, the limit hit and
// the notices of a sandbox that ran.
void classify(const SandboxSpec& spec, const SandboxEnd& end, const Cgroup& cgroup,
              RunResult& result) {
  if (auto stats = cgroup.stats(); stats) {
    result.memory_peak_bytes = stats->memory_peak_bytes;
    result.cpu = std::chrono::milliseconds(stats->cpu_usage_ns / 1000000);
    result.oom_kills = stats->oom_kills;
    result.pids_max_hits = stats->pids_max_hits;
  }
  result.oom_killed = result.oom_kills > 0;
  if (!result.failure) {
    if (result.timed_out) {
      result.exit_code = 124;
      result.limit_hit = "timeout";
      result.notices.push_back("the command timed out after " +
                               std::to_string(spec.limits.timeout.count()) +
                               " ms; the whole process tree was killed");
    } else if (end.killed_by_us != 0) {
      result.exit_code = 128 + end.killed_by_us;
      result.signal = end.killed_by_us;
    } else if (end.got_exit && WIFEXITED(end.wait_status)) {
      result.exit_code = WEXITSTATUS(end.wait_status);
    } else if (end.got_exit && WIFSIGNALED(end.wait_status)) {
      result.signal = WTERMSIG(end.wait_status);
      result.exit_code = 128 + result.signal;
    }
    if (result.oom_killed) {
      if (result.limit_hit.empty()) result.limit_hit = "memory";
      if (result.signal == SIGKILL) result.exit_code = 137;
      result.notices.push_back(
          "out of memory: the memory limit (" + std::to_string(spec.limits.memory_bytes) +
          " bytes) was hit; the OOM killer killed " + std::to_string(result.oom_kills) +
          " process(es); peak usage " + std::to_string(result.memory_peak_bytes) + " bytes");
    }
    if (result.pids_max_hits > 0) {
      if (result.limit_hit.empty()) result.limit_hit = "pids";
      result.notices.push_back("the process limit (" + std::to_string(spec.limits.pids) +
                               ") refused " + std::to_string(result.pids_max_hits) + " fork(s)");
    }
  }
  if (result.signal != 0 && result.limit_hit.empty() && end.killed_by_us == 0) {
    result.notices.push_back("the command was killed by " + signal_name(result.signal));
  }
}

// Teardown, verified: processes and cgroup, writable layer, mounts, the
// veth pair, the lock file. `init` is null when the launch failed (its
// undo removed what it had made).
void teardown(PreparedSandbox& prepared, LaunchedInit* init, const SandboxEnd& end,
              const SecretCheck& has_secret, RunResult& result) {
  if (init != nullptr) {
    if (end.init_alive) sys::pidfd_send_signal(init->pidfd.get(), SIGKILL, nullptr, 0);
    if (auto st = init->cgroup->destroy(); !st) result.residue.push_back(st.error().message);
  }
  if (auto usage = prepared.layer->usage(); usage) result.disk_used_bytes = usage->bytes;
  if (prepared.dry_run) result.dry_run = collect_dry_run_writes(prepared, has_secret);
  if (auto wiped = prepared.layer->wipe(); wiped) {
    result.residue_bytes = wiped->bytes;
    if (wiped->bytes != 0)
      result.residue.push_back("writable layer still holds " + std::to_string(wiped->bytes) +
                               " bytes after wipe");
  } else {
    result.residue.push_back(wiped.error().message);
  }
  for (auto& m : leaked_mounts(prepared.plan.stage_dir)) result.residue.push_back(m);
  // The veth pair dies with the namespace; delete the host end if the
  // kernel has not yet, and check.
  if (prepared.network.slot) {
    if (auto st = net::teardown_sandbox_link(*prepared.network.slot); !st)
      result.residue.push_back(st.error().message);
  }
  if (init != nullptr) {
    init->alive.reset();
    if (unlink(init->lock_path.c_str()) != 0) result.residue.push_back("file " + init->lock_path);
  }
}

}  // namespace

RunResult run_sandbox(const SandboxSpec& spec, const RunOptions& options) {
  RunResult result;
  Stage failed_stage = Stage::kPlan;

  // Signals we handle ourselves, through a signalfd: block them first so a
  // Ctrl-C during setup is not lost and still cleans up.
  sigset_t handled, previous;
  sigemptyset(&handled);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCHLD})
    sigaddset(&handled, sig);
  sigprocmask(SIG_BLOCK, &handled, &previous);
  struct RestoreMask {
    sigset_t mask;
    ~RestoreMask() { sigprocmask(SIG_SETMASK, &mask, nullptr); }
  } restore{previous};

  auto prepared_or = prepare_sandbox(spec, options, failed_stage);
  if (!prepared_or) {
    set_failure(result, failed_stage, prepared_or.error().sys_errno, prepared_or.error().message,
                prepared_or.error().hint);
    return result;
  }
  PreparedSandbox& prepared = **prepared_or;
  result.sandbox_id = prepared.id;
  if (prepared.network.slot && !options.network_ready) {
    set_failure(result, Stage::kNetworkPolicy, 0,
                "this caller runs no proxy or DNS, so it cannot give a sandbox network",
                "use `corral run` or `corral serve`, which serve them");
    return result;
  }
  result.notices = prepared.notices;

  auto stdio_or = StdioRelay::create(options.tty);
  if (!stdio_or) {
    set_failure(result, Stage::kPlan, stdio_or.error().sys_errno, stdio_or.error().message, "");
    return result;
  }
  StdioRelay& stdio = *stdio_or;
  for (int n = 0; n < 3; ++n) prepared.plan.stdio[n] = stdio.child_fd(n);

  std::unique_ptr<CgroupManager> cgroups;
  auto init = launch(spec, prepared, options, cgroups);
  if (!init) {
    set_launch_failure(result, init.error());
    // No lock or no cgroup: nothing of the sandbox was made.
    const LaunchStep step = init.error().step;
    if (step == LaunchStep::kAliveLock || step == LaunchStep::kCgroup) return result;
  }
  stdio.close_child_ends();

  SandboxEnd end;
  if (init) {
    end = Supervisor(*init, stdio, result).run(handled, spec.limits.timeout);
    result.wall =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - init->cloned_at);
    classify(spec, end, *init->cgroup, result);
  } else {
    end.init_alive = false;
    stdio.drain();
  }
  teardown(prepared, init ? &*init : nullptr, end, options.has_secret, result);
  return result;
}

}  // namespace corral
