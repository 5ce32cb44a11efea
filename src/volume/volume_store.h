// Named persistent volumes (D2, F4; docs/volumes.md, ADR 0010): each one an
// ext4 file system in a sparse image file of exactly its quota, so neither a
// sandbox nor the host disk can go past it, loop-mounted on the host under
// <data_dir>/volumes/mnt/<namespace>/<name> (a root-only tree).
//
//   <data_dir>/volumes/store/<name>/volume.json   what it is (atomic writes)
//   <data_dir>/volumes/store/<name>/image.ext4    its bytes
//   <data_dir>/volumes/mnt/<namespace>/<name>     where it is mounted
//   <data_dir>/volumes/binds/<sandbox>-<n>        a sub-path, bound for one create
//
// A volume's name is unique on the daemon and it belongs to one namespace:
// asked for from another namespace, every call fails with kPermissionDenied
// ("belongs to another namespace") and says nothing else about it.
//
// The store remembers which sandboxes use a volume (volume.json "users"), so
// that it survives a daemon restart; remove() asks the caller which of them
// still live. Thread-safe: one mutex.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace corral::volume {

struct VolumeLimits {
  std::uint64_t max_quota = 0;  // one volume (serve.volumes.max_quota)
  std::uint64_t max_total = 0;  // the sum of all quotas (serve.volumes.max_total)
};

inline constexpr std::uint64_t kMinQuota = 16ull << 20;
// The files under <data_dir>/volumes/mnt belong to this unprivileged host
// uid/gid (mkfs root_owner); a sandbox sees them as its own user through an
// idmapped mount.
inline constexpr unsigned kVolumeOwner = 65534;

struct VolumeInfo {
  std::string name;
  std::string ns;
  std::uint64_t quota = 0;            // bytes: the image's size
  std::uint64_t used_bytes = 0;       // in use inside its file system
  std::uint64_t capacity_bytes = 0;   // its file system's size (quota less ext4's metadata)
  std::uint64_t allocated_bytes = 0;  // host disk the image takes (st_blocks)
  std::int64_t created_ms = 0;
  bool mounted = false;
  std::vector<std::string> sandboxes;  // live users (as the last remove/list found them)
};

class VolumeStore {
 public:
  VolumeStore(std::string data_dir, VolumeLimits limits);
  ~VolumeStore();
  VolumeStore(const VolumeStore&) = delete;
  VolumeStore& operator=(const VolumeStore&) = delete;

  // Loads every volume, mounts it (or reuses the mount a killed daemon
  // left), removes what a create cut short and stale binds. Returns a
  // summary for the start-up line; a volume that cannot be mounted stays
  // listed, unmounted, and is refused to sandboxes.
  std::string start();
  // Detaches the host mounts (sandboxes keep theirs).
  void stop();

  // kInvalidArgument (name, quota), kAlreadyExists (this namespace has it),
  // kPermissionDenied (another has it), kResourceExhausted (max_total),
  // kUnavailable (no loop devices, no mkfs.ext4).
  Result<VolumeInfo> create(const std::string& ns, const std::string& name, std::uint64_t quota);
  std::vector<VolumeInfo> list(const std::string& ns);
  Result<VolumeInfo> get(const std::string& ns, const std::string& name);
  // Refused while a sandbox for which `is_live(id)` is true, or a create in
  // progress, uses it: kUnavailable with sys_errno EBUSY, naming them.
  // Removes the mount, the image and the metadata.
  Status remove(const std::string& ns, const std::string& name,
                const std::function<bool(const std::string&)>& is_live);

  // The directory `subpath` ("" = the root) of a mounted volume, opened
  // O_PATH with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
  // RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV): a symlink anywhere on the way,
  // or a missing or non-directory component, is kInvalidArgument.
  Result<UniqueFd> open_subpath(const std::string& ns, const std::string& name,
                                const std::string& subpath);
  // The regular file `path` (relative, normal) of a mounted volume, opened
  // O_RDONLY by the same walk (a task's input, docs/tasks.md). kNotFound
  // when it does not exist; kInvalidArgument for a symlink on the way, or a
  // FIFO, socket, device or directory (looked at through O_PATH, never
  // opened); kUnavailable when the volume is not mounted.
  Result<UniqueFd> open_file(const std::string& ns, const std::string& name,
                             const std::string& path);
  // Records `sandbox_id` as a user (persisted) and as a create in progress.
  Status acquire(const std::string& ns, const std::string& name, const std::string& sandbox_id);
  // The create of `sandbox_id` has ended, however.
  void creation_done(const std::string& name, const std::string& sandbox_id);

  // Binds `dir_fd` at binds/<tag> and returns that path; binds_root() is
  // the mount root a create hands to the factory for it.
  Result<std::string> stage_bind(int dir_fd, const std::string& tag);
  void unstage_bind(const std::string& path);
  const VolumeLimits& limits() const { return limits_; }
  std::string binds_root() const { return root_ + "/binds"; }
  std::string mount_dir(const std::string& ns, const std::string& name) const {
    return root_ + "/mnt/" + ns + "/" + name;
  }
  std::string image_path(const std::string& name) const {
    return root_ + "/store/" + name + "/image.ext4";
  }

 private:
  struct Volume {
    std::string ns;
    std::uint64_t quota = 0;
    std::int64_t created_ms = 0;
    std::set<std::string> users;
    std::set<std::string> creating;
    bool mounted = false;
  };
  Status check_owner(const std::string& ns, const std::string& name) const;
  Result<UniqueFd> open_beneath(const std::string& ns, const std::string& name,
                                const std::string& rel, int flags, const std::string& what);
  Status save(const std::string& name, const Volume& v) const;
  Status mount_volume(const std::string& name, Volume& v);
  VolumeInfo info(const std::string& name, const Volume& v) const;

  const std::string root_;
  const VolumeLimits limits_;
  std::mutex mu_;
  std::map<std::string, Volume> volumes_;
};

// "1GiB", "512MiB", "16Mi": a quota in bytes, at least kMinQuota and at most
// `max_quota`; errors say which bound.
Result<std::uint64_t> parse_quota(std::string_view text, std::uint64_t max_quota);

}  // namespace corral::volume
