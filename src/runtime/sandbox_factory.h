// SandboxFactory: creates the daemon's long-lived sandboxes (ADR 0004) in a
// helper process forked when the daemon starts, before it has threads.
//
// Why a separate process: a sandbox's init is forked (clone3) from whoever
// creates it and keeps that process's memory image for the sandbox's whole
// life. Forked from the daemon, every init would pin a copy of the daemon's
// heap, and a clone3 in a multithreaded process may catch another thread
// holding a lock. The factory is small and single-threaded; it plans,
// makes the cgroup, clones init, hands the daemon init's pidfd and channels,
// and forgets the sandbox. Init is its child but survives it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "jail/sandbox_runner.h"
#include "spec/sandbox_spec.h"

namespace corral {

// A sandbox whose init is running its setup; the daemon owns it from here.
struct CreatedSandbox {
  std::string id;
  pid_t init_pid = -1;
  std::uint64_t init_start_time = 0;  // /proc/<pid>/stat field 22: pid-reuse guard
  std::uint32_t host_uid_base = 0;
  std::string cgroup;  // name under corral's cgroup parent
  std::vector<std::string> notices;
  std::vector<std::string> env;  // the base environment of its processes ("K=V")
  std::int64_t net_slot = -1;    // its veth pair's slot (net/net_slot.h); -1: no network
  // A warm pool's sandbox: the slot its init holds for a claim (-1: none).
  std::int64_t reserved_net_slot = -1;
  UniqueFd pidfd;                // init
  UniqueFd control;              // ControlMessage from init (failure, zygote exit)
  UniqueFd spawn;                // the zygote's requests and replies
  UniqueFd layer;                // writable layer mount fd
};

class SandboxFactory {
 public:
  // Forks the factory process. Call it before the daemon starts any thread.
  // The factory dies with the daemon (PDEATHSIG); sandboxes do not.
  // `network`: the templates and address pool of networked sandboxes.
  static Result<std::unique_ptr<SandboxFactory>> start(const NetworkOptions& network = {});
  ~SandboxFactory();

  // Plans and starts a long-lived sandbox (spec.argv empty, options.long_lived
  // and options.sandbox_id set by the caller). Thread-safe: requests are
  // served one at a time. On failure, `failure` says at which stage, and
  // nothing of the sandbox is left.
  // `deadline_ms` (unix ms) arms init's lifetime backstop.
  // `timeout` bounds the factory's answer (0: none). A factory that does
  // not answer in time is killed (kTimeout), and every later create fails
  // at once (kUnavailable): the daemon must be restarted, and re-attaches
  // its sandboxes. A half-made sandbox of the killed factory is the
  // caller's to clean (its cgroup and lock file are named by its id).
  Result<CreatedSandbox> create(const SandboxSpec& spec, const RunOptions& options,
                                std::int64_t deadline_ms, SetupFailure* failure,
                                std::chrono::milliseconds timeout = {});

  pid_t pid() const { return pid_; }

 private:
  SandboxFactory(UniqueFd sock, pid_t pid) : sock_(std::move(sock)), pid_(pid) {}
  std::mutex mu_;
  UniqueFd sock_;
  pid_t pid_;
  bool broken_ = false;  // killed after a timeout; guarded by mu_
};

// /proc/<pid>/stat field 22 (start time in clock ticks since boot), or 0.
std::uint64_t process_start_time(pid_t pid);

}  // namespace corral
