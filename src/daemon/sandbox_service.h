// SandboxService: the lifecycle of the daemon's sandboxes (ARCHITECTURE.md
// "The path of one sandbox", REQUIREMENTS.md C2, N7, D6): create with a
// capacity check and an idempotency key, the state machine stored in
// SQLite and audited, live usage, lifetime extension, verified destroy,
// a monitor thread that hears from every sandbox's zygote and init, a
// reaper that ends expired sandboxes and timed-out processes, and the
// reconcile step that re-attaches to (or destroys) what a previous daemon
// left running.
//
// One class, one file per concern:
//   sandbox_service.cc    threads' start and stop, transitions, reads,
//                         live network update, lifetime extension
//   sandbox_create.cc     create, step by step (SandboxService::Creation)
//   sandbox_teardown.cc   destroy and teardown
//   sandbox_teardown_retry.cc  the retries of failed teardowns
//   sandbox_processes.cc  the process registry of each sandbox and spawn
//   sandbox_monitor.cc    the monitor thread (zygote replies, init exits)
//   sandbox_reaper.cc     the reaper thread (expiry, process timeouts)
//   sandbox_reconcile.cc  reconcile after a restart (SandboxService::Reconciler)
//   sandbox_diagnostics_service.cc  diagnostics (T1): read live, recorded
//                         at teardown, kept for a while, pruned
// The live entries, the capacity they hold (a CapacityLedger, reserved at
// admission) and the idempotency keys' locks are a SandboxRegistry
// (sandbox_registry.h).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/api_model.h"
#include "base/unique_fd.h"
#include "daemon/api_result.h"
#include "daemon/dry_run_record.h"
#include "daemon/image_settings.h"
#include "daemon/journal.h"
#include "daemon/metrics.h"
#include "daemon/network_service.h"
#include "daemon/process_entry.h"
#include "daemon/sandbox_diagnostics.h"
#include "daemon/sandbox_entry.h"
#include "daemon/sandbox_lease.h"
#include "daemon/sandbox_registry.h"
#include "daemon/secret_service.h"
#include "image/image_store.h"
#include "jail/cgroup.h"
#include "runtime/live_sandbox.h"
#include "runtime/sandbox_factory.h"
#include "spec/sandbox_spec.h"
#include "store/audit_log.h"
#include "store/state_store.h"

namespace corral::volume {
class VolumeStore;
}

namespace corral::daemon {

// Process ids are "p-" + the 16 hex digits of the spawn request id, so a
// re-attached daemon can match the zygote's late exit reports.
std::uint64_t new_request_id();
std::string process_id_for(std::uint64_t request_id);
std::optional<std::uint64_t> request_id_of(std::string_view process_id);

struct ServiceLimits {
  std::uint64_t max_sandboxes = 256;
  std::uint64_t max_memory_bytes = 0;  // sum of the live sandboxes' memory limits
  std::uint64_t max_disk_bytes = 0;    // sum of their disk limits (RAM-backed layers)
  std::chrono::milliseconds setup_timeout{30000};
  bool self_check = true;                // serve.self_check (daemon/self_check.h)
  std::vector<std::string> mount_roots;  // host dirs that API mounts may come from
  // The journal's bound (serve.audit.queue; docs/audit.md).
  std::size_t journal_queue = Journal::kDefaultCapacity;
  // Images by digest (serve.images; docs/images.md "Pulling by digest").
  ImageSettings images;
};

class SandboxService {
 public:
  // `network` may be null: then only sandboxes without network are served.
  // `secrets` may be null: then specs that ask for secrets are refused.
  SandboxService(ServiceLimits limits, SandboxSpec defaults, StateStore& store, AuditLog& audit,
                 SandboxFactory& factory, CgroupManager& cgroups, MetricsRegistry& metrics,
                 NetworkService* network = nullptr, SecretService* secrets = nullptr);
  ~SandboxService();  // stops the threads; sandboxes live on for the next daemon

  // Re-attaches to or destroys what the store says may still exist, then
  // starts the monitor and reaper threads. Returns a summary for the log.
  std::string start();
  void stop();

  struct Created {
    api::SandboxInfo info;
    bool created = false;  // false: the idempotency key named an earlier create
  };
  // `ns`: the caller's namespace, whose volumes the spec may mount.
  ApiResult<Created> create(const api::CreateSandboxRequest& request,
                            std::optional<std::string> idempotency_key,
                            const std::string& ns = "default");
  // Warm pools (C4, ADR 0015; pool_service.h, sandbox_claim.cc). A create
  // first asks the claimer (set before the API serves): nullopt is a miss,
  // and the create goes on cold. `key_is_fresh` takes the key's lock and
  // says whether no earlier create used it; the claimer calls it (once, not
  // under its own lock) only when a pool is about the create.
  using Claimer = std::function<std::optional<ApiResult<Created>>(
      const api::CreateSandboxRequest& request, const std::optional<std::string>& key,
      const std::function<bool()>& key_is_fresh, const std::string& ns)>;
  void set_claimer(Claimer claimer) { claimer_ = std::move(claimer); }
  // A sandbox for a pool: an ordinary cold create whose entry stays hidden
  // (SandboxEntry::pooled) until claim_pooled; `pool_key` marks its row.
  ApiResult<Created> create_pooled(const api::CreateSandboxRequest& request,
                                   const std::string& pool_key);
  // Hands pooled sandbox `id` to the caller of `claim`: binds its env,
  // workdir, timeout and max_lifetime (from now), host name and secrets
  // (claim_identity.h), stores and audits the claim. Fails (the sandbox stays
  // as it was, or is gone) when it is no longer claimable; the caller then
  // tries another or goes cold. Secrets the request may not have answer
  // 400/503 as at a cold create, a binding that fails setup_failed: the
  // sandbox is destroyed in both cases.
  // `key`: the claim's Idempotency-Key, which its row takes (the caller
  // holds the key's lock and found no earlier create with it).
  ApiResult<Created> claim_pooled(const std::string& id, const api::CreateSandboxRequest& claim,
                                  const SandboxSpec& pool_spec, const std::string& pool,
                                  const std::optional<std::string>& key,
                                  const std::string& ns = "default");
  // Whether what `spec` brings that lives in the sandbox's namespaces
  // (network, mounts, volumes: claim_binding.h) can be bound at claim:
  // empty, or the miss's reason. Asked before a pooled sandbox is taken.
  std::string claim_unbindable(const SandboxSpec& spec, const std::string& ns = "default");

  // The named volumes creates may mount (docs/volumes.md); unset: a spec
  // with volumes is refused. Set before the API serves.
  void set_volumes(volume::VolumeStore* volumes) { volumes_ = volumes; }
  // True while the registry holds the sandbox (alive, or being torn down).
  bool registered(std::string_view id) { return entry(id) != nullptr; }
  // A create that named or matched a pool: served from it (hit) or cold
  // (miss). Daemon-wide, for diagnostics' pool_hit_rate (T1).
  void count_pool_claim(bool hit) {
    (hit ? pool_hits_ : pool_misses_).fetch_add(1, std::memory_order_relaxed);
  }
  // True for a warm pool's sandbox not claimed yet (hidden from callers).
  bool unclaimed_pooled(std::string_view id) {
    auto e = entry(id);
    return e && is_pooled(*e);
  }
  ApiResult<api::SandboxInfo> get(std::string_view id);
  // The OOM kills in the sandbox's cgroup so far, whatever its state: read
  // now, or as its teardown last read them (on cgroup v2 an OOM kill takes
  // the whole sandbox, init included, so the sandbox is torn down as the
  // killed process's end is reported). Waits for a teardown in progress.
  // Takes the entry (a task's runner holds it), not the id: the registry
  // may have let go of a torn-down sandbox already. nullopt when its
  // counters are unknown.
  std::optional<std::uint64_t> oom_kills(SandboxEntry& sandbox);
  ApiResult<std::vector<api::SandboxInfo>> list();
  ApiResult<api::SandboxInfo> destroy(std::string_view id, std::string_view reason);
  // Destroys this node's sandboxes that the fleet marked lost (the node was
  // cut off and another marked it lost: the callers were told they are
  // gone; issue 18). Returns a line for the log.
  std::string release_lost();
  ApiResult<api::SandboxInfo> extend(std::string_view id, const api::ExtendRequest& request);
  // PUT /v1/sandboxes/{id}/network: the whole new network, applied at once
  // (open connections it no longer allows are closed) and stored.
  ApiResult<api::SandboxInfo> set_network(std::string_view id, const NetworkSpec& network);

  // A sandbox that can take work (ready or running): not_found (404) for an
  // unknown id, conflict (409) while it is being destroyed or after.
  ApiResult<std::shared_ptr<SandboxEntry>> live(std::string_view id);
  // The same, held by a request that keeps fds into the sandbox's root or
  // layer (sandbox_lease.h): a teardown waits for it. `connection`: the
  // request's connection, shut down by a teardown to cut a transfer off
  // (-1: a short operation, waited for).
  ApiResult<SandboxLease> lease(std::string_view id, int connection = -1);

  // Registers a process and sends its spawn request; the monitor fills in
  // the rest. `stdio` are the process's ends (closed here after sending).
  // `request_id` 0: a new random one. `tag`: kept with a background
  // process, in the store too (the E2B facade's commands.run tag).
  ApiResult<std::shared_ptr<ProcessEntry>> spawn(const std::shared_ptr<SandboxEntry>& sandbox,
                                                 const api::ExecRequest& request, bool background,
                                                 UniqueFd stdio[3], std::uint64_t request_id = 0,
                                                 std::optional<std::string> tag = std::nullopt);
  // Kills a process's whole group (it runs in its own session).
  void kill_process(ProcessEntry& process, int sig);
  // Processes of a sandbox (background ones and execs still running).
  std::vector<std::shared_ptr<ProcessEntry>> processes(const SandboxEntry& sandbox);
  std::shared_ptr<ProcessEntry> find_process(SandboxEntry& sandbox, std::string_view id);

  // The redactor of what leaves sandbox `id` (issue 5, S3); null when the
  // daemon has no secret service.
  std::shared_ptr<const secrets::RedactionSet> redaction(const std::string& id) const {
    return secrets_ != nullptr ? secrets_->redaction(id) : nullptr;
  }
  // The file systems of sandbox `id`'s secret files, which the file API
  // never serves (empty without a secret service or file secrets).
  Result<std::vector<dev_t>> secret_devices(const std::string& id) const {
    return secrets_ != nullptr ? secrets_->secret_devices(id) : std::vector<dev_t>{};
  }

  // Issue 15 (S4): bounds on sandbox `id`'s broker tokens while it lives
  // (SecretService::revoke_tokens / limit_token_lifetime, in
  // sandbox_secrets.cc). not_found (404) for an unknown id; a sandbox that
  // has ended has its tokens revoked already (0). Both answer how many
  // tokens they changed; both are idempotent.
  ApiResult<std::size_t> revoke_secrets(std::string_view id);
  ApiResult<std::size_t> limit_secret_lifetime(std::string_view id,
                                               std::chrono::system_clock::time_point deadline);

  // Diagnostics (REQUIREMENTS.md T1; sandbox_diagnostics_service.cc). Set
  // before start().
  void set_diagnostics(const DiagnosticsConfig& config);
  // An audit event of the network engine or the broker, seen before the
  // audit budget may drop it: refusals are counted per sandbox.
  // (A dry-run sandbox's record takes it too: X2, sandbox_dry_run.cc.)
  void observe_for_diagnostics(const nlohmann::json& event) {
    diagnostics_book_.observe(event);
    dry_run_book_.observe(event);
  }
  // GET /v1/sandboxes/{id}/diagnostics: a live sandbox's read now, a
  // destroyed one's as its teardown recorded them (until the retention
  // ends). not_found (404) for an unknown id, one of another namespace
  // than `ns`, and one whose diagnostics were pruned.
  ApiResult<nlohmann::json> diagnostics(std::string_view id, const std::string& ns);

  // Dry-run (X2, docs/dry-run.md; sandbox_dry_run.cc): GET
  // /v1/sandboxes/{id}/dry-run, what live dry-run sandbox `id` would have
  // done so far (writes read from its layer now, network, secret reads).
  // not_found (404) for an unknown id, conflict (409) for one that is not
  // a dry run or is being destroyed.
  ApiResult<nlohmann::json> dry_run_report(std::string_view id);

  // Appends an audit record after everything the journal still holds.
  void audit_now(const nlohmann::json& event);
  // Appends it through the journal (in order, without waiting).
  // `droppable`: a record a sandbox triggered, dropped (false) rather
  // than queued when the journal's queue is full (docs/audit.md).
  bool audit_async(nlohmann::json event, bool droppable = false) {
    return audit_later(std::move(event), droppable);
  }
  StateStore& store() { return store_; }
  MetricsRegistry& metrics() { return metrics_; }
  std::size_t live_count();
  // The share of serve.capacity held now: live sandboxes and creates in
  // progress (for the corral_capacity_reserved gauges).
  CapacityLedger::Totals capacity_reserved() { return registry_.capacity().reserved(); }
  // Idempotency keys with a create in progress (their locks are dropped
  // when the last create using one ends): for tests and a gauge.
  std::size_t idempotency_locks_held();
  // Teardowns started on an init's exit that have not been joined yet.
  std::size_t teardown_threads();
  // What a create's self-check looks at (daemon/self_check.h); null when
  // the daemon has no network engine or no secrets.
  NetworkService* network_service() { return network_; }
  SecretService* secret_service() { return secrets_; }
  // The daemon's `sandbox:` configuration: the base of every create.
  const SandboxSpec& defaults() const { return defaults_; }

 private:
  ApiResult<api::SandboxInfo> info_of(const SandboxRecord& record,
                                      const std::shared_ptr<SandboxEntry>& entry);
  std::shared_ptr<SandboxEntry> entry(std::string_view id);
  // Stores and audits a transition now (after what the journal holds).
  Status transition(SandboxEntry* entry, std::string_view id, SandboxState to,
                    std::string_view reason);
  // The same through the journal: for ready <-> running, on the exec path.
  void transition_later(SandboxEntry* entry, const std::string& id, SandboxState to,
                        std::string reason);
  bool audit_later(nlohmann::json event, bool droppable = false);
  // The image a spec's "image" names on this node (sandbox_image.cc): by
  // name, by digest, or by a registry reference pinned by digest, pulled
  // (from an allowed registry) when the node does not have it yet.
  ApiResult<ImageInfo> image_for(const std::string& image);
  // The steps of create() (sandbox_create.cc) and of reconcile()
  // (sandbox_reconcile.cc), each with the state its steps share.
  class Creation;
  class Reconciler;
  class ClaimBinder;  // claim_network.cc, claim_mounts.cc
  // Destroys a sandbox's host resources and records the outcome
  // (sandbox_teardown.cc).
  api::SandboxInfo teardown(const std::shared_ptr<SandboxEntry>& entry, std::string_view id,
                            std::string_view reason, bool failed);
  // Tries again what a failed teardown left (the reaper, a DELETE).
  api::SandboxInfo retry_teardown(const std::shared_ptr<SandboxEntry>& entry, std::string_view why);
  DestroyReport remove_from_host(const std::shared_ptr<SandboxEntry>& entry, std::string_view id);
  api::SandboxInfo record_teardown(const std::shared_ptr<SandboxEntry>& entry, std::string_view id,
                                   std::string_view reason, const DestroyReport& report);
  // The retries' schedule (sandbox_teardown_retry.cc): `failed_attempts`
  // 0 takes the sandbox off it.
  void schedule_teardown_retry(const std::shared_ptr<SandboxEntry>& entry, int failed_attempts);
  std::shared_ptr<SandboxEntry> failed_teardown(std::string_view id);
  void retry_due_teardowns();
  void watch(const std::shared_ptr<SandboxEntry>& entry);
  void unwatch(const SandboxEntry& entry);
  void monitor_loop();
  void reaper_loop();
  void on_reply(const std::shared_ptr<SandboxEntry>& entry, ReceivedReply reply);
  void on_init_exit(const std::shared_ptr<SandboxEntry>& entry);
  // Called with process.mu held; takes sandbox.mu (ADR 0007's order).
  void finish_process(SandboxEntry& sandbox, ProcessEntry& process);
  // A re-attached process whose end was never reported and that could
  // not be found again on the host: recorded as lost.
  void lose_process(SandboxEntry& sandbox, ProcessEntry& process, const std::string& why);
  std::string reconcile();
  // Kills and removes what a sandbox the daemon holds no LiveSandbox for
  // left on the host (its cgroup, by name, and its lock file); returns
  // what could not be removed.
  std::vector<std::string> remove_unadopted(const std::string& id, const std::string& cgroup_name);
  // Stores what a teardown found (sandbox_diagnostics_service.cc).
  void record_diagnostics(const std::shared_ptr<SandboxEntry>& entry, std::string_view reason,
                          const DestroyReport& report, bool cleaned);
  // CPU throttling and memory-limit hits of a cgroup (nullopt: unreadable),
  // and the same stashed for the record just before a teardown removes it.
  std::optional<CgroupLimitCounters> read_limits(const std::string& cgroup);
  void record_limits_before_teardown(const SandboxEntry& entry);
  // Removes stored diagnostics older than the retention, now and then.
  void prune_diagnostics();

  ServiceLimits limits_;
  SandboxSpec defaults_;
  StateStore& store_;
  AuditLog& audit_;
  SandboxFactory& factory_;
  CgroupManager& cgroups_;
  MetricsRegistry& metrics_;
  NetworkService* network_;
  SecretService* secrets_;
  volume::VolumeStore* volumes_ = nullptr;
  Claimer claimer_;
  std::atomic<std::uint64_t> pool_hits_{0}, pool_misses_{0};

  // The live entries, their capacity reservations and the idempotency
  // keys' locks; its mutex is taken after any entry's or process's mu
  // (ADR 0007).
  SandboxRegistry registry_;

  UniqueFd epoll_;
  UniqueFd wake_;  // eventfd: stop the threads
  std::atomic<bool> stopping_{false};
  std::thread monitor_;
  std::thread reaper_;
  std::mutex reaper_mu_;
  std::mutex pull_mu_;  // one image pull at a time (sandbox_image.cc); nothing under it
  std::condition_variable reaper_cv_;
  // Teardowns of sandboxes whose init exited, off the monitor thread (they
  // wait on the kernel). Tracked so that stop() joins them before what they
  // use goes (docs/adr/0007-daemon-threads.md); finished ones are joined
  // when the next one starts.
  struct TeardownThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::mutex teardowns_mu_;  // guards teardowns_; a leaf lock
  std::vector<TeardownThread> teardowns_;
  // Sandboxes whose teardown failed, out of the registry, with their
  // handles (the layer's mount fd) for the retries.
  struct FailedTeardown {
    std::shared_ptr<SandboxEntry> sandbox;
    std::chrono::steady_clock::time_point next;  // max(): only a DELETE retries
  };
  std::mutex retry_mu_;  // guards failed_teardowns_; a leaf lock
  std::map<std::string, FailedTeardown> failed_teardowns_;
  DiagnosticsConfig diagnostics_config_;
  DiagnosticsBook diagnostics_book_;
  std::chrono::steady_clock::time_point next_diagnostics_prune_{};  // the reaper's
  DryRunBook dry_run_book_;                                         // live dry-run sandboxes (X2)
  Journal journal_;  // last: drained before the rest goes
};

}  // namespace corral::daemon
