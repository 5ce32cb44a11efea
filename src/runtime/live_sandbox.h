// LiveSandbox: the daemon's handle on one long-lived sandbox (ADR 0004):
// its init (pidfd), its two channels (jail/live_channel.h), its cgroup and
// its writable layer. Made from a fresh CreatedSandbox, or re-attached
// after a daemon restart from what the state store recorded (the channels
// and layer come back from init with pidfd_getfd). destroy() tears it down
// and verifies, like `corral run` does.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "jail/cgroup.h"
#include "jail/live_channel.h"
#include "jail/sandbox_runner.h"
#include "jail/spawn_request.h"
#include "jail/writable_layer.h"
#include "runtime/sandbox_factory.h"

namespace corral {

// What the state store keeps to find a sandbox again.
struct LiveSandboxIdentity {
  std::string id;
  pid_t init_pid = -1;
  std::uint64_t init_start_time = 0;
  std::uint32_t host_uid_base = 0;
  std::string cgroup;
};

struct ReceivedReply {
  SpawnReply reply{};
  UniqueFd pidfd;  // kStarted only
};

struct DestroyReport {
  std::uint64_t disk_used_bytes = 0;  // writable layer just before the wipe
  std::uint64_t residue_bytes = 0;    // still allocated after the wipe: must be 0
  std::vector<std::string> residue;   // anything of the sandbox left on the host
  std::optional<CgroupStats> final_stats;
};

class LiveSandbox {
 public:
  // Takes over a sandbox the factory just made. Its cgroup or layer that
  // cannot be opened fails the adoption, and init is killed: the daemon
  // never keeps a sandbox it cannot account for and remove.
  static Result<std::unique_ptr<LiveSandbox>> adopt(CreatedSandbox created,
                                                    CgroupManager& cgroups);
  // After a daemon restart: finds init by pid, checks it is the same
  // process (start time) and takes its channels back. kNotFound when the
  // sandbox is gone. A cgroup that cannot be opened fails it, as in adopt().
  static Result<std::unique_ptr<LiveSandbox>> attach(const LiveSandboxIdentity& identity,
                                                     CgroupManager& cgroups);
  ~LiveSandbox();

  const LiveSandboxIdentity& identity() const { return identity_; }
  const std::string& id() const { return identity_.id; }

  // Waits for the zygote's kReady (or a setup failure reported by init,
  // or init's death). A failure names the stage.
  Status wait_ready(std::chrono::milliseconds timeout, SetupFailure* failure);

  // Sends one spawn request with the process's stdio fds. Thread-safe
  // (one SOCK_SEQPACKET message per request).
  Status send_spawn(const SpawnRequest& request, const int stdio[3]);
  // Sends a barrier: a request with no stdio fds, which the zygote refuses
  // at once (kFailed for `request_id`, stage plan) and starts nothing for.
  // The zygote answers its requests in order, so once that answer is read,
  // every request sent before the barrier has had its kStarted or kFailed.
  Status send_barrier(std::uint64_t request_id);
  // Next reply from the zygote, without blocking (nullopt: none waiting).
  // An error means the channel is broken (the sandbox is ending).
  Result<std::optional<ReceivedReply>> read_reply();

  // Moves init's lifetime backstop (unix ms); see SandboxPlan::deadline_ms.
  void set_deadline(std::int64_t deadline_ms);

  int spawn_fd() const { return spawn_.get(); }
  int pidfd() const { return pidfd_.get(); }
  int control_fd() const { return control_.get(); }
  bool init_alive() const;

  Result<CgroupStats> stats() const;
  Result<LayerUsage> disk_usage() const;
  // The layer's root dir fd: the daemon's private area lives there, out of
  // the sandbox's view (it only sees the layer's upper/ and tmp/ dirs).
  int layer_root_fd() const { return layer_ ? layer_->root_fd() : -1; }
  // The sandbox's "/" as seen by its init: /proc/<init>/root.
  std::string root_path() const;
  // uid/gid on the host of the sandbox user (1000 inside), for files the
  // daemon creates on its behalf.
  uid_t host_user_uid() const { return identity_.host_uid_base + 1000; }

  // Kills every process, removes the cgroup, wipes and checks the layer,
  // removes the lock file. Idempotent: a second call (a retry after
  // residue) does each step again and reports what is left now. The handles (pidfd, channels, layer
  // fd) stay open until the LiveSandbox itself goes: other threads may
  // still use them (the monitor reading a reply that came before the
  // teardown, a request reading the disk usage), and a closed fd's number
  // can be reused at once, by another sandbox's channel. TSan reported
  // both races (ADR 0007).
  DestroyReport destroy();

 private:
  LiveSandbox() = default;
  // Destroys what adopt() or attach() got so far and returns the error.
  tl::unexpected<Error> give_up(const char* what, const Error& why);
  LiveSandboxIdentity identity_;
  UniqueFd pidfd_, control_, spawn_;
  std::optional<WritableLayer> layer_;
  std::unique_ptr<Cgroup> cgroup_;
};

}  // namespace corral
