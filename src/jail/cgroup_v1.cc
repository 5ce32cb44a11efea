// cgroup v1 backend: one directory per sandbox in each hierarchy that
// corral uses (memory, pids, cpu, cpuacct, and freezer when mounted; cpu and
// cpuacct share one directory when co-mounted).
//
// Limits: memory.limit_in_bytes, then memory.memsw.limit_in_bytes (RAM +
// swap; it must never be below the RAM limit, so it is written second);
// pids.max; cpu.cfs_period_us = 100000 and cpu.cfs_quota_us. v1 has no
// cgroup.kill and no group OOM kill: kill_all freezes the cgroup (freezer
// hierarchy), SIGKILLs every process through a pidfd, thaws, and repeats
// until cgroup.procs is empty in every hierarchy.
#include <fcntl.h>

#include <algorithm>
#include <thread>

#include "jail/cgroup.h"
#include "jail/cgroup_files.h"

namespace corral::cgroup_internal {

namespace {

bool has(const std::vector<std::string>& v, std::string_view x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

struct V1Dir {
  std::string path;                      // <mount>/<parent>/<name>
  std::vector<std::string> controllers;  // of its hierarchy
};

// The directory of the hierarchy holding `controller`, or "" if none.
std::string dir_for(const std::vector<V1Dir>& dirs, std::string_view controller) {
  for (const auto& d : dirs) {
    if (has(d.controllers, controller)) return d.path;
  }
  return {};
}

std::vector<std::string> dir_paths(const std::vector<V1Dir>& dirs) {
  std::vector<std::string> out;
  for (const auto& d : dirs) out.push_back(d.path);
  return out;
}

class CgroupV1 final : public Cgroup {
 public:
  CgroupV1(std::string name, std::vector<V1Dir> dirs, const CgroupOptions& options)
      : name_(std::move(name)), dirs_(std::move(dirs)), options_(options) {}

  const std::string& name() const override { return name_; }

  Status add_process(pid_t pid) override {
    for (const auto& d : dirs_) {
      auto st = write_file(join_path(d.path, "cgroup.procs"), std::to_string(pid));
      if (!st) return tl::unexpected<Error>(std::move(st).error().wrap("adding process to cgroup"));
    }
    return ok();
  }

  int clone_into_fd() const override { return -1; }

  Result<std::vector<UniqueFd>> open_self_join() const override {
    std::vector<UniqueFd> fds;
    for (const auto& d : dirs_) {
      const std::string path = join_path(d.path, "tasks");
      UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
      if (!fd) return errno_error("open(" + path + ")");
      fds.push_back(std::move(fd));
    }
    return fds;
  }

  Result<CgroupStats> stats() const override {
    CgroupStats s;
    auto fail = [&](Error e) {
      return tl::unexpected<Error>(e.wrap("reading stats of cgroup " + name_));
    };
    if (std::string mem = dir_for(dirs_, "memory"); !mem.empty()) {
      // memsw counts RAM + swap, like the limit; plain memory.* when the
      // kernel has no swap accounting.
      bool memsw = file_exists(join_path(mem, "memory.memsw.usage_in_bytes"));
      auto cur =
          read_u64(join_path(mem, memsw ? "memory.memsw.usage_in_bytes" : "memory.usage_in_bytes"));
      if (!cur) return fail(cur.error());
      auto peak = read_u64(
          join_path(mem, memsw ? "memory.memsw.max_usage_in_bytes" : "memory.max_usage_in_bytes"));
      if (!peak) return fail(peak.error());
      auto oom = read_keyed(join_path(mem, "memory.oom_control"), "oom_kill");
      if (!oom) return fail(oom.error());
      s.memory_current_bytes = *cur;
      s.memory_peak_bytes = *peak;
      s.oom_kills = *oom;
    }
    if (std::string acct = dir_for(dirs_, "cpuacct"); !acct.empty()) {
      auto usage = read_u64(join_path(acct, "cpuacct.usage"));
      if (!usage) return fail(usage.error());
      s.cpu_usage_ns = *usage;
    }
    if (std::string pids = dir_for(dirs_, "pids"); !pids.empty()) {
      auto cur = read_u64(join_path(pids, "pids.current"));
      if (!cur) return fail(cur.error());
      auto hits = read_keyed(join_path(pids, "pids.events"), "max");
      if (!hits) return fail(hits.error());
      s.pids_current = *cur;
      s.pids_max_hits = *hits;
    }
    return s;
  }

  // Union over the hierarchies: a process half-added (one hierarchy failed)
  // still shows up, so kill_all and destroy do not miss it.
  Result<std::vector<pid_t>> processes() const override { return collect_procs(present_dirs()); }

  Status kill_all() override {
    auto deadline = Clock::now() + options_.kill_timeout;
    std::vector<std::string> dirs = present_dirs();
    std::string freezer_dir = dir_for(dirs_, "freezer");
    FreezeOps freezer;
    freezer.freeze = [&](Clock::time_point dl) {
      std::string state = join_path(freezer_dir, "freezer.state");
      if (!write_file(state, "FROZEN")) return false;
      // FREEZING until every task has stopped; killing works either way,
      // but a frozen cgroup cannot fork behind our back.
      auto until = std::min(dl, Clock::now() + std::chrono::seconds(1));
      for (;;) {
        auto s = read_file(state);
        if (!s || s->rfind("FROZEN", 0) == 0 || Clock::now() >= until) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    };
    freezer.thaw = [&] { (void)write_file(join_path(freezer_dir, "freezer.state"), "THAWED"); };
    bool can_freeze = !freezer_dir.empty() && file_exists(freezer_dir);
    auto st = kill_loop(dirs, can_freeze ? &freezer : nullptr, deadline);
    if (!st) return tl::unexpected<Error>(std::move(st).error().wrap("killing cgroup " + name_));
    return ok();
  }

  Status destroy() override {
    std::vector<std::string> all = dir_paths(dirs_);
    if (present_dirs().empty()) return ok();
    std::string errors;
    auto killed = kill_all();
    if (!killed) errors = killed.error().message;
    // Every hierarchy, even after a failure in one of them.
    auto deadline = Clock::now() + std::chrono::seconds(1);
    for (const std::string& d : all) {
      auto removed = remove_cgroup_dir(d, options_.fake_kernel, deadline);
      if (!removed) {
        if (!errors.empty()) errors += "; ";
        errors += removed.error().message;
      }
    }
    auto gone = verify_removed(all);
    if (!gone) {
      if (!errors.empty()) errors += "; ";
      errors += gone.error().message;
      return make_error(ErrorCode::kSystem, "destroying cgroup " + name_ + ": " + errors,
                        gone.error().hint);
    }
    return ok();
  }

  std::vector<std::string> paths() const override { return dir_paths(dirs_); }

 private:
  std::vector<std::string> present_dirs() const {
    std::vector<std::string> out;
    for (const auto& d : dirs_) {
      if (file_exists(d.path)) out.push_back(d.path);
    }
    return out;
  }

  std::string name_;
  std::vector<V1Dir> dirs_;
  CgroupOptions options_;
};

class CgroupV1Manager final : public CgroupManager {
 public:
  CgroupV1Manager(std::vector<V1Hierarchy> hierarchies, const CgroupOptions& options)
      : hierarchies_(std::move(hierarchies)), options_(options) {}

  CgroupVersion version() const override { return CgroupVersion::kV1; }

  std::string describe() const override {
    std::string s = "cgroup v1:";
    for (const auto& h : hierarchies_) {
      std::string ctl;
      for (const auto& c : h.controllers) ctl += (ctl.empty() ? "" : ",") + c;
      s += " " + ctl + " at " + h.mount_point + ";";
    }
    bool freezer = std::any_of(hierarchies_.begin(), hierarchies_.end(),
                               [](const auto& h) { return has(h.controllers, "freezer"); });
    s += freezer ? " kill freezes first;" : " no freezer hierarchy (kill loop without freeze);";
    s += " sandboxes under " + options_.parent_name + "/ in each";
    return s;
  }

  Result<std::unique_ptr<Cgroup>> create(std::string_view name,
                                         const CgroupLimits& limits) override {
    CORRAL_TRY(check_name(name));
    auto quota = cpu_quota_us(limits.cpus);
    if (!quota) return tl::unexpected<Error>(std::move(quota).error());

    for (const auto& h : hierarchies_) {
      CORRAL_TRY_CTX(make_parent_dirs(h.mount_point, options_.parent_name, options_.fake_kernel),
                     "preparing cgroup parent in " + h.mount_point);
    }
    std::vector<V1Dir> dirs = dirs_for(name);
    std::vector<std::string> created;
    // Fail closed: anything that goes wrong removes every directory made.
    auto undo = [&](Error e) {
      auto deadline = Clock::now() + std::chrono::seconds(1);
      for (const std::string& d : created) {
        auto removed = remove_cgroup_dir(d, options_.fake_kernel, deadline);
        if (!removed) e.message += "; removing it again also failed: " + removed.error().message;
      }
      return tl::unexpected<Error>(std::move(e).wrap("creating cgroup " + std::string(name)));
    };
    for (const auto& d : dirs) {
      auto made = make_dir(d.path, options_.fake_kernel);
      if (!made) return undo(made.error());
      if (!*made) {
        return undo(Error{ErrorCode::kAlreadyExists, "cgroup " + d.path + " already exists",
                          "another sandbox has this name, or a stale one is left: "
                          "remove it (corral rm) first"});
      }
      created.push_back(d.path);
    }

    std::string mem = dir_for(dirs, "memory");
    std::string bytes = limits.memory_bytes ? std::to_string(limits.memory_bytes) : "-1";
    if (auto st = write_file(join_path(mem, "memory.limit_in_bytes"), bytes); !st) {
      return undo(st.error());
    }
    std::string memsw = join_path(mem, "memory.memsw.limit_in_bytes");
    if (file_exists(memsw)) {
      if (auto st = write_file(memsw, bytes); !st) return undo(st.error());
    } else if (limits.memory_bytes != 0 && swap_active()) {
      return undo(Error{ErrorCode::kUnavailable,
                        memsw + " is missing, so swap use cannot be limited",
                        "enable memory swap accounting (boot with swapaccount=1) or turn swap "
                        "off (swapoff -a)"});
    }
    std::string pids = dir_for(dirs, "pids");
    if (auto st = write_file(join_path(pids, "pids.max"),
                             limits.pids ? std::to_string(limits.pids) : "max");
        !st) {
      return undo(st.error());
    }
    std::string cpu = dir_for(dirs, "cpu");
    if (auto st = write_file(join_path(cpu, "cpu.cfs_period_us"), std::to_string(kCpuPeriodUs));
        !st) {
      return undo(st.error());
    }
    if (auto st =
            write_file(join_path(cpu, "cpu.cfs_quota_us"), *quota ? std::to_string(*quota) : "-1");
        !st) {
      return undo(st.error());
    }
    return std::unique_ptr<Cgroup>(
        std::make_unique<CgroupV1>(std::string(name), std::move(dirs), options_));
  }

  Result<std::unique_ptr<Cgroup>> open(std::string_view name) override {
    CORRAL_TRY(check_name(name));
    std::vector<V1Dir> present;
    for (auto& d : dirs_for(name)) {
      if (file_exists(d.path)) present.push_back(std::move(d));
    }
    if (present.empty()) {
      return make_error(ErrorCode::kNotFound, "opening cgroup: no hierarchy has " +
                                                  options_.parent_name + "/" + std::string(name));
    }
    return std::unique_ptr<Cgroup>(
        std::make_unique<CgroupV1>(std::string(name), std::move(present), options_));
  }

  Result<std::vector<std::string>> list() const override {
    std::vector<std::string> parents;
    for (const auto& h : hierarchies_) {
      parents.push_back(join_path(h.mount_point, options_.parent_name));
    }
    return list_children(parents);
  }

 private:
  std::vector<V1Dir> dirs_for(std::string_view name) const {
    std::vector<V1Dir> dirs;
    for (const auto& h : hierarchies_) {
      dirs.push_back(
          {join_path(join_path(h.mount_point, options_.parent_name), name), h.controllers});
    }
    return dirs;
  }

  std::vector<V1Hierarchy> hierarchies_;
  CgroupOptions options_;
};

}  // namespace

std::unique_ptr<CgroupManager> make_v1_manager(std::vector<V1Hierarchy> hierarchies,
                                               const CgroupOptions& options) {
  return std::make_unique<CgroupV1Manager>(std::move(hierarchies), options);
}

}  // namespace corral::cgroup_internal
