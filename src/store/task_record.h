// The task state table (REQUIREMENTS.md D6, C2; docs/tasks.md): what the
// state store keeps of each task, and the statuses and transitions a task
// may take. Like sandbox_state.h, the transition table is data so that the
// store, the task service, the docs and the tests read the same edges.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace corral {

enum class TaskStatus {
  kQueued,     // accepted and stored; no sandbox yet
  kRunning,    // a stage (create .. cleanup) is under way
  kSucceeded,  // the command exited 0 and every required output was stored
  kFailed,     // see TaskRecord::reason
  kTimedOut,   // the task's timeout ended the command
  kCancelled,  // POST /v1/tasks/{id}/cancel
};

inline constexpr std::array<TaskStatus, 6> kAllTaskStatuses = {
    TaskStatus::kQueued, TaskStatus::kRunning,  TaskStatus::kSucceeded,
    TaskStatus::kFailed, TaskStatus::kTimedOut, TaskStatus::kCancelled,
};

// "queued", "running", "succeeded", "failed", "timed_out", "cancelled".
std::string_view task_status_name(TaskStatus status);
std::optional<TaskStatus> parse_task_status(std::string_view name);
// Every status but queued and running: the task's result is final.
bool is_finished(TaskStatus status);

// The stages of a running task, in order (C2). Stored with the task so
// that a restarted daemon knows how far it got.
enum class TaskStage {
  kNone,        // not started
  kCreate,      // the sandbox is being created
  kInitialize,  // inputs pushed and verified (secrets, mounts, network are the create's)
  kExecute,     // the command runs
  kCollect,     // outputs hashed and stored
  kSnapshot,    // the failure snapshot is being taken
  kDestroy,     // the sandbox is being destroyed
  kCleanup,     // the destroy's residue check
  kDone,
};
std::string_view task_stage_name(TaskStage stage);
std::optional<TaskStage> parse_task_stage(std::string_view name);

struct TaskTransitionEdge {
  TaskStatus from;
  TaskStatus to;
  std::string_view why;
};
std::span<const TaskTransitionEdge> task_transition_table();
bool task_transition_allowed(TaskStatus from, TaskStatus to);

// One collected output.
struct TaskOutputRecord {
  std::string path;      // as the task asked for it (inside the sandbox)
  bool present = false;  // false: not there (and not required)
  std::uint64_t size = 0;
  std::string sha256;      // lowercase hex
  std::string object_key;  // where it is stored in the object store
};

struct TaskRecord {
  std::string id;
  std::string ns = "default";  // the namespace of the API key that submitted it
  TaskStatus status = TaskStatus::kQueued;
  TaskStage stage = TaskStage::kNone;
  // The request as accepted, in canonical JSON (keys sorted, no spaces):
  // what an idempotent repeat is compared against.
  std::string request_json;
  // What replay needs (T2): the resolved sandbox spec, image digest, input
  // hashes and stored copies, env with secret names only. JSON; may be empty.
  std::string resolved_json;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::optional<std::string> reason;  // oom, timeout, output_missing, ...
  std::optional<std::string> detail;  // a sentence for people; never a secret
  std::optional<std::string> sandbox_id;
  std::optional<std::string> process_id;  // the command's process, for re-attach
  std::vector<TaskOutputRecord> outputs;
  std::optional<std::string> snapshot_id;
  std::optional<std::string> snapshot_error;  // why the snapshot could not be taken
  int attempt = 1;
  std::optional<std::string> replay_of;  // the task this one replays
  std::int64_t created_at_ms = 0;
  std::int64_t updated_at_ms = 0;
  std::optional<std::int64_t> started_at_ms;
  std::optional<std::int64_t> finished_at_ms;
  // The node that holds it (issue 18): the one that runs it. Empty: queued
  // for any node to claim.
  std::optional<std::string> node;
};

struct TaskTransitionRecord {
  std::int64_t id = 0;
  std::string task_id;
  std::optional<TaskStatus> from;  // empty: the row that records the submit
  TaskStatus to = TaskStatus::kQueued;
  TaskStage stage = TaskStage::kNone;
  int attempt = 1;
  std::int64_t at_ms = 0;
  std::string reason;
};

// The bytes of one inline input of a task (StateStore::submit_task).
struct TaskInputContent {
  std::size_t index = 0;  // its place in the request's inputs
  std::string sha256;     // lowercase hex of `bytes`
  std::string bytes;
};

struct TaskSubmitResult {
  TaskRecord task;
  // false: the id was submitted before with the same request; `task` is
  // that one, in whatever status it has now.
  bool created = false;
  // true: the earlier attempt had failed with a retryable reason
  // (kRetryableTaskReasons) and this submit started attempt + 1.
  bool retried = false;
};

// Reasons after which a repeat POST of the same id and body runs the task
// again (a new attempt) instead of returning the stored failure: the
// command never ran, or its result could not be kept (node_lost: its node
// was lost while the command ran; docs/fleet.md).
inline constexpr std::array<std::string_view, 2> kRetryableTaskReasons = {"storage_unavailable",
                                                                          "node_lost"};

struct TaskFilter {
  std::vector<TaskStatus> statuses;               // empty: any
  std::optional<std::string> ns;                  // empty: any namespace
  std::optional<std::int64_t> created_after_ms;   // inclusive
  std::optional<std::int64_t> created_before_ms;  // exclusive
  std::size_t limit = 100;                        // 1..1000
  // From a previous page's next_cursor: the page after it.
  std::optional<std::string> cursor;
};

struct TaskPage {
  std::vector<TaskRecord> tasks;           // newest first
  std::optional<std::string> next_cursor;  // empty: the last page
};

// What update_task changes; unset fields stay as they are. A status change
// is checked against task_transition_table() and stored with a transition
// row in the same transaction; moving to a finished status sets
// finished_at, moving to running the first time sets started_at.
struct TaskUpdate {
  std::optional<TaskStatus> status;
  std::optional<TaskStage> stage;
  std::string reason_for_transition;  // the transition row's reason
  std::optional<std::string> resolved_json;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::optional<std::string> reason;
  std::optional<std::string> detail;
  std::optional<std::string> sandbox_id;
  std::optional<std::string> process_id;
  std::optional<std::vector<TaskOutputRecord>> outputs;
  std::optional<std::string> snapshot_id;
  std::optional<std::string> snapshot_error;
  // The attempt the caller works on: refused (kPermissionDenied) when the
  // task has moved on to another (requeued from a lost node, or
  // resubmitted), so a runner that fell behind writes nothing.
  std::optional<int> attempt;
};

// The first field where two JSON documents differ, as a path
// ("outputs[1].max_size", "command", "env.PATH"; a key that is not
// [A-Za-z0-9_-]+ is quoted: env["A.B"]), or empty when they are
// equal. Objects are compared key by key in sorted order, a key present in
// one only counts as differing; arrays element by element, then by length.
// Both must be valid JSON (otherwise "" is never returned: "(document)"),
// nested at most kMaxCompareDepth deep (deeper: "(document)", never equal;
// the API's reader refuses requests nested deeper than 32 long before).
inline constexpr int kMaxCompareDepth = 64;
std::string first_differing_field(std::string_view a_json, std::string_view b_json);
// How deep `text` nests arrays and objects.
int nesting_depth(std::string_view text);

}  // namespace corral
