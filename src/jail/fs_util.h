// The launcher's own file helpers, on top of base/fs.h (mkdir_p,
// remove_tree, write_all; included here for the callers of both).
// Deletion is fd-based and never follows symlinks or crosses mount points,
// so a hostile tree (a sandbox's writable layer) cannot steer it outside.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/fs.h"
#include "base/result.h"

namespace corral {

Status write_file(const std::string& path, std::string_view content, mode_t mode);
Status copy_file(const std::string& from, const std::string& to, mode_t mode);
// Writes `content` to `name` under the directory fd (O_EXCL|O_NOFOLLOW).
Status write_file_at(int dirfd, const char* name, std::string_view content, mode_t mode,
                     uid_t uid, gid_t gid);

// Removes everything below the directory `dirfd` (the directory stays),
// making each subdirectory 0700 first so that a mode the sandbox set cannot
// stop the wipe.
Status clear_dir_at(int dirfd);

// Bytes allocated below `path` (st_blocks * 512, hard links counted once
// per directory entry, symlinks not followed, mount points not crossed).
std::uint64_t disk_usage(const std::string& path);

}  // namespace corral
