// Clones a sandbox's init (jail/init_process.cc) into its new namespaces
// and, on cgroup v2, straight into its cgroup. One place for the flags, so
// `corral run` and the daemon's factory create exactly the same sandbox.
#pragma once

#include <sys/types.h>

#include "jail/cgroup.h"
#include "jail/sandbox_plan.h"

namespace corral {

// Returns init's pid (> 0) with *pidfd set, or -1 with errno. On v1 init
// joins the cgroup itself, through plan.cgroup_join_fds, before "go".
// plan.unshare_cgroup_ns is set here (v1: init unshares it after joining).
// The child closes the `count` fds in `close_in_child` (the creator's ends
// of its channels: init must see EOF if its creator dies before "go"), then
// runs run_init(plan) and never returns.
pid_t clone_sandbox_init(SandboxPlan& plan, const Cgroup& cgroup, int* pidfd,
                         const int* close_in_child, int count);

}  // namespace corral
