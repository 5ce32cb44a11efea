// SandboxEntry: one live sandbox as the daemon tracks it, shared by the
// request threads, the monitor, the reaper and teardowns (SandboxService,
// SandboxRegistry).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "daemon/process_entry.h"
#include "daemon/sandbox_diagnostics.h"
#include "daemon/self_check.h"
#include "runtime/live_sandbox.h"
#include "spec/sandbox_spec.h"
#include "store/sandbox_state.h"

namespace corral::daemon {

// A live sandbox as the daemon tracks it. Lock order (docs/adr/0007-daemon-
// threads.md): an idempotency key's lock, teardown_mu, network_mu, a
// ProcessEntry's mu, then this mu, then SandboxRegistry::mu_, then the
// journal, store, audit and metrics locks.
struct SandboxEntry {
  std::string id;
  SandboxSpec spec;                   // spec.network: guarded by mu (PUT .../network changes it)
  std::unique_ptr<LiveSandbox> live;  // set once init is running
  std::vector<std::string> env;       // base environment of its processes
  std::optional<std::uint32_t> net_slot;  // its veth pair's slot, if it has network
  // A warm pool's sandbox: the slot its init holds, unlinked, for a claim
  // that brings network (claim_network.cc); it becomes net_slot then.
  std::optional<std::uint32_t> reserved_net_slot;
  // One network update at a time: the engine, the spec and the store then
  // change in the same order (held across the store write, not only mu).
  std::mutex network_mu;
  // One teardown attempt at a time: the first, and the retries of a failed
  // one (the reaper's, a second DELETE's).
  std::mutex teardown_mu;

  std::mutex mu;  // guards what follows
  SandboxState state = SandboxState::kCreating;
  std::int64_t expires_at_ms = 0;
  std::map<std::uint64_t, std::shared_ptr<ProcessEntry>> processes;  // by request id
  std::uint64_t running = 0;                                         // processes not yet finished
  bool tearing_down = false;  // one teardown per sandbox; later destroys wait
  bool torn = false;
  // Its create is still making it: a destroy waits (a teardown now would
  // give its capacity back while the create goes on building it).
  bool building = false;
  std::condition_variable_any torn_down;  // also notified when building ends
  // Requests holding fds into its root or writable layer (SandboxLease,
  // sandbox_lease.h): lease number -> the connection a teardown shuts down
  // to cut the transfer off (-1: a short operation, waited for).
  std::map<std::uint64_t, int> leases;
  std::uint64_t next_lease = 0;
  std::condition_variable_any leases_gone;
  // What a client left holding files of the sandbox between its calls
  // (the E2B facade's polling watchers), by the id it was given. Added
  // only while not tearing_down; a teardown drops them before it drains
  // the leases.
  struct HeldBetweenCalls {
    virtual ~HeldBetweenCalls() = default;
  };
  std::map<std::string, std::shared_ptr<HeldBetweenCalls>> held;

  // Guarded by teardown_mu: the attempts so far, and what the last one
  // left, which a retry redoes (only that: a network slot, once freed, may
  // be another sandbox's by then).
  int teardown_attempts = 0;
  bool host_left = true;     // init, cgroup, writable layer, lock file
  bool network_left = true;  // its network's listeners and host link
  bool secrets_left = true;  // its secret files' mount
  // The cgroup's counters as its teardown last read them (oom_kills).
  std::optional<CgroupStats> final_stats;

  // The namespace whose caller created it (diagnostics are theirs alone).
  std::string ns = "default";
  // Guarded by teardown_mu: what the diagnostics counted while it lived,
  // taken at its first teardown (a retry records them again).
  std::optional<SandboxCounters> diagnostics_counters;
  // Guarded by mu: its last self-check (daemon/self_check.h, T3), for
  // GET /v1/sandboxes/{id} and diagnostics; unset while none has run.
  std::optional<SelfCheckReport> self_check;
  // Guarded by mu: made for a warm pool and not claimed yet (C4, ADR
  // 0015): hidden from every route until a claim clears it; never set again.
  bool pooled = false;
};

inline bool is_pooled(SandboxEntry& sandbox) {
  std::lock_guard lock(sandbox.mu);
  return sandbox.pooled;
}

}  // namespace corral::daemon
