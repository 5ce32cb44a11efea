// The per-sandbox writable layer (F2, F3): one tmpfs with a hard size and
// inode limit, created detached with the new mount API so it never appears
// in the host's mount table. The launcher keeps its mount fd: it fills in
// the overlay's upper/work dirs and the generated /etc files before the
// sandbox starts, and after the sandbox ends it wipes the layer and
// measures what is still allocated (the residue, which must be 0).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "base/result.h"
#include "base/unique_fd.h"

namespace corral {

struct LayerUsage {
  std::uint64_t bytes = 0;
  std::uint64_t inodes = 0;
};

class WritableLayer {
 public:
  static Result<WritableLayer> create(std::uint64_t size_bytes, std::uint64_t inodes);
  // Takes over an existing layer's mount fd (a daemon re-attaching to a
  // sandbox gets it back from the sandbox's init).
  static Result<WritableLayer> adopt(UniqueFd mount_fd);

  int mount_fd() const { return mount_fd_.get(); }
  // Directory fd of the layer's root (for mkdirat/openat).
  int root_fd() const { return root_fd_.get(); }

  Status make_dir(const char* relpath, mode_t mode, uid_t uid, gid_t gid);
  Status make_file(const char* relpath, const std::string& content, mode_t mode, uid_t uid,
                   gid_t gid);

  Result<LayerUsage> usage() const;
  // Deletes everything in the layer and returns what stays allocated
  // (non-zero only if something still holds a file open).
  Result<LayerUsage> wipe();

 private:
  WritableLayer(UniqueFd mount_fd, UniqueFd root_fd)
      : mount_fd_(std::move(mount_fd)), root_fd_(std::move(root_fd)) {}
  UniqueFd mount_fd_;
  UniqueFd root_fd_;
};

}  // namespace corral
