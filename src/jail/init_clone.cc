#include "jail/init_clone.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>

#include "sys/syscalls.h"

namespace corral {

namespace {

constexpr std::uint64_t kCloneIntoCgroup = 0x200000000ULL;

}  // namespace

pid_t clone_sandbox_init(SandboxPlan& plan, const Cgroup& cgroup, int* pidfd,
                         const int* close_in_child, int count) {
  const bool v2 = cgroup.clone_into_fd() >= 0;
  plan.unshare_cgroup_ns = !v2;
  sys::CloneArgs args{};
  args.flags = CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
               CLONE_PIDFD;
  if (v2) {
    args.flags |= CLONE_NEWCGROUP | kCloneIntoCgroup;
    args.cgroup = static_cast<std::uint64_t>(cgroup.clone_into_fd());
  }
  args.pidfd = reinterpret_cast<std::uint64_t>(pidfd);
  args.exit_signal = SIGCHLD;
  pid_t child = sys::clone3(&args, sizeof args);
  if (child == 0) {
    for (int i = 0; i < count; ++i) {
      if (close_in_child[i] >= 0) close(close_in_child[i]);
    }
    run_init(plan);  // never returns
  }
  return child;
}

}  // namespace corral
