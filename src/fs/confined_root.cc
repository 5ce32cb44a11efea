#include "fs/confined_root.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "sys/syscalls.h"

namespace corral {
namespace {

// Resolution of the parent directory: symlinks followed as if the root were
// "/", no magic links (/proc/self/fd/...), no mount crossing.
constexpr std::uint64_t kInRoot = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
// Resolution of the last component, relative to its parent fd: one name,
// no symlink at all, no mount crossing.
constexpr std::uint64_t kLastComponent =
    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
// openat2 returns EAGAIN when a rename raced with ".." resolution (in a
// symlink target) under RESOLVE_IN_ROOT; the walk is redone from the start.
constexpr int kEagainRetries = 64;
constexpr int kRemovePasses = 8;

// The path as shown in messages: quoted, control bytes escaped, cut short.
std::string quote(std::string_view path) {
  std::string out = "\"";
  std::size_t shown = 0;
  for (char c : path) {
    if (++shown > 200) {
      out += "...";
      break;
    }
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '"' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

// An errno from resolving or using `path`, as an error that says what to do.
tl::unexpected<Error> path_error(std::string_view op, std::string_view path, int err,
                                 bool last_component) {
  std::string what = std::string(op) + "(" + quote(path) + "): ";
  ErrorCode code = ErrorCode::kSystem;
  std::string hint;
  switch (err) {
    case ENOENT:
      code = ErrorCode::kNotFound;
      what += "no such file or directory in the sandbox";
      hint = "symlinks in the middle of a path resolve inside the sandbox root, never on the host";
      break;
    case ELOOP:
      code = ErrorCode::kPermissionDenied;
      if (last_component) {
        what += "the last component is a symbolic link, which the file API never follows";
        hint = "use the link's target path instead";
      } else {
        what += "too many levels of symbolic links";
      }
      break;
    case EXDEV:
      code = ErrorCode::kPermissionDenied;
      what += "the operation would cross a mount point inside the sandbox";
      hint =
          "a rename stays within one mount (copy across mounts instead); a recursive delete "
          "does not enter a mount nested in the tree";
      break;
    case ENOTDIR:
      code = ErrorCode::kInvalidArgument;
      what += "a component of the path is not a directory";
      break;
    case EISDIR:
      code = ErrorCode::kInvalidArgument;
      what += "is a directory";
      break;
    case EEXIST:
      code = ErrorCode::kAlreadyExists;
      what += "already exists";
      break;
    case ENOTEMPTY:
      code = ErrorCode::kInvalidArgument;
      what += "directory is not empty";
      hint = "remove it with the recursive option";
      break;
    case ENAMETOOLONG:
      code = ErrorCode::kInvalidArgument;
      what += "name too long";
      break;
    case ENOSPC:
    case EDQUOT:
      code = ErrorCode::kResourceExhausted;
      what += "the sandbox's disk limit is full";
      hint = "free space in the sandbox or give it a larger disk limit";
      break;
    case EAGAIN:
      code = ErrorCode::kUnavailable;
      what += "the directory tree kept changing during resolution";
      hint = "retry the request";
      break;
    case EACCES:
    case EPERM:
      code = ErrorCode::kPermissionDenied;
      what += "permission denied";
      break;
    case EROFS:
      code = ErrorCode::kPermissionDenied;
      what += "the path is on a read-only mount in the sandbox";
      hint = "write under /workspace or /tmp, or mount the volume read-write";
      break;
    case EINVAL:
      code = ErrorCode::kInvalidArgument;
      what += "invalid for this file (a directory cannot move into itself)";
      break;
    case EBUSY:
      code = ErrorCode::kAlreadyExists;
      what += "the path is a mount point in use";
      break;
    default:
      break;
  }
  what.append(" [").append(errno_name(err)).append("]");
  return tl::unexpected<Error>(Error{code, std::move(what), std::move(hint), err});
}

tl::unexpected<Error> refuse(std::string_view op, std::string_view path, std::string_view why,
                             std::string hint = {}) {
  return make_error(ErrorCode::kPermissionDenied,
                    std::string(op) + "(" + quote(path) + "): " + std::string(why),
                    std::move(hint));
}

constexpr std::string_view kHardlinkHint =
    "a file with several hard links may be another name for a host file; copy it inside the "
    "sandbox (cp, not ln) and use the copy";

FileType type_of(mode_t mode) {
  if (S_ISREG(mode)) return FileType::kRegular;
  if (S_ISDIR(mode)) return FileType::kDirectory;
  if (S_ISLNK(mode)) return FileType::kSymlink;
  return FileType::kOther;
}

FileInfo info_of(const struct stat& st, std::string name) {
  FileInfo info;
  info.name = std::move(name);
  info.type = type_of(st.st_mode);
  info.size = static_cast<std::uint64_t>(st.st_size);
  info.mode = static_cast<std::uint32_t>(st.st_mode & 07777);
  info.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  info.nlink = static_cast<std::uint64_t>(st.st_nlink);
  info.uid = st.st_uid;
  info.gid = st.st_gid;
  return info;
}

void fill_link_target(int dir_fd, const char* name, FileInfo& info) {
  if (info.type != FileType::kSymlink) return;
  char buf[kMaxSandboxPathBytes];
  ssize_t n = ::readlinkat(dir_fd, name, buf, sizeof buf);
  if (n > 0) info.link_target.assign(buf, static_cast<std::size_t>(n));
}

// openat2 relative to a parent fd for the last component, retried on EAGAIN.
int open_last(int parent_fd, const std::string& name, int flags, mode_t mode,
              std::uint64_t resolve = kLastComponent) {
  for (int i = 0;; ++i) {
    int fd = sys::openat2(parent_fd, name.c_str(), flags | O_CLOEXEC, mode, resolve);
    if (fd >= 0 || errno != EAGAIN || i >= kEagainRetries) return fd;
  }
}

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};
using DirPtr = std::unique_ptr<DIR, DirCloser>;

// A DIR stream over a dup of dir_fd (the caller keeps its fd).
DirPtr open_dir_stream(int dir_fd) {
  int dup_fd = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return nullptr;
  DIR* d = ::fdopendir(dup_fd);
  if (d == nullptr) {
    int saved = errno;
    ::close(dup_fd);
    errno = saved;
  }
  return DirPtr(d);
}

bool is_dot(const char* name) {
  return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

}  // namespace

std::string_view file_type_name(FileType type) {
  switch (type) {
    case FileType::kRegular:
      return "file";
    case FileType::kDirectory:
      return "directory";
    case FileType::kSymlink:
      return "symlink";
    case FileType::kOther:
      return "other";
  }
  return "other";
}

Result<std::vector<std::string>> split_sandbox_path(std::string_view path) {
  if (path.empty()) {
    return make_error(ErrorCode::kInvalidArgument, "empty path", "use \"/\" for the sandbox root");
  }
  if (path.find('\0') != std::string_view::npos) {
    return make_error(ErrorCode::kInvalidArgument, "path " + quote(path) + " contains a NUL byte",
                      "paths are text without NUL bytes");
  }
  if (path.size() > kMaxSandboxPathBytes) {
    return make_error(ErrorCode::kInvalidArgument,
                      "path " + quote(path) + " is " + std::to_string(path.size()) +
                          " bytes long, over the limit of " + std::to_string(kMaxSandboxPathBytes));
  }
  std::vector<std::string> parts;
  int depth = 0;
  std::size_t pos = 0;
  while (pos <= path.size()) {
    std::size_t slash = path.find('/', pos);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view part = path.substr(pos, slash - pos);
    pos = slash + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      // Refused outright, even when it would stay inside ("a/../b"): a path
      // without ".." is one whose meaning a reader can check at a glance.
      if (--depth < 0) {
        return make_error(ErrorCode::kPermissionDenied,
                          "path " + quote(path) + " leaves the sandbox",
                          "\"..\" may not climb above the sandbox root; the file API "
                          "refuses \"..\" components altogether");
      }
      return make_error(ErrorCode::kPermissionDenied,
                        "path " + quote(path) + " contains a \"..\" component",
                        "the file API refuses \"..\"; write the path without it");
    }
    if (part.size() > kMaxSandboxNameBytes) {
      return make_error(ErrorCode::kInvalidArgument,
                        "path " + quote(path) + " has a component of " +
                            std::to_string(part.size()) + " bytes, over the limit of " +
                            std::to_string(kMaxSandboxNameBytes));
    }
    ++depth;
    parts.emplace_back(part);
  }
  return parts;
}

Result<ConfinedRoot> ConfinedRoot::open(const std::string& host_dir, bool cross_mounts) {
  auto r = open(host_dir);
  if (r) r->cross_mounts_ = cross_mounts;
  return r;
}

Result<ConfinedRoot> ConfinedRoot::open(const std::string& host_dir) {
  UniqueFd fd(::open(host_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    return errno_error("open(" + host_dir + ", O_PATH|O_DIRECTORY)", errno,
                       "the sandbox root directory must exist");
  }
  // openat2 (Linux 5.6) is what makes the confinement hold; fail closed.
  UniqueFd probe(sys::openat2(fd.get(), ".", O_PATH | O_DIRECTORY | O_CLOEXEC, 0, kInRoot));
  if (!probe) {
    int err = errno;
    if (err == ENOSYS || err == EINVAL) {
      return make_error(
          ErrorCode::kUnavailable,
          "openat2(RESOLVE_IN_ROOT) is not available: " + std::string(errno_name(err)),
          "the file API needs Linux 5.6 or later");
    }
    return errno_error("openat2(" + host_dir + ", RESOLVE_IN_ROOT)", err);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error("fstat(" + host_dir + ")");
  return ConfinedRoot(std::move(fd), st.st_dev);
}

std::uint64_t ConfinedRoot::in_root_flags() const {
  return cross_mounts_ ? (kInRoot & ~std::uint64_t{RESOLVE_NO_XDEV}) : kInRoot;
}

std::uint64_t ConfinedRoot::last_flags() const {
  return cross_mounts_ ? (kLastComponent & ~std::uint64_t{RESOLVE_NO_XDEV}) : kLastComponent;
}

// With mount crossing allowed, the kernel's own file systems stay out of
// reach: the sandbox's /proc and anything like it.
Status ConfinedRoot::check_fs(int fd, std::string_view op, std::string_view path) const {
  if (!cross_mounts_) return ok();
  struct statfs sfs {};
  if (::fstatfs(fd, &sfs) != 0) return path_error(op, path, errno, false);
  switch (static_cast<unsigned long>(sfs.f_type)) {
    case PROC_SUPER_MAGIC:
    case SYSFS_MAGIC:
    case CGROUP_SUPER_MAGIC:
    case CGROUP2_SUPER_MAGIC:
    case DEVPTS_SUPER_MAGIC:
    case SECURITYFS_MAGIC:
    case DEBUGFS_MAGIC:
      return make_error(ErrorCode::kPermissionDenied,
                        std::string(op) + "(" + quote(path) +
                            "): the file API does not reach kernel file systems (/proc, /sys, "
                            "/dev/pts)",
                        "use paths under /workspace, /tmp or a mount of your own");
    default:
      return ok();
  }
}

void ConfinedRoot::seal_device(dev_t dev, std::string label) {
  sealed_.emplace_back(dev, std::move(label));
}

Status ConfinedRoot::check_sealed(dev_t dev, std::string_view op, std::string_view path) const {
  for (const auto& [sealed, label] : sealed_) {
    if (sealed != dev) continue;
    return make_error(ErrorCode::kPermissionDenied,
                      label + ": " + std::string(op) + "(" + quote(path) +
                          "): corral's secret files are not served by the file API",
                      "the sandbox reads its secrets itself; nothing outside it may");
  }
  return ok();
}

Status ConfinedRoot::check_sealed_fd(int fd, std::string_view op, std::string_view path) const {
  if (sealed_.empty()) return ok();
  struct stat st {};
  if (::fstat(fd, &st) != 0) return path_error(op, path, errno, false);
  return check_sealed(st.st_dev, op, path);
}

int ConfinedRoot::open_in_root(const std::string& rel, int flags) const {
  for (int i = 0;; ++i) {
    int fd = sys::openat2(root_.get(), rel.c_str(), flags | O_CLOEXEC, 0, in_root_flags());
    if (fd >= 0 || errno != EAGAIN || i >= kEagainRetries) return fd;
  }
}

Result<ConfinedRoot::Resolved> ConfinedRoot::resolve(std::string_view op,
                                                     std::string_view path) const {
  auto parts = split_sandbox_path(path);
  if (!parts) return tl::unexpected<Error>(std::move(parts).error().wrap(op));
  Resolved r;
  std::string parent = ".";
  if (!parts->empty()) {
    r.name = parts->back();
    parts->pop_back();
    for (const std::string& p : *parts) parent.append("/").append(p);
  }
  r.parent.reset(open_in_root(parent, O_PATH | O_DIRECTORY));
  if (!r.parent) return path_error(op, path, errno, false);
  CORRAL_TRY(check_fs(r.parent.get(), op, path));
  CORRAL_TRY(check_sealed_fd(r.parent.get(), op, path));
  return r;
}

Result<FileInfo> ConfinedRoot::stat(std::string_view path) const {
  auto r = resolve("stat", path);
  if (!r) return tl::unexpected<Error>(std::move(r).error());
  struct stat st {};
  if (r->name.empty()) {
    if (::fstat(r->parent.get(), &st) != 0) return path_error("stat", path, errno, true);
    return info_of(st, "");
  }
  if (::fstatat(r->parent.get(), r->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return path_error("stat", path, errno, true);
  }
  // A sealed file system's own root (its mount point) is refused too.
  CORRAL_TRY(check_sealed(st.st_dev, "stat", path));
  FileInfo info = info_of(st, r->name);
  fill_link_target(r->parent.get(), r->name.c_str(), info);
  return info;
}

Result<UniqueFd> ConfinedRoot::open_directory(std::string_view path) const {
  return open_dir_checked("open_directory", path);
}

Result<UniqueFd> ConfinedRoot::open_dir_checked(std::string_view op, std::string_view path) const {
  auto r = resolve(op, path);
  if (!r) return tl::unexpected<Error>(std::move(r).error());
  UniqueFd dir;
  if (r->name.empty()) {
    dir.reset(::openat(r->parent.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  } else {
    // O_DIRECTORY reports a symlink as ENOTDIR; say what it is instead.
    struct stat st {};
    if (::fstatat(r->parent.get(), r->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode)) {
      return path_error(op, path, ELOOP, true);
    }
    dir.reset(
        open_last(r->parent.get(), r->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, last_flags()));
    if (dir) CORRAL_TRY(check_fs(dir.get(), op, path));
    if (dir) CORRAL_TRY(check_sealed_fd(dir.get(), op, path));
  }
  if (!dir) return path_error(op, path, errno, true);
  return dir;
}

Result<Listing> ConfinedRoot::list(std::string_view path, std::size_t max_entries) const {
  auto opened = open_dir_checked("list", path);
  if (!opened) return tl::unexpected<Error>(std::move(opened).error());
  UniqueFd dir = std::move(*opened);
  DirPtr stream = open_dir_stream(dir.get());
  if (!stream) return path_error("list", path, errno, true);

  Listing out;
  for (;;) {
    errno = 0;
    const dirent* ent = ::readdir(stream.get());
    if (ent == nullptr) {
      if (errno != 0) return path_error("list", path, errno, true);
      break;
    }
    if (is_dot(ent->d_name)) continue;
    if (out.entries.size() >= max_entries) {
      out.truncated = true;
      break;
    }
    struct stat st {};
    if (::fstatat(dir.get(), ent->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;  // removed while we listed
      return path_error("list", path, errno, true);
    }
    FileInfo info = info_of(st, ent->d_name);
    fill_link_target(dir.get(), ent->d_name, info);
    out.entries.push_back(std::move(info));
  }
  std::sort(out.entries.begin(), out.entries.end(),
            [](const FileInfo& a, const FileInfo& b) { return a.name < b.name; });
  return out;
}

Status ConfinedRoot::mkdir(std::string_view path, mode_t mode, bool parents, uid_t owner,
                           gid_t group) const {
  mode &= 0777;
  // A directory we create is handed to `owner` right away (by name in the
  // fd of its parent, never following a symlink).
  auto give = [&](int parent_fd, const std::string& name) {
    if (owner != static_cast<uid_t>(-1))
      (void)::fchownat(parent_fd, name.c_str(), owner, group, AT_SYMLINK_NOFOLLOW);
  };
  if (!parents) {
    auto r = resolve("mkdir", path);
    if (!r) return tl::unexpected<Error>(std::move(r).error());
    if (r->name.empty()) return path_error("mkdir", path, EEXIST, true);
    if (::mkdirat(r->parent.get(), r->name.c_str(), mode) != 0) {
      return path_error("mkdir", path, errno, true);
    }
    give(r->parent.get(), r->name);
    return ok();
  }
  auto parts = split_sandbox_path(path);
  if (!parts) return tl::unexpected<Error>(std::move(parts).error().wrap("mkdir"));
  // Each prefix is opened from the root (so symlinks on the way resolve in
  // the root like everywhere else); a missing one is created in its parent.
  UniqueFd parent(open_in_root(".", O_PATH | O_DIRECTORY));
  if (!parent) return path_error("mkdir", path, errno, false);
  std::string prefix = ".";
  for (const std::string& part : *parts) {
    prefix.append("/").append(part);
    UniqueFd next(open_in_root(prefix, O_PATH | O_DIRECTORY));
    if (!next && errno == ENOENT) {
      if (::mkdirat(parent.get(), part.c_str(), mode) != 0) {
        if (errno != EEXIST) return path_error("mkdir", path, errno, true);
      } else {
        give(parent.get(), part);
      }
      next.reset(open_in_root(prefix, O_PATH | O_DIRECTORY));
    }
    if (!next) return path_error("mkdir", path, errno, false);
    CORRAL_TRY(check_sealed_fd(next.get(), "mkdir", path));
    parent = std::move(next);
  }
  return ok();
}

Status ConfinedRoot::remove_tree(int dir_fd, dev_t dev, std::string_view op, std::string_view path,
                                 int depth) const {
  if (depth > kMaxRemoveDepth) {
    return make_error(ErrorCode::kResourceExhausted,
                      std::string(op) + "(" + quote(path) + "): the tree is deeper than " +
                          std::to_string(kMaxRemoveDepth) + " levels",
                      "remove its deepest directories first");
  }
  DirPtr stream = open_dir_stream(dir_fd);
  if (!stream) return path_error(op, path, errno, false);
  // Removing entries while reading may make readdir skip some; passes repeat
  // until one finds nothing left (bounded: the sandbox may keep writing).
  for (int pass = 0; pass < kRemovePasses; ++pass) {
    ::rewinddir(stream.get());
    bool removed = false;
    for (;;) {
      errno = 0;
      const dirent* ent = ::readdir(stream.get());
      if (ent == nullptr) {
        if (errno != 0) return path_error(op, path, errno, false);
        break;
      }
      if (is_dot(ent->d_name)) continue;
      struct stat st {};
      if (::fstatat(dir_fd, ent->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;
        return path_error(op, path, errno, false);
      }
      if (S_ISDIR(st.st_mode)) {
        if (st.st_dev != dev) return path_error(op, path, EXDEV, false);
        std::string name = ent->d_name;
        UniqueFd child(open_last(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0));
        if (!child) {
          if (errno == ENOENT) continue;
          return path_error(op, path, errno, false);
        }
        CORRAL_TRY(remove_tree(child.get(), dev, op, path, depth + 1));
        if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
          return path_error(op, path, errno, false);
        }
      } else if (::unlinkat(dir_fd, ent->d_name, 0) != 0 && errno != ENOENT) {
        return path_error(op, path, errno, false);
      }
      removed = true;
    }
    if (!removed) break;
  }
  return ok();
}

Status ConfinedRoot::remove(std::string_view path, bool recursive) const {
  auto r = resolve("remove", path);
  if (!r) return tl::unexpected<Error>(std::move(r).error());
  if (r->name.empty()) {
    return refuse("remove", path, "the sandbox root itself cannot be removed",
                  "remove the entries below it instead");
  }
  struct stat st {};
  if (::fstatat(r->parent.get(), r->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return path_error("remove", path, errno, true);
  }
  CORRAL_TRY(check_sealed(st.st_dev, "remove", path));
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(r->parent.get(), r->name.c_str(), 0) != 0) {
      return path_error("remove", path, errno, true);
    }
    return ok();
  }
  if (recursive) {
    UniqueFd dir(
        open_last(r->parent.get(), r->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, last_flags()));
    if (!dir) return path_error("remove", path, errno, true);
    CORRAL_TRY(check_fs(dir.get(), "remove", path));
    struct stat dst {};
    if (::fstat(dir.get(), &dst) != 0) return path_error("remove", path, errno, true);
    // Without mount crossing the tree must be on the root's own mount; with
    // it, the tree is removed on whichever mount it is, and a mount nested
    // inside it is not entered.
    if (!cross_mounts_ && dst.st_dev != dev_) return path_error("remove", path, EXDEV, true);
    CORRAL_TRY(remove_tree(dir.get(), dst.st_dev, "remove", path, 1));
  }
  if (::unlinkat(r->parent.get(), r->name.c_str(), AT_REMOVEDIR) != 0) {
    return path_error("remove", path, errno, true);
  }
  return ok();
}

Status ConfinedRoot::rename(std::string_view from, std::string_view to, bool no_replace) const {
  auto src = resolve("rename", from);
  if (!src) return tl::unexpected<Error>(std::move(src).error());
  auto dst = resolve("rename", to);
  if (!dst) return tl::unexpected<Error>(std::move(dst).error());
  if (src->name.empty() || dst->name.empty()) {
    return refuse("rename", src->name.empty() ? from : to,
                  "the sandbox root itself cannot be renamed");
  }
  if (::renameat2(src->parent.get(), src->name.c_str(), dst->parent.get(), dst->name.c_str(),
                  no_replace ? RENAME_NOREPLACE : 0) != 0) {
    return path_error("rename", std::string(from) + " -> " + std::string(to), errno, true);
  }
  return ok();
}

Result<UniqueFd> ConfinedRoot::open_read(std::string_view path) const {
  auto r = resolve("open_read", path);
  if (!r) return tl::unexpected<Error>(std::move(r).error());
  if (r->name.empty()) return path_error("open_read", path, EISDIR, true);
  // Look before opening: opening a device or FIFO can have effects (or
  // block), so only a regular file is opened at all.
  struct stat st {};
  if (::fstatat(r->parent.get(), r->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return path_error("open_read", path, errno, true);
  }
  // Before opening: an open of a secret file is itself audited as a read.
  CORRAL_TRY(check_sealed(st.st_dev, "open_read", path));
  if (S_ISLNK(st.st_mode)) return path_error("open_read", path, ELOOP, true);
  if (S_ISDIR(st.st_mode)) return path_error("open_read", path, EISDIR, true);
  if (!S_ISREG(st.st_mode)) {
    return refuse("open_read", path, "not a regular file",
                  "the file API reads and writes regular files only");
  }
  UniqueFd fd(open_last(r->parent.get(), r->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0,
                        last_flags()));
  if (!fd) return path_error("open_read", path, errno, true);
  // Check what was opened, not what was looked at (it may have been swapped).
  if (::fstat(fd.get(), &st) != 0) return path_error("open_read", path, errno, true);
  CORRAL_TRY(check_sealed(st.st_dev, "open_read", path));
  if (!S_ISREG(st.st_mode)) {
    return refuse("open_read", path, "not a regular file",
                  "the file API reads and writes regular files only");
  }
  if (st.st_nlink > 1) {
    return refuse("open_read", path,
                  "the file has " + std::to_string(st.st_nlink) +
                      " hard links and may be a name for a file outside the sandbox",
                  std::string(kHardlinkHint));
  }
  int fl = ::fcntl(fd.get(), F_GETFL);
  if (fl >= 0) ::fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

Result<UniqueFd> ConfinedRoot::open_write(std::string_view path,
                                          const WriteOptions& options) const {
  auto r = resolve("open_write", path);
  if (!r) return tl::unexpected<Error>(std::move(r).error());
  if (r->name.empty()) return path_error("open_write", path, EISDIR, true);
  struct stat st {};
  if (::fstatat(r->parent.get(), r->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (options.exclusive) return path_error("open_write", path, EEXIST, true);
    if (S_ISLNK(st.st_mode)) return path_error("open_write", path, ELOOP, true);
    if (S_ISDIR(st.st_mode)) return path_error("open_write", path, EISDIR, true);
    if (!S_ISREG(st.st_mode)) {
      return refuse("open_write", path, "not a regular file",
                    "the file API reads and writes regular files only");
    }
  } else if (errno != ENOENT) {
    return path_error("open_write", path, errno, true);
  }
  // Never O_TRUNC here: truncation waits until the file is known to be a
  // single-link regular file.
  int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
  if (options.exclusive) flags |= O_EXCL;
  UniqueFd fd(open_last(r->parent.get(), r->name, flags, options.mode & 0777, last_flags()));
  if (!fd) return path_error("open_write", path, errno, true);
  if (::fstat(fd.get(), &st) != 0) return path_error("open_write", path, errno, true);
  CORRAL_TRY(check_sealed(st.st_dev, "open_write", path));
  if (!S_ISREG(st.st_mode)) {
    return refuse("open_write", path, "not a regular file",
                  "the file API reads and writes regular files only");
  }
  if (st.st_nlink > 1) {
    return refuse("open_write", path,
                  "the file has " + std::to_string(st.st_nlink) +
                      " hard links and may be a name for a file outside the sandbox",
                  std::string(kHardlinkHint));
  }
  int fl = ::fcntl(fd.get(), F_GETFL);
  if (fl >= 0) ::fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK);
  if (options.truncate && !options.exclusive && ::ftruncate(fd.get(), 0) != 0) {
    return path_error("open_write", path, errno, true);
  }
  return fd;
}

}  // namespace corral
