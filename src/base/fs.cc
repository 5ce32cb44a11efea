#include "base/fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include "base/scope_guard.h"
#include "base/unique_fd.h"

namespace corral {

namespace {

// Deeper trees are refused rather than recursed into (each level holds an
// open directory).
constexpr int kMaxDepth = 4096;

constexpr unsigned kStatxMask =
    STATX_TYPE | STATX_MODE | STATX_INO | STATX_NLINK | STATX_BLOCKS | STATX_MNT_ID;

std::string child_path(std::string_view dir, std::string_view name) {
  std::string p(dir);
  if (p.empty() || p.back() != '/') p.push_back('/');
  p.append(name);
  return p;
}

// remove_tree_at, below a parent whose statx is known, `depth` levels down.
Status remove_below(int parent_fd, const FileStat& parent_st, const std::string& name,
                    const std::string& shown, int depth) {
  if (depth > kMaxDepth) {
    return make_error(ErrorCode::kResourceExhausted,
                      "tree deeper than " + std::to_string(kMaxDepth) + ": " + shown);
  }
  int fd = openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return ok();
    if (errno != ENOTDIR && errno != ELOOP) return errno_error("open(" + shown + ")");
    if (unlinkat(parent_fd, name.c_str(), 0) != 0 && errno != ENOENT) {
      return errno_error("unlink(" + shown + ")");
    }
    return ok();
  }
  UniqueFd dir(fd);
  FileStat st;
  if (stat_at(dir.get(), "", &st) != 0) return errno_error("statx(" + shown + ")");
  if (crosses_mount(parent_st, st)) {
    return make_error(ErrorCode::kSystem,
                      "refusing to cross the mount point " + shown + " while removing",
                      "unmount it first: umount " + shown);
  }
  auto names = read_dir_names(dir.get(), shown);
  if (!names) return tl::unexpected(names.error());
  Status first_error = ok();
  for (const auto& child : *names) {
    std::string child_shown = child_path(shown, child);
    if (unlinkat(dir.get(), child.c_str(), 0) == 0 || errno == ENOENT) continue;
    if (errno != EISDIR && errno != EPERM) {
      if (first_error) first_error = errno_error("unlink(" + child_shown + ")");
      continue;
    }
    // A directory (unlink says EISDIR, or EPERM on Linux).
    Status r = remove_below(dir.get(), st, child, child_shown, depth + 1);
    if (!r && first_error) first_error = r;
  }
  if (!first_error) return first_error;
  dir.reset();
  if (unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return errno_error("rmdir(" + shown + ")");
  }
  return ok();
}

}  // namespace

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd p{fd, POLLOUT, 0};
        int r;
        do {
          r = poll(&p, 1, -1);
        } while (r < 0 && errno == EINTR);
        if (r > 0) continue;
      }
      return false;
    }
    if (n == 0) {  // not for a non-empty write to a file, pipe or socket
      errno = EIO;
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

Status write_all(int fd, std::string_view data, const std::string& shown) {
  if (!write_all(fd, data)) return errno_error("write(" + shown + ")");
  return ok();
}

Result<std::string> read_up_to(int fd, std::size_t max, const std::string& shown) {
  std::string out(max, '\0');
  std::size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("read(" + shown + ")");
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  return out;
}

Status mkdir_p(const std::string& path, mode_t mode) {
  if (path.empty()) return make_error(ErrorCode::kInvalidArgument, "mkdir_p: empty path");
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    std::string prefix = path.substr(0, pos);
    if (mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST)
      return errno_error("mkdir(" + prefix + ")");
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return errno_error("stat(" + path + ")");
  if (!S_ISDIR(st.st_mode))
    return make_error(ErrorCode::kInvalidArgument, path + " exists and is not a directory");
  return ok();
}

Result<UniqueFd> open_dir(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_error("open(" + path + ")");
  return UniqueFd(fd);
}

Result<UniqueFd> open_dir_at(int dirfd, const std::string& name, const std::string& shown) {
  int fd = openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno_error("open(" + shown + ")");
  return UniqueFd(fd);
}

int stat_at(int dirfd, const char* name, FileStat* st) {
  int flags = AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | (name[0] == '\0' ? AT_EMPTY_PATH : 0);
  return statx(dirfd, name, flags, kStatxMask, &st->stx);
}

bool crosses_mount(const FileStat& parent, const FileStat& child) {
  if (child.mount_root()) return true;
  if (parent.has_mnt_id() && child.has_mnt_id()) {
    return parent.stx.stx_mnt_id != child.stx.stx_mnt_id;
  }
  return parent.stx.stx_dev_major != child.stx.stx_dev_major ||
         parent.stx.stx_dev_minor != child.stx.stx_dev_minor;
}

Result<std::vector<std::string>> read_dir_names(int dirfd, const std::string& shown) {
  int dup_fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return errno_error("dup(" + shown + ")");
  DIR* d = fdopendir(dup_fd);
  if (d == nullptr) {
    int e = errno;
    close(dup_fd);
    return errno_error("fdopendir(" + shown + ")", e);
  }
  ScopeGuard close_dir([d] { closedir(d); });
  rewinddir(d);
  std::vector<std::string> names;
  for (;;) {
    errno = 0;
    dirent* ent = readdir(d);
    if (ent == nullptr) {
      if (errno != 0) return errno_error("readdir(" + shown + ")");
      break;
    }
    std::string_view n(ent->d_name);
    if (n == "." || n == "..") continue;
    names.emplace_back(n);
  }
  return names;
}

Status remove_tree_at(int parent_fd, const std::string& name, const std::string& shown) {
  FileStat parent_st;
  if (stat_at(parent_fd, "", &parent_st) != 0) return errno_error("statx(parent of " + shown + ")");
  return remove_below(parent_fd, parent_st, name, shown, 0);
}

Status remove_tree(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.rfind('/');
  std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : p.substr(0, slash);
  std::string name = slash == std::string::npos ? p : p.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") {
    return make_error(ErrorCode::kInvalidArgument, "remove_tree: refusing to remove " + path);
  }
  UniqueFd dir(open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) {
    if (errno == ENOENT) return ok();
    return errno_error("open(" + parent + ")");
  }
  return remove_tree_at(dir.get(), name, path);
}

}  // namespace corral
