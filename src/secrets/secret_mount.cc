#include "secrets/secret_mount.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "base/unique_fd.h"

namespace corral::secrets {
namespace {

std::string errno_text(int e) { return std::strerror(e); }

bool is_tmpfs(const std::string& dir) {
  struct statfs fs {};
  return ::statfs(dir.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

bool is_mount_point(const std::string& dir) {
  struct stat self {
  }, parent{};
  if (::stat(dir.c_str(), &self) != 0) return false;
  if (::stat((dir + "/..").c_str(), &parent) != 0) return false;
  return self.st_dev != parent.st_dev;
}

bool plain_name(std::string_view name) {
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
         name.find('/') == std::string_view::npos && name.find('\0') == std::string_view::npos;
}

// Zeroes a file's bytes in place (its size is kept until the unlink).
Status overwrite(int dir_fd, const char* name) {
  UniqueFd fd(::openat(dir_fd, name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd)
    return make_error(ErrorCode::kSystem, std::string("opening secret file ") + name,
                      errno_text(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return make_error(ErrorCode::kSystem, std::string("stat of secret file ") + name,
                      errno_text(errno));
  static const char zeros[4096] = {};
  off_t off = 0;
  while (off < st.st_size) {
    std::size_t n = std::min<std::size_t>(sizeof zeros, static_cast<std::size_t>(st.st_size - off));
    ssize_t w = ::pwrite(fd.get(), zeros, n, off);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      return make_error(ErrorCode::kSystem, std::string("overwriting secret file ") + name,
                        errno_text(errno));
    }
    off += w;
  }
  return ok();
}

}  // namespace

Result<SecretMount> SecretMount::create(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return make_error(ErrorCode::kSystem, "creating the secret directory " + dir,
                      errno_text(errno));
  if (is_mount_point(dir))
    return make_error(ErrorCode::kAlreadyExists, "a secret mount already exists at " + dir);
  SecretMount m(dir);
  // Small: secrets are small. uid/gid 0 and mode 0755 for the directory.
  const char* base = "size=1m,nr_inodes=128,mode=0755,uid=0,gid=0";
  std::string opts = std::string(base) + ",noswap";
  if (::mount("corral-secrets", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              opts.c_str()) != 0) {
    if (errno != EINVAL)
      return make_error(ErrorCode::kSystem, "mounting the secret tmpfs at " + dir,
                        errno_text(errno));
    if (::mount("corral-secrets", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, base) !=
        0)
      return make_error(ErrorCode::kSystem, "mounting the secret tmpfs at " + dir,
                        errno_text(errno));
    m.notice_ = "this kernel's tmpfs has no noswap option: secret files could reach swap";
  }
  // Not seen by other mount namespaces created later from the host's.
  (void)::mount(nullptr, dir.c_str(), nullptr, MS_PRIVATE, nullptr);
  return m;
}

Result<SecretMount> SecretMount::adopt(const std::string& dir) {
  if (!is_tmpfs(dir) || !is_mount_point(dir))
    return make_error(ErrorCode::kNotFound, "no secret tmpfs is mounted at " + dir);
  return SecretMount(dir);
}

Status SecretMount::write(std::string_view name, std::string_view value, uid_t uid, gid_t gid) {
  if (!plain_name(name))
    return make_error(ErrorCode::kInvalidArgument,
                      "secret file name \"" + std::string(name) + "\" is not a plain name");
  UniqueFd dir_fd(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  if (!dir_fd) return make_error(ErrorCode::kSystem, "opening " + dir_, errno_text(errno));
  const std::string file(name);
  UniqueFd fd(::openat(dir_fd.get(), file.c_str(),
                       O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0400));
  if (!fd) return make_error(ErrorCode::kSystem, "creating secret file " + file, errno_text(errno));
  std::size_t off = 0;
  while (off < value.size()) {
    ssize_t w = ::write(fd.get(), value.data() + off, value.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = errno;
      (void)overwrite(dir_fd.get(), file.c_str());
      (void)::unlinkat(dir_fd.get(), file.c_str(), 0);
      return make_error(ErrorCode::kSystem, "writing secret file " + file, errno_text(e));
    }
    off += static_cast<std::size_t>(w);
  }
  if (::fchown(fd.get(), uid, gid) != 0 || ::fchmod(fd.get(), 0400) != 0) {
    int e = errno;
    (void)overwrite(dir_fd.get(), file.c_str());
    (void)::unlinkat(dir_fd.get(), file.c_str(), 0);
    return make_error(ErrorCode::kSystem, "setting the owner of secret file " + file,
                      errno_text(e));
  }
  return ok();
}

Status wipe_secret_mount(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return ok();
    return make_error(ErrorCode::kSystem, "stat of " + dir, errno_text(errno));
  }
  std::string left;
  if (is_tmpfs(dir) && is_mount_point(dir)) {
    UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
    if (!dir_fd) return make_error(ErrorCode::kSystem, "opening " + dir, errno_text(errno));
    std::vector<std::string> names;
    if (DIR* d = ::fdopendir(::dup(dir_fd.get()))) {
      while (dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") names.push_back(std::move(n));
      }
      ::closedir(d);
    }
    for (const auto& n : names) {
      if (auto st2 = overwrite(dir_fd.get(), n.c_str()); !st2)
        left += (left.empty() ? "" : "; ") + st2.error().message;
      if (::unlinkat(dir_fd.get(), n.c_str(), 0) != 0)
        left += (left.empty() ? "" : "; ") + ("unlinking " + n + ": " + errno_text(errno));
    }
    dir_fd.reset();
    // Lazy: a process that still holds the directory open (the sandbox's
    // copy is another mount of the same, now empty, tmpfs) cannot stop it.
    if (::umount2(dir.c_str(), MNT_DETACH) != 0)
      left += (left.empty() ? "" : "; ") + ("unmounting " + dir + ": " + errno_text(errno));
  }
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT)
    left += (left.empty() ? "" : "; ") + ("removing " + dir + ": " + errno_text(errno));
  if (!left.empty())
    return make_error(ErrorCode::kSystem, "secret mount " + dir + " left: " + left);
  return ok();
}

}  // namespace corral::secrets
