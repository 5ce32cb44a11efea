// cgroup v2 backend: one directory per sandbox under <mount>/<parent>.
//
// Limits: memory.max = the limit and memory.swap.max = 0, so RAM + swap
// never exceeds the limit (v2 has no combined counter); memory.oom.group = 1
// so an OOM kill takes the whole sandbox, not one random process; pids.max;
// cpu.max "<quota> 100000". Kill: cgroup.kill, then wait on cgroup.events
// until "populated 0".
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "base/unique_fd.h"
#include "jail/cgroup.h"
#include "jail/cgroup_files.h"

namespace corral::cgroup_internal {

namespace {

bool has(const std::vector<std::string>& v, std::string_view x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// "populated 1" / "frozen 0" from cgroup.events, read through an open fd
// so the same fd can be polled for changes.
Result<std::uint64_t> events_value(int fd, const std::string& path, std::string_view key) {
  char buf[256];
  ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n < 0) return errno_error("read(" + path + ")");
  std::string_view text(buf, static_cast<size_t>(n));
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      return parse_u64(line.substr(key.size() + 1), path);
    }
  }
  return make_error(ErrorCode::kSystem, path + ": no \"" + std::string(key) + "\" line");
}

// Waits until cgroup.events says `key` == `want`. The kernel wakes poll()
// with POLLPRI when the file changes; the short poll timeout also covers a
// missed wake-up and fake trees (plain files never wake poll).
Status wait_events(const std::string& dir, std::string_view key, std::uint64_t want,
                   Clock::time_point deadline, bool* reached) {
  std::string path = join_path(dir, "cgroup.events");
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return errno_error("open(" + path + ")");
  for (;;) {
    auto v = events_value(fd.get(), path, key);
    if (!v) return tl::unexpected<Error>(std::move(v).error());
    if (*v == want) {
      *reached = true;
      return ok();
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      *reached = false;
      return ok();
    }
    pollfd p{fd.get(), POLLPRI, 0};
    ::poll(&p, 1, static_cast<int>(std::min<long>(left.count(), 50)));
  }
}

class CgroupV2 final : public Cgroup {
 public:
  CgroupV2(std::string name, std::string dir, std::vector<std::string> controllers, UniqueFd dir_fd,
           const CgroupOptions& options)
      : name_(std::move(name)),
        dir_(std::move(dir)),
        controllers_(std::move(controllers)),
        dir_fd_(std::move(dir_fd)),
        options_(options) {}

  const std::string& name() const override { return name_; }

  Status add_process(pid_t pid) override {
    auto st = write_file(join_path(dir_, "cgroup.procs"), std::to_string(pid));
    if (!st) return tl::unexpected<Error>(std::move(st).error().wrap("adding process to cgroup"));
    return ok();
  }

  int clone_into_fd() const override { return dir_fd_.get(); }

  Result<std::vector<UniqueFd>> open_self_join() const override {
    return std::vector<UniqueFd>{};
  }

  Result<CgroupStats> stats() const override {
    CgroupStats s;
    auto fail = [&](Error e) { return tl::unexpected<Error>(e.wrap("reading stats of " + dir_)); };
    if (has(controllers_, "memory")) {
      auto cur = read_u64(join_path(dir_, "memory.current"));
      if (!cur) return fail(cur.error());
      auto swap = read_optional_u64(join_path(dir_, "memory.swap.current"));
      if (!swap) return fail(swap.error());
      // memory.peak: Linux 5.19+; memory.swap.peak: 6.5+. With swap.max = 0
      // the swap terms are 0; otherwise their sum is an upper bound.
      auto peak = read_optional_u64(join_path(dir_, "memory.peak"));
      if (!peak) return fail(peak.error());
      auto swap_peak = read_optional_u64(join_path(dir_, "memory.swap.peak"));
      if (!swap_peak) return fail(swap_peak.error());
      auto oom = read_keyed(join_path(dir_, "memory.events"), "oom_kill");
      if (!oom) return fail(oom.error());
      s.memory_current_bytes = *cur + *swap;
      s.memory_peak_bytes = std::max(*peak + *swap_peak, s.memory_current_bytes);
      s.oom_kills = *oom;
    }
    // cpu.stat is always there (core accounting), with or without "cpu".
    auto usage = read_keyed(join_path(dir_, "cpu.stat"), "usage_usec");
    if (!usage) return fail(usage.error());
    s.cpu_usage_ns = *usage * 1000;
    if (has(controllers_, "pids")) {
      auto cur = read_u64(join_path(dir_, "pids.current"));
      if (!cur) return fail(cur.error());
      auto hits = read_keyed(join_path(dir_, "pids.events"), "max");
      if (!hits) return fail(hits.error());
      s.pids_current = *cur;
      s.pids_max_hits = *hits;
    }
    return s;
  }

  Result<std::vector<pid_t>> processes() const override { return collect_procs(dir_); }

  Status kill_all() override {
    auto deadline = Clock::now() + options_.kill_timeout;
    auto st = kill_until_empty(deadline);
    if (!st) return tl::unexpected<Error>(std::move(st).error().wrap("killing cgroup " + dir_));
    return ok();
  }

  Status destroy() override {
    if (!file_exists(dir_)) {
      dir_fd_.reset();
      return ok();
    }
    std::string errors;
    auto killed = kill_all();
    if (!killed) errors = killed.error().message;
    auto removed =
        remove_cgroup_dir(dir_, options_.fake_kernel, Clock::now() + std::chrono::seconds(1));
    if (!removed) {
      if (!errors.empty()) errors += "; ";
      errors += removed.error().message;
    }
    auto gone = verify_removed({dir_});
    if (!gone) {
      if (!errors.empty()) errors += "; ";
      errors += gone.error().message;
      return make_error(ErrorCode::kSystem, "destroying cgroup " + name_ + ": " + errors,
                        gone.error().hint);
    }
    dir_fd_.reset();
    // Killed and removed; a kill_all error (e.g. a fake tree) is moot now.
    return ok();
  }

  std::vector<std::string> paths() const override { return {dir_}; }

 private:
  Status kill_until_empty(Clock::time_point deadline) {
    auto killed = write_file(join_path(dir_, "cgroup.kill"), "1");
    if (!killed && killed.error().sys_errno == ENOENT) {
      // Linux < 5.14 has no cgroup.kill: freeze (5.2+), kill each, thaw.
      FreezeOps freezer;
      freezer.freeze = [this](Clock::time_point dl) {
        if (!write_file(join_path(dir_, "cgroup.freeze"), "1")) return false;
        bool frozen = false;
        (void)wait_events(dir_, "frozen", 1, std::min(dl, Clock::now() + std::chrono::seconds(1)),
                          &frozen);
        return true;
      };
      freezer.thaw = [this] { (void)write_file(join_path(dir_, "cgroup.freeze"), "0"); };
      bool can_freeze = file_exists(join_path(dir_, "cgroup.freeze"));
      return kill_loop({dir_}, can_freeze ? &freezer : nullptr, deadline);
    }
    if (!killed) return killed;
    bool empty = false;
    CORRAL_TRY(wait_events(dir_, "populated", 0, deadline, &empty));
    if (empty) return ok();
    auto left = collect_procs(dir_);
    return make_error(ErrorCode::kTimeout,
                      "still populated " + std::to_string(options_.kill_timeout.count()) +
                          " ms after cgroup.kill (pids: " +
                          (left ? pids_to_string(*left) : left.error().message) + ")",
                      "a process in uninterruptible sleep (D state) cannot die until it wakes; "
                      "look at /proc/<pid>/stack");
  }

  std::string name_;
  std::string dir_;
  std::vector<std::string> controllers_;
  UniqueFd dir_fd_;
  CgroupOptions options_;
};

class CgroupV2Manager final : public CgroupManager {
 public:
  CgroupV2Manager(std::string mount_point, std::vector<std::string> controllers,
                  const CgroupOptions& options)
      : mount_(std::move(mount_point)),
        controllers_(std::move(controllers)),
        options_(options),
        parent_dir_(join_path(mount_, options_.parent_name)) {}

  CgroupVersion version() const override { return CgroupVersion::kV2; }

  std::string describe() const override {
    std::string ctl;
    for (const auto& c : controllers_) ctl += (ctl.empty() ? "" : " ") + c;
    return "cgroup v2 at " + mount_ + " (controllers used: " + (ctl.empty() ? "none" : ctl) +
           "; kill via cgroup.kill); sandboxes under " + parent_dir_;
  }

  Result<std::unique_ptr<Cgroup>> create(std::string_view name,
                                         const CgroupLimits& limits) override {
    CORRAL_TRY(check_name(name));
    auto quota = cpu_quota_us(limits.cpus);
    if (!quota) return tl::unexpected<Error>(std::move(quota).error());
    CORRAL_TRY(require("memory", limits.memory_bytes != 0));
    CORRAL_TRY(require("pids", limits.pids != 0));
    CORRAL_TRY(require("cpu", limits.cpus != 0));

    CORRAL_TRY_CTX(make_parent_dirs(mount_, options_.parent_name, options_.fake_kernel,
                                    [this](const std::string& d) { return enable_controllers(d); }),
                   "preparing cgroup parent " + parent_dir_);

    std::string dir = join_path(parent_dir_, name);
    auto made = make_dir(dir, options_.fake_kernel);
    if (!made) return tl::unexpected<Error>(std::move(made).error().wrap("creating cgroup"));
    if (!*made) {
      return make_error(ErrorCode::kAlreadyExists, "cgroup " + dir + " already exists",
                        "another sandbox has this name, or a stale one is left: "
                        "remove it (corral rm) first");
    }
    // Fail closed: any limit that cannot be written removes the cgroup.
    auto undo = [&](Error e) {
      auto removed =
          remove_cgroup_dir(dir, options_.fake_kernel, Clock::now() + std::chrono::seconds(1));
      if (!removed) e.message += "; removing it again also failed: " + removed.error().message;
      return tl::unexpected<Error>(std::move(e).wrap("creating cgroup " + dir));
    };

    if (has(controllers_, "memory")) {
      std::string mem = limits.memory_bytes ? std::to_string(limits.memory_bytes) : "max";
      if (auto st = write_file(join_path(dir, "memory.max"), mem); !st) return undo(st.error());
      std::string swap_file = join_path(dir, "memory.swap.max");
      if (file_exists(swap_file)) {
        // Swap counts against the same limit: no swap at all for the sandbox.
        if (auto st = write_file(swap_file, limits.memory_bytes ? "0" : "max"); !st) {
          return undo(st.error());
        }
      } else if (limits.memory_bytes != 0 && swap_active()) {
        return undo(Error{ErrorCode::kUnavailable,
                          swap_file + " is missing, so swap use cannot be limited",
                          "enable memory swap accounting (CONFIG_MEMCG_SWAP, boot without "
                          "swapaccount=0) or turn swap off (swapoff -a)"});
      }
      if (auto st = write_file(join_path(dir, "memory.oom.group"), "1"); !st) {
        return undo(st.error());
      }
    }
    if (has(controllers_, "pids")) {
      std::string pids = limits.pids ? std::to_string(limits.pids) : "max";
      if (auto st = write_file(join_path(dir, "pids.max"), pids); !st) return undo(st.error());
    }
    if (has(controllers_, "cpu")) {
      std::string cpu = (*quota ? std::to_string(*quota) : std::string("max")) + " " +
                        std::to_string(kCpuPeriodUs);
      if (auto st = write_file(join_path(dir, "cpu.max"), cpu); !st) return undo(st.error());
    }
    auto fd = open_dir(dir);
    if (!fd) return undo(fd.error());
    return std::unique_ptr<Cgroup>(
        std::make_unique<CgroupV2>(std::string(name), dir, controllers_, std::move(*fd), options_));
  }

  Result<std::unique_ptr<Cgroup>> open(std::string_view name) override {
    CORRAL_TRY(check_name(name));
    std::string dir = join_path(parent_dir_, name);
    auto fd = open_dir(dir);
    if (!fd) return tl::unexpected<Error>(std::move(fd).error().wrap("opening cgroup"));
    return std::unique_ptr<Cgroup>(
        std::make_unique<CgroupV2>(std::string(name), dir, controllers_, std::move(*fd), options_));
  }

  Result<std::vector<std::string>> list() const override { return list_children({parent_dir_}); }

 private:
  Status require(std::string_view controller, bool needed) const {
    if (!needed || has(controllers_, controller)) return ok();
    return make_error(ErrorCode::kUnavailable,
                      "a " + std::string(controller) + " limit was asked for, but the " +
                          std::string(controller) + " controller is not used in cgroup2 at " +
                          mount_,
                      "run `corral doctor` to see which cgroup controllers this host offers");
  }

  // Adds the missing controllers to dir/cgroup.subtree_control so that its
  // children get them. The kernel refuses (EBUSY) when `dir` holds
  // processes and is not the root: "no internal processes".
  Status enable_controllers(const std::string& dir) const {
    if (controllers_.empty()) return ok();
    std::string path = join_path(dir, "cgroup.subtree_control");
    auto text = read_file(path);
    if (!text) return tl::unexpected<Error>(std::move(text).error());
    std::vector<std::string> enabled = split_words(*text);
    std::string add;
    for (const auto& c : controllers_) {
      if (has(enabled, c)) continue;
      if (!add.empty()) add.push_back(' ');
      add += "+" + c;
    }
    if (add.empty()) return ok();
    auto st = write_file(path, add);
    if (!st && st.error().sys_errno == EBUSY) {
      return make_error(ErrorCode::kUnavailable, st.error().message,
                        dir +
                            " holds processes, and cgroup v2 lets only a cgroup without "
                            "processes hand controllers to its children: move them to a leaf "
                            "cgroup, or use a parent cgroup that has none (Delegate=yes)");
    }
    return st;
  }

  static Result<UniqueFd> open_dir(const std::string& dir) {
    UniqueFd fd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!fd) return errno_error("open(" + dir + ", O_PATH|O_DIRECTORY)");
    return fd;
  }

  std::string mount_;
  std::vector<std::string> controllers_;
  CgroupOptions options_;
  std::string parent_dir_;
};

}  // namespace

std::unique_ptr<CgroupManager> make_v2_manager(std::string mount_point,
                                               std::vector<std::string> controllers,
                                               const CgroupOptions& options) {
  return std::make_unique<CgroupV2Manager>(std::move(mount_point), std::move(controllers), options);
}

}  // namespace corral::cgroup_internal
