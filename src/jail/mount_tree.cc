#include "jail/mount_tree.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <sstream>

#include "jail/idmap_userns.h"
#include "sys/syscalls.h"

namespace corral {

Result<std::string> relative_target(const std::string& target) {
  if (target.empty() || target[0] != '/')
    return make_error(ErrorCode::kInvalidArgument,
                      "mount target \"" + target + "\" must be an absolute path");
  std::string rel;
  std::stringstream ss(target);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..")
      return make_error(ErrorCode::kInvalidArgument,
                        "mount target \"" + target + "\" must not contain \"..\"");
    rel += (rel.empty() ? "" : "/") + part;
  }
  if (rel.empty())
    return make_error(ErrorCode::kInvalidArgument, "cannot mount over the sandbox's root /");
  for (const char* reserved : {"proc", "dev", "sys"}) {
    std::string r(reserved);
    if (rel == r || rel.rfind(r + "/", 0) == 0)
      return make_error(ErrorCode::kInvalidArgument,
                        "mount target \"" + target + "\" is under /" + r + ", which corral owns");
  }
  return rel;
}

Result<UniqueFd> clone_tree(int source_fd, bool writable, const std::string& what) {
  UniqueFd tree(
      open_tree(source_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE));
  if (!tree) return errno_error("open_tree(" + what + ")");
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (writable ? 0 : MOUNT_ATTR_RDONLY);
  if (mount_setattr(tree.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0)
    return errno_error("mount_setattr(" + what + ")");
  return tree;
}

Result<std::string> idmap_user_mount(int tree, int source_fd, bool writable, uid_t host_base,
                                     uid_t sandbox_uid, const std::string& what) {
  struct stat st;
  if (fstat(source_fd, &st) != 0) return errno_error("fstat(" + what + ")");
  if (writable && (st.st_uid == 0 || st.st_gid == 0)) {
    return "mount " + what +
           " is owned by host root: files the sandbox writes there are "
           "owned by its own host uid " +
           std::to_string(host_base + sandbox_uid) +
           " (give the directory to an unprivileged owner to have them owned by that user)";
  }
  auto line = [&](unsigned owner) {
    return std::to_string(owner) + " " + std::to_string(host_base + sandbox_uid) + " 1\n";
  };
  auto ns = make_idmap_userns(line(st.st_uid), line(st.st_gid));
  if (!ns) return tl::unexpected(ns.error().wrap("idmapping " + what));
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_IDMAP;
  attr.userns_fd = static_cast<std::uint64_t>(ns->get());
  if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0) {
    if (errno == EINVAL || errno == EPERM || errno == EOPNOTSUPP)
      return "mount " + what + ": its file system cannot do idmapped mounts (" +
             std::string(errno_name(errno)) + "); files keep their host owners";
    return errno_error("mount_setattr(" + what + ", MOUNT_ATTR_IDMAP)");
  }
  return std::string();
}

int open_mount_target(int root_fd, const char* rel, bool is_dir) {
  char buf[4096];
  size_t len = strlen(rel);
  if (len == 0 || len >= sizeof buf) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(buf, rel, len + 1);
  int dir = fcntl(root_fd, F_DUPFD_CLOEXEC, 0);
  if (dir < 0) return -1;
  char* part = buf;
  for (;;) {
    char* slash = strchr(part, '/');
    bool last = slash == nullptr;
    if (!last) *slash = '\0';
    if (*part != '\0') {
      int next;
      if (!last || is_dir) {
        if (mkdirat(dir, part, 0755) != 0 && errno != EEXIST) {
          close(dir);
          return -1;
        }
        next = sys::openat2(dir, part, O_PATH | O_DIRECTORY | O_CLOEXEC, 0,
                            RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH);
      } else {
        int f = sys::openat2(dir, part, O_WRONLY | O_CREAT | O_CLOEXEC, 0644,
                             RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH);
        if (f < 0 && errno == EISDIR) f = -1;
        if (f >= 0) close(f);
        next = sys::openat2(dir, part, O_PATH | O_CLOEXEC, 0,
                            RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH);
      }
      close(dir);
      if (next < 0) return -1;
      dir = next;
    }
    if (last) break;
    part = slash + 1;
  }
  return dir;
}

}  // namespace corral
