#include "jail/writable_layer.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "jail/fs_util.h"

namespace corral {

Result<WritableLayer> WritableLayer::create(std::uint64_t size_bytes, std::uint64_t inodes) {
  UniqueFd fs(fsopen("tmpfs", FSOPEN_CLOEXEC));
  if (!fs) return errno_error("fsopen(tmpfs)", errno, "run `corral doctor`");
  std::string size = std::to_string(size_bytes);
  std::string nr_inodes = std::to_string(inodes);
  if (fsconfig(fs.get(), FSCONFIG_SET_STRING, "size", size.c_str(), 0) != 0)
    return errno_error("fsconfig(tmpfs, size=" + size + ")");
  if (fsconfig(fs.get(), FSCONFIG_SET_STRING, "nr_inodes", nr_inodes.c_str(), 0) != 0)
    return errno_error("fsconfig(tmpfs, nr_inodes=" + nr_inodes + ")");
  if (fsconfig(fs.get(), FSCONFIG_SET_STRING, "mode", "0755", 0) != 0)
    return errno_error("fsconfig(tmpfs, mode=0755)");
  if (fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0)
    return errno_error("fsconfig(tmpfs, create)");
  UniqueFd mnt(fsmount(fs.get(), FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV));
  if (!mnt) return errno_error("fsmount(tmpfs)");
  UniqueFd root(openat(mnt.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) return errno_error("openat(writable layer root)");
  return WritableLayer(std::move(mnt), std::move(root));
}

Result<WritableLayer> WritableLayer::adopt(UniqueFd mount_fd) {
  UniqueFd root(openat(mount_fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) return errno_error("openat(writable layer root)");
  return WritableLayer(std::move(mount_fd), std::move(root));
}

Status WritableLayer::make_dir(const char* relpath, mode_t mode, uid_t uid, gid_t gid) {
  if (mkdirat(root_fd(), relpath, mode) != 0 && errno != EEXIST)
    return errno_error(std::string("mkdirat(layer/") + relpath + ")");
  if (fchownat(root_fd(), relpath, uid, gid, AT_SYMLINK_NOFOLLOW) != 0)
    return errno_error(std::string("fchownat(layer/") + relpath + ")");
  if (fchmodat(root_fd(), relpath, mode, 0) != 0)
    return errno_error(std::string("fchmodat(layer/") + relpath + ")");
  return ok();
}

Status WritableLayer::make_file(const char* relpath, const std::string& content, mode_t mode,
                                uid_t uid, gid_t gid) {
  return write_file_at(root_fd(), relpath, content, mode, uid, gid);
}

Result<LayerUsage> WritableLayer::usage() const {
  struct statfs st;
  if (fstatfs(root_fd(), &st) != 0) return errno_error("fstatfs(writable layer)");
  LayerUsage u;
  u.bytes = static_cast<std::uint64_t>(st.f_blocks - st.f_bfree) * st.f_bsize;
  u.inodes = static_cast<std::uint64_t>(st.f_files - st.f_ffree);
  return u;
}

Result<LayerUsage> WritableLayer::wipe() {
  CORRAL_TRY_CTX(clear_dir_at(root_fd()), "wiping the writable layer");
  return usage();
}

}  // namespace corral
