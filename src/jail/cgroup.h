// One interface over cgroup v1 and v2 (docs/adr/0002-cgroups.md).
// CgroupManager finds which version holds the memory, pids and cpu
// controllers (from /proc/self/mountinfo) and creates one Cgroup per
// sandbox under a corral-owned parent ("corral/<name>"). Limit hits are
// read back as counters so the runner can say which limit was hit.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace corral {

struct CgroupLimits {
  std::uint64_t memory_bytes = 0;  // RAM + swap together (swap counted); 0 = unlimited
  double cpus = 0;                 // quota in cores (>= 0.01); 0 = unlimited
  std::uint32_t pids = 0;          // 0 = unlimited
};

struct CgroupStats {
  std::uint64_t memory_current_bytes = 0;  // RAM + swap now
  std::uint64_t memory_peak_bytes = 0;     // RAM + swap high-water mark
  std::uint64_t cpu_usage_ns = 0;
  std::uint64_t oom_kills = 0;      // processes killed by the memory limit
  std::uint64_t pids_max_hits = 0;  // forks refused by the pids limit
  std::uint64_t pids_current = 0;
};

enum class CgroupVersion { kV1, kV2 };

// One cgroup or cgroup2 line of /proc/self/mountinfo.
struct CgroupMount {
  CgroupVersion version = CgroupVersion::kV1;
  std::string mount_point;  // unescaped ("\040" -> " ")
  std::string root;         // the mount's root inside its hierarchy ("/" usually)
  // v1: the controllers bound to this hierarchy (from the super options).
  // v2: empty after parsing; detect() fills it from cgroup.controllers.
  std::vector<std::string> controllers;
  std::string name;  // v1 named hierarchy ("systemd" for name=systemd), else empty
};

// Parses mountinfo text and returns its cgroup and cgroup2 mounts, in
// order. A mount point that is mounted over later hides the earlier entry.
// A malformed line is an error naming the line.
Result<std::vector<CgroupMount>> parse_cgroup_mounts(std::string_view mountinfo);

// Test seam for a fake cgroup tree (a plain directory standing in for
// cgroupfs). The kernel fills a new cgroup directory with its control files
// and removes them with the directory; on a plain file system these hooks
// do it. Never set in production.
struct CgroupFakeKernel {
  std::function<void(const std::string& dir)> after_mkdir;
  std::function<void(const std::string& dir)> before_rmdir;
};

struct CgroupOptions {
  std::string mountinfo_path = "/proc/self/mountinfo";
  // The corral-owned parent, relative to each hierarchy's mount point.
  // Components match [A-Za-z0-9_.-]+, separated by '/'.
  std::string parent_name = "corral";
  // How long kill_all() waits for the cgroup to become empty.
  std::chrono::milliseconds kill_timeout{5000};
  CgroupFakeKernel fake_kernel;  // tests only
};

class Cgroup {
 public:
  virtual ~Cgroup() = default;  // never destroys: call destroy()
  virtual const std::string& name() const = 0;
  // Moves a process (and its threads) into the cgroup (every hierarchy on v1).
  virtual Status add_process(pid_t pid) = 0;
  // v2 only: an O_PATH|O_DIRECTORY fd for clone3(CLONE_INTO_CGROUP), -1 on v1.
  // Owned by the Cgroup; valid until destroy().
  virtual int clone_into_fd() const = 0;
  // v1 only (empty on v2): the `tasks` file of every hierarchy, opened for
  // writing, for a new single-threaded process to join by writing "0" to
  // each itself (jail/init_process.cc). A thread that moves itself skips the
  // global threadgroup lock, whose write side waits for an RCU grace period
  // (~7 ms here) when a pid is written to cgroup.procs (ADR 0002).
  virtual Result<std::vector<UniqueFd>> open_self_join() const = 0;
  // Counters of a controller the manager does not use (v2_at) read 0.
  virtual Result<CgroupStats> stats() const = 0;
  // Processes in the cgroup and in any cgroup below it.
  virtual Result<std::vector<pid_t>> processes() const = 0;
  // SIGKILLs every process (cgroup.kill on v2; a freeze-kill loop on v1)
  // and waits, bounded, until none is left.
  virtual Status kill_all() = 0;
  // kill_all, then removes the directories and verifies they are gone (the
  // error names every one left). Idempotent.
  virtual Status destroy() = 0;
  // Host directories that make up this cgroup (one per v1 hierarchy).
  virtual std::vector<std::string> paths() const = 0;
};

class CgroupManager {
 public:
  virtual ~CgroupManager() = default;
  // v2 when a cgroup2 mount offers memory, pids and cpu; else v1 when the
  // memory, pids, cpu and cpuacct hierarchies are mounted; else kUnavailable
  // with a hint saying what to mount or enable. Tests point mountinfo_path
  // at a fixture whose mount points are in a temporary directory.
  static Result<std::unique_ptr<CgroupManager>> detect(const CgroupOptions& options = {});

  // A v2 manager on one cgroup2 mount that uses only `controllers` (each
  // must be listed in the mount's cgroup.controllers). A limit that needs a
  // controller not in the set fails. For hybrid hosts, where the cgroup2
  // mount holds none of memory/pids/cpu but cgroup.kill still works.
  static Result<std::unique_ptr<CgroupManager>> v2_at(std::string mount_point,
                                                      std::vector<std::string> controllers,
                                                      const CgroupOptions& options = {});

  virtual CgroupVersion version() const = 0;
  // Human description for `corral doctor`: version, mount points, controllers.
  virtual std::string describe() const = 0;
  // Creates "<parent>/<name>" with the limits applied. Fails (and leaves
  // nothing) if any limit cannot be written. A cgroup of that name that
  // already exists is kAlreadyExists and is left alone.
  virtual Result<std::unique_ptr<Cgroup>> create(std::string_view name,
                                                 const CgroupLimits& limits) = 0;
  // Re-opens an existing sandbox cgroup (for cleanup of stale ones). On v1,
  // the hierarchies where the directory is missing are left out.
  virtual Result<std::unique_ptr<Cgroup>> open(std::string_view name) = 0;
  // Names of existing children of the corral parent.
  virtual Result<std::vector<std::string>> list() const = 0;
};

// True for a sandbox cgroup name: [A-Za-z0-9_.-]{1,128}, no "..".
bool valid_cgroup_name(std::string_view name);

}  // namespace corral
