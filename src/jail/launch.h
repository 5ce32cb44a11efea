// The launcher sequence, host side: the one order in which `corral run`
// (sandbox_runner.cc) and the daemon's factory (runtime/sandbox_factory.cc)
// start a planned sandbox's init. The steps inside the sandbox are in
// init_process.cc and workload.cc.
//
//   1. the alive-lock        run_dir()/sandboxes/<id>.lock, flock'ed
//   2. the cgroup            with its limits (memory, cpus, pids)
//   3. the channels          control (and, long-lived, spawn) socketpairs
//   4. clone                 init in its new namespaces (v2: in its cgroup)
//   5. cgroup attach         v1 only: init moved into its cgroup
//   6. network link          the veth pair (and the caller's listeners)
//   7. go                    init builds the sandbox from here
//
// A step that fails undoes what the earlier ones made (init killed and
// reaped, cgroup removed, lock file removed) and reports its stage and
// errno: there is one error path, so a hardening step added here holds for
// both callers.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "jail/cgroup.h"
#include "jail/sandbox_planner.h"
#include "jail/stage.h"
#include "spec/sandbox_spec.h"

namespace corral {

// The steps above, for a caller that words a failure by step.
enum class LaunchStep {
  kAliveLock,
  kCgroup,
  kChannels,
  kClone,
  kCgroupAttach,
  kNetworkLink,
  kGo,
};

struct LaunchOptions {
  // Where the sandbox's cgroup is made. Required.
  CgroupManager* cgroups = nullptr;
  // Fds of the caller that init must not inherit (the factory's socket to
  // the daemon). The launcher's own ends of the channels are added to them.
  std::vector<int> close_in_init;
  // Long-lived sandboxes: a lock init holds for its whole life beside the
  // others (the image in use, so that `corral image rm` refuses it); -1: none.
  int image_lock_fd = -1;
  // Called once the veth pair exists and before "go", to start the proxy
  // and DNS on its host end (`corral run`). A failure stops the launch at
  // Stage::kNetworkLink. Unset: the caller attaches them later, before the
  // sandbox's first process (the daemon).
  std::function<Status(const std::string& sandbox_id, const SandboxNetwork& network)> network_ready;
};

// A sandbox whose init received "go". Its owner tears it down (kill,
// cgroup, lock file); nothing here does that on destruction.
struct LaunchedInit {
  std::string lock_path;
  UniqueFd alive;  // the flock'ed alive-lock (reap_stale_cgroups)
  std::unique_ptr<Cgroup> cgroup;
  pid_t pid = -1;
  UniqueFd pidfd;
  UniqueFd control;  // our end of the control channel
  UniqueFd spawn;    // long-lived: our end of the spawn channel
  std::chrono::steady_clock::time_point cloned_at{};
};

struct LaunchError {
  LaunchStep step = LaunchStep::kAliveLock;
  Stage stage = Stage::kPlan;
  Error error;                       // sys_errno set where a call failed
  std::vector<std::string> residue;  // what the undo could not remove
};

// Runs the steps above for `prepared` (planned from `spec`). On success,
// prepared.plan's channel fds are closed again (init has its copies) and
// prepared.bind_fds is emptied. On failure nothing of the launch is left
// but what `residue` lists.
tl::expected<LaunchedInit, LaunchError> launch_init(const SandboxSpec& spec,
                                                    PreparedSandbox& prepared,
                                                    const LaunchOptions& options);

// Kills init (and waits until it is gone), removes the cgroup and the lock
// file: the undo of a launch. Returns what could not be removed. Idempotent.
std::vector<std::string> undo_launch(LaunchedInit& init);

}  // namespace corral
