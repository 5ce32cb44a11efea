// One task through its stages (task_service.h): create, initialize,
// execute, collect, snapshot, destroy, cleanup; and the resume of a task
// a previous daemon left running. Each stage is stored before it starts,
// each failure ends the task with its reason (docs/tasks.md, "Reasons").
#include <cstdio>
#include <string>
#include <utility>

#include "base/json_text.h"
#include "daemon/snapshot_service.h"
#include "daemon/task_runner.h"

namespace corral::daemon {

namespace {

// The final status a stored outcome stands for (reason empty: success).
TaskStatus status_for(const std::optional<std::string>& reason) {
  if (!reason) return TaskStatus::kSucceeded;
  if (*reason == "timeout") return TaskStatus::kTimedOut;
  if (*reason == "cancelled") return TaskStatus::kCancelled;
  return TaskStatus::kFailed;
}

}  // namespace

void TaskService::Runner::run(std::vector<TaskInputContent> held) {
  auto request = api::parse_stored_task_request(task_.request_json);
  if (!request) {
    if (task_.status == TaskStatus::kQueued && !to(TaskStatus::kRunning, TaskStage::kCreate))
      return;
    outcome_ = StageFailure{"internal", "the stored request cannot be read: " +
                                            request.error().message};
    return finish();
  }
  req_ = std::move(*request);
  // Bytes this daemon hashed at submit and held since: pushed as they are
  // (push_input reads and checks the stored copy of any other).
  for (TaskInputContent& c : held) {
    if (c.index >= req_.inputs.size()) continue;
    api::TaskInput& in = req_.inputs[c.index];
    if (in.source != api::TaskInput::Source::kContent || in.content_sha256 != c.sha256) continue;
    in.content = std::move(c.bytes);
    in.content_held = true;
  }
  resolved_ = nlohmann::json::parse(task_.resolved_json, nullptr, false);
  if (!resolved_.is_object()) resolved_ = nlohmann::json::object();
  if (task_.status == TaskStatus::kQueued) {
    if (!to(TaskStatus::kRunning, TaskStage::kCreate, "a worker took it")) return;
    return run_from_start();
  }
  resume();
}

void TaskService::Runner::run_from_start() {
  if (!stage(TaskStage::kCreate) || !create()) return end_stages();
  if (!stage(TaskStage::kInitialize) || !initialize()) return end_stages();
  const bool ran = execute();
  if (ran || command_ended(outcome_) || active_->cancel) collect();
  end_stages();
}

// After a restart: how far did it get? (task_service.h)
void TaskService::Runner::resume() {
  switch (task_.stage) {
    case TaskStage::kNone:
    case TaskStage::kCreate:
    case TaskStage::kInitialize:
      // The command never started: throw away what was made, run again.
      discard_leftover_sandbox();
      return run_from_start();
    case TaskStage::kExecute:
      if (!reattach()) {
        outcome_ = StageFailure{"daemon_restart",
                                "the daemon restarted while the command ran, and its sandbox "
                                "or process did not survive; it is not run a second time"};
        return end_stages();
      }
      if (wait_command() || command_ended(outcome_) || active_->cancel) collect();
      return end_stages();
    case TaskStage::kCollect:
      // The command's end is stored with this stage (wait_command).
      outcome_from_stored();
      if (!reattach_sandbox()) {
        if (!outcome_)
          outcome_ = StageFailure{"daemon_restart",
                                  "the daemon restarted while outputs were collected, and the "
                                  "sandbox did not survive"};
        return end_stages();
      }
      if (command_ended(outcome_)) collect();
      return end_stages();
    default:
      outcome_from_stored();
      reattach_sandbox();
      return end_stages();
  }
}

// Snapshot (on failure, or always), destroy, cleanup, the final status.
void TaskService::Runner::end_stages() {
  if (active_->stopping) return;  // the next daemon resumes it
  if (active_->cancel && (!outcome_ || outcome_->reason != "timeout"))
    outcome_ = StageFailure{"cancelled", "cancelled through POST /v1/tasks/{id}/cancel"};
  const bool failed = outcome_.has_value();
  const bool snapshot = sandbox_ && req_.snapshot != "never" && (failed || req_.snapshot == "always");
  const bool destroy = sandbox_ && !req_.keep_sandbox;
  // A task without a snapshot to take goes on to its destroy in this write.
  store_outcome(snapshot || !destroy ? TaskStage::kSnapshot : TaskStage::kDestroy);
  // S4: the task is over, so are its tokens (idempotent; a destroy
  // revokes them again).
  if (sandbox_) (void)s_.sandboxes_.revoke_secrets(sandbox_->id);
  if (snapshot) {
    const auto t0 = Clock::now();
    TaskUpdate u;
    if (s_.snapshots_ == nullptr) {
      u.snapshot_error = "this daemon has no snapshot service";
    } else {
      // D4: the layer while the sandbox lives; the task's result stands
      // whatever happens here (a failure is its snapshot_error).
      auto snap = s_.snapshots_->take_sandbox(sandbox_->id, task_.id,
                                              failed ? outcome_->reason : "succeeded", {});
      if (snap) u.snapshot_id = snap->id;
      else u.snapshot_error = snap.error().message;
    }
    update(u);
    s_.observe_stage(TaskStage::kSnapshot, Clock::now() - t0);
  }
  std::string residue;
  if (destroy) {
    if (!stage(TaskStage::kDestroy)) return;
    const auto t0 = Clock::now();
    auto info = s_.sandboxes_.destroy(sandbox_->id, "task " + task_.id + " ended");
    s_.observe_stage(TaskStage::kDestroy, Clock::now() - t0);
    if (!stage(TaskStage::kCleanup)) return;
    if (!info) {
      residue = "the sandbox could not be destroyed: " + info.error().message;
    } else if (!info->residue.empty()) {
      residue = "the destroy left residue:";
      for (const auto& r : info->residue) residue += " " + r;
    }
    if (!residue.empty())
      s_.sandboxes_.audit_async(
          {{"type", "task.cleanup"}, {"task", task_.id}, {"residue", residue}});
  }
  finish(residue);
}

void TaskService::Runner::finish(const std::string& residue) {
  TaskUpdate u;
  u.status = status_for(outcome_ ? std::optional(outcome_->reason) : std::nullopt);
  u.stage = TaskStage::kDone;
  if (outcome_) {
    u.reason = outcome_->reason;
    u.detail = outcome_->detail;
  }
  if (!residue.empty()) u.detail = (outcome_ ? outcome_->detail + "; " : std::string()) + residue;
  u.reason_for_transition = outcome_ ? outcome_->reason : "succeeded";
  if (auto after = s_.apply(task_, u); after) task_ = std::move(*after);
}

bool TaskService::Runner::to(TaskStatus status, TaskStage st, std::string why) {
  TaskUpdate u;
  u.status = status;
  u.stage = st;
  u.reason_for_transition = std::move(why);
  return update(u);
}

bool TaskService::Runner::stage(TaskStage st) {
  if (active_->stopping) return false;
  // Already there (the create after "a worker took it", the collect that
  // wait_command stored with the command's end): no write, no transition.
  if (task_.stage == st) return true;
  TaskUpdate u;
  u.stage = st;
  return update(u);
}

bool TaskService::Runner::update(const TaskUpdate& u) {
  const TaskUpdate* write = &u;
  TaskUpdate with_unsaved;
  if ((resolved_unsaved_ && !u.resolved_json) || (unsaved_outputs_ && !u.outputs)) {
    with_unsaved = u;
    if (resolved_unsaved_ && !u.resolved_json) with_unsaved.resolved_json = json_text(resolved_);
    if (unsaved_outputs_ && !u.outputs) with_unsaved.outputs = unsaved_outputs_;
    write = &with_unsaved;
  }
  auto after = s_.apply(task_, *write);
  if (!after) {
    fprintf(stderr, "corral serve: task %s: storing its state failed: %s\n", task_.id.c_str(),
            after.error().message.c_str());
    return false;
  }
  task_ = std::move(*after);
  if (write->resolved_json) resolved_unsaved_ = false;
  if (write->outputs) unsaved_outputs_.reset();
  return true;
}

// The outcome so far, stored before the last stages so that a resumed
// task ends with it.
void TaskService::Runner::store_outcome(TaskStage next) {
  TaskUpdate u;
  u.stage = next;
  if (outcome_) {
    u.reason = outcome_->reason;
    u.detail = outcome_->detail;
  }
  update(u);
}

void TaskService::Runner::outcome_from_stored() {
  if (task_.reason) outcome_ = StageFailure{*task_.reason, task_.detail.value_or("")};
}

bool TaskService::Runner::fail(std::string reason, std::string detail) {
  outcome_ = StageFailure{std::move(reason), std::move(detail)};
  return false;
}

std::string TaskService::Runner::deadline_passed(TaskStage st, Clock::time_point deadline) {
  if (Clock::now() < deadline) return {};
  return "the " + std::string(task_stage_name(st)) + " stage took longer than its timeout";
}

bool TaskService::Runner::store_resolved() {
  TaskUpdate u;
  u.resolved_json = json_text(resolved_);
  return update(u);
}

void TaskService::run_one(const std::string& id) {
  std::vector<TaskInputContent> held = take_handoff(id);
  auto a = active(id);
  auto t = store_.get_task(id);
  if (!a || !t || is_finished(t->status)) return;  // cancelled while queued, or pruned
  Runner(*this, std::move(*t), std::move(a)).run(std::move(held));
}

}  // namespace corral::daemon
