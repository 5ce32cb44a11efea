// Internal to the cgroup backends (cgroup_manager.cc, cgroup_v1.cc,
// cgroup_v2.cc): reading and writing cgroupfs control files, creating and
// removing cgroup directories, and the bounded kill loop that v1 (and v2
// kernels without cgroup.kill) use. Not for other layers.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "jail/cgroup.h"

namespace corral::cgroup_internal {

using Clock = std::chrono::steady_clock;

// Period used for every cpu quota: 100 ms, the kernel default.
inline constexpr std::uint64_t kCpuPeriodUs = 100000;
// The kernel refuses quotas below 1 ms.
inline constexpr std::uint64_t kMinCpuQuotaUs = 1000;

std::string join_path(std::string_view dir, std::string_view name);

// --- control files ---
// Whole file. ENOENT is kNotFound (see errno_error).
Result<std::string> read_file(const std::string& path);
// Like read_file, but a missing file is std::nullopt.
Result<std::optional<std::string>> read_optional_file(const std::string& path);
// One write(2) of `value` (open O_WRONLY|O_TRUNC, never O_CREAT: cgroupfs
// files are the kernel's). The error names the path and the value.
Status write_file(const std::string& path, std::string_view value, std::string hint = {});
bool file_exists(const std::string& path);
// A decimal counter; `what` names the file in the error.
Result<std::uint64_t> parse_u64(std::string_view text, std::string_view what);
Result<std::uint64_t> read_u64(const std::string& path);
// A missing file counts as 0 (counters that older kernels lack).
Result<std::uint64_t> read_optional_u64(const std::string& path);
// The value of `key` in a flat-keyed file ("key value" lines); 0 when the
// key is absent (a counter the running kernel does not have yet).
Result<std::uint64_t> read_keyed(const std::string& path, std::string_view key);
std::vector<std::string> split_words(std::string_view text);
// cgroup.procs of `dir` and of every cgroup below it, sorted, unique.
Result<std::vector<pid_t>> collect_procs(const std::string& dir);
// Union of collect_procs over several directories.
Result<std::vector<pid_t>> collect_procs(const std::vector<std::string>& dirs);
// "12 34 56" for messages.
std::string pids_to_string(const std::vector<pid_t>& pids);

// --- directories ---
// mkdir 0755. Returns true if created, false if it already existed.
Result<bool> make_dir(const std::string& path, const CgroupFakeKernel& fake);
// Creates mount_point/parent_name one component at a time; calls
// `on_each(dir)` for the mount point and each component, top down.
Status make_parent_dirs(const std::string& mount_point, std::string_view parent_name,
                        const CgroupFakeKernel& fake,
                        const std::function<Status(const std::string&)>& on_each = {});
// Removes a cgroup directory and any cgroup below it; EBUSY (a cgroup that
// is still emptying) is retried until `deadline`. A missing dir is fine.
Status remove_cgroup_dir(const std::string& path, const CgroupFakeKernel& fake,
                         Clock::time_point deadline);
// Checks that every path is gone; the error lists those left.
Status verify_removed(const std::vector<std::string>& paths);
// Names of valid sandbox cgroups under any of `parent_dirs`, sorted, unique.
Result<std::vector<std::string>> list_children(const std::vector<std::string>& parent_dirs);

// --- validation ---
Status check_name(std::string_view name);
Status check_parent_name(std::string_view parent_name);
// cpus -> quota in microseconds per kCpuPeriodUs; 0 = unlimited.
Result<std::uint64_t> cpu_quota_us(double cpus);
// True when /proc/swaps lists an active swap area.
bool swap_active();

// --- killing ---
// Optional freezer: freeze() returns true once the cgroup is frozen (or at
// least freezing), thaw() undoes it.
struct FreezeOps {
  std::function<bool(Clock::time_point deadline)> freeze;
  std::function<void()> thaw;
};
// SIGKILLs every process under `dirs` until none is left, or fails with
// kTimeout at `deadline` naming the pids left. Each round: freeze (if
// given), read the pids, open a pidfd for each, re-read, signal the pidfds
// whose pid is still listed (so a recycled pid is never signalled), thaw.
Status kill_loop(const std::vector<std::string>& dirs, const FreezeOps* freezer,
                 Clock::time_point deadline);

// --- backends ---
struct V1Hierarchy {
  std::string mount_point;
  std::vector<std::string> controllers;
};
std::unique_ptr<CgroupManager> make_v1_manager(std::vector<V1Hierarchy> hierarchies,
                                               const CgroupOptions& options);
std::unique_ptr<CgroupManager> make_v2_manager(std::string mount_point,
                                               std::vector<std::string> controllers,
                                               const CgroupOptions& options);

}  // namespace corral::cgroup_internal
