// ConfinedRoot: file access confined to one sandbox's root directory, for
// the daemon's file API (REQUIREMENTS.md F5, F6; docs/file-api.md).
//
// Every operation takes a sandbox path ("/workspace/in.txt" or
// "workspace/in.txt", both meaning the same file below the root) and
// resolves it by file descriptor, never by a host path string:
//   1. the path is checked as text: no NUL, no ".." component, at most
//      kMaxPathBytes bytes and kMaxNameBytes per component;
//   2. its parent directory is opened with openat2(root_fd, parent,
//      RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV): symlinks
//      in the middle of the path are followed, but as if the root were "/"
//      (an absolute target or a ".." in a target never climbs above it), and
//      resolution never crosses a mount point;
//   3. the last component is used relative to that parent fd with
//      RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV (or the *at()
//      call with AT_SYMLINK_NOFOLLOW): a symlink as the last component is
//      reported (stat, list) or refused (read, write, list of it), never
//      followed.
// A symlink swapped in during the call changes which in-root file is used,
// never whether a host file is reached: the kernel does each walk under
// RESOLVE_IN_ROOT against the fd, not against a string we checked earlier.
//
// Regular files with more than one hard link are refused for reading and
// writing: a hard link keeps no trace of where its other names are, so one
// inside the root may be a name for a host file (made before the sandbox was
// created, or by a host process on the same filesystem). Refusing every
// st_nlink > 1 file is the only check that does not need to know the rest of
// the filesystem. Removing or renaming such a name is allowed (it changes
// only the name inside the root).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace corral {

inline constexpr std::size_t kMaxSandboxPathBytes = 4096;  // PATH_MAX
inline constexpr std::size_t kMaxSandboxNameBytes = 255;   // NAME_MAX
inline constexpr std::size_t kDefaultListLimit = 10000;
// Depth below which remove(recursive) refuses to descend: each level holds
// one open directory, so the fds and memory of a removal stay bounded.
inline constexpr int kMaxRemoveDepth = 256;

enum class FileType { kRegular, kDirectory, kSymlink, kOther };
std::string_view file_type_name(FileType type);

struct FileInfo {
  std::string name;  // last component ("" for the root)
  FileType type = FileType::kOther;
  std::uint64_t size = 0;     // bytes (for a symlink: length of its target)
  std::uint32_t mode = 0;     // permission bits (07777)
  std::int64_t mtime_ns = 0;  // since the epoch
  std::uint64_t nlink = 0;
  uid_t uid = 0;  // as the host sees them (the sandbox maps its own)
  gid_t gid = 0;
  std::string link_target;  // only for kSymlink; shown, never followed
};

struct Listing {
  std::vector<FileInfo> entries;  // sorted by name
  bool truncated = false;         // more entries than max_entries existed
};

struct WriteOptions {
  mode_t mode = 0644;      // for a new file; masked to 0777
  bool truncate = true;    // an existing file is emptied (after the checks)
  bool exclusive = false;  // the file must not exist yet (O_EXCL)
};

// Splits a sandbox path into its components, refusing what the file API
// never accepts: NUL bytes, "..", over-long paths or names, an empty path.
// "/" and "." give no components (the root). Exposed for the API layer.
Result<std::vector<std::string>> split_sandbox_path(std::string_view path);

class ConfinedRoot {
 public:
  // host_dir is chosen by corral (the sandbox's root directory), not by the
  // user; it is opened O_PATH | O_DIRECTORY and everything after goes
  // through that fd.
  static Result<ConfinedRoot> open(const std::string& host_dir);
  // With `cross_mounts`, paths may lead into other mounts below the root
  // (a sandbox's /tmp, its --mount targets), except the kernel's own file
  // systems (procfs, sysfs, cgroupfs, devpts, ...), which stay refused.
  // Recursive removal still never leaves the mount it started on.
  static Result<ConfinedRoot> open(const std::string& host_dir, bool cross_mounts);

  // lstat semantics: a symlink is described, not followed.
  Result<FileInfo> stat(std::string_view path) const;
  // At most max_entries entries (in directory order, then sorted by name);
  // `truncated` says whether more existed. A symlink to a directory is not
  // listed through (list its target instead).
  Result<Listing> list(std::string_view path, std::size_t max_entries = kDefaultListLimit) const;
  // A directory, opened O_RDONLY | O_DIRECTORY with list()'s resolution and
  // checks (not a symlink, not a kernel file system, not sealed): for
  // watching it with inotify through /proc/self/fd.
  Result<UniqueFd> open_directory(std::string_view path) const;
  // mode is masked to 0777. With parents, missing directories on the way
  // are created and an existing directory is not an error.
  // Directories it creates are chowned to owner/group unless owner is -1.
  Status mkdir(std::string_view path, mode_t mode = 0755, bool parents = false,
               uid_t owner = static_cast<uid_t>(-1), gid_t group = static_cast<gid_t>(-1)) const;
  // A file, a symlink (the link itself) or an empty directory. With
  // recursive, a directory tree is removed by an fd walk that never follows
  // a symlink and never crosses a mount point.
  Status remove(std::string_view path, bool recursive = false) const;
  // renameat2 between two in-root parents; no_replace: RENAME_NOREPLACE.
  Status rename(std::string_view from, std::string_view to, bool no_replace = true) const;
  // A regular file with a single link, opened O_RDONLY | O_CLOEXEC.
  Result<UniqueFd> open_read(std::string_view path) const;
  // A regular file with a single link (or a new one), opened
  // O_WRONLY | O_CLOEXEC. A symlink as the last component is refused.
  Result<UniqueFd> open_write(std::string_view path, const WriteOptions& options = {}) const;

  int root_fd() const { return root_.get(); }

  // Seals file system `dev` (st_dev): its root and everything on it are
  // refused by every operation, however the path reaches it (a symlink in
  // the middle, another mount of the same file system). The error is
  // kPermissionDenied, its message starting with `label` and ": " (the
  // daemon's file API gives its API code there), then the operation and
  // the path. For corral's own secret files (/run/secrets).
  void seal_device(dev_t dev, std::string label);

 private:
  explicit ConfinedRoot(UniqueFd root, dev_t dev) : root_(std::move(root)), dev_(dev) {}

  struct Resolved {
    UniqueFd parent;   // O_PATH directory inside the root
    std::string name;  // last component; "" when the path is the root
  };
  // Opens the parent directory of `path` inside the root.
  Result<Resolved> resolve(std::string_view op, std::string_view path) const;
  Result<UniqueFd> open_dir_checked(std::string_view op, std::string_view path) const;
  // openat2(root_fd, rel, flags, RESOLVE_IN_ROOT | ...), retried on EAGAIN.
  int open_in_root(const std::string& rel, int flags) const;
  // Removes what is below dir_fd, all on device `dev` (the tree's own
  // mount: a mount nested inside it is not entered).
  Status remove_tree(int dir_fd, dev_t dev, std::string_view op, std::string_view path,
                     int depth) const;

  std::uint64_t in_root_flags() const;
  std::uint64_t last_flags() const;
  Status check_fs(int fd, std::string_view op, std::string_view path) const;
  // Refuses a sealed device (seal_device).
  Status check_sealed(dev_t dev, std::string_view op, std::string_view path) const;
  Status check_sealed_fd(int fd, std::string_view op, std::string_view path) const;

  UniqueFd root_;
  dev_t dev_ = 0;  // st_dev of the root
  bool cross_mounts_ = false;
  std::vector<std::pair<dev_t, std::string>> sealed_;  // device, label
};

}  // namespace corral
