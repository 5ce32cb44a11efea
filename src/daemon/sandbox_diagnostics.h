// Diagnostics of a sandbox (REQUIREMENTS.md T1, issue 16 point 4): the
// answer to "why did it fail?" for each symptom of the design source's
// troubleshooting table (docs/operations.md, "Symptom -> where to look").
//
// DiagnosticsBook counts, per live sandbox, what only the daemon sees as it
// happens: requests the DNS server, the egress proxy and the gateway
// refused (with their reasons and the last few in full), secret uses the
// broker refused, processes ended by their timeout or by SIGXFSZ, and a
// writable layer found full when a process ended. It is fed the audit
// events before the audit budget (docs/audit.md) may drop any, so a flood
// is counted whole. Bounded: fixed counters, a map keyed by reason names
// of a closed set, and the last `keep_last` entries.
//
// diagnostics_json() joins those counters with the cgroup's counters (OOM
// kills, memory peak, pids and memory limit hits, CPU throttling), the
// layer's use, the teardown's residue and the destroy reason into the
// document GET /v1/sandboxes/{id}/diagnostics answers (docs/api.md). The
// teardown stores it in the state store (sandbox_diagnostics, kept for
// serve.diagnostics.retention; docs/adr/0018-diagnostics-store.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "daemon/diagnostics_config.h"
#include "jail/cgroup.h"
#include "jail/cgroup_limit_counters.h"
#include "spec/sandbox_spec.h"

namespace corral::daemon {

struct BlockedRequest {
  std::int64_t at_ms = 0;
  std::string layer;   // "dns", "proxy", "gateway"
  std::string host;    // the name asked for or connected to (or the address)
  std::uint16_t port = 0;
  std::string reason;  // the refusal's name: "denied", "address", "rate_limited", ...
  std::string detail;  // the policy's sentence, shortened
};

struct SecretFailure {
  std::int64_t at_ms = 0;
  std::string secret;  // its name (never a value); empty for an unknown token
  std::string reason;  // "host not allowed", "expired", "revoked", ...
  std::string via;     // "gateway", "tls-intercept", "http", "runtime-api"
  std::string host;
};

// What the daemon saw of one sandbox while it lived.
struct SandboxCounters {
  std::string ns = "default";
  std::uint64_t blocked = 0;
  std::map<std::string, std::uint64_t> blocked_by_reason;  // "dns:denied", "proxy:rate_limited"
  std::deque<BlockedRequest> blocked_last;
  std::uint64_t secret_failures = 0;
  std::map<std::string, std::uint64_t> secret_failures_by_reason;
  std::deque<SecretFailure> secret_last;
  std::uint64_t process_timeouts = 0;
  std::uint64_t sigxfsz_kills = 0;       // a file grew past RLIMIT_FSIZE (the disk limit)
  std::uint64_t layer_full_at_exit = 0;  // processes that ended with the layer full
  // CPU throttling and memory-limit hits as the teardown read them, just
  // before the cgroup went.
  std::optional<CgroupLimitCounters> final_limit_counters;
};

class DiagnosticsBook {
 public:
  explicit DiagnosticsBook(std::size_t keep_last = 20) : keep_last_(keep_last) {}
  void set_keep_last(std::size_t n) {
    std::lock_guard lock(mu_);
    keep_last_ = n;
  }

  // Starts counting for sandbox `id`, created by namespace `ns`. Events for
  // ids not opened (or closed already) are ignored: nothing grows for an
  // id the daemon does not hold.
  void open(const std::string& id, const std::string& ns);
  // One audit event: network.dns / network.connection / network.gateway
  // with decision "deny", secret.refused. Others are ignored.
  void observe(const nlohmann::json& event);
  void process_ended(const std::string& id, bool timed_out, std::optional<int> signal,
                     bool layer_full);
  void set_final_limit_counters(const std::string& id, const CgroupLimitCounters& counters);
  std::optional<SandboxCounters> snapshot(const std::string& id) const;
  // Stops counting and returns what was counted.
  std::optional<SandboxCounters> close(const std::string& id);

 private:
  void blocked(const std::string& id, BlockedRequest request);
  std::size_t keep_last_;
  mutable std::mutex mu_;  // a leaf lock
  std::map<std::string, SandboxCounters> sandboxes_;
};

// Whether a layer of `limit_bytes` using `used_bytes` is full: less than
// one page left (tmpfs allocates pages), or every inode used.
bool layer_full(std::uint64_t used_bytes, std::uint64_t limit_bytes, std::uint64_t used_inodes,
                std::uint64_t inode_limit);

// Everything diagnostics_json() reads.
struct DiagnosticsInput {
  std::string id;
  std::string state;
  bool final = false;  // recorded at teardown (false: read from a live sandbox)
  std::int64_t recorded_at_ms = 0;
  Limits limits;
  std::optional<CgroupStats> stats;  // nullopt: the counters could not be read
  std::optional<CgroupLimitCounters> limit_counters;  // the same
  std::optional<std::string> cgroup_version;  // "v1", "v2"
  std::optional<std::uint64_t> disk_used_bytes;
  bool layer_full_now = false;  // at teardown: before the wipe
  SandboxCounters counters;
  std::optional<std::string> destroy_reason;
  bool lifetime_expired = false;
  std::vector<std::string> residue;  // final only
  std::uint64_t residue_bytes = 0;
  nlohmann::json self_check;  // null until the self-check lands (T3)
};

nlohmann::json diagnostics_json(const DiagnosticsInput& in);

}  // namespace corral::daemon
