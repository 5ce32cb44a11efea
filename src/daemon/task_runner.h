// TaskService::Runner: one task through its stages (task_service.h).
// Private to the runner's files: the flow (run, resume, the last stages)
// and its bookkeeping are in task_runner.cc, each stage in its own file:
// task_stage_create.cc, task_stage_inputs.cc (initialize),
// task_stage_execute.cc, task_stage_collect.cc.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "daemon/sandbox_service.h"
#include "daemon/task_service.h"
#include "fs/confined_root.h"

namespace corral::daemon {

// A failure of a stage: the task's reason and a sentence for people.
struct StageFailure {
  std::string reason;
  std::string detail;
};

// Where a background process's output lives on its sandbox's layer (the
// names exec_api.cc uses, so GET .../processes/{pid}/output serves it too).
inline constexpr const char* kOutputDir = "corral-daemon";
inline std::string output_name(const std::string& pid, std::string_view stream) {
  return std::string(kOutputDir) + "/" + pid + "." + std::string(stream);
}

// Whether the command ran to an end of its own (its outputs are collected).
inline bool command_ended(const std::optional<StageFailure>& outcome) {
  if (!outcome) return true;
  for (const char* r : {"exit_code", "signal", "oom", "timeout", "disk_quota"})
    if (outcome->reason == r) return true;
  return false;
}

class TaskService::Runner {
 public:
  Runner(TaskService& s, TaskRecord task, std::shared_ptr<Active> active)
      : s_(s), task_(std::move(task)), active_(std::move(active)) {}

  // `held`: inline input bytes the submit handed over (TaskService::hand_off).
  void run(std::vector<TaskInputContent> held = {});

 private:
  using Clock = std::chrono::steady_clock;

  // ---- flow and bookkeeping (task_runner.cc) --------------------------------
  void run_from_start();
  void resume();
  void end_stages();
  void finish(const std::string& residue = {});
  bool to(TaskStatus status, TaskStage st, std::string why = {});
  bool stage(TaskStage st);
  bool update(const TaskUpdate& u);
  void store_outcome(TaskStage next);
  void outcome_from_stored();
  bool fail(std::string reason, std::string detail);
  std::string deadline_passed(TaskStage st, Clock::time_point deadline);
  bool store_resolved();

  // ---- create (task_stage_create.cc) ----------------------------------------
  void discard_leftover_sandbox();
  bool create();
  bool reattach_sandbox();
  void record_for_replay(const api::CreateSandboxRequest& spec);

  // ---- initialize (task_stage_inputs.cc) ------------------------------------
  bool initialize();
  std::optional<nlohmann::json> keep_input_copy(const ConfinedRoot& root, std::size_t i);
  bool restore_snapshot(const ConfinedRoot& root, uid_t owner);
  nlohmann::json* replay_restored();
  bool push_input(const ConfinedRoot& root, uid_t owner, std::size_t i);
  tl::expected<UniqueFd, StageFailure> open_volume_input(const api::TaskInput& in);

  // ---- execute (task_stage_execute.cc) --------------------------------------
  std::int64_t timeout_ms() const;
  bool execute();
  bool start_command();
  bool reattach();
  std::optional<api::SandboxUsage> usage();
  bool wait_command();
  void judge_command(std::optional<int> exit_code, std::optional<int> sig, bool timed_out,
                     bool killed, const std::string& failure);
  void write_stdin();

  // ---- collect (task_stage_collect.cc) --------------------------------------
  void collect();
  void begin_output_puts();
  std::string output_key(std::size_t i) const;
  objstore::PutOptions output_put_options(std::size_t i) const;
  std::optional<StageFailure> collect_outputs(std::vector<TaskOutputRecord>& records);
  void store_logs();

  TaskService& s_;
  TaskRecord task_;
  std::shared_ptr<Active> active_;
  api::TaskRequest req_;
  std::shared_ptr<SandboxEntry> sandbox_;
  std::shared_ptr<ProcessEntry> process_;
  UniqueFd stdin_w_;
  std::size_t stdin_off_ = 0;
  Clock::time_point exec_started_{};
  // The sandbox's OOM kills before the command (a re-attached task's is
  // unknown: its sandbox was made for it, so none).
  std::optional<std::uint64_t> oom_kills_before_;
  std::optional<StageFailure> outcome_;
  nlohmann::json resolved_ = nlohmann::json::object();  // TaskRecord::resolved_json
  // What a stage learned that a restart can do without, stored with the
  // runner's next write rather than in a write of its own: resolved_ as
  // initialize left it, the outputs collect recorded (update()).
  bool resolved_unsaved_ = false;
  std::optional<std::vector<TaskOutputRecord>> unsaved_outputs_;
  // The outputs' puts, begun while the command runs (begin_output_puts);
  // null where none could be begun. Those not used end with the runner.
  std::vector<std::unique_ptr<objstore::PendingPut>> pending_outputs_;
  std::string input_sha_;  // of the input push_input wrote last
  std::uint64_t input_size_ = 0;
};

}  // namespace corral::daemon
