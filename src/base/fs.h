// Host-side file helpers: one of each. Tree removal works relative to
// directory fds, never follows a symlink and never crosses into another
// mount, so that a hostile tree (an imported image, a sandbox's writable
// layer) cannot steer it outside. jail/fs_util.h adds the launcher's own
// helpers on top; fs/confined_root.h is the file API's confined view of a
// sandbox root (its removal reports errors in the API's terms).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace corral {

// Writes all of `data` to `fd`: short writes continue, EINTR is retried,
// and EAGAIN (a non-blocking fd) waits until the fd is writable. false with
// errno set if a write fails.
bool write_all(int fd, std::string_view data);
// The same as a Status: "write(<shown>): <errno>".
Status write_all(int fd, std::string_view data, const std::string& shown);
// Reads from `fd` until EOF or `max` bytes, EINTR retried; "read(<shown>):
// <errno>" if a read fails. A caller that must refuse a longer file asks
// for one byte more than it allows and checks the size.
Result<std::string> read_up_to(int fd, std::size_t max, const std::string& shown);

// Creates `path` and its missing parents with `mode` ("mkdir(<prefix>)");
// an existing directory is fine, anything else there is kInvalidArgument.
Status mkdir_p(const std::string& path, mode_t mode);

// A directory opened O_RDONLY|O_CLOEXEC ("open(<path>)"); _at: one name
// under `dirfd`, not a symlink ("open(<shown>)").
Result<UniqueFd> open_dir(const std::string& path);
Result<UniqueFd> open_dir_at(int dirfd, const std::string& name, const std::string& shown);

// statx of `name` under `dirfd` ("" for dirfd itself), never following a
// symlink or triggering an automount.
struct FileStat {
  struct statx stx {};
  bool is_dir() const { return S_ISDIR(stx.stx_mode); }
  bool is_reg() const { return S_ISREG(stx.stx_mode); }
  bool mount_root() const {
    return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0 &&
           (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
  }
  bool has_mnt_id() const { return (stx.stx_mask & STATX_MNT_ID) != 0; }
};
// 0, or -1 with errno set.
int stat_at(int dirfd, const char* name, FileStat* st);
// A directory on another mount than its parent (a mount point).
bool crosses_mount(const FileStat& parent, const FileStat& child);

// The names in a directory, without "." and "..".
Result<std::vector<std::string>> read_dir_names(int dirfd, const std::string& shown);

// Removes `name` under `parent_fd` (a file, a symlink or a whole tree).
// Symlinks are removed, never followed; a mount point inside the tree stops
// the removal of that branch with an error (the rest is still removed, the
// first error is returned); more than 4096 levels is kResourceExhausted.
// ENOENT counts as removed, so two processes cleaning the same stale tree
// do not fail each other. Messages name `shown` and the paths below it.
Status remove_tree_at(int parent_fd, const std::string& name, const std::string& shown);
// The same for a path. Absent is not an error.
Status remove_tree(const std::string& path);

}  // namespace corral
