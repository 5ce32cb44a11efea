// Confinement of host paths that a spec mounts into a sandbox (F4, F6).
// A source must lie below one of the allowed mount roots; `..` is refused
// outright; the path is opened by file descriptor beneath the root with
// openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), so a symlink that leads
// out is refused, and the fd (not the path) is what gets mounted, so the
// path cannot be swapped after the check. Hard-linked files are refused
// (a hard link can point anywhere on the same file system).
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "spec/sandbox_spec.h"

namespace corral {

struct OpenedMount {
  UniqueFd fd;           // O_PATH fd of the source
  bool is_dir = false;
  std::string source;    // absolute source path as given (for messages)
  std::string target;    // absolute path inside the sandbox
  bool writable = false;
};

// `cwd` resolves relative sources and roots.
Result<OpenedMount> open_mount_source(const MountSpec& mount,
                                      const std::vector<std::string>& allowed_roots,
                                      const std::string& cwd);

}  // namespace corral
