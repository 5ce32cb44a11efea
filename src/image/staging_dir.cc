#include "image/staging_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "base/fs.h"
#include "base/json_text.h"

namespace corral::image_detail {

namespace {

using json = nlohmann::json;

// Mount points at or below `path` according to /proc/self/mountinfo,
// deepest first. Fields are octal-escaped (\040 for a space).
std::vector<std::string> mounts_under(const std::string& path) {
  std::vector<std::string> found;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, mount_point;
    if (!(fields >> id >> parent >> devno >> root >> mount_point)) continue;
    std::string mp;
    for (size_t i = 0; i < mount_point.size(); ++i) {
      if (mount_point[i] == '\\' && i + 3 < mount_point.size() &&
          std::isdigit(static_cast<unsigned char>(mount_point[i + 1]))) {
        mp.push_back(
            static_cast<char>(std::strtol(mount_point.substr(i + 1, 3).c_str(), nullptr, 8)));
        i += 3;
      } else {
        mp.push_back(mount_point[i]);
      }
    }
    if (mp == path || mp.rfind(path + "/", 0) == 0) found.push_back(mp);
  }
  std::sort(found.begin(), found.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return found;
}

}  // namespace

std::string join_path(std::string_view a, std::string_view b) {
  std::string p(a);
  if (p.empty() || p.back() != '/') p.push_back('/');
  p.append(b);
  return p;
}

void detach_mounts_under(const std::string& path) {
  char real[PATH_MAX];
  if (realpath(path.c_str(), real) == nullptr) return;
  for (const auto& mp : mounts_under(real)) {
    umount2(mp.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
  }
}

pid_t owner_pid(std::string_view entry) {
  if (entry.rfind(kPartialPrefix, 0) != 0 && entry.rfind(kRemovingPrefix, 0) != 0) return 0;
  size_t dash = entry.rfind('-');
  if (dash == std::string_view::npos || dash + 1 >= entry.size()) return 0;
  long pid = 0;
  for (char c : entry.substr(dash + 1)) {
    if (c < '0' || c > '9') return 0;
    pid = pid * 10 + (c - '0');
    if (pid > INT_MAX) return 0;
  }
  return static_cast<pid_t>(pid);
}

bool process_alive(pid_t pid) { return kill(pid, 0) == 0 || errno == EPERM; }

PartialDir::PartialDir(const std::string& images_dir, int images_fd, std::string_view name)
    : images_dir_(images_dir), images_fd_(images_fd), name_(name) {
  entry_ = std::string(kPartialPrefix) + std::string(name) + "-" + std::to_string(getpid());
  path_ = join_path(images_dir_, entry_);
}

PartialDir::~PartialDir() {
  if (created_ && !done_) (void)discard();
}

Status PartialDir::create() {
  // A leftover of ours (same pid, earlier call in this process) goes first.
  CORRAL_TRY(remove_tree_at(images_fd_, entry_, path_));
  // 0755 so that apt inside mmdebstrap can drop to its _apt user.
  if (mkdirat(images_fd_, entry_.c_str(), 0755) != 0) return errno_error("mkdir(" + path_ + ")");
  created_ = true;
  auto fd = open_dir_at(images_fd_, entry_, path_);
  if (!fd) return tl::unexpected(fd.error());
  fd_ = std::move(*fd);
  int lock = openat(fd_.get(), kBuildingFile,
                    O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (lock < 0) return errno_error("create(" + path(kBuildingFile) + ")");
  lock_.reset(lock);
  if (flock(lock_.get(), LOCK_EX) != 0) return errno_error("flock(" + path(kBuildingFile) + ")");
  return ok();
}

Status PartialDir::discard() {
  done_ = true;
  fd_.reset();
  lock_.reset();
  detach_mounts_under(path_);
  return remove_tree_at(images_fd_, entry_, path_);
}

Status PartialDir::commit(const ImageInfo& info) {
  json j = {{"name", info.name},       {"source", info.source},
            {"created", info.created}, {"size_bytes", info.size_bytes},
            {"env", info.env},         {"workdir", info.workdir}};
  if (!info.digest.empty()) j["digest"] = info.digest;
  std::string text = json_text(j, 2) + "\n";
  CORRAL_TRY(write_file("image.json", text, 0644));
  CORRAL_TRY(write_file(".lock", "", 0644));
  if (unlinkat(fd_.get(), kBuildingFile, 0) != 0) {
    return errno_error("unlink(" + path(kBuildingFile) + ")");
  }
  if (fchmod(fd_.get(), 0755) != 0) return errno_error("chmod(" + path_ + ")");
  if (fsync(fd_.get()) != 0) return errno_error("fsync(" + path_ + ")");
  if (renameat2(images_fd_, entry_.c_str(), images_fd_, name_.c_str(), RENAME_NOREPLACE) != 0) {
    if (errno == EEXIST || errno == ENOTEMPTY) {
      return make_error(ErrorCode::kAlreadyExists,
                        "image " + name_ + " was created by another process meanwhile",
                        "corral image rm " + name_ + " first");
    }
    return errno_error("rename(" + path_ + " -> " + join_path(images_dir_, name_) + ")");
  }
  done_ = true;
  fsync(images_fd_);
  return ok();
}

Status PartialDir::write_file(const char* name, const std::string& text, mode_t mode) {
  std::string shown = path(name);
  int fd = openat(fd_.get(), name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return errno_error("create(" + shown + ")");
  UniqueFd f(fd);
  CORRAL_TRY(write_all(f.get(), text, shown));
  if (fsync(f.get()) != 0) return errno_error("fsync(" + shown + ")");
  return ok();
}

}  // namespace corral::image_detail
