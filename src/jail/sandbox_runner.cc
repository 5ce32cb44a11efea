// The host side of `corral run`: plan, create the cgroup, clone the
// sandbox's init into new namespaces, watch it (timeout, signals, limit
// events, the pty), then tear everything down and verify that nothing is
// left (F3). The steps inside the sandbox are in init_process.cc.
#include "jail/sandbox_runner.h"

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "base/paths.h"
#include "jail/cgroup.h"
#include "jail/fs_util.h"
#include "jail/init_clone.h"
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
  SandboxPlan& plan = prepared.plan;
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

  // The lock that marks this sandbox as alive (see reap_stale_cgroups).
  const std::string locks_dir = run_dir() + "/sandboxes";
  if (auto st = mkdir_p(locks_dir, 0700); !st) {
    set_failure(result, Stage::kPlan, st.error().sys_errno, st.error().message, "");
    return result;
  }
  const std::string lock_path = locks_dir + "/" + prepared.id + ".lock";
  UniqueFd alive(open(lock_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!alive || flock(alive.get(), LOCK_EX) != 0) {
    set_failure(result, Stage::kPlan, errno, "creating " + lock_path + ": " + strerror(errno), "");
    return result;
  }

  auto manager = CgroupManager::detect();
  if (!manager) {
    unlink(lock_path.c_str());
    set_failure(result, Stage::kCgroup, 0, manager.error().message, manager.error().hint);
    return result;
  }
  reap_stale_cgroups(**manager, locks_dir);
  CgroupLimits limits;
  limits.memory_bytes = spec.limits.memory_bytes;
  limits.cpus = spec.limits.cpus;
  limits.pids = spec.limits.pids + 1;  // + our init
  auto cgroup_or = (*manager)->create(prepared.id, limits);
  if (!cgroup_or) {
    unlink(lock_path.c_str());
    set_failure(result, Stage::kCgroup, cgroup_or.error().sys_errno, cgroup_or.error().message,
                cgroup_or.error().hint);
    return result;
  }
  Cgroup& cgroup = **cgroup_or;

  int sv[2] = {-1, -1};
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    set_failure(result, Stage::kClone, errno, std::string("socketpair: ") + strerror(errno), "");
  UniqueFd control(sv[0]);
  plan.control_fd = sv[1];
  for (int n = 0; n < 3; ++n) plan.stdio[n] = stdio.child_fd(n);

  const bool v2 = cgroup.clone_into_fd() >= 0;
  int pidfd = -1;
  const int control_fd = control.get();

  // Give freed planning memory back before init is forked from us: both
  // processes keep their heap for the sandbox's whole life.
  malloc_trim(0);
  const auto start = Clock::now();
  pid_t child = result.failure ? -1 : clone_sandbox_init(plan, cgroup, &pidfd, &control_fd, 1);
  if (sv[1] >= 0) close(sv[1]);
  stdio.close_child_ends();
  UniqueFd child_pidfd(pidfd);
  if (child < 0 && !result.failure) {
    set_failure(result, Stage::kClone, errno,
                describe_failure(Stage::kClone, errno, "clone3(new namespaces)"),
                std::string(stage_hint(Stage::kClone, errno)));
  }

  bool child_alive = child > 0;
  if (child_alive && !v2) {
    if (auto st = cgroup.add_process(child); !st) {
      set_failure(result, Stage::kCgroup, st.error().sys_errno, st.error().message, "");
      sys::pidfd_send_signal(child_pidfd.get(), SIGKILL, nullptr, 0);
    }
  }
  // The veth pair, then the owner's proxy and DNS on its host end, before
  // init builds the sandbox: the workload never runs with half a network.
  if (child_alive && !result.failure && prepared.network.slot) {
    auto netns_path = "/proc/" + std::to_string(child) + "/ns/net";
    UniqueFd netns(open(netns_path.c_str(), O_RDONLY | O_CLOEXEC));
    Status linked = netns ? net::setup_sandbox_link(*prepared.network.slot, netns.get())
                          : errno_error("open(" + netns_path + ")");
    if (linked && options.network_ready)
      linked = options.network_ready(prepared.id, prepared.network);
    if (!linked) {
      set_failure(result, Stage::kNetworkLink, linked.error().sys_errno, linked.error().message,
                  linked.error().hint.empty()
                      ? std::string(stage_hint(Stage::kNetworkLink, linked.error().sys_errno))
                      : linked.error().hint);
      sys::pidfd_send_signal(child_pidfd.get(), SIGKILL, nullptr, 0);
    }
  }
  // Everything is in place: let init build the sandbox.
  prepared.bind_fds.clear();
  if (child_alive && !result.failure) {
    ControlMessage go{};
    go.type = ControlType::kGo;
    (void)send(control.get(), &go, sizeof go, MSG_NOSIGNAL);
  }

  UniqueFd sigfd(signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK));
  UniqueFd timer(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  {
    itimerspec its{};
    auto ms = spec.limits.timeout.count();
    its.it_value.tv_sec = ms / 1000;
    its.it_value.tv_nsec = (ms % 1000) * 1000000;
    timerfd_settime(timer.get(), 0, &its, nullptr);
  }
  std::optional<TtyRelay> relay;
  int wait_status = -1;
  bool got_exit = false;
  int killed_by_us = 0;  // signal that made us kill the sandbox

  auto kill_sandbox = [&]() {
    if (child_alive) sys::pidfd_send_signal(child_pidfd.get(), SIGKILL, nullptr, 0);
  };
  bool control_open = true;
  auto handle_control = [&]() {
    for (;;) {
      ControlMessage msg{};
      iovec iov{&msg, sizeof msg};
      alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
      msghdr mh{};
      mh.msg_iov = &iov;
      mh.msg_iovlen = 1;
      mh.msg_control = cbuf;
      mh.msg_controllen = sizeof cbuf;
      ssize_t n = recvmsg(control.get(), &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
      if (n == 0) control_open = false;  // init closed its end: stop polling it
      if (n <= 0) return;
      if (msg.type == ControlType::kFailure && !result.failure) {
        msg.detail[sizeof msg.detail - 1] = '\0';
        Stage stage = static_cast<Stage>(msg.stage);
        std::string message =
            stage == Stage::kExec
                ? std::string(msg.detail) + ": " +
                      (msg.err == ENOENT ? "command not found in the sandbox" : strerror(msg.err))
                : describe_failure(stage, msg.err, msg.detail);
        set_failure(result, stage, msg.err, message, std::string(stage_hint(stage, msg.err)));
      } else if (msg.type == ControlType::kExited) {
        got_exit = true;
        wait_status = msg.wait_status;
      } else if (msg.type == ControlType::kPtyMaster) {
        cmsghdr* cm = CMSG_FIRSTHDR(&mh);
        if (cm != nullptr && cm->cmsg_type == SCM_RIGHTS) {
          int fd;
          memcpy(&fd, CMSG_DATA(cm), sizeof fd);
          relay.emplace(UniqueFd(fd));
        }
      }
    }
  };

  while (child_alive) {
    pollfd fds[9] = {{child_pidfd.get(), POLLIN, 0},
                     {control_open ? control.get() : -1, POLLIN, 0},
                     {sigfd.get(), POLLIN, 0},
                     {timer.get(), POLLIN, 0}};
    int nfds = 4;
    const int stdio_at = nfds;
    nfds += stdio.add_poll_fds(fds + nfds, 3);
    const int tty_at = nfds;
    if (relay) nfds += relay->add_poll_fds(fds + nfds, 2);
    if (poll(fds, static_cast<nfds_t>(nfds), -1) < 0 && errno != EINTR) break;
    if (fds[1].revents != 0) handle_control();
    stdio.on_poll(fds + stdio_at);
    if (relay) relay->on_poll(fds + tty_at);
    if (fds[2].revents & POLLIN) {
      signalfd_siginfo si;
      while (read(sigfd.get(), &si, sizeof si) == sizeof si) {
        int sig = static_cast<int>(si.ssi_signo);
        if (sig == SIGCHLD) continue;
        if (sig == SIGWINCH) {
          if (relay) relay->sync_window_size();
          continue;
        }
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
          killed_by_us = sig;
          kill_sandbox();
        } else {
          kill(child, sig);  // init forwards it to the command
        }
      }
    }
    if (fds[3].revents & POLLIN) {
      result.timed_out = true;
      kill_sandbox();
    }
    if (fds[0].revents & POLLIN) {
      int status;
      waitpid(child, &status, 0);
      child_alive = false;
      handle_control();
      if (!got_exit && WIFSIGNALED(status) && !result.failure && !result.timed_out &&
          killed_by_us == 0) {
        // init itself died (the OOM killer may pick it): the sandbox ended.
        wait_status = status;
        got_exit = true;
      }
    }
  }
  if (relay) relay->drain();
  stdio.drain();
  result.wall = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);

  // What happened, in order of precedence.
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
    } else if (killed_by_us != 0) {
      result.exit_code = 128 + killed_by_us;
      result.signal = killed_by_us;
    } else if (got_exit && WIFEXITED(wait_status)) {
      result.exit_code = WEXITSTATUS(wait_status);
    } else if (got_exit && WIFSIGNALED(wait_status)) {
      result.signal = WTERMSIG(wait_status);
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
  if (result.signal != 0 && result.limit_hit.empty() && killed_by_us == 0) {
    result.notices.push_back("the command was killed by " + signal_name(result.signal));
  }

  // Teardown, verified: processes and cgroup, writable layer, mounts, files.
  if (child_alive) kill_sandbox();
  if (auto st = cgroup.destroy(); !st) result.residue.push_back(st.error().message);
  if (auto usage = prepared.layer->usage(); usage) result.disk_used_bytes = usage->bytes;
  if (auto wiped = prepared.layer->wipe(); wiped) {
    result.residue_bytes = wiped->bytes;
    if (wiped->bytes != 0)
      result.residue.push_back("writable layer still holds " + std::to_string(wiped->bytes) +
                               " bytes after wipe");
  } else {
    result.residue.push_back(wiped.error().message);
  }
  for (auto& m : leaked_mounts(plan.stage_dir)) result.residue.push_back(m);
  // The veth pair dies with the namespace; delete the host end if the
  // kernel has not yet, and check.
  if (prepared.network.slot) {
    if (auto st = net::teardown_sandbox_link(*prepared.network.slot); !st)
      result.residue.push_back(st.error().message);
  }
  alive.reset();
  if (unlink(lock_path.c_str()) != 0) result.residue.push_back("file " + lock_path);
  return result;
}

}  // namespace corral
