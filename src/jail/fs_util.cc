#include "jail/fs_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/unique_fd.h"

namespace corral {

Status write_file(const std::string& path, std::string_view content, mode_t mode) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd) return errno_error("open(" + path + ")");
  return write_all(fd.get(), content, path);
}

Status write_file_at(int dirfd, const char* name, std::string_view content, mode_t mode,
                     uid_t uid, gid_t gid) {
  UniqueFd fd(openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd) return errno_error(std::string("openat(") + name + ")");
  CORRAL_TRY(write_all(fd.get(), content, name));
  if (fchown(fd.get(), uid, gid) != 0) return errno_error(std::string("fchown(") + name + ")");
  if (fchmod(fd.get(), mode) != 0) return errno_error(std::string("fchmod(") + name + ")");
  return ok();
}

Status copy_file(const std::string& from, const std::string& to, mode_t mode) {
  UniqueFd in(open(from.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!in) return errno_error("open(" + from + ")");
  UniqueFd out(open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!out) return errno_error("open(" + to + ")");
  char buf[65536];
  for (;;) {
    ssize_t n = read(in.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error("read(" + from + ")");
    }
    if (n == 0) break;
    CORRAL_TRY(write_all(out.get(), std::string_view(buf, static_cast<size_t>(n)), to));
  }
  return ok();
}

Status clear_dir_at(int dirfd) {
  struct stat self;
  if (fstat(dirfd, &self) != 0) return errno_error("fstat(dir)");
  int dup_fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return errno_error("dup(dir)");
  DIR* dir = fdopendir(dup_fd);
  if (dir == nullptr) {
    close(dup_fd);
    return errno_error("fdopendir");
  }
  Status result = ok();
  while (dirent* e = readdir(dir)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      result = errno_error(std::string("fstatat(") + e->d_name + ")");
      break;
    }
    if (S_ISDIR(st.st_mode)) {
      if (st.st_dev != self.st_dev) {  // a mount point: never cross
        result = make_error(ErrorCode::kSystem,
                            std::string("refusing to delete across mount point ") + e->d_name);
        break;
      }
      UniqueFd sub(openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub) {
        result = errno_error(std::string("openat(") + e->d_name + ")");
        break;
      }
      // Make sure we can empty it even if its mode says otherwise.
      (void)fchmod(sub.get(), 0700);
      result = clear_dir_at(sub.get());
      if (!result) break;
      if (unlinkat(dirfd, e->d_name, AT_REMOVEDIR) != 0) {
        result = errno_error(std::string("rmdir(") + e->d_name + ")");
        break;
      }
    } else if (unlinkat(dirfd, e->d_name, 0) != 0) {
      result = errno_error(std::string("unlink(") + e->d_name + ")");
      break;
    }
  }
  closedir(dir);
  return result;
}

static std::uint64_t usage_at(int dirfd, dev_t dev) {
  int dup_fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return 0;
  DIR* dir = fdopendir(dup_fd);
  if (dir == nullptr) {
    close(dup_fd);
    return 0;
  }
  std::uint64_t total = 0;
  while (dirent* e = readdir(dir)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    total += static_cast<std::uint64_t>(st.st_blocks) * 512;
    if (S_ISDIR(st.st_mode) && st.st_dev == dev) {
      UniqueFd sub(openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub) total += usage_at(sub.get(), dev);
    }
  }
  closedir(dir);
  return total;
}

std::uint64_t disk_usage(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return 0;
  std::uint64_t total = static_cast<std::uint64_t>(st.st_blocks) * 512;
  if (!S_ISDIR(st.st_mode)) return total;
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd) total += usage_at(fd.get(), st.st_dev);
  return total;
}

}  // namespace corral
