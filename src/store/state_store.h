// StateStore: the daemon's durable state (sandboxes, their transitions and
// processes) in one SQLite database in WAL mode. See docs/adr/0003-state-store.md.
//
// Every write is one transaction committed with synchronous=FULL before the
// call returns: what a method acknowledged survives a kill -9 of the daemon
// (and a power cut). A state change is checked against transition_table()
// and stored with its transition row in the same transaction.
//
// One connection, guarded by a mutex: safe to share between threads.
// Times are unix milliseconds.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "store/node_record.h"
#include "store/placement.h"
#include "store/sandbox_state.h"
#include "store/task_record.h"

namespace corral {

struct SandboxRecord {
  std::string id;
  SandboxState state = SandboxState::kCreating;
  std::string spec_json;  // canonical form (keys sorted, no spaces)
  std::optional<std::string> idempotency_key;
  std::optional<std::int64_t> host_uid_base;
  std::optional<std::string> cgroup;
  std::int64_t created_at_ms = 0;
  std::int64_t updated_at_ms = 0;
  std::optional<std::int64_t> expires_at_ms;
  std::optional<std::string> error;         // reason of the last move to kFailed
  std::optional<std::string> runtime_json;  // the daemon's re-attach data (init pid, ...)
  // The node that made it and owns its host resources (issue 18).
  std::string node;
  // When its node was marked lost (node_record.h): reported lost, and
  // destroyed by its node if that comes back.
  std::optional<std::int64_t> lost_at_ms;
};

struct TransitionRecord {
  std::int64_t id = 0;  // increases with time: orders transitions across sandboxes
  std::string sandbox_id;
  std::optional<SandboxState> from;  // empty for the row that records creation
  SandboxState to = SandboxState::kCreating;
  std::int64_t at_ms = 0;
  std::string reason;
};

enum class ProcessState {
  kStarting,  // requested, not yet confirmed running by PID 1
  kRunning,
  kExited,  // ended: exit_code or signal is set
  kLost,    // its end was never observed (daemon restarted, sandbox gone)
};

std::string_view process_state_name(ProcessState state);
std::optional<ProcessState> parse_process_state(std::string_view name);

struct ProcessRecord {
  std::string id;
  std::string sandbox_id;
  std::vector<std::string> argv;
  ProcessState state = ProcessState::kStarting;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::int64_t started_at_ms = 0;
  std::optional<std::int64_t> ended_at_ms;
  // Its timeout as a unix-ms deadline (empty: none recorded).
  std::optional<std::int64_t> deadline_at_ms;
  // Who it is on the host, recorded once it runs (set_process_host), so
  // that a restarted daemon can find and signal it again: its pid in the
  // host's pid namespace and its start time (/proc/<pid>/stat field 22,
  // clock ticks since boot), which tells it from a later process that got
  // the same pid.
  std::optional<std::int64_t> host_pid;
  std::optional<std::uint64_t> host_start_time;
  // Ended by its timeout (marked before the kill: an exit a restarted
  // daemon learns of later is still known to be the timeout's).
  bool timed_out = false;
  // The tag it was started with (E2B's commands.run tag); empty: none.
  std::optional<std::string> tag;
};

// A destroyed sandbox's diagnostics as stored (docs/operations.md).
struct DiagnosticsRecord {
  std::string sandbox_id;
  std::string ns;  // the namespace that created the sandbox
  std::int64_t recorded_at_ms = 0;
  std::string diagnostics_json;  // a JSON object
};

// A warm pool made through the API (C4; pool_table.cc), rebuilt at start.
struct PoolRecord {
  std::string name;
  std::string settings_json;  // a JSON object: {name, min, max, idle_limit_ms, sandbox}
  std::int64_t created_at_ms = 0;
};

struct CreateResult {
  SandboxRecord sandbox;
  bool created = false;  // false: an earlier request with the same idempotency key
  // created with a key that an earlier, never acknowledged create held:
  // that sandbox's id (it no longer holds the key).
  std::optional<std::string> key_taken_from;
};

class StateStore {
 public:
  static constexpr int kSchemaVersion = 15;

  // What an acknowledged write survives. kPowerLoss: synchronous=FULL, every
  // commit is fsync'd before the call returns. kProcessCrash:
  // synchronous=NORMAL in WAL mode, every commit is in the file (page
  // cache) before the call returns, so a kill -9 of the daemon loses
  // nothing; a power cut may lose the commits since the last checkpoint
  // (docs/adr/0003-state-store.md: sandboxes live in RAM and do not survive
  // a power cut either).
  enum class Durability { kPowerLoss, kProcessCrash };

  // Opens (creating if needed, mode 0600) the database at `path` and brings
  // its schema to kSchemaVersion. Refuses a database written by a newer corral.
  static Result<StateStore> open(const std::string& path);  // kPowerLoss
  static Result<StateStore> open(const std::string& path, Durability durability);
  // `path` may be a postgres:// URL (issue 18, ADR 0020): the same tables
  // in a PostgreSQL database that several daemons share. Durability is the
  // server's (synchronous_commit); inline task inputs live in the database.
  static Result<StateStore> open_postgres(const std::string& url);

  StateStore(StateStore&&) noexcept;
  StateStore& operator=(StateStore&&) noexcept;
  ~StateStore();

  const std::string& path() const;

  // Inserts a sandbox in kCreating, with its creation transition row.
  // With an idempotency key that was used before: another spec is
  // kAlreadyExists; the same spec returns the existing sandbox
  // (created=false, whatever its state), unless that sandbox no longer
  // holds the key (idempotency_key_released): then the key moves to the
  // new sandbox, in the same transaction (key_taken_from names the old).
  // `spec_json` must be a JSON value; it is compared and stored in
  // canonical form.
  // `placement` (a create placed by another node, or by this one) is the
  // placement row this sandbox fills: removed in the same transaction, so
  // that the fleet never counts the sandbox twice nor not at all.
  Result<CreateResult> create_sandbox(std::string_view id, std::string_view spec_json,
                                      std::optional<std::string_view> idempotency_key,
                                      std::optional<std::int64_t> expires_at_ms,
                                      std::optional<std::string_view> placement = std::nullopt);

  // Moves a sandbox to `to` if transition_allowed(current, to), in one
  // transaction with its transition row. Moving to kFailed stores `reason`
  // as the sandbox's error.
  Result<TransitionRecord> transition(std::string_view id, SandboxState to,
                                      std::string_view reason);

  // Records the host resources of a sandbox (known after the create stage).
  Status set_resources(std::string_view id, std::optional<std::int64_t> host_uid_base,
                       std::optional<std::string_view> cgroup);

  // Records what the daemon needs to re-attach to a live sandbox.
  Status set_runtime(std::string_view id, std::string_view runtime_json);
  // Moves a sandbox's lifetime deadline (POST /v1/sandboxes/{id}/timeout).
  Status set_expiry(std::string_view id, std::int64_t expires_at_ms);
  // A warm pool's sandbox handed to a caller (C4, ADR 0015): the claim's
  // spec and expiry, and the pool's marker key replaced by the claim's
  // idempotency key (or none), in one write.
  Status set_claimed(std::string_view id, std::string_view spec_json, std::int64_t expires_at_ms,
                     std::optional<std::string_view> idempotency_key);

  Result<SandboxRecord> get(std::string_view id);
  // The sandbox created with this idempotency key, if any.
  Result<std::optional<SandboxRecord>> find_by_idempotency_key(std::string_view key);
  // Whether the create that made `sandbox` was never acknowledged, so that
  // a retry with its key makes a new sandbox (docs/api.md, Idempotency):
  // true when it ended (destroying, cleaned or failed) without ever being
  // stored ready. The daemon answers 201 only after `ready` is stored, so
  // such a create was answered with an error or not at all (the daemon
  // died and reconcile destroyed the sandbox).
  Result<bool> idempotency_key_released(const SandboxRecord& sandbox);
  // Sandboxes in any of `states` (all of them when empty), oldest first.
  Result<std::vector<SandboxRecord>> list(std::span<const SandboxState> states = {});
  // The transitions of one sandbox, in the order they happened.
  Result<std::vector<TransitionRecord>> transitions(std::string_view id);

  Status add_process(const ProcessRecord& process);
  // Sets state, exit code and signal; a move to kExited or kLost also sets
  // ended_at (to `ended_at_ms`, or now). `timed_out` marks it ended by its
  // timeout; a mark is never taken back.
  Status update_process(std::string_view id, ProcessState state, std::optional<int> exit_code,
                        std::optional<int> signal, bool timed_out = false,
                        std::optional<std::int64_t> ended_at_ms = std::nullopt);
  // Marks a process that has not ended as killed by its timeout (before
  // the kill). kNotFound for an unknown id; kInvalidArgument once ended.
  Status mark_process_timed_out(std::string_view id);
  // Records the host pid and start time of a process that runs, and moves
  // it from starting to running, in one transaction. kNotFound for an
  // unknown id; kInvalidArgument once it has ended.
  Status set_process_host(std::string_view id, std::int64_t host_pid,
                          std::uint64_t host_start_time);
  Result<std::vector<ProcessRecord>> list_processes(std::string_view sandbox_id);

  // This node's sandboxes that may still hold host resources (every state
  // but kCleaned, so kFailed ones too): what the daemon reconciles on
  // restart. Those with lost_at_ms are no longer the node's to keep.
  Result<std::vector<SandboxRecord>> sandboxes_to_reconcile();
  // This node's live sandboxes (creating, initializing, ready, running)
  // whose expires_at is at or before `now_ms`: what the lifetime reaper
  // destroys.
  Result<std::vector<SandboxRecord>> expired(std::int64_t now_ms);

  // ---- Tasks (docs/tasks.md; implemented in task_table.cc) ----

  // Stores a new task in kQueued with its submit transition row, or finds
  // the one stored under `task.id`: the same request (canonical JSON
  // equal) returns it (created=false), or, when it failed with a reason in
  // kRetryableTaskReasons, moves it back to kQueued with attempt + 1
  // (retried=true); another request is kAlreadyExists whose message names
  // first_differing_field() ("task X exists with another request: field
  // outputs[0].max_size differs"). The id is unique across namespaces: a
  // task of another namespace is kAlreadyExists ("exists in another
  // namespace") without its request. A retry empties the per-attempt
  // fields (stage, sandbox, process, result, outputs, snapshot, started /
  // finished) and takes `task.resolved_json`; its transition row keeps the
  // failure's reason. `task.id` must be 1-128 of [A-Za-z0-9._:-];
  // `task.request_json` must be JSON; it is stored in canonical form. Only
  // id, ns, request_json, resolved_json and replay_of of `task` are used.
  // `inputs`: the bytes of the request's inline inputs, stored with a new
  // task in the same transaction (a repeat or a retry keeps the first ones,
  // which its equal request names by the same sha256).
  Result<TaskSubmitResult> submit_task(const TaskRecord& task,
                                       const std::vector<TaskInputContent>& inputs = {});
  // The bytes of inline input `index` of a task, as submitted; kNotFound
  // when the task has none there.
  Result<TaskInputContent> task_input_content(std::string_view id, std::size_t index);
  Result<TaskRecord> get_task(std::string_view id);  // kNotFound for an unknown id
  // Newest first by (created_at, id). A limit outside 1..1000, or a cursor
  // this store did not make, is kInvalidArgument.
  Result<TaskPage> list_tasks(const TaskFilter& filter);
  // Applies `update` in one transaction; returns the task as stored after.
  // A status change not in task_transition_table() is kInvalidArgument, and
  // so is a move to queued (only submit_task starts an attempt); a status
  // equal to the current one is no change. A change of status or of stage
  // writes one transition row (a stage change alone: from == to). Fields
  // of a finished task can still be set (a snapshot after the result).
  Result<TaskRecord> update_task(std::string_view id, const TaskUpdate& update);
  // Queued and running tasks this node claimed, oldest first: what a
  // restarted daemon resumes.
  Result<std::vector<TaskRecord>> unfinished_tasks();
  Result<std::vector<TaskTransitionRecord>> task_transitions(std::string_view id);
  // Finished tasks whose finished_at is before `before_ms`, oldest first, at
  // most `limit`: what the pruner removes.
  Result<std::vector<TaskRecord>> finished_tasks_before(std::int64_t before_ms, std::size_t limit);
  // Removes a finished task and its transition rows (kInvalidArgument for
  // one that is not finished).
  Status delete_task(std::string_view id);

  // Claims for this node up to `limit` queued tasks that no node holds
  // (submitted elsewhere and given up, requeued from a lost node, or stored
  // before nodes existed), oldest first; returns their ids. On PostgreSQL
  // the rows are chosen FOR UPDATE SKIP LOCKED, so that nodes claiming at
  // once each get other tasks; a task is claimed by one node only.
  Result<std::vector<std::string>> claim_queued_tasks(std::size_t limit);

  // ---- Nodes of a fleet (issue 18; node_table.cc, node_record.h) ----

  // The node this store writes for ("local" until set; a daemon sets it
  // once, before its first write): new sandboxes and submitted tasks are
  // stamped with it; reconcile, expired() and unfinished_tasks() read its
  // rows only; a task moves to running only on the node that holds it
  // (update_task: kPermissionDenied on another).
  // kInvalidArgument for an id valid_node_id() refuses.
  Status set_node(std::string_view id);
  const std::string& node() const;
  // True on PostgreSQL: other daemons may share the store (a fleet).
  bool shared() const;
  // Registers this store's node (registration.id must be node()): a new
  // row, or the same id's next incarnation, live again with a heartbeat
  // now. Returns the record as stored. kAlreadyExists when another daemon
  // is live as this node (NodeRegistration::instance, live_within_ms).
  Result<NodeRecord> register_node(const NodeRegistration& registration);
  // For a daemon before it reconciles (which would take another daemon's
  // sandboxes for its own): the same check, and a claim on the id in the
  // same transaction (node_claims: this instance, now), which a second
  // daemon's claim is refused by until this one registers or its claim is
  // older than live_within_ms. One statement decides between daemons that
  // claim at once, on both backends. register_node refuses to register a
  // daemon whose claim another has taken over since; leave() drops it.
  Status claim_node(const NodeRegistration& registration);
  // Keeps this daemon's claim fresh while it reconciles (a reconcile longer
  // than live_within_ms would otherwise let another daemon take the id).
  // kAlreadyExists when the claim is no longer this daemon's.
  Status renew_claim(const NodeRegistration& registration);
  // Cordons node `id` (or lifts it): a cordoned node is placed no creates
  // and claims no queued tasks, while what it runs keeps running and its
  // calls are still served; it stays cordoned across restarts until lifted.
  // Returns the record; kNotFound for an unknown id.
  Result<NodeRecord> set_node_cordoned(std::string_view id, bool cordoned);
  // Records a heartbeat of this node, and reads whether it is cordoned.
  // kPermissionDenied when the node is not live (another node marked it
  // lost, or it left): what it owned is no longer its own; the daemon
  // reconciles and registers again.
  Result<NodeBeat> heartbeat();
  // Marks this node left (a drained stop): no sweep marks it lost; the
  // queued tasks it held are released for other nodes to claim.
  Status leave();
  Result<std::vector<NodeRecord>> list_nodes();
  Result<NodeRecord> get_node(std::string_view id);  // kNotFound for an unknown id
  // Marks lost every live node but this one whose last heartbeat is older
  // than now_ms - lost_after_ms, and in the same transaction handles what
  // such nodes held (LostNodeSweep): their sandboxes that are not cleaned
  // get lost_at; their tasks whose command had not started (queued, or
  // running before the execute stage) go back to queued as the next
  // attempt with no node; those whose command had started fail with
  // reason node_lost. Tasks still held by a lost node are handled by the
  // next sweep too (a sweep that died half way is finished by another).
  // Ages are measured on the fleet's clock: the database server's on
  // PostgreSQL, which stamps heartbeats too, so a node whose clock runs
  // ahead or behind neither marks the others lost early nor escapes late.
  Result<LostNodeSweep> sweep_lost_nodes(std::int64_t lost_after_ms);
  // The same as at time `at` of the fleet's clock (tests: a sweep in the
  // future).
  Result<LostNodeSweep> sweep_lost_nodes(std::optional<std::int64_t> at,
                                         std::int64_t lost_after_ms);

  // ---- Placement of creates across nodes (issue 18; placement_table.cc) ----

  // Chooses the live node a new sandbox goes to (store/placement.h) and
  // holds the choice in a placement row, in one write transaction: a node
  // that matches the request and has room for it, the one with the most
  // free room for its size first (this node on a tie). `share_of` reads the
  // share of each stored sandbox. A Placement with no id when none fits
  // (`refused` says why of each node).
  Result<Placement> place_sandbox(const PlacementRequest& request, const ShareOfSpec& share_of);
  // Drops a placement (its create ended, stored or not); an unknown id is
  // not an error.
  Status release_placement(std::string_view id);

  // ---- Diagnostics of destroyed sandboxes (T1; diagnostics_table.cc) ----

  // Stores (or replaces) sandbox `sandbox_id`'s diagnostics, a JSON object,
  // as recorded at `recorded_at_ms` by namespace `ns`'s sandbox.
  Status put_diagnostics(const DiagnosticsRecord& record);
  // nullopt when none is stored (never recorded, or pruned).
  Result<std::optional<DiagnosticsRecord>> get_diagnostics(std::string_view sandbox_id);
  // Removes the rows recorded before `before_ms`; returns how many.
  Result<std::size_t> prune_diagnostics(std::int64_t before_ms);

  // ---- Warm pools made through the API (C4; pool_table.cc) ----

  // Stores a new pool; kAlreadyExists when its name is stored already.
  Status put_pool(const PoolRecord& record);
  // Removes pool `name`'s row; false when there was none.
  Result<bool> delete_pool(std::string_view name);
  // Every stored pool, by name.
  Result<std::vector<PoolRecord>> list_pools();

  // "ok", or what PRAGMA integrity_check reports.
  Result<std::string> integrity_check();
  // The value of a read-only PRAGMA (journal_mode, synchronous, foreign_keys,
  // user_version, busy_timeout), for diagnostics and tests.
  Result<std::string> pragma(std::string_view name);

  static std::int64_t now_ms();

 private:
  struct Db;
  explicit StateStore(std::unique_ptr<Db> db);
  std::unique_ptr<Db> db_;
};

}  // namespace corral
