// A user namespace that exists only to describe an id mapping for an
// idmapped mount (mount_setattr MOUNT_ATTR_IDMAP). Used for --mount
// sources: the owner of the source directory is shown inside as the
// sandbox's user, and what the sandbox writes lands on the host owned by
// that same owner, not by an anonymous high uid.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/result.h"
#include "base/unique_fd.h"

namespace corral {

// `uid_map`/`gid_map` in /proc/<pid>/uid_map syntax ("inside outside count\n").
// Returns an fd of the namespace (the helper process is gone already).
Result<UniqueFd> make_idmap_userns(const std::string& uid_map, const std::string& gid_map);

}  // namespace corral
