// The pieces of a user mount that a cold create's planner and a warm
// pool's claim share (F4, F6, C4): the target checked, the source's tree
// cloned with the sandbox's flags (nosuid, nodev, read-only unless
// writable) and idmapped to the sandbox's user, and its mount point opened
// beneath the sandbox's root without following a symlink. The planner
// hands the trees to init, which attaches them before the pivot; a claim
// attaches them to the running sandbox (daemon/claim_mounts.cc).
#pragma once

#include <sys/types.h>

#include <string>

#include "base/result.h"
#include "base/unique_fd.h"

namespace corral {

// A target inside the sandbox: absolute, no "..", not / and not under
// /proc, /dev or /sys (corral's); returned without the leading slash.
Result<std::string> relative_target(const std::string& target);

// A detached copy of the mount tree at `source_fd` (open_tree clones only
// mounts of the caller's own namespace: done on the host), with nosuid,
// nodev and, unless `writable`, read-only applied.
Result<UniqueFd> clone_tree(int source_fd, bool writable, const std::string& what);

// Shows the owner of a mount source as the sandbox's user (host uid
// `host_base + sandbox_uid`), so the sandbox can use a directory it was
// given, and what it writes there belongs to the directory's owner on the
// host. Host root is never mapped for a writable mount: the sandbox could
// otherwise leave setuid-root files on the host. Such a source keeps the
// plain mount (what the sandbox writes is owned by its own unprivileged
// host uid). Returns a notice when the idmap is not applied; isolation is
// the same either way.
Result<std::string> idmap_user_mount(int tree, int source_fd, bool writable, uid_t host_base,
                                     uid_t sandbox_uid, const std::string& what);

// Opens (creating if needed, mode 0755) the mount point `rel` beneath
// `root_fd` without following any symlink: a hostile image cannot redirect
// a bind. O_PATH fd, or -1 with errno. Async-signal-safe (no allocation):
// init and a claim's forked helper call it.
int open_mount_target(int root_fd, const char* rel, bool is_dir);

}  // namespace corral
