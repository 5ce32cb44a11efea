// The create stage of a task (task_runner.h): its sandbox, made with an
// idempotency key stored first, and what a replay needs recorded; and the
// sandbox a previous daemon made, found again or thrown away.
#include <chrono>
#include <optional>
#include <string>

#include "daemon/pool_service.h"
#include "daemon/task_replay.h"
#include "daemon/task_runner.h"

namespace corral::daemon {

namespace {

// Each create of a task's sandbox gets its own idempotency key, stored in
// the task's resolved_json before the create: a restarted daemon finds
// (and destroys) what a create it interrupted made, and its own create
// never gets that sandbox back.
std::string new_create_key(const TaskRecord& t) {
  return "task:" + t.id + ":" + std::to_string(t.attempt) + ":" +
         process_id_for(new_request_id()).substr(2, 8);
}

std::optional<std::string> stored_create_key(const TaskRecord& t) {
  if (t.resolved_json.empty()) return std::nullopt;
  auto j = nlohmann::json::parse(t.resolved_json, nullptr, false);
  if (!j.is_object() || !j.contains("create_key") || !j["create_key"].is_string())
    return std::nullopt;
  return j["create_key"].get<std::string>();
}

}  // namespace

void TaskService::Runner::discard_leftover_sandbox() {
  std::optional<std::string> id = task_.sandbox_id;
  if (!id) {
    auto key = stored_create_key(task_);
    if (auto found = key ? s_.store_.find_by_idempotency_key(*key)
                         : Result<std::optional<SandboxRecord>>(std::nullopt);
        found && *found)
      id = (*found)->id;
  }
  if (id) (void)s_.sandboxes_.destroy(*id, "task " + task_.id + " restarts from its start");
}

bool TaskService::Runner::create() {
  const auto t0 = Clock::now();
  std::string body = req_.sandbox_json;
  if (req_.volumes_json != "[]") {
    const auto close = body.rfind('}');
    const bool empty = body.find_first_not_of(" \t\r\n{") == close;
    body = body.substr(0, close) + (empty ? "" : ",") + "\"volumes\":" + req_.volumes_json + "}";
  }
  // Over the pool's spec when it names one (C4): its create claims from
  // the pool, under the create key's lock (a retry never claims twice).
  auto spec = parse_create_over_pool(s_.pools_, s_.sandboxes_.defaults(), body);
  if (!spec) return fail("setup", "the sandbox spec: " + spec.error().message);
  if (req_.dry_run) spec->spec.dry_run = true;  // X2: a replay is a dry run too
  // T2: what a replay needs, before the sandbox exists (docs/tasks.md
  // "Replay"): the spec as the defaults made it (secret names, never
  // values), before the lifetime is raised for this task.
  record_for_replay(*spec);
  // The sandbox outlives the command's timeout and the stages after it:
  // the reaper must not end it under a running task.
  const std::chrono::milliseconds needed(timeout_ms() + s_.config_.initialize_timeout_ms +
                                         s_.config_.collect_timeout_ms + 5 * 60'000);
  if (spec->spec.limits.max_lifetime < needed) spec->spec.limits.max_lifetime = needed;
  const std::string key = new_create_key(task_);
  resolved_["create_key"] = key;
  if (!store_resolved()) return false;
  auto made = s_.sandboxes_.create(*spec, key, task_.ns);
  s_.observe_stage(TaskStage::kCreate, Clock::now() - t0);
  if (!made) return fail("setup", "the sandbox could not be created: " + made.error().message);
  // The sandbox and the next stage in one write (a restart treats create
  // and initialize alike: task_runner.cc's resume).
  TaskUpdate u;
  u.sandbox_id = made->info.id;
  u.stage = TaskStage::kInitialize;
  if (!update(u) || active_->stopping) return false;
  auto live = s_.sandboxes_.live(made->info.id);
  if (!live) return fail("setup", "the new sandbox is gone: " + live.error().message);
  sandbox_ = *live;
  // S4: the task's broker tokens live 1.5 times its timeout at most, and
  // are revoked when it ends (end_stages), even in a kept sandbox.
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::milliseconds(timeout_ms() + timeout_ms() / 2);
  if (auto limited = s_.sandboxes_.limit_secret_lifetime(sandbox_->id, deadline); !limited)
    return fail("setup", "bounding the sandbox's broker tokens: " + limited.error().message);
  return !active_->cancel;
}

bool TaskService::Runner::reattach_sandbox() {
  if (!task_.sandbox_id) return false;
  auto live = s_.sandboxes_.live(*task_.sandbox_id);
  if (!live) return false;
  sandbox_ = *live;
  return true;
}

void TaskService::Runner::record_for_replay(const api::CreateSandboxRequest& spec) {
  resolved_["sandbox"] = nlohmann::json::parse(api::spec_to_json(spec.spec), nullptr, false);
  resolved_["image"] = image_identity(spec.spec.image);
  resolved_["argv"] = req_.argv();
  nlohmann::json env = nlohmann::json::object();
  for (const auto& [name, value] : req_.env) env[name] = value;
  resolved_["env"] = std::move(env);
  nlohmann::json secrets = nlohmann::json::array();
  for (const auto& sec : spec.spec.secrets) secrets.push_back(sec.name);
  resolved_["secret_names"] = std::move(secrets);
  resolved_["timeout_ms"] = timeout_ms();
}

}  // namespace corral::daemon
