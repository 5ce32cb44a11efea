// The image store's staging trees (internal to src/image): a build or
// import writes into <images>/.partial-<name>-<pid>/ and renames it into
// place only when complete; removal renames an image to
// .removing-<name>-<pid> first. A tree whose process is gone is stale
// (ImageStore::remove_stale).
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "base/result.h"
#include "base/unique_fd.h"
#include "image/image_store.h"

namespace corral::image_detail {

inline constexpr std::string_view kPartialPrefix = ".partial-";
inline constexpr std::string_view kRemovingPrefix = ".removing-";
// Held (flock LOCK_EX) by the build and inherited by its tools; see
// PartialDir.
inline constexpr const char* kBuildingFile = ".building";

std::string join_path(std::string_view a, std::string_view b);

// A tool killed half-way (mmdebstrap mounts /proc, /sys and /dev in its
// target) can leave mounts inside a partial tree: detach them before the
// tree is deleted. Only ever called on corral's own partial trees.
void detach_mounts_under(const std::string& path);

// ".partial-<name>-<pid>" / ".removing-<name>-<pid>" -> pid, or 0.
pid_t owner_pid(std::string_view entry);

bool process_alive(pid_t pid);

// A build or import in progress: <images>/.partial-<name>-<pid>. Removed
// on destruction unless committed. Its .building file is flock()ed by us and
// inherited by the tools we run, so a partial tree counts as stale only when
// its owner is gone *and* no tool it started is still writing into it (a
// SIGKILLed corral can leave mmdebstrap running for a while).
class PartialDir {
 public:
  PartialDir(const std::string& images_dir, int images_fd, std::string_view name);
  ~PartialDir();
  PartialDir(const PartialDir&) = delete;
  PartialDir& operator=(const PartialDir&) = delete;

  Status create();
  // Passed to the tools as RunOptions::inherit_fd.
  int lock_fd() const { return lock_.get(); }
  const std::string& path() const { return path_; }
  std::string path(std::string_view sub) const { return join_path(path_, sub); }
  int fd() const { return fd_.get(); }

  Status discard();
  // Writes image.json and .lock, then renames the tree to <images>/<name>.
  Status commit(const ImageInfo& info);

 private:
  Status write_file(const char* name, const std::string& text, mode_t mode);

  std::string images_dir_;
  int images_fd_;
  std::string name_;
  std::string entry_;
  std::string path_;
  UniqueFd fd_;
  UniqueFd lock_;
  bool created_ = false;
  bool done_ = false;
};

}  // namespace corral::image_detail
