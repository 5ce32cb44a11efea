// PID 1 of every sandbox: corral's own init, the forked launcher, never
// re-executed. Its /proc/1/exe does point at the corral binary, so it must
// be out of the sandbox's reach (CVE-2019-5736): it is host root in the
// host's user namespace and not dumpable, so the sandbox can neither
// ptrace it nor open its /proc entries, and hidepid=invisible hides it. It builds the root,
// starts the workload in a fresh user namespace, forwards signals to it,
// reaps every orphan, and exits when the workload exits; the kernel then
// kills whatever is left in the pid namespace (double-forked daemons too).
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "base/environment.h"
#include "jail/capabilities.h"
#include "jail/rootfs_setup.h"
#include "jail/sandbox_plan.h"
#include "jail/stage.h"
#include "sys/syscalls.h"

namespace corral {

void child_fail(int control_fd, int stage, int err, const char* detail) {
  ControlMessage msg{};
  msg.type = ControlType::kFailure;
  msg.stage = stage;
  msg.err = err;
  if (detail != nullptr) {
    strncpy(msg.detail, detail, sizeof msg.detail - 1);
  }
  (void)send(control_fd, &msg, sizeof msg, MSG_NOSIGNAL);
  _exit(125);
}

namespace {

// How long after its deadline an unattended long-lived sandbox ends itself.
constexpr std::int64_t kBackstopGraceMs = 60'000;

[[noreturn]] void fail(const SandboxPlan& plan, Stage stage, const char* detail) {
  child_fail(plan.control_fd, static_cast<int>(stage), errno, detail);
}

void bring_up_loopback(const SandboxPlan& plan) {
  int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) fail(plan, Stage::kLoopback, "socket");
  ifreq ifr{};
  strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (ioctl(sock, SIOCGIFFLAGS, &ifr) != 0) fail(plan, Stage::kLoopback, "SIOCGIFFLAGS");
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
  if (ioctl(sock, SIOCSIFFLAGS, &ifr) != 0) fail(plan, Stage::kLoopback, "SIOCSIFFLAGS");
  close(sock);
}

void write_id_map(const SandboxPlan& plan, pid_t pid, const char* name, const char* content) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%d/%s", plan.stage_proc.c_str(), pid, name);
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) fail(plan, Stage::kIdMap, path);
  size_t len = strlen(content);
  if (write(fd, content, len) != static_cast<ssize_t>(len)) fail(plan, Stage::kIdMap, path);
  close(fd);
}

}  // namespace

// "go" from the creator, with (long-lived sandboxes) the three fds that init
// keeps for the daemon. Returns the bytes received.
ssize_t recv_go(int control_fd, ControlMessage* go, int held[3]) {
  iovec iov{go, sizeof *go};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(3 * sizeof(int))];
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof cbuf;
  ssize_t n = recvmsg(control_fd, &mh, MSG_CMSG_CLOEXEC);
  for (cmsghdr* cm = CMSG_FIRSTHDR(&mh); n > 0 && cm != nullptr; cm = CMSG_NXTHDR(&mh, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count && i < 3; ++i)
      memcpy(&held[i], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
  }
  return n;
}

int close_fds_except(const int* keep, int count) {
  int sorted[16];
  int n = 0;
  for (int i = 0; i < count && n < 16; ++i) {
    if (keep[i] < 3) continue;
    int j = n++;
    while (j > 0 && sorted[j - 1] > keep[i]) {
      sorted[j] = sorted[j - 1];
      --j;
    }
    sorted[j] = keep[i];
  }
  unsigned next = 3;
  for (int i = 0; i < n; ++i) {
    unsigned k = static_cast<unsigned>(sorted[i]);
    if (k < next) continue;
    if (k > next && sys::close_range(next, k - 1, 0) != 0) return -1;
    next = k + 1;
  }
  return sys::close_range(next, ~0U, 0);
}

namespace {

// Cgroup v1: into the sandbox's cgroup before anything else, by ourselves
// (Cgroup::open_self_join says why), then tell the launcher, which waits for
// it before "go". On failure the launcher hears it and nothing runs.
void join_cgroup(SandboxPlan& plan) {
  bool any = false;
  for (int& fd : plan.cgroup_join_fds) {
    if (fd < 0) continue;
    any = true;
    if (write(fd, "0", 1) != 1) fail(plan, Stage::kCgroup, "joining the sandbox's cgroup");
    close(fd);
    fd = -1;
  }
  if (!any) return;
  ControlMessage joined{};
  joined.type = ControlType::kJoined;
  if (send(plan.control_fd, &joined, sizeof joined, MSG_NOSIGNAL) != sizeof joined) _exit(125);
}

}  // namespace

void run_init(SandboxPlan& plan) {
  // If `corral run` dies, so does the sandbox: the pid namespace goes with
  // us. A long-lived sandbox outlives a daemon crash (ADR 0004): the daemon
  // re-attaches, or destroys it, when it comes back.
  // If `corral run` dies, so does the sandbox: the pid namespace goes with
  // us. A long-lived sandbox outlives its daemon (ADR 0004); before "go" it
  // dies with its creator too, by EOF on the control socket: the ends it
  // keeps for the daemon arrive with "go", not before.
  if (!plan.long_lived) prctl(PR_SET_PDEATHSIG, SIGKILL);
  // Nothing of our creator's environment (the daemon's may hold secrets;
  // `corral run`'s is the user's shell): init and the zygote need none,
  // and every workload gets the plan's own.
  scrub_environment(nullptr, 0);
  // Whoever forked us may ignore SIGCHLD (the daemon's factory lets the
  // kernel reap inits): we and the zygote must see our children's ends.
  signal(SIGCHLD, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  prctl(PR_SET_DUMPABLE, 0);
  prctl(PR_SET_NAME, "corral-init");
  join_cgroup(plan);
  ControlMessage go{};
  int held[3] = {-1, -1, -1};
  if (recv_go(plan.control_fd, &go, held) != sizeof go || go.type != ControlType::kGo) _exit(125);
  for (int i = 0; i < 3; ++i) {
    if (held[i] < 0) continue;
    if (dup3(held[i], plan.held_fds[i], O_CLOEXEC) < 0) _exit(125);
    close(held[i]);
  }
  if (setsid() < 0) fail(plan, Stage::kSession, "setsid");
  for (int n = 0; n < 3; ++n) {
    if (plan.stdio[n] != n && dup2(plan.stdio[n], n) < 0) fail(plan, Stage::kSession, "dup2 stdio");
  }
  umask(0);
  if (plan.unshare_cgroup_ns && unshare(CLONE_NEWCGROUP) != 0)
    fail(plan, Stage::kCgroupNamespace, "unshare(CLONE_NEWCGROUP)");
  stage_writable_layer(plan);

  // Signals are taken through a signalfd; the workload unblocks them.
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, nullptr);

  // The workload is born now, in the sandbox's user namespace: created
  // after every other namespace, so the sandbox's root owns none of them
  // (it cannot touch the network or mounts, even with --root). It waits
  // until the root file system is ready; pivot_root moves it along.
  int go_pipe[2];
  if (pipe2(go_pipe, O_CLOEXEC) != 0) fail(plan, Stage::kUserNamespace, "pipe");
  pid_t workload = sys::fork_into_new_userns();
  if (workload < 0) fail(plan, Stage::kUserNamespace, "clone(CLONE_NEWUSER)");
  if (workload == 0) {
    close(go_pipe[1]);
    if (plan.long_lived) run_zygote(plan, go_pipe[0]);
    run_workload(plan, go_pipe[0]);
  }
  close(go_pipe[0]);
  write_id_map(plan, workload, "uid_map", plan.uid_map.c_str());
  write_id_map(plan, workload, "gid_map", plan.gid_map.c_str());
  char ns_path[4200];
  snprintf(ns_path, sizeof ns_path, "%s/%d/ns/user", plan.stage_proc.c_str(), workload);
  int userns = open(ns_path, O_RDONLY | O_CLOEXEC);
  if (userns < 0) fail(plan, Stage::kUserNamespace, ns_path);

  setup_rootfs(plan, userns);
  WorkloadGo release{-1};
  int pty_slave = plan.tty ? open_sandbox_pty(plan, &release.pty_index) : -1;
  if (sethostname(plan.hostname.c_str(), plan.hostname.size()) != 0)
    fail(plan, Stage::kHostname, plan.hostname.c_str());
  bring_up_loopback(plan);
  enter_rootfs(plan);
  // Nothing of the host stays open in the sandbox: init keeps only the
  // control socket, the pty slave (so the pty outlives a short command
  // until the launcher has read it all), the release pipe and, for a
  // long-lived sandbox, what a re-attaching daemon takes back and the
  // locks that mark its uid block and base layer as in use.
  const int* kept = plan.held_fds;
  const int keep[] = {plan.control_fd, pty_slave, go_pipe[1], kept[0], kept[1], kept[2],
                      kept[3],         kept[4],   kept[5],    kept[6], kept[7]};
  static_assert(sizeof keep / sizeof keep[0] == 3 + sizeof plan.held_fds / sizeof(int));
  if (close_fds_except(keep, 11) != 0) fail(plan, Stage::kCloseFds, "close_range");

  // Setup is over: from here init only reaps, forwards signals to the
  // workload (another uid: CAP_KILL) and reports. It keeps nothing else,
  // so a bug in this loop is not a bug in full host root. The drop comes
  // before the release, so no workload ever runs beside a privileged init.
  if (drop_bounding_set(kInitCapabilities) != 0 || set_capabilities(kInitCapabilities) != 0 ||
      prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    fail(plan, Stage::kCapabilities, "init drops its capabilities");
  if (write(go_pipe[1], &release, sizeof release) != sizeof release)
    fail(plan, Stage::kUserNamespace, "release workload");
  close(go_pipe[1]);

  int sfd = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) fail(plan, Stage::kSession, "signalfd");
  // The lifetime backstop of a long-lived sandbox (no daemon left to end it).
  int timer = -1;
  auto arm = [&](std::int64_t deadline_ms) {
    if (timer < 0 || deadline_ms <= 0) return;
    itimerspec its{};
    const std::int64_t at = deadline_ms + kBackstopGraceMs;
    its.it_value.tv_sec = at / 1000;
    its.it_value.tv_nsec = (at % 1000) * 1000000;
    timerfd_settime(timer, TFD_TIMER_ABSTIME, &its, nullptr);
  };
  if (plan.long_lived && plan.deadline_ms > 0) {
    timer = timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC | TFD_NONBLOCK);
    arm(plan.deadline_ms);
  }
  for (;;) {
    pollfd fds[3] = {
        {sfd, POLLIN, 0}, {plan.long_lived ? plan.control_fd : -1, POLLIN, 0}, {timer, POLLIN, 0}};
    if (poll(fds, 3, -1) < 0) continue;
    if (fds[1].revents & POLLIN) {
      ControlMessage msg{};
      if (recv(plan.control_fd, &msg, sizeof msg, MSG_DONTWAIT) == sizeof msg &&
          msg.type == ControlType::kExtend)
        arm(msg.deadline_ms);
    }
    if (fds[2].revents & POLLIN) {
      ControlMessage msg{};
      msg.type = ControlType::kExpired;
      (void)send(plan.control_fd, &msg, sizeof msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      _exit(0);  // the pid namespace, and every process in it, goes with us
    }
    if (!(fds[0].revents & POLLIN)) continue;
    signalfd_siginfo si;
    while (read(sfd, &si, sizeof si) == sizeof si) {
      if (si.ssi_signo == SIGCHLD) {
        int status;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
          if (pid == workload) {
            ControlMessage msg{};
            msg.type = ControlType::kExited;
            msg.wait_status = status;
            (void)send(plan.control_fd, &msg, sizeof msg, MSG_NOSIGNAL | MSG_DONTWAIT);
            _exit(0);  // takes every remaining process of the sandbox with it
          }
        }
        continue;
      }
      kill(workload, static_cast<int>(si.ssi_signo));
    }
  }
}

}  // namespace corral
