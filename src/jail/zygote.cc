// The zygote of a long-lived sandbox (ADR 0004, ADR 0006): the first
// process of the sandbox's user namespace, forked from init and never
// exec'd (so its memory belongs to the host's user namespace and nothing
// inside can ptrace it). Once set up it is kZygoteId there, with no
// capability, in the sandbox's one Landlock domain, and owns the commands'
// user namespace (jail/command_userns.h). It starts one process per spawn
// request from the daemon: a child cloned with CLONE_VM | CLONE_VFORK (as
// posix_spawn does: no copy of the zygote's address space), the request's
// stdio fds as 0-2, the same hardening as `corral run`'s workload
// (harden_process: it joins the commands' namespace, inherits the domain,
// installs the seccomp filter), execve. It reaps its children and reports every start,
// failure and exit on the spawn channel (jail/live_channel.h). It is
// single-threaded and suspended while a child runs in its memory, so the
// child takes no lock anyone holds; it does not allocate either (see
// ChildArgs).
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "jail/live_channel.h"
#include "jail/sandbox_plan.h"
#include "jail/spawn_request.h"
#include "jail/stage.h"
#include "sys/syscalls.h"

namespace corral {

namespace {

void send_reply(int fd, const SpawnReply& reply, int pass_fd = -1) {
  iovec iov{const_cast<SpawnReply*>(&reply), sizeof reply};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))] = {};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  if (pass_fd >= 0) {
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof cbuf;
    cmsghdr* cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &pass_fd, sizeof pass_fd);
  }
  // Never block: with no daemon attached the replies wait in the socket
  // until it is full, and then the oldest news is the daemon's to miss.
  (void)sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
}

SpawnReply failure_reply(std::uint64_t request_id, Stage stage, int err, const char* detail) {
  SpawnReply r{};
  r.type = SpawnReplyType::kFailed;
  r.request_id = request_id;
  r.stage = static_cast<int>(stage);
  r.err = err;
  snprintf(r.detail, sizeof r.detail, "%s", detail);
  return r;
}

// Why a child could not exec: written by the child into memory it shares
// with the zygote (CLONE_VM), read by the zygote once the child is gone.
struct ChildReport {
  int stage = 0;
  int err = 0;
  char detail[200] = {};
};

// Everything a child needs, built by the zygote before the clone: the
// child shares the zygote's memory until it execs, so it must not
// allocate (a failed child would leave its allocations in the zygote's
// heap) and it only writes its report.
struct ChildArgs {
  const SandboxPlan* plan;
  const SharedConfinement* shared;
  const SpawnRequest* request;
  const int* stdio;
  char* const* argv;
  char* const* envp;
  const std::vector<std::string>* candidates;  // paths to try, in order
  ChildReport report;
  bool failed = false;
};

// Not instrumented by AddressSanitizer (the sanitizer build): these run on
// a stack ASan does not know, and its no-return bookkeeping before _exit
// would warn on the command's stderr.
#define CORRAL_CHILD_FN __attribute__((no_sanitize("address")))

CORRAL_CHILD_FN int child_report(ChildArgs& a, Stage stage, int err, const char* detail) {
  a.report.stage = static_cast<int>(stage);
  a.report.err = err;
  snprintf(a.report.detail, sizeof a.report.detail, "%s", detail);
  a.failed = true;
  _exit(125);
}

// The child: becomes the requested process or reports why it could not.
// It runs on its own stack in the zygote's memory; the zygote is
// suspended (CLONE_VFORK) until it execs or exits.
CORRAL_CHILD_FN int become_process(void* arg) {
  ChildArgs& a = *static_cast<ChildArgs*>(arg);
  for (int n = 0; n < 3; ++n) {
    if (dup2(a.stdio[n], n) < 0) return child_report(a, Stage::kSession, errno, "dup2 stdio");
  }
  const int keep[] = {a.shared->commands_userns};
  if (close_fds_except(keep, 1) != 0)
    return child_report(a, Stage::kCloseFds, errno, "close_range");
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // Its own session and process group, so the daemon can end the tree.
  if (a.request->new_session && setsid() < 0)
    return child_report(a, Stage::kSession, errno, "setsid");
  // A terminal's process: its stdin (the slave the daemon passed as all
  // three stdio fds) becomes the new session's controlling terminal, so
  // ^C, job control and /dev/tty work as in a login shell.
  if (a.request->controlling_tty && ioctl(0, TIOCSCTTY, 0) != 0)
    return child_report(a, Stage::kSession, errno, "TIOCSCTTY");

  const std::string& cwd = a.request->cwd.empty() ? a.plan->workdir : a.request->cwd;
  HardenFailure failure;
  if (!harden_process(*a.plan, cwd.c_str(), &failure, a.shared))
    return child_report(a, static_cast<Stage>(failure.stage), failure.err, failure.detail);

  int first_error = 0;
  for (const std::string& candidate : *a.candidates) {
    execve(candidate.c_str(), a.argv, a.envp);
    if (first_error == 0 || (first_error == ENOENT && errno != ENOENT)) first_error = errno;
  }
  return child_report(a, Stage::kExec, first_error != 0 ? first_error : ENOENT,
                      a.request->argv[0].c_str());
}

// The paths execve tries for argv[0]: itself if it names a path, else
// each directory of the request's PATH (or the sandbox's default).
std::vector<std::string> exec_candidates(const SandboxPlan& plan, const SpawnRequest& request) {
  const std::string& cmd = request.argv[0];
  if (cmd.find('/') != std::string::npos) return {cmd};
  std::string path_value = plan.default_path;
  for (const auto& e : request.env) {
    if (e.rfind("PATH=", 0) == 0) path_value = e.substr(5);
  }
  // Split by hand: a stringstream costs a locale set-up on every spawn.
  std::vector<std::string> out;
  std::string_view rest = path_value;
  while (!rest.empty()) {
    const std::size_t colon = rest.find(':');
    std::string_view dir = rest.substr(0, colon);
    out.push_back(std::string(dir.empty() ? "." : dir) + "/" + cmd);
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return out;
}

// The children's stack: one, reused (a CLONE_VFORK child ends or execs
// before the next clone), with a guard page below it.
constexpr std::size_t kChildStack = 256 * 1024;

char* child_stack_top() {
  static char* top = [] {
    const long page = sysconf(_SC_PAGESIZE);
    void* m = mmap(nullptr, kChildStack + page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (m == MAP_FAILED) return static_cast<char*>(nullptr);
    (void)mprotect(m, page, PROT_NONE);
    return static_cast<char*>(m) + kChildStack + page;
  }();
  return top;
}

// Starts one request; the reply says how it went. The child is cloned
// with CLONE_VM | CLONE_VFORK, like posix_spawn: no copy of the zygote's
// address space, and the zygote resumes once the child has exec'd (or
// failed, leaving its report in shared memory).
void spawn_one(const SandboxPlan& plan, const SharedConfinement& shared,
               const SpawnRequest& request, const int stdio[3],
               std::unordered_map<pid_t, std::uint64_t>& running) {
  std::vector<char*> argv, envp;
  for (const auto& a : request.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : request.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const std::vector<std::string> candidates = exec_candidates(plan, request);
  ChildArgs args{&plan, &shared, &request, stdio, argv.data(), envp.data(), &candidates, {}, false};

  char* stack = child_stack_top();
  if (stack == nullptr) {
    send_reply(plan.spawn_fd, failure_reply(request.request_id, Stage::kClone, ENOMEM, "stack"));
    return;
  }
  int pidfd = -1;
  const pid_t pid =
      clone(become_process, stack, CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD, &args, &pidfd);
  if (pid < 0) {
    send_reply(plan.spawn_fd, failure_reply(request.request_id, Stage::kClone, errno, "clone"));
    return;
  }
  if (args.failed) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    args.report.detail[sizeof args.report.detail - 1] = '\0';
    send_reply(plan.spawn_fd,
               failure_reply(request.request_id, static_cast<Stage>(args.report.stage),
                             args.report.err, args.report.detail));
    close(pidfd);
    return;
  }
  running[pid] = request.request_id;
  SpawnReply started{};
  started.type = SpawnReplyType::kStarted;
  started.request_id = request.request_id;
  started.pid = pid;
  send_reply(plan.spawn_fd, started, pidfd);
  close(pidfd);
}

}  // namespace

void run_zygote(const SandboxPlan& plan, int go_fd) {
  prctl(PR_SET_NAME, "corral-zygote");
  WorkloadGo go{};
  if (read(go_fd, &go, sizeof go) != sizeof go) _exit(125);  // init failed
  close(go_fd);
  const int keep[] = {plan.control_fd, plan.spawn_fd};
  if (close_fds_except(keep, 2) != 0)
    child_fail(plan.control_fd, static_cast<int>(Stage::kCloseFds), errno, "close_range");
  if (setsid() < 0) child_fail(plan.control_fd, static_cast<int>(Stage::kSession), errno, "setsid");
  // A new user namespace does not change credentials: until now the zygote
  // is still host uid 0, which owns host files by DAC alone. Become root of
  // the sandbox's namespace (its first host id); the capabilities it holds
  // there stay (an euid change to that namespace's root keeps them) until
  // prepare_shared_confinement() gives them up for kZygoteId.
  const gid_t root_group[1] = {0};
  if (setgroups(1, root_group) != 0 || setresgid(0, 0, 0) != 0 || setresuid(0, 0, 0) != 0)
    child_fail(plan.control_fd, static_cast<int>(Stage::kCredentials), errno, "zygote credentials");
  if (chdir("/") != 0) child_fail(plan.control_fd, static_cast<int>(Stage::kWorkdir), errno, "/");
  // Signals stay blocked (as init left them); children are reaped here.
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) child_fail(plan.control_fd, static_cast<int>(Stage::kSession), errno, "signalfd");
  // The children's stack, mapped while the zygote may still do anything.
  if (child_stack_top() == nullptr)
    child_fail(plan.control_fd, static_cast<int>(Stage::kClone), errno, "child stack");
  // The sandbox's one Landlock domain and the commands' user namespace
  // (ADR 0006); the zygote gives up its ids and capabilities here.
  SharedConfinement shared;
  HardenFailure failure;
  if (!prepare_shared_confinement(plan, &shared, &failure))
    child_fail(plan.control_fd, failure.stage, failure.err, failure.detail);
  // From here on, failures are per request: init alone speaks on control.
  close(plan.control_fd);

  SpawnReply ready{};
  ready.type = SpawnReplyType::kReady;
  send_reply(plan.spawn_fd, ready);

  std::vector<char> buf(kSpawnMaxMessage + 1);
  std::unordered_map<pid_t, std::uint64_t> running;
  for (;;) {
    pollfd fds[2] = {{plan.spawn_fd, POLLIN, 0}, {sfd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == sizeof si) {
      }
      int status;
      pid_t pid;
      while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        auto it = running.find(pid);
        if (it == running.end()) continue;
        SpawnReply exited{};
        exited.type = SpawnReplyType::kExited;
        exited.request_id = it->second;
        exited.pid = pid;
        exited.status = status;
        send_reply(plan.spawn_fd, exited);
        running.erase(it);
      }
    }
    if (fds[0].revents & (POLLHUP | POLLERR) && !(fds[0].revents & POLLIN)) _exit(0);
    if (!(fds[0].revents & POLLIN)) continue;

    iovec iov{buf.data(), buf.size()};
    alignas(cmsghdr) char cbuf[CMSG_SPACE(3 * sizeof(int))];
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof cbuf;
    ssize_t n = recvmsg(plan.spawn_fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n == 0) _exit(0);  // nobody can ever send again
    if (n < 0) continue;
    int stdio[3] = {-1, -1, -1};
    int nfds = 0;
    for (cmsghdr* cm = CMSG_FIRSTHDR(&mh); cm != nullptr; cm = CMSG_NXTHDR(&mh, cm)) {
      if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
        if (nfds < 3)
          stdio[nfds] = fd;
        else
          close(fd);
        ++nfds;
      }
    }
    auto close_stdio = [&] {
      for (int fd : stdio)
        if (fd >= 0) close(fd);
    };
    std::uint64_t request_id = 0;
    if (static_cast<size_t>(n) >= 20) memcpy(&request_id, buf.data() + 12, sizeof request_id);
    // Refused at once, nothing started: LiveSandbox::send_barrier relies
    // on this answer (a message with no fds) coming in order.
    if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || nfds != 3) {
      close_stdio();
      errno = EINVAL;
      send_reply(plan.spawn_fd, failure_reply(request_id, Stage::kPlan, EINVAL,
                                              "a spawn request needs exactly 3 stdio fds"));
      continue;
    }
    auto request = decode_spawn_request(std::string_view(buf.data(), static_cast<size_t>(n)));
    if (!request) {
      close_stdio();
      send_reply(plan.spawn_fd,
                 failure_reply(request_id, Stage::kPlan, EINVAL, request.error().message.c_str()));
      continue;
    }
    spawn_one(plan, shared, *request, stdio, running);
    close_stdio();
  }
}

}  // namespace corral
