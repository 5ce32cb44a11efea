// Post-fork: builds the sandbox's root in init's private mount namespace
// (overlay of base + writable layer, read-only binds, /dev, /proc with
// masks, /tmp), then pivot_root into it. Runs as host root inside mount
// and pid namespaces owned by the host's user namespace, so the sandbox
// can never undo any of it. Failures are reported and end the process.
#pragma once

#include "jail/sandbox_plan.h"

namespace corral {

// Attaches the writable layer and mounts the sandbox's /proc early (init
// needs it to write the workload's id maps).
void stage_writable_layer(const SandboxPlan& plan);
// `userns_fd`: the sandbox's user namespace; the base layer and the host's
// system directories are idmapped through it, so files owned by host root
// appear owned by the sandbox's root.
void setup_rootfs(const SandboxPlan& plan, int userns_fd);
// After setup_rootfs: opens a pty in the sandbox's own devpts instance,
// owned by the sandbox user, and sends the master to the launcher over the
// control socket. Returns the slave fd; *index gets its number.
int open_sandbox_pty(const SandboxPlan& plan, int* index);
void enter_rootfs(const SandboxPlan& plan);

}  // namespace corral
