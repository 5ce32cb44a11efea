// Mounts attached to a sandbox that runs already (a warm pool's claim, C4,
// docs/adr/0015-warm-pools.md), and the one file a claim's network needs
// there (/etc/resolv.conf). A helper forked for it enters the mount
// namespace of the sandbox's init by its pidfd (no pid race) and attaches
// each tree at a mount point opened beneath the sandbox's root without
// following a symlink (open_mount_target), as init does at create. Init's
// mount namespace is owned by the host's user namespace (rootfs_setup.h):
// the helper is host root there, as init was, and nothing the sandbox does
// can change the flags the trees carry.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/result.h"

namespace corral {

struct RunningBind {
  int tree = -1;       // from clone_tree (jail/mount_tree.h), flags applied
  std::string target;  // relative to the sandbox's root (relative_target)
  bool is_dir = true;
};

// Attaches `binds` in order, then, unless `resolv_conf` is empty, writes it
// as /etc/resolv.conf (mode 0644, owned by host uid `root_uid`: the
// sandbox's root), replacing whatever the image has there. The error names
// the step and the target. The forked helper makes only system calls: safe
// from a process with threads.
Status attach_to_running_sandbox(int init_pidfd, const std::vector<RunningBind>& binds,
                                 const std::string& resolv_conf, uid_t root_uid);

}  // namespace corral
