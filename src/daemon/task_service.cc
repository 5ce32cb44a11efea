// TaskService (task_service.h): submit, read, wait, cancel, the worker
// pool, the resume after a restart and the pruner. One task through its
// stages is TaskService::Runner (task_runner.h): the flow in task_runner.cc,
// each stage in a task_stage_*.cc.
#include "daemon/task_service.h"

#include <signal.h>

#include <algorithm>
#include <functional>

#include "base/json_text.h"
#include "daemon/pool_service.h"
#include "daemon/sandbox_service.h"
#include "snapshot/snapshot_store.h"
#include "volume/volume_store.h"

namespace corral::daemon {

namespace {

api::ApiError not_found(std::string_view id) {
  return api::make_api_error(api::ApiErrorCode::kNotFound, "no task \"" + std::string(id) + "\"",
                             "", "list them with GET /v1/tasks");
}

// "effective" sandbox body: the task's "sandbox" with its "volumes" added.
std::string sandbox_body(const api::TaskRequest& request) {
  if (request.volumes_json == "[]") return request.sandbox_json;
  std::string body = request.sandbox_json;
  const auto close = body.rfind('}');
  const bool empty = body.find_first_not_of(" \t\r\n{") == close;
  return body.substr(0, close) + (empty ? "" : ",") + "\"volumes\":" + request.volumes_json + "}";
}

}  // namespace

TaskService::TaskService(TaskConfig config, SandboxService& sandboxes, StateStore& store,
                         objstore::ObjectStore* objects, MetricsRegistry& metrics)
    : config_(std::move(config)),
      sandboxes_(sandboxes),
      store_(store),
      objects_(objects),
      metrics_(metrics) {
  if (config_.workers == 0) config_.workers = 1;
  for (const char* status : {"queued", "running"}) {
    metrics_.gauge_fn("corral_tasks", "Tasks queued or running now",
                      [this, queued = std::string_view(status) == "queued"] {
                        std::lock_guard lock(mu_);
                        return static_cast<double>(queued ? queue_.size() : active_.size());
                      },
                      {{"status", status}});
  }
}

TaskService::~TaskService() { stop(); }

std::string TaskService::attempt_prefix(const TaskRecord& task) {
  return std::string(kTaskObjectPrefix) + task.id + "/" + std::to_string(task.attempt);
}

std::string TaskService::start() {
  std::size_t resumed = 0;
  if (auto unfinished = store_.unfinished_tasks(); unfinished) {
    for (const TaskRecord& t : *unfinished) {
      enqueue(t.id);
      ++resumed;
    }
  }
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
  }
  for (unsigned i = 0; i < config_.workers; ++i) workers_.emplace_back([this] { worker_loop(); });
  pruner_ = std::thread([this] { pruner_loop(); });
  claimer_ = std::thread([this] { claimer_loop(); });
  return std::to_string(resumed) + " unfinished tasks resumed, " + std::to_string(config_.workers) +
         " task workers";
}

void TaskService::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    // A running task's command keeps running in its sandbox: the next
    // daemon re-attaches to it (task_service.h).
    for (auto& [id, a] : active_) a->stopping = true;
  }
  queue_cv_.notify_all();
  pruner_cv_.notify_all();
  for (auto& w : workers_)
    if (w.joinable()) w.join();
  workers_.clear();
  if (pruner_.joinable()) pruner_.join();
  if (claimer_.joinable()) claimer_.join();
}

std::mutex& TaskService::submit_lock(std::string_view id) {
  return submit_locks_[std::hash<std::string_view>()(id) % submit_locks_.size()];
}

// The daemon's own objects are not a task's inputs by key: what a task
// kept under tasks/<id>/ (its outputs, logs, input copies) is only for a
// task of the same namespace, and snapshots/ (archives of other sandboxes'
// files) never; a replay reads them (D2, F4: nothing crosses namespaces).
std::optional<api::ApiError> TaskService::check_object_input(const std::string& ns,
                                                             const std::string& key,
                                                             std::size_t index) {
  const std::string field = "inputs[" + std::to_string(index) + "].object";
  const std::string tasks(kTaskObjectPrefix), snapshots(snapshot::kSnapshotObjectPrefix);
  auto forbidden = [&](std::string why) {
    return api::make_api_error(api::ApiErrorCode::kForbidden, field + ": " + why, field,
                               "name an object of your own, outside the daemon's " + tasks +
                                   " and " + snapshots +
                                   " prefixes; replay a task to run on what it kept");
  };
  if (key.starts_with(snapshots)) return forbidden(snapshots + " holds the daemon's snapshots");
  if (!key.starts_with(tasks)) return std::nullopt;
  const std::string_view rest = std::string_view(key).substr(tasks.size());
  const std::string id(rest.substr(0, rest.find('/')));
  auto owner = store_.get_task(id);
  if (!owner || owner->ns != ns)
    return forbidden(tasks + " holds what tasks kept, and " + key +
                     " is not under a task of yours");
  return std::nullopt;
}

std::vector<TaskInputContent> TaskService::take_inline_contents(api::TaskRequest& request) {
  std::vector<TaskInputContent> contents;
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    api::TaskInput& in = request.inputs[i];
    if (in.source == api::TaskInput::Source::kContent && in.content_held)
      contents.push_back({i, in.content_sha256, std::move(in.content)});
  }
  return contents;
}

ApiResult<TaskService::Submitted> TaskService::submit(const std::string& ns, std::string_view body,
                                                      const api::TaskContentParts* parts) {
  auto request = api::parse_task_request(body, config_.max_body, parts);
  if (!request) return api_fail(request.error());
  if (request->timeout_ms && *request->timeout_ms > config_.max_timeout_ms)
    return api_fail(api::ApiErrorCode::kInvalidValue,
                    "timeout: at most " + std::to_string(config_.max_timeout_ms / 1000) +
                        " s (serve.tasks.max_timeout)",
                    "timeout");
  for (std::size_t i = 0; i < request->inputs.size(); ++i) {
    const api::TaskInput& in = request->inputs[i];
    if (in.source == api::TaskInput::Source::kObject) {
      if (auto refused = check_object_input(ns, in.object_key, i)) return tl::unexpected(*refused);
      continue;
    }
    if (in.source != api::TaskInput::Source::kVolume) continue;
    const std::string field = "inputs[" + std::to_string(i) + "].volume";
    if (volumes_ == nullptr)
      return api_fail(api::ApiErrorCode::kInvalidValue,
                      field +
                          ": volume inputs need the volume service, which this daemon does "
                          "not have",
                      field, "push the file as \"content\" or from \"object\"");
    // Another namespace's volume is 403 now, as for a sandbox's mounts; one
    // that does not exist (yet) fails the task with input_missing when it
    // runs, like a missing object.
    if (auto v = volumes_->get(ns, in.volume); !v && v.error().code == ErrorCode::kPermissionDenied)
      return api_fail(api::ApiErrorCode::kForbidden, field + ": " + v.error().message, field,
                      v.error().hint);
  }
  // The sandbox spec is checked now, against the daemon's defaults, so that
  // a spec the daemon would refuse is a 400, not a failed task.
  if (auto spec = parse_create_over_pool(pools_, sandboxes_.defaults(), sandbox_body(*request));
      !spec) {
    api::ApiError e = spec.error();
    e.field = e.field.empty() ? "sandbox" : "sandbox." + e.field;
    e.message = "sandbox: " + e.message;
    return tl::unexpected(e);
  }
  TaskRecord record;
  record.id = request->id;
  record.ns = ns;
  record.request_json = api::to_canonical_json(*request);
  std::lock_guard guard(submit_lock(record.id));
  std::vector<TaskInputContent> contents = take_inline_contents(*request);
  auto submitted = store_.submit_task(record, contents);
  if (!submitted) {
    if (submitted.error().code != ErrorCode::kAlreadyExists) return api_fail(submitted.error());
    auto stored = store_.get_task(record.id);
    if (stored && stored->ns != ns)
      return api_fail(api::ApiErrorCode::kConflict,
                      "task id \"" + record.id + "\" is taken; choose another id", "id");
    std::string field =
        stored ? first_differing_field(stored->request_json, record.request_json) : std::string();
    // Bytes are compared by their hash; the client sent "content".
    for (std::string_view hashed : {".content_sha256", ".content_size"})
      if (field.ends_with(hashed))
        field.replace(field.size() - hashed.size(), hashed.size(), ".content");
    return api_fail(api::ApiErrorCode::kConflict,
                    "task " + record.id + " exists with another request" +
                        (field.empty() ? std::string() : ": field " + field + " differs"),
                    field, "use a new id for a different task");
  }
  if (submitted->task.ns != ns) {
    // An idempotent repeat from another namespace: the id is not its own.
    return api_fail(api::ApiErrorCode::kConflict,
                    "task id \"" + record.id + "\" is taken; choose another id", "id");
  }
  if (submitted->created || submitted->retried) {
    sandboxes_.audit_async({{"type", "task.submitted"},
                            {"task", record.id},
                            {"ns", ns},
                            {"attempt", submitted->task.attempt},
                            {"retry", submitted->retried}});
    hand_off(record.id, std::move(contents));
    enqueue(record.id);
  }
  return Submitted{std::move(submitted->task), submitted->created, submitted->retried};
}

ApiResult<TaskRecord> TaskService::get(const std::string& ns, std::string_view id) {
  if (!api::valid_task_id(id)) return tl::unexpected(not_found(id));
  auto t = store_.get_task(id);
  if (!t) {
    if (t.error().code == ErrorCode::kNotFound) return tl::unexpected(not_found(id));
    return api_fail(t.error());
  }
  if (t->ns != ns) return tl::unexpected(not_found(id));
  return std::move(*t);
}

ApiResult<TaskRecord> TaskService::wait(const std::string& ns, std::string_view id,
                                        std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    std::uint64_t seq;
    {
      std::lock_guard lock(finished_mu_);
      seq = finished_seq_;
    }
    auto t = get(ns, id);
    if (!t || is_finished(t->status) || std::chrono::steady_clock::now() >= deadline) return t;
    std::unique_lock lock(finished_mu_);
    finished_cv_.wait_until(lock, deadline, [&] { return finished_seq_ != seq; });
  }
}

ApiResult<TaskPage> TaskService::list(TaskFilter filter) {
  auto page = store_.list_tasks(filter);
  if (!page) return api_fail(page.error());
  return std::move(*page);
}

ApiResult<TaskRecord> TaskService::cancel(const std::string& ns, std::string_view id) {
  auto t = get(ns, id);
  if (!t) return t;
  std::shared_ptr<Active> a;
  {
    // Under mu_: a worker takes a task only after registering it here, so
    // either the runner sees the flag or the task is cancelled while queued.
    std::lock_guard lock(mu_);
    auto it = active_.find(t->id);
    if (it == active_.end()) {
      auto now = store_.get_task(t->id);
      if (!now) return api_fail(now.error());
      if (now->status != TaskStatus::kQueued) {
        if (is_finished(now->status))
          return api_fail(
              api::ApiErrorCode::kConflict,
              "task " + now->id + " is already " + std::string(task_status_name(now->status)),
              "status");
        // Running but not held by a worker: a resume after a restart is
        // queued for it; the worker that takes it sees the cancel.
        cancel_requested_.insert(now->id);
        return std::move(*now);
      }
      TaskUpdate u;
      u.status = TaskStatus::kCancelled;
      u.stage = TaskStage::kDone;
      u.reason = "cancelled";
      u.detail = "cancelled before it started";
      u.reason_for_transition = "POST /v1/tasks/{id}/cancel";
      auto done = apply(*now, u);
      queued_ids_.erase(now->id);
      std::erase(queue_, now->id);
      (void)take_handoff(now->id);
      if (!done) return api_fail(done.error());
      return std::move(*done);
    }
    a = it->second;
  }
  // Its runner may have stored the end already and not yet let go of it.
  if (is_finished(t->status))
    return api_fail(api::ApiErrorCode::kConflict,
                    "task " + t->id + " is already " + std::string(task_status_name(t->status)),
                    "status");
  a->cancel = true;
  std::shared_ptr<ProcessEntry> p;
  {
    std::lock_guard lock(a->mu);
    p = a->process;
  }
  if (p) sandboxes_.kill_process(*p, SIGKILL);
  return get(ns, id);
}

// ---- the pool -----------------------------------------------------------

void TaskService::hand_off(const std::string& id, std::vector<TaskInputContent> contents) {
  std::size_t bytes = 0;
  for (const auto& c : contents) bytes += c.bytes.size();
  if (bytes == 0) return;
  std::lock_guard lock(handoff_mu_);
  if (auto old = handoff_.find(id); old != handoff_.end()) {  // a retry's
    for (const auto& c : old->second) handoff_bytes_ -= c.bytes.size();
    handoff_.erase(old);
  }
  if (handoff_bytes_ + bytes > kHandoffBudget) return;  // read back from the store
  handoff_bytes_ += bytes;
  handoff_.emplace(id, std::move(contents));
}

std::vector<TaskInputContent> TaskService::take_handoff(const std::string& id) {
  std::lock_guard lock(handoff_mu_);
  auto it = handoff_.find(id);
  if (it == handoff_.end()) return {};
  std::vector<TaskInputContent> taken = std::move(it->second);
  handoff_.erase(it);
  for (const auto& c : taken) handoff_bytes_ -= c.bytes.size();
  return taken;
}

void TaskService::enqueue(const std::string& id) {
  {
    std::lock_guard lock(mu_);
    if (!queued_ids_.insert(id).second) return;
    queue_.push_back(id);
  }
  queue_cv_.notify_one();
}

std::shared_ptr<TaskService::Active> TaskService::active(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = active_.find(id);
  return it == active_.end() ? nullptr : it->second;
}

void TaskService::worker_loop() {
  for (;;) {
    std::string id;
    std::shared_ptr<Active> a;
    {
      std::unique_lock lock(mu_);
      queue_cv_.wait(lock, [&] {
        if (stopping_) return true;
        // The first queued task that no runner holds (a retry may be
        // queued while its previous attempt's runner is finishing).
        return std::any_of(queue_.begin(), queue_.end(),
                           [&](const std::string& q) { return !active_.contains(q); });
      });
      if (stopping_) return;
      auto it = std::find_if(queue_.begin(), queue_.end(),
                             [&](const std::string& q) { return !active_.contains(q); });
      id = *it;
      queue_.erase(it);
      queued_ids_.erase(id);
      a = std::make_shared<Active>();
      if (cancel_requested_.erase(id) > 0) a->cancel = true;
      active_.emplace(id, a);
    }
    run_one(id);
    {
      std::lock_guard lock(mu_);
      active_.erase(id);
    }
    queue_cv_.notify_all();
  }
}

void TaskService::notify_finished() {
  {
    std::lock_guard lock(finished_mu_);
    ++finished_seq_;
  }
  finished_cv_.notify_all();
}

Result<TaskRecord> TaskService::apply(const TaskRecord& before, const TaskUpdate& update) {
  // Fenced by the attempt this runner works on (issue 18: a requeue from a
  // lost node or a resubmit moves the task on without this runner).
  TaskUpdate fenced = update;
  if (!fenced.attempt) fenced.attempt = before.attempt;
  auto after = store_.update_task(before.id, fenced);
  if (!after) return after;
  if (update.status && *update.status != before.status) {
    nlohmann::json event = {{"type", "task.transition"},
                            {"task", before.id},
                            {"from", task_status_name(before.status)},
                            {"to", task_status_name(after->status)},
                            {"stage", task_stage_name(after->stage)},
                            {"attempt", after->attempt}};
    if (after->reason) event["reason"] = *after->reason;
    sandboxes_.audit_async(std::move(event));
    if (is_finished(after->status)) {
      metrics_
          .counter(
              "corral_tasks_total", "Tasks finished, by status and reason",
              {{"status", std::string(task_status_name(after->status))},
               {"reason", after->status == TaskStatus::kSucceeded ? std::string()
                                                                  : after->reason.value_or("")}})
          .inc();
      notify_finished();
    }
  } else if (update.stage && *update.stage != before.stage) {
    sandboxes_.audit_async({{"type", "task.transition"},
                            {"task", before.id},
                            {"from", task_status_name(before.status)},
                            {"to", task_status_name(after->status)},
                            {"stage", task_stage_name(after->stage)},
                            {"attempt", after->attempt}});
  }
  return after;
}

void TaskService::observe_stage(TaskStage stage, std::chrono::steady_clock::duration took) {
  metrics_
      .histogram("corral_task_duration_seconds", "Time spent in each stage of a task",
                 {0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800, 7200},
                 {{"stage", std::string(task_stage_name(stage))}})
      .observe(std::chrono::duration<double>(took).count());
}

// ---- pruning --------------------------------------------------------------

std::size_t TaskService::prune(std::int64_t now_ms) {
  std::size_t removed = 0;
  for (;;) {
    auto old = store_.finished_tasks_before(now_ms - config_.retention_ms, 100);
    if (!old || old->empty()) return removed;
    std::size_t before = removed;
    for (const TaskRecord& t : *old) {
      if (objects_ != nullptr) {
        // Every attempt's objects: tasks/<id>/ (ids never contain '/').
        auto stored = objects_->list(std::string(kTaskObjectPrefix) + t.id + "/");
        if (!stored) continue;  // the store is away: kept until it is back
        bool all = true;
        for (const auto& o : *stored)
          if (!objects_->remove(o.key)) all = false;
        if (!all) continue;
      }
      if (!store_.delete_task(t.id)) continue;
      sandboxes_.audit_async({{"type", "task.pruned"}, {"task", t.id}, {"attempt", t.attempt}});
      ++removed;
    }
    if (removed == before) return removed;  // nothing more could go now
  }
}

void TaskService::pruner_loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    (void)prune(StateStore::now_ms());
    lock.lock();
    pruner_cv_.wait_for(lock, std::chrono::milliseconds(config_.prune_interval_ms),
                        [&] { return stopping_; });
  }
}

std::size_t TaskService::claim_unheld() {
  std::size_t room = 0;
  {
    std::lock_guard lock(mu_);
    const std::size_t busy = queue_.size() + active_.size();
    if (stopping_ || busy >= config_.workers) return 0;
    room = config_.workers - busy;
  }
  auto claimed = store_.claim_queued_tasks(room);
  if (!claimed) return 0;  // the store is down: the next round tries again
  for (const std::string& id : *claimed) enqueue(id);
  return claimed->size();
}

void TaskService::claimer_loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    pruner_cv_.wait_for(lock, std::chrono::milliseconds(config_.claim_interval_ms),
                        [&] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    (void)claim_unheld();
    lock.lock();
  }
}

// ---- views ------------------------------------------------------------------

api::TaskInfo TaskService::info_of(const TaskRecord& t, bool with_request) {
  api::TaskInfo info;
  info.id = t.id;
  info.ns = t.ns;
  info.status = std::string(task_status_name(t.status));
  info.stage = std::string(task_stage_name(t.stage));
  info.reason = t.reason;
  info.detail = t.detail;
  info.exit_code = t.exit_code;
  info.signal = t.signal;
  info.sandbox_id = t.sandbox_id;
  info.node = t.node;
  info.attempt = t.attempt;
  info.replay_of = t.replay_of;
  for (std::size_t i = 0; i < t.outputs.size(); ++i) {
    const TaskOutputRecord& o = t.outputs[i];
    api::TaskOutputInfo out;
    out.index = i;
    out.path = o.path;
    out.present = o.present;
    out.size = o.size;
    if (o.present && !o.sha256.empty()) out.sha256 = o.sha256;
    if (o.present && !o.object_key.empty()) out.stored_at = o.object_key;
    info.outputs.push_back(std::move(out));
  }
  info.snapshot_id = t.snapshot_id;
  info.snapshot_error = t.snapshot_error;
  info.created_at_ms = t.created_at_ms;
  info.started_at_ms = t.started_at_ms;
  info.finished_at_ms = t.finished_at_ms;
  if (with_request) {
    info.request_json = t.request_json;
    if (!t.resolved_json.empty()) info.resolved_json = t.resolved_json;
  }
  // A dry run's report (X2) is kept with what replay keeps (no new column).
  if (t.resolved_json.find("\"dry_run\"") != std::string::npos) {
    auto resolved = nlohmann::json::parse(t.resolved_json, nullptr, false);
    if (resolved.is_object() && resolved.contains("dry_run"))
      info.dry_run_json = json_text(resolved["dry_run"]);
  }
  return info;
}

}  // namespace corral::daemon
