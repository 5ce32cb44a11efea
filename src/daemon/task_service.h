// TaskService: tasks that run once (docs/tasks.md; REQUIREMENTS.md D6, C2,
// N7, F6). A task is accepted into the state store (submit_task: the id is
// the idempotency key), waits there in `queued`, and is run by one of a
// bounded pool of workers through its stages, each stored before it starts
// so that a restarted daemon knows how far it got (TaskService::Runner,
// task_runner.h; the stages' code in task_stage_*.cc):
//   create      SandboxService::create, with an idempotency key stored first
//   initialize  inputs (inline, from the object store or from a volume of the
//               task's namespace) pushed through the sandbox's confined root,
//               hashes verified
//   execute     the command as a background process (its output on the
//               sandbox's layer survives the daemon); process_id stored first
//   collect     outputs read through the confined root, hashed, stored in the
//               object store at tasks/<id>/<attempt>/outputs/<n>
//   snapshot    SnapshotService::take_sandbox (on failure, or always)
//   destroy     the sandbox is destroyed (unless keep_sandbox)
//   cleanup     the destroy's residue recorded
// Every transition is stored (update_task), audited (task.transition) and
// counted (corral_tasks_total, corral_task_duration_seconds, corral_tasks).
//
// After a kill -9 (start()): a queued task runs; a running one whose
// command never started (stage create or initialize) runs again from its
// start after its half-made sandbox is destroyed; one whose command may
// have started is re-attached when its sandbox and process survived, and
// otherwise ends failed with reason daemon_restart. A command is never run
// twice: its process id is stored before the spawn.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "api/task_model.h"
#include "daemon/api_result.h"
#include "daemon/metrics.h"
#include "daemon/task_config.h"
#include "objstore/object_store.h"
#include "store/state_store.h"
#include "store/task_record.h"

namespace corral::volume {
class VolumeStore;
}

namespace corral::daemon {

class SandboxService;
class SnapshotService;
class PoolService;
struct ProcessEntry;

class TaskService {
 public:
  // `objects` may be null: then every task that needs storage (object
  // inputs, outputs, logs) fails with storage_unavailable.
  TaskService(TaskConfig config, SandboxService& sandboxes, StateStore& store,
              objstore::ObjectStore* objects, MetricsRegistry& metrics);
  ~TaskService();

  // Resumes what a previous daemon left unfinished, then starts the
  // workers and the pruner. Returns a summary for the log.
  std::string start();
  void stop();

  struct Submitted {
    TaskRecord task;
    bool created = false;  // false: an idempotent repeat (the stored task)
    bool retried = false;  // a storage_unavailable failure started attempt + 1
  };
  // POST /v1/tasks: `body` parsed, checked against the daemon's limits and
  // sandbox defaults, stored (committed before this returns), queued.
  // `parts`: the byte parts of a multipart submit (api::parse_task_request).
  ApiResult<Submitted> submit(const std::string& ns, std::string_view body,
                              const api::TaskContentParts* parts = nullptr);
  ApiResult<TaskRecord> get(const std::string& ns, std::string_view id);
  // POST /v1/tasks/{id}/replay (T2; task_replay.cc): finished task `id` of
  // namespace `ns` run again in a fresh sandbox under a new id, from the
  // copies and the resolved spec it kept. created=false: the same explicit
  // id was replayed before with the same body (that task is returned).
  ApiResult<Submitted> replay(const std::string& ns, std::string_view id, std::string_view body);
  // Until the task is finished or `wait` passes; the task either way.
  ApiResult<TaskRecord> wait(const std::string& ns, std::string_view id,
                             std::chrono::milliseconds wait);
  ApiResult<TaskPage> list(TaskFilter filter);
  ApiResult<TaskRecord> cancel(const std::string& ns, std::string_view id);

  // The task's command output: the live files while it runs, the stored
  // copy (redacted, bounded) once it ended. `emit(stream, data)` returns
  // false to stop; `follow`: until the command ends.
  using LogSink = std::function<bool(std::string_view stream, std::string_view data)>;
  ApiResult<TaskRecord> stream_log(const std::string& ns, std::string_view id, bool follow,
                                   const LogSink& emit, const std::function<bool()>& gone);

  objstore::ObjectStore* objects() const { return objects_; }
  // Where failure snapshots go (D4); unset: a failed task records
  // snapshot_error "this daemon has no snapshot service". Before start().
  void set_snapshots(SnapshotService* snapshots) { snapshots_ = snapshots; }
  // Where inputs with "volume" are read from (the caller's namespace's
  // volumes); unset: such a task is refused at submit. Before start().
  void set_volumes(volume::VolumeStore* volumes) { volumes_ = volumes; }
  // The warm pools a task's `"sandbox": {"pool": ...}` names (C4); unset:
  // such a task is refused at submit (404). Before start().
  void set_pools(PoolService* pools) { pools_ = pools; }
  const TaskConfig& config() const { return config_; }
  // Removes finished tasks older than the retention, with their stored
  // objects; returns how many. Run by the pruner thread; public for tests.
  std::size_t prune(std::int64_t now_ms);

  // Where what tasks keep lives in the object store (outputs, logs, input
  // copies): tasks/<id>/<attempt>/...; ids never contain '/'.
  static constexpr std::string_view kTaskObjectPrefix = "tasks/";
  // The object keys of one attempt: tasks/<id>/<attempt>/...
  static std::string attempt_prefix(const TaskRecord& task);
  // The bytes of `request`'s inline inputs, moved out for the state store
  // (StateStore::submit_task); its canonical form names them by hash.
  static std::vector<TaskInputContent> take_inline_contents(api::TaskRequest& request);

  static api::TaskInfo info_of(const TaskRecord& task, bool with_request);

 private:
  class Runner;  // task_runner.h: one task through its stages
  struct Active {
    std::atomic<bool> cancel{false};
    std::atomic<bool> stopping{false};  // the daemon stops: leave the task for the next one
    std::mutex mu;                      // guards process
    std::shared_ptr<ProcessEntry> process;
  };

  void enqueue(const std::string& id);
  void worker_loop();
  void pruner_loop();
  void claimer_loop();
  // Claims queued tasks no node holds, as many as idle workers can take,
  // and queues them here. Returns how many.
  std::size_t claim_unheld();
  void run_one(const std::string& id);
  // Store, audit and count one change; notify the waiters when it ends the task.
  Result<TaskRecord> apply(const TaskRecord& before, const TaskUpdate& update);
  void observe_stage(TaskStage stage, std::chrono::steady_clock::duration took);
  std::shared_ptr<Active> active(const std::string& id);
  void notify_finished();
  std::mutex& submit_lock(std::string_view id);
  // 403 for an object input under the daemon's own prefixes that is not
  // the caller's (tasks/<id>/ of another namespace's task, snapshots/).
  std::optional<api::ApiError> check_object_input(const std::string& ns, const std::string& key,
                                                  std::size_t index);

  TaskConfig config_;
  SandboxService& sandboxes_;
  StateStore& store_;
  objstore::ObjectStore* objects_;
  MetricsRegistry& metrics_;
  SnapshotService* snapshots_ = nullptr;
  volume::VolumeStore* volumes_ = nullptr;
  PoolService* pools_ = nullptr;

  std::mutex mu_;  // guards queue_, queued_ids_, active_, cancel_requested_, stopping_
  std::condition_variable queue_cv_;
  std::deque<std::string> queue_;
  std::set<std::string> queued_ids_;
  std::map<std::string, std::shared_ptr<Active>> active_;
  std::set<std::string> cancel_requested_;  // resumed tasks cancelled before a worker took them
  bool stopping_ = false;
  std::vector<std::thread> workers_;
  std::thread pruner_;
  std::thread claimer_;
  std::condition_variable pruner_cv_;

  std::mutex finished_mu_;  // waiters of ?wait=
  std::condition_variable finished_cv_;
  std::uint64_t finished_seq_ = 0;

  // Inline input bytes of tasks just submitted, held for their runner: a
  // task that starts soon neither reads its blobs back from the state store
  // nor hashes them again (they never left this process). Bounded by
  // kHandoffBudget; beyond it, after a restart, or once a worker took the
  // task, the runner reads the stored copy and checks it (task_stage_inputs.cc).
  void hand_off(const std::string& id, std::vector<TaskInputContent> contents);
  std::vector<TaskInputContent> take_handoff(const std::string& id);
  static constexpr std::size_t kHandoffBudget = 128u << 20;
  std::mutex handoff_mu_;  // guards handoff_, handoff_bytes_
  std::map<std::string, std::vector<TaskInputContent>> handoff_;
  std::size_t handoff_bytes_ = 0;

  std::mutex replay_mu_;                     // one replay submission at a time (task_replay.cc)
  std::array<std::mutex, 64> submit_locks_;  // per-id submit guard, striped
  std::atomic<std::int64_t> queued_{0}, running_{0};
};

}  // namespace corral::daemon
