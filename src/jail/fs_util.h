// Small host-side file helpers used by the launcher and the image store.
// Deletion is fd-based and never follows symlinks or crosses mount points,
// so a hostile tree (an imported image, a sandbox's writable layer) cannot
// steer it outside.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace corral {

Status mkdir_p(const std::string& path, mode_t mode);
Status write_file(const std::string& path, std::string_view content, mode_t mode);
Status copy_file(const std::string& from, const std::string& to, mode_t mode);
// Writes `content` to `name` under the directory fd (O_EXCL|O_NOFOLLOW).
Status write_file_at(int dirfd, const char* name, std::string_view content, mode_t mode,
                     uid_t uid, gid_t gid);

// Removes `path` and everything below it. Absent is not an error.
Status remove_tree(const std::string& path);
// Removes everything below the directory `dirfd` (the directory stays).
Status clear_dir_at(int dirfd);

// Bytes allocated below `path` (st_blocks * 512, hard links counted once
// per directory entry, symlinks not followed, mount points not crossed).
std::uint64_t disk_usage(const std::string& path);

}  // namespace corral
