// Post-fork: builds the sandbox's root in init's private mount namespace
// (overlay of base + writable layer, read-only binds, /dev, /proc with
// masks, /tmp), then pivot_root into it. Runs as host root inside mount
// and pid namespaces owned by the host's user namespace, so the sandbox
// can never undo any of it. Failures are reported and end the process.
#pragma once

#include "jail/sandbox_plan.h"

namespace corral {

void setup_rootfs(const SandboxPlan& plan);
// After setup_rootfs: opens a pty in the sandbox's own devpts instance.
// Returns the slave fd (owned by the sandbox user) and sends the master to
// the launcher over the control socket.
int open_sandbox_pty(const SandboxPlan& plan);
void enter_rootfs(const SandboxPlan& plan);

}  // namespace corral
