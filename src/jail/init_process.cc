// PID 1 of every sandbox: corral's own init (the forked launcher, never
// re-executed, so no host binary is reachable through /proc/1/exe; it is
// host root and not dumpable, so the sandbox cannot ptrace it or open its
// /proc entries, and hidepid=invisible hides it). It builds the root,
// starts the workload in a fresh user namespace, forwards signals to it,
// reaps every orphan, and exits when the workload exits; the kernel then
// kills whatever is left in the pid namespace (double-forked daemons too).
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

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

void write_proc_file(const SandboxPlan& plan, pid_t pid, const char* name, const char* content) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/%s", pid, name);
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) fail(plan, Stage::kIdMap, path);
  size_t len = strlen(content);
  if (write(fd, content, len) != static_cast<ssize_t>(len)) fail(plan, Stage::kIdMap, path);
  close(fd);
}

// Closes every fd except the ones init still needs: nothing of the host
// stays open in the sandbox.
void close_other_fds(const SandboxPlan& plan, int keep_a, int keep_b) {
  int keep[2] = {keep_a < keep_b ? keep_a : keep_b, keep_a < keep_b ? keep_b : keep_a};
  unsigned next = 3;
  for (int k : keep) {
    if (k < 0 || static_cast<unsigned>(k) < next) continue;
    if (static_cast<unsigned>(k) > next &&
        sys::close_range(next, static_cast<unsigned>(k) - 1, 0) != 0)
      fail(plan, Stage::kCloseFds, "close_range");
    next = static_cast<unsigned>(k) + 1;
  }
  if (sys::close_range(next, ~0U, 0) != 0) fail(plan, Stage::kCloseFds, "close_range");
}

}  // namespace

void run_init(SandboxPlan& plan) {
  // If the launcher dies, so does the sandbox: the pid namespace goes with us.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  prctl(PR_SET_DUMPABLE, 0);
  ControlMessage go{};
  if (recv(plan.control_fd, &go, sizeof go, 0) != sizeof go || go.type != ControlType::kGo)
    _exit(125);
  if (setsid() < 0) fail(plan, Stage::kSession, "setsid");
  umask(0);
  if (plan.unshare_cgroup_ns && unshare(CLONE_NEWCGROUP) != 0)
    fail(plan, Stage::kCgroupNamespace, "unshare(CLONE_NEWCGROUP)");

  setup_rootfs(plan);
  int pty_slave = plan.tty ? open_sandbox_pty(plan) : -1;
  if (sethostname(plan.hostname.c_str(), plan.hostname.size()) != 0)
    fail(plan, Stage::kHostname, plan.hostname.c_str());
  bring_up_loopback(plan);
  enter_rootfs(plan);

  close_other_fds(plan, plan.control_fd, pty_slave);
  int go_pipe[2];
  if (pipe2(go_pipe, O_CLOEXEC) != 0) fail(plan, Stage::kUserNamespace, "pipe");

  // Signals are taken through a signalfd; the workload unblocks them.
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, nullptr);

  // The user namespace is created last, after every other namespace, so
  // the sandbox's root owns none of them (it cannot touch the network or
  // mounts even with --root).
  pid_t workload = static_cast<pid_t>(syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0));
  if (workload < 0) fail(plan, Stage::kUserNamespace, "clone(CLONE_NEWUSER)");
  if (workload == 0) {
    close(go_pipe[1]);
    run_workload(plan, go_pipe[0], pty_slave);
  }
  close(go_pipe[0]);
  write_proc_file(plan, workload, "uid_map", plan.uid_map.c_str());
  write_proc_file(plan, workload, "gid_map", plan.gid_map.c_str());
  if (write(go_pipe[1], "g", 1) != 1) fail(plan, Stage::kIdMap, "release workload");
  close(go_pipe[1]);
  if (pty_slave >= 0) close(pty_slave);

  int sfd = signalfd(-1, &all, SFD_CLOEXEC);
  if (sfd < 0) fail(plan, Stage::kSession, "signalfd");
  for (;;) {
    signalfd_siginfo si;
    ssize_t n = read(sfd, &si, sizeof si);
    if (n != sizeof si) continue;
    if (si.ssi_signo == SIGCHLD) {
      int status;
      pid_t pid;
      while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        if (pid == workload) {
          ControlMessage msg{};
          msg.type = ControlType::kExited;
          msg.wait_status = status;
          (void)send(plan.control_fd, &msg, sizeof msg, MSG_NOSIGNAL);
          _exit(0);  // takes every remaining process of the sandbox with it
        }
      }
      continue;
    }
    kill(workload, static_cast<int>(si.ssi_signo));
  }
}

}  // namespace corral
