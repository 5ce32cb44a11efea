#include "volume/volume_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "base/fs.h"
#include "base/json_text.h"
#include "base/random.h"
#include "base/strings.h"
#include "base/subprocess.h"
#include "spec/units.h"
#include "spec/volume_ref.h"
#include "sys/syscalls.h"
#include "volume/loop_mount.h"

namespace corral::volume {
namespace {

using nlohmann::json;

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

tl::unexpected<Error> other_namespace(const std::string& name) {
  return make_error(ErrorCode::kPermissionDenied,
                    "volume " + quote_for_message(name) + " belongs to another namespace",
                    "use a volume of your own namespace (corral volume ls)");
}

// `text` into `dir`/`file` by a temporary file, fsync and rename.
Status write_atomic(const std::string& dir, const std::string& file, const std::string& text) {
  const std::string tmp = dir + "/." + file + ".tmp";
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return errno_error("open(" + tmp + ")");
  CORRAL_TRY(write_all(fd.get(), text, tmp));
  if (::fsync(fd.get()) != 0) return errno_error("fsync(" + tmp + ")");
  fd.reset();
  if (::rename(tmp.c_str(), (dir + "/" + file).c_str()) != 0)
    return errno_error("rename(" + tmp + ")");
  UniqueFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d) (void)::fsync(d.get());
  return ok();
}

std::vector<std::string> dir_names(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  return out;
}

// mkfs.ext4 on the image: no reserved blocks (the quota is the user's), the
// root directory owned by the volume owner.
Status make_file_system(const std::string& image) {
  auto mkfs = find_program("mkfs.ext4");
  if (!mkfs)
    return make_error(ErrorCode::kUnavailable, "volumes need mkfs.ext4, which is not installed",
                      "install e2fsprogs");
  SubprocessOptions o;
  o.program = *mkfs;
  o.argv = {"mkfs.ext4", "-q", "-F", "-m", "0", "-E",
            "root_owner=" + std::to_string(kVolumeOwner) + ":" + std::to_string(kVolumeOwner),
            image};
  o.timeout = std::chrono::seconds(120);
  auto r = run_subprocess(o);
  if (!r) return tl::unexpected(r.error());
  if (!r->exited_ok())
    return make_error(ErrorCode::kSystem, "mkfs.ext4 " + image + ": " +
                                              describe_wait_status(r->wait_status) + ": " +
                                              r->err.substr(0, 512));
  return ok();
}

}  // namespace

Result<std::uint64_t> parse_quota(std::string_view text, std::uint64_t max_quota) {
  auto bytes = parse_size(text);
  if (!bytes) return tl::unexpected(bytes.error());
  if (*bytes < kMinQuota)
    return make_error(ErrorCode::kInvalidArgument,
                      quote_for_message(text) + " is less than the smallest quota, 16Mi");
  if (max_quota != 0 && *bytes > max_quota)
    return make_error(ErrorCode::kInvalidArgument,
                      quote_for_message(text) + " is more than this daemon's largest quota, " +
                          format_size(max_quota),
                      "serve.volumes.max_quota sets it");
  return *bytes;
}

VolumeStore::VolumeStore(std::string data_dir, VolumeLimits limits)
    : root_(std::move(data_dir) + "/volumes"), limits_(limits) {}

VolumeStore::~VolumeStore() = default;

Status VolumeStore::check_owner(const std::string& ns, const std::string& name) const {
  auto it = volumes_.find(name);
  if (it == volumes_.end())
    return make_error(ErrorCode::kNotFound, "no volume " + quote_for_message(name),
                      "corral volume ls lists the volumes of your namespace");
  if (it->second.ns != ns) return other_namespace(name);
  return ok();
}

Status VolumeStore::save(const std::string& name, const Volume& v) const {
  json j{{"name", name},
         {"namespace", v.ns},
         {"quota", v.quota},
         {"created_ms", v.created_ms},
         {"users", std::vector<std::string>(v.users.begin(), v.users.end())}};
  return write_atomic(root_ + "/store/" + name, "volume.json", json_text(j) + "\n");
}

Status VolumeStore::mount_volume(const std::string& name, Volume& v) {
  const std::string dir = mount_dir(v.ns, name);
  CORRAL_TRY(mkdir_p(dir, 0700));
  auto reused = image_mounted_at(image_path(name), dir);
  if (!reused) return tl::unexpected(reused.error());
  if (!*reused) CORRAL_TRY(mount_image(image_path(name), dir));
  v.mounted = true;
  return ok();
}

VolumeInfo VolumeStore::info(const std::string& name, const Volume& v) const {
  VolumeInfo i;
  i.name = name;
  i.ns = v.ns;
  i.quota = v.quota;
  i.created_ms = v.created_ms;
  i.mounted = v.mounted;
  i.sandboxes.assign(v.users.begin(), v.users.end());
  struct stat st {};
  if (::stat(image_path(name).c_str(), &st) == 0)
    i.allocated_bytes = static_cast<std::uint64_t>(st.st_blocks) * 512;
  struct statvfs vfs {};
  if (v.mounted && ::statvfs(mount_dir(v.ns, name).c_str(), &vfs) == 0) {
    i.capacity_bytes = static_cast<std::uint64_t>(vfs.f_blocks) * vfs.f_frsize;
    i.used_bytes = static_cast<std::uint64_t>(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize;
  }
  return i;
}

std::string VolumeStore::start() {
  std::lock_guard lock(mu_);
  if (auto st = mkdir_p(root_ + "/store", 0700); !st) return "volumes: " + st.error().message;
  (void)mkdir_p(root_ + "/mnt", 0700);
  (void)mkdir_p(binds_root(), 0700);
  (void)::chmod(root_.c_str(), 0700);
  // Binds of creates a killed daemon left: the sandboxes hold their own.
  for (const std::string& n : dir_names(binds_root())) unstage_bind(binds_root() + "/" + n);
  std::size_t mounted = 0, failed = 0;
  for (const std::string& name : dir_names(root_ + "/store")) {
    const std::string dir = root_ + "/store/" + name;
    std::ifstream in(dir + "/volume.json");
    std::stringstream text;
    text << in.rdbuf();
    json j = json::parse(text.str(), nullptr, false);
    if (!is_valid_volume_name(name) || !j.is_object() || !j.contains("namespace")) {
      // A create cut short before its metadata was written: never used.
      (void)remove_tree(dir);
      continue;
    }
    Volume v;
    v.ns = j.value("namespace", "");
    v.quota = j.value("quota", std::uint64_t{0});
    v.created_ms = j.value("created_ms", std::int64_t{0});
    for (const auto& u : j.value("users", std::vector<std::string>{})) v.users.insert(u);
    if (auto st = mount_volume(name, v); !st) {
      ++failed;
      fprintf(stderr, "corral serve: warning: volume %s is not mounted: %s\n", name.c_str(),
              st.error().message.c_str());
    } else {
      ++mounted;
    }
    volumes_.emplace(name, std::move(v));
  }
  // Mount points of volumes that are gone (a remove cut short).
  for (const std::string& ns : dir_names(root_ + "/mnt")) {
    for (const std::string& name : dir_names(root_ + "/mnt/" + ns)) {
      auto it = volumes_.find(name);
      if (it != volumes_.end() && it->second.ns == ns) continue;
      const std::string dir = root_ + "/mnt/" + ns + "/" + name;
      if (unmount(dir)) ::rmdir(dir.c_str());
    }
  }
  std::string out = std::to_string(mounted) + " volumes mounted";
  if (failed != 0) out += ", " + std::to_string(failed) + " not mountable";
  return out;
}

void VolumeStore::stop() {
  std::lock_guard lock(mu_);
  for (auto& [name, v] : volumes_) {
    if (v.mounted && unmount(mount_dir(v.ns, name))) v.mounted = false;
  }
}

Result<VolumeInfo> VolumeStore::create(const std::string& ns, const std::string& name,
                                       std::uint64_t quota) {
  if (!is_valid_volume_name(name))
    return make_error(ErrorCode::kInvalidArgument,
                      quote_for_message(name) + " is not a volume name ([a-z0-9][a-z0-9._-]{0,62})");
  if (quota < kMinQuota || (limits_.max_quota != 0 && quota > limits_.max_quota))
    return make_error(ErrorCode::kInvalidArgument, "quota out of range");
  std::lock_guard lock(mu_);
  if (auto it = volumes_.find(name); it != volumes_.end()) {
    if (it->second.ns != ns) return other_namespace(name);
    return make_error(ErrorCode::kAlreadyExists, "volume " + quote_for_message(name) + " exists",
                      "remove it first, or choose another name");
  }
  std::uint64_t total = quota;
  for (const auto& [n, v] : volumes_) total += v.quota;
  if (limits_.max_total != 0 && total > limits_.max_total)
    return make_error(ErrorCode::kResourceExhausted,
                      "the volumes' quotas would come to " + format_size(total) +
                          ", more than serve.volumes.max_total (" + format_size(limits_.max_total) +
                          ")",
                      "remove a volume, or ask for a smaller quota");
  const std::string dir = root_ + "/store/" + name;
  CORRAL_TRY(mkdir_p(root_ + "/store", 0700));
  if (::mkdir(dir.c_str(), 0700) != 0) return errno_error("mkdir(" + dir + ")");
  Volume v;
  v.ns = ns;
  v.quota = quota;
  v.created_ms = now_ms();
  auto made = [&]() -> Status {
    // Sparse: the host disk holds only what the file system has written,
    // and never more than `quota` (the file's size).
    UniqueFd image(::open(image_path(name).c_str(),
                          O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!image) return errno_error("open(" + image_path(name) + ")");
    if (::ftruncate(image.get(), static_cast<off_t>(quota)) != 0)
      return errno_error("ftruncate(" + image_path(name) + ")");
    image.reset();
    CORRAL_TRY(make_file_system(image_path(name)));
    CORRAL_TRY(save(name, v));  // the commit point: start() keeps it from here
    return mount_volume(name, v);
  }();
  if (!made) {
    (void)unmount(mount_dir(ns, name));
    ::rmdir(mount_dir(ns, name).c_str());
    (void)remove_tree(dir);
    return tl::unexpected(made.error().wrap("creating volume " + name));
  }
  auto it = volumes_.emplace(name, std::move(v)).first;
  return info(name, it->second);
}

std::vector<VolumeInfo> VolumeStore::list(const std::string& ns) {
  std::lock_guard lock(mu_);
  std::vector<VolumeInfo> out;
  for (const auto& [name, v] : volumes_) {
    if (v.ns == ns) out.push_back(info(name, v));
  }
  return out;
}

Result<VolumeInfo> VolumeStore::get(const std::string& ns, const std::string& name) {
  std::lock_guard lock(mu_);
  CORRAL_TRY(check_owner(ns, name));
  return info(name, volumes_.at(name));
}

Status VolumeStore::remove(const std::string& ns, const std::string& name,
                           const std::function<bool(const std::string&)>& is_live) {
  std::lock_guard lock(mu_);
  CORRAL_TRY(check_owner(ns, name));
  Volume& v = volumes_.at(name);
  std::string busy;
  for (auto it = v.users.begin(); it != v.users.end();) {
    if (v.creating.contains(*it) || is_live(*it)) {
      busy += (busy.empty() ? "" : ", ") + *it;
      ++it;
    } else {
      it = v.users.erase(it);
    }
  }
  if (!busy.empty()) {
    (void)save(name, v);
    Error e{ErrorCode::kUnavailable, "volume " + quote_for_message(name) + " is in use by " + busy,
            "destroy those sandboxes first", EBUSY};
    return tl::unexpected(std::move(e));
  }
  CORRAL_TRY(unmount(mount_dir(v.ns, name)));
  ::rmdir(mount_dir(v.ns, name).c_str());
  // The metadata first: a remove cut short after it leaves no volume.
  const std::string dir = root_ + "/store/" + name;
  if (::unlink((dir + "/volume.json").c_str()) != 0 && errno != ENOENT)
    return errno_error("unlink(" + dir + "/volume.json)");
  volumes_.erase(name);
  return remove_tree(dir);
}

// `rel` below the root of a mounted volume, by openat2 with `flags` and
// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
// RESOLVE_NO_XDEV: the one walk both a sub-path and an input file take.
// `what` names it in errors.
Result<UniqueFd> VolumeStore::open_beneath(const std::string& ns, const std::string& name,
                                           const std::string& rel, int flags,
                                           const std::string& what) {
  std::lock_guard lock(mu_);
  CORRAL_TRY(check_owner(ns, name));
  const Volume& v = volumes_.at(name);
  const std::string dir = mount_dir(ns, name);
  // Only the volume's own file system: never the empty directory under it.
  auto mounted = v.mounted ? image_mounted_at(image_path(name), dir) : Result<bool>(false);
  if (!mounted || !*mounted)
    return make_error(ErrorCode::kUnavailable,
                      "volume " + quote_for_message(name) + " is not mounted",
                      "see the daemon's start-up log; restarting it mounts volumes again");
  UniqueFd root(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  if (!root) return errno_error("open(" + dir + ")");
  UniqueFd fd(sys::openat2(root.get(), rel.c_str(), flags | O_CLOEXEC, 0,
                           RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                               RESOLVE_NO_XDEV));
  if (!fd) {
    const int err = errno;
    if (err == ELOOP)
      return make_error(ErrorCode::kInvalidArgument, what + " goes through a symbolic link",
                        "name the real path; links are never followed in a volume");
    if (err == EXDEV)
      return make_error(ErrorCode::kInvalidArgument, what + " leads outside the volume");
    if (err == ENOENT) return make_error(ErrorCode::kNotFound, what + " does not exist");
    if (err == ENOTDIR)
      return make_error(ErrorCode::kInvalidArgument, what + " is not a directory");
    return errno_error("openat2(" + what + ")", err);
  }
  return fd;
}

Result<UniqueFd> VolumeStore::open_subpath(const std::string& ns, const std::string& name,
                                           const std::string& subpath) {
  const std::string what = "sub-path " + quote_for_message(subpath) + " of volume " + name;
  auto fd = open_beneath(ns, name, subpath.empty() ? "." : subpath, O_PATH | O_DIRECTORY, what);
  if (!fd && fd.error().code == ErrorCode::kNotFound)
    return make_error(ErrorCode::kInvalidArgument, what + " does not exist",
                      "create it first (mount the volume writable and mkdir it)");
  return fd;
}

Result<UniqueFd> VolumeStore::open_file(const std::string& ns, const std::string& name,
                                        const std::string& path) {
  const std::string what = "file " + quote_for_message(path) + " of volume " + name;
  // Looked at first (O_PATH opens nothing): a FIFO or a device is never
  // opened at all, so it can neither block nor act.
  auto look = open_beneath(ns, name, path, O_PATH | O_NOFOLLOW, what);
  if (!look) return look;
  struct stat seen {};
  if (::fstat(look->get(), &seen) != 0) return errno_error("fstat(" + what + ")");
  auto not_regular = [&what](mode_t mode) {
    const char* kind = S_ISDIR(mode)    ? "a directory"
                       : S_ISLNK(mode)  ? "a symbolic link"
                       : S_ISFIFO(mode) ? "a FIFO"
                       : S_ISSOCK(mode) ? "a socket"
                       : S_ISCHR(mode) || S_ISBLK(mode) ? "a device"
                                                        : "not a regular file";
    return make_error(ErrorCode::kInvalidArgument, what + " is " + kind,
                      "an input is read from a regular file of the volume");
  };
  if (!S_ISREG(seen.st_mode)) return not_regular(seen.st_mode);
  auto fd = open_beneath(ns, name, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, what);
  if (!fd) return fd;
  // What was opened is what was looked at (it may have been swapped since).
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return errno_error("fstat(" + what + ")");
  if (!S_ISREG(st.st_mode)) return not_regular(st.st_mode);
  if (st.st_dev != seen.st_dev || st.st_ino != seen.st_ino)
    return make_error(ErrorCode::kUnavailable, what + " changed while it was opened",
                      "retry when nothing else renames it");
  const int fl = ::fcntl(fd->get(), F_GETFL);
  if (fl >= 0) (void)::fcntl(fd->get(), F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

Status VolumeStore::acquire(const std::string& ns, const std::string& name,
                            const std::string& sandbox_id) {
  std::lock_guard lock(mu_);
  CORRAL_TRY(check_owner(ns, name));
  Volume& v = volumes_.at(name);
  v.creating.insert(sandbox_id);
  if (v.users.insert(sandbox_id).second) {
    if (auto st = save(name, v); !st) {
      v.users.erase(sandbox_id);
      v.creating.erase(sandbox_id);
      return st;
    }
  }
  return ok();
}

void VolumeStore::creation_done(const std::string& name, const std::string& sandbox_id) {
  std::lock_guard lock(mu_);
  auto it = volumes_.find(name);
  if (it != volumes_.end()) it->second.creating.erase(sandbox_id);
}

Result<std::string> VolumeStore::stage_bind(int dir_fd, const std::string& tag) {
  const std::string path = binds_root() + "/" + tag;
  CORRAL_TRY(mkdir_p(binds_root(), 0700));
  if (::mkdir(path.c_str(), 0700) != 0) return errno_error("mkdir(" + path + ")");
  if (auto st = bind_fd(dir_fd, path); !st) {
    ::rmdir(path.c_str());
    return tl::unexpected(st.error());
  }
  return path;
}

void VolumeStore::unstage_bind(const std::string& path) {
  if (unmount(path)) ::rmdir(path.c_str());
}

}  // namespace corral::volume
