// One task through its stages (task_service.h): create, initialize,
// execute, collect, snapshot, destroy, cleanup; and the resume of a task
// a previous daemon left running. Each stage is stored before it starts,
// each failure ends the task with its reason (docs/tasks.md, "Reasons").
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "base/json_text.h"
#include "base/sha256.h"
#include "daemon/file_ops.h"
#include "daemon/sandbox_service.h"
#include "daemon/snapshot_service.h"
#include "daemon/task_replay.h"
#include "daemon/task_service.h"
#include "secrets/redactor.h"
#include "volume/volume_store.h"

namespace corral::daemon {

// A failure of a stage: the task's reason and a sentence for people.
struct StageFailure {
  std::string reason;
  std::string detail;
};

namespace {

using Clock = std::chrono::steady_clock;

// Where a background process's output lives on its sandbox's layer (the
// names exec_api.cc uses, so GET .../processes/{pid}/output serves it too).
constexpr const char* kOutputDir = "corral-daemon";
std::string output_name(const std::string& pid, std::string_view stream) {
  return std::string(kOutputDir) + "/" + pid + "." + std::string(stream);
}

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

// The final status a stored outcome stands for (reason empty: success).
TaskStatus status_for(const std::optional<std::string>& reason) {
  if (!reason) return TaskStatus::kSucceeded;
  if (*reason == "timeout") return TaskStatus::kTimedOut;
  if (*reason == "cancelled") return TaskStatus::kCancelled;
  return TaskStatus::kFailed;
}

std::string parent_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

namespace {
bool command_ended(const std::optional<StageFailure>& outcome) {
  if (!outcome) return true;
  for (const char* r : {"exit_code", "signal", "oom", "timeout", "disk_quota"})
    if (outcome->reason == r) return true;
  return false;
}
}  // namespace

class TaskService::Runner {
 public:
  Runner(TaskService& s, TaskRecord task, std::shared_ptr<Active> active)
      : s_(s), task_(std::move(task)), active_(std::move(active)) {}

  void run() {
    auto request = api::parse_stored_task_request(task_.request_json);
    if (!request) {
      if (task_.status == TaskStatus::kQueued && !to(TaskStatus::kRunning, TaskStage::kCreate))
        return;
      outcome_ = StageFailure{"internal", "the stored request cannot be read: " +
                                              request.error().message};
      return finish();
    }
    req_ = std::move(*request);
    resolved_ = nlohmann::json::parse(task_.resolved_json, nullptr, false);
    if (!resolved_.is_object()) resolved_ = nlohmann::json::object();
    if (task_.status == TaskStatus::kQueued) {
      if (!to(TaskStatus::kRunning, TaskStage::kCreate, "a worker took it")) return;
      return run_from_start();
    }
    resume();
  }

 private:
  // ---- flow ----------------------------------------------------------------

  void run_from_start() {
    if (!stage(TaskStage::kCreate) || !create()) return end_stages();
    if (!stage(TaskStage::kInitialize) || !initialize()) return end_stages();
    const bool ran = execute();
    if (ran || command_ended(outcome_) || active_->cancel) collect();
    end_stages();
  }

  // After a restart: how far did it get? (task_service.h)
  void resume() {
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
  void end_stages() {
    if (active_->stopping) return;  // the next daemon resumes it
    if (active_->cancel && (!outcome_ || outcome_->reason != "timeout"))
      outcome_ = StageFailure{"cancelled", "cancelled through POST /v1/tasks/{id}/cancel"};
    store_outcome(TaskStage::kSnapshot);
    // S4: the task is over, so are its tokens (idempotent; a destroy
    // revokes them again).
    if (sandbox_) (void)s_.sandboxes_.revoke_secrets(sandbox_->id);
    const bool failed = outcome_.has_value();
    if (sandbox_ && req_.snapshot != "never" && (failed || req_.snapshot == "always")) {
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
    if (sandbox_ && !req_.keep_sandbox) {
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

  void finish(const std::string& residue = {}) {
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

  // ---- bookkeeping ---------------------------------------------------------

  bool to(TaskStatus status, TaskStage st, std::string why = {}) {
    TaskUpdate u;
    u.status = status;
    u.stage = st;
    u.reason_for_transition = std::move(why);
    return update(u);
  }

  bool stage(TaskStage st) {
    if (active_->stopping) return false;
    TaskUpdate u;
    u.stage = st;
    return update(u);
  }

  bool update(const TaskUpdate& u) {
    auto after = s_.apply(task_, u);
    if (!after) {
      fprintf(stderr, "corral serve: task %s: storing its state failed: %s\n", task_.id.c_str(),
              after.error().message.c_str());
      return false;
    }
    task_ = std::move(*after);
    return true;
  }

  // The outcome so far, stored before the last stages so that a resumed
  // task ends with it.
  void store_outcome(TaskStage next) {
    TaskUpdate u;
    u.stage = next;
    if (outcome_) {
      u.reason = outcome_->reason;
      u.detail = outcome_->detail;
    }
    update(u);
  }

  void outcome_from_stored() {
    if (task_.reason) outcome_ = StageFailure{*task_.reason, task_.detail.value_or("")};
  }

  bool fail(std::string reason, std::string detail) {
    outcome_ = StageFailure{std::move(reason), std::move(detail)};
    return false;
  }

  std::string deadline_passed(TaskStage st, Clock::time_point deadline) {
    if (Clock::now() < deadline) return {};
    return "the " + std::string(task_stage_name(st)) + " stage took longer than its timeout";
  }

  // ---- create ----------------------------------------------------------------

  void discard_leftover_sandbox() {
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

  bool create() {
    const auto t0 = Clock::now();
    std::string body = req_.sandbox_json;
    if (req_.volumes_json != "[]") {
      const auto close = body.rfind('}');
      const bool empty = body.find_first_not_of(" \t\r\n{") == close;
      body = body.substr(0, close) + (empty ? "" : ",") + "\"volumes\":" + req_.volumes_json + "}";
    }
    auto spec = api::parse_create_sandbox_over(body, s_.sandboxes_.defaults());
    if (!spec) return fail("setup", "the sandbox spec: " + spec.error().message);
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
    TaskUpdate u;
    u.sandbox_id = made->info.id;
    if (!update(u)) return false;
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

  bool reattach_sandbox() {
    if (!task_.sandbox_id) return false;
    auto live = s_.sandboxes_.live(*task_.sandbox_id);
    if (!live) return false;
    sandbox_ = *live;
    return true;
  }

  // ---- initialize ------------------------------------------------------------

  bool initialize() {
    const auto t0 = Clock::now();
    const auto deadline = t0 + std::chrono::milliseconds(s_.config_.initialize_timeout_ms);
    // Held while fds into the sandbox's root are open: a teardown waits.
    auto lease = s_.sandboxes_.lease(sandbox_->id);
    if (!lease) return fail("setup", "the sandbox went away: " + lease.error().message);
    auto root = open_sandbox_root(s_.sandboxes_, *sandbox_);
    if (!root) return fail("setup", "the sandbox's files: " + root.error().message);
    const uid_t owner = file_owner(*sandbox_);
    if (!restore_snapshot(*root, owner)) return false;
    nlohmann::json kept = nlohmann::json::array();
    for (std::size_t i = 0; i < req_.inputs.size(); ++i) {
      if (active_->cancel) return false;
      if (auto late = deadline_passed(TaskStage::kInitialize, deadline); !late.empty())
        return fail("setup", late);
      if (!push_input(*root, owner, i)) return false;
      auto copy = keep_input_copy(*root, i);
      if (!copy) return false;
      kept.push_back(std::move(*copy));
    }
    resolved_["inputs"] = std::move(kept);
    if (!store_resolved()) return false;
    s_.observe_stage(TaskStage::kInitialize, Clock::now() - t0);
    return true;
  }

  // T2: a copy of input `i` as the command will see it (task_replay.h).
  std::optional<nlohmann::json> keep_input_copy(const ConfinedRoot& root, std::size_t i) {
    const api::TaskInput& in = req_.inputs[i];
    auto kept = daemon::keep_input_copy(s_.objects_,
                                        attempt_prefix(task_) + "/inputs/" + std::to_string(i),
                                        task_.id, i, in, root, input_sha_, input_size_);
    if (kept) return std::move(*kept);
    const std::string where = "inputs[" + std::to_string(i) + "] (" + in.path + "): ";
    const Error& e = kept.error();
    if (e.code == ErrorCode::kInvalidArgument) fail("input_mismatch", where + e.message);
    else if (e.code == ErrorCode::kUnavailable) fail("storage_unavailable", where + e.message);
    else if (e.code == ErrorCode::kResourceExhausted) fail("storage_unavailable", where + e.message);
    else fail("setup", where + e.message);
    return std::nullopt;
  }

  // ---- replay (T2) -------------------------------------------------------

  void record_for_replay(const api::CreateSandboxRequest& spec) {
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

  bool store_resolved() {
    TaskUpdate u;
    u.resolved_json = json_text(resolved_);
    return update(u);
  }

  // A replay from a failure snapshot: its files (as archived: redacted)
  // are written into the new sandbox before the inputs.
  bool restore_snapshot(const ConfinedRoot& root, uid_t owner) {
    const auto* replay = resolved_.contains("replay") ? &resolved_["replay"] : nullptr;
    if (replay == nullptr || !replay->is_object() || !replay->contains("from_snapshot") ||
        !(*replay)["from_snapshot"].is_string())
      return true;
    const std::string snap = (*replay)["from_snapshot"].get<std::string>();
    if (s_.snapshots_ == nullptr)
      return fail("setup", "snapshot " + snap + ": this daemon has no snapshot service");
    auto restored = restore_snapshot_files(*s_.snapshots_, snap, root, owner);
    if (!restored) {
      const Error& e = restored.error();
      if (e.code == ErrorCode::kNotFound) return fail("input_missing", e.message);
      if (e.code == ErrorCode::kResourceExhausted) return fail("disk_quota", e.message);
      if (e.code == ErrorCode::kUnavailable) return fail("storage_unavailable", e.message);
      return fail("setup", e.message);
    }
    (*replay_restored())["files"] = restored->files;
    (*replay_restored())["dirs"] = restored->dirs;
    (*replay_restored())["skipped"] = restored->skipped;
    return true;
  }

  nlohmann::json* replay_restored() { return &resolved_["replay"]["restored"]; }

  bool push_input(const ConfinedRoot& root, uid_t owner, std::size_t i) {
    const api::TaskInput& in = req_.inputs[i];
    const std::string where = "inputs[" + std::to_string(i) + "] (" + in.path + ")";
    // A volume's file is opened before anything is written: a refused one
    // leaves no empty file behind.
    UniqueFd volume_file;
    if (in.source == api::TaskInput::Source::kVolume) {
      auto opened = open_volume_input(in);
      if (!opened) return fail(opened.error().reason, where + ": " + opened.error().detail);
      volume_file = std::move(*opened);
    }
    if (auto st = root.mkdir(parent_of(in.path), 0755, true, owner, owner); !st)
      return fail("setup", where + ": its directory: " + st.error().message);
    auto fd = root.open_write(in.path);
    if (!fd) return fail("setup", where + ": " + file_error(fd.error()).message);
    (void)fchown(fd->get(), owner, owner);
    Sha256 hash;
    std::uint64_t written = 0;
    auto sink = [&](std::span<const char> chunk) -> Status {
      hash.update(chunk.data(), chunk.size());
      if (auto e = write_upload_chunk(fd->get(), std::string_view(chunk.data(), chunk.size()),
                                      written))
        return make_error(ErrorCode::kResourceExhausted, e->message);
      return ok();
    };
    if (in.source == api::TaskInput::Source::kContent) {
      std::string_view bytes = in.content;
      Result<TaskInputContent> stored;
      if (!in.content_held) {
        stored = s_.store_.task_input_content(task_.id, i);
        if (!stored)
          return fail("input_missing", where + ": its stored bytes: " + stored.error().message);
        bytes = stored->bytes;
      }
      if (auto st = sink(std::span<const char>(bytes.data(), bytes.size())); !st)
        return fail("disk_quota", where + ": " + st.error().message);
    } else if (volume_file) {
      std::vector<char> buf(256 * 1024);
      for (;;) {
        const ssize_t n = read(volume_file.get(), buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          const int err = errno;
          (void)root.remove(in.path);
          return fail("storage_unavailable",
                      where + ": reading volume " + in.volume + ": " + strerror(err));
        }
        if (n == 0) break;
        if (auto st = sink(std::span<const char>(buf.data(), static_cast<std::size_t>(n))); !st) {
          (void)root.remove(in.path);
          return fail("disk_quota", where + ": " + st.error().message);
        }
      }
    } else {
      if (s_.objects_ == nullptr)
        return fail("storage_unavailable", where + ": this daemon has no object store");
      auto got = s_.objects_->get(in.object_key, sink);
      if (!got) {
        const Error& e = got.error();
        (void)root.remove(in.path);
        if (e.code == ErrorCode::kNotFound)
          return fail("input_missing", where + ": no object \"" + in.object_key + "\"");
        if (e.code == ErrorCode::kResourceExhausted)
          return fail("disk_quota", where + ": " + e.message);
        if (e.code == ErrorCode::kInvalidArgument)
          return fail("input_mismatch", where + ": " + e.message);
        return fail("storage_unavailable", where + ": " + e.message);
      }
    }
    const std::string actual = Sha256::hex(hash.final());
    // The state store's copy is what was submitted (bytes from a damaged
    // database are not the client's input to run).
    if (in.source == api::TaskInput::Source::kContent && actual != in.content_sha256) {
      (void)root.remove(in.path);
      return fail("internal", where + ": its stored bytes do not match the sha256 they were "
                              "submitted with");
    }
    input_sha_ = actual;
    input_size_ = written;
    if (in.sha256 && *in.sha256 != actual) {
      (void)root.remove(in.path);
      return fail("input_mismatch",
                  where + ": its sha256 is " + actual + ", the request expected " + *in.sha256);
    }
    return true;
  }

  // A volume input's file, from a volume of the task's own namespace
  // (VolumeStore::open_file: confined to the volume, a regular file).
  tl::expected<UniqueFd, StageFailure> open_volume_input(const api::TaskInput& in) {
    if (s_.volumes_ == nullptr)
      return tl::unexpected(StageFailure{"input_missing", "this daemon has no volume service"});
    auto f = s_.volumes_->open_file(task_.ns, in.volume, in.volume_path);
    if (f) return std::move(*f);
    // Not mounted, or a passing error: the same id may be retried.
    const bool passing = f.error().code == ErrorCode::kUnavailable ||
                         f.error().code == ErrorCode::kInternal;
    return tl::unexpected(StageFailure{passing ? "storage_unavailable" : "input_missing",
                                       f.error().message});
  }

  // ---- execute ---------------------------------------------------------------

  std::int64_t timeout_ms() const {
    return req_.timeout_ms.value_or(s_.config_.default_timeout_ms);
  }

  bool execute() { return start_command() && wait_command(); }

  // Opens the command's output files on the layer (leased while they are
  // open here) and spawns it; its process id is stored first.
  bool start_command() {
    auto lease = s_.sandboxes_.lease(sandbox_->id);
    if (!lease) return fail("setup", "the sandbox went away: " + lease.error().message);
    const int layer = sandbox_->live->layer_root_fd();
    if (mkdirat(layer, kOutputDir, 0700) != 0 && errno != EEXIST)
      return fail("internal", std::string("the output directory: ") + strerror(errno));
    const std::uint64_t rid = new_request_id();
    const std::string pid = process_id_for(rid);
    UniqueFd files[2];
    for (int i = 0; i < 2; ++i) {
      files[i] = UniqueFd(openat(layer, output_name(pid, i == 0 ? "stdout" : "stderr").c_str(),
                                 O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
                                 0600));
      if (!files[i])
        return fail(errno == ENOSPC || errno == EDQUOT ? "disk_quota" : "internal",
                    std::string("the command's output file: ") + strerror(errno));
    }
    int in[2];
    if (pipe2(in, O_CLOEXEC) != 0) return fail("internal", "could not make a pipe");
    UniqueFd stdin_r(in[0]), stdin_w(in[1]);
    api::ExecRequest er;
    er.argv = req_.argv();
    er.cmd = req_.sh;
    er.env = req_.env;
    er.cwd = req_.cwd;
    er.timeout_ms = timeout_ms();
    oom_kills_before_ = s_.sandboxes_.oom_kills(*sandbox_);
    // Stored before the spawn: from here a restarted daemon never runs the
    // command again (task_service.h).
    TaskUpdate u;
    u.stage = TaskStage::kExecute;
    u.process_id = pid;
    if (active_->stopping || !update(u)) return false;
    exec_started_ = Clock::now();
    UniqueFd stdio[3] = {std::move(stdin_r), std::move(files[0]), std::move(files[1])};
    auto proc = s_.sandboxes_.spawn(sandbox_, er, true, stdio, rid);
    if (!proc) return fail("setup", "the command could not be started: " + proc.error().message);
    {
      std::lock_guard lock(active_->mu);
      active_->process = *proc;
    }
    if (active_->cancel) s_.sandboxes_.kill_process(**proc, SIGKILL);
    process_ = *proc;
    stdin_w_ = std::move(stdin_w);
    fcntl(stdin_w_.get(), F_SETFL, fcntl(stdin_w_.get(), F_GETFL) | O_NONBLOCK);
    if (req_.stdin_data.empty()) stdin_w_.reset();
    return true;
  }

  bool reattach() {
    if (!task_.process_id || !reattach_sandbox()) return false;
    auto p = s_.sandboxes_.find_process(*sandbox_, *task_.process_id);
    if (!p) return false;
    process_ = p;
    std::lock_guard lock(active_->mu);
    active_->process = p;
    exec_started_ = Clock::now();
    return true;
  }

  std::optional<api::SandboxUsage> usage() {
    auto info = s_.sandboxes_.get(sandbox_->id);
    if (!info || !info->usage) return std::nullopt;
    return info->usage;
  }

  // Until the command ends (its own timeout is the reaper's), writing its
  // stdin; a cancel kills it; the daemon stopping leaves it running.
  bool wait_command() {
    ProcessEntry& p = *process_;
    const auto give_up = exec_started_ + std::chrono::milliseconds(timeout_ms()) +
                         std::chrono::milliseconds(s_.config_.kill_grace_ms);
    bool killed = false;
    for (;;) {
      if (active_->stopping) return false;
      if (stdin_w_) write_stdin();
      std::unique_lock lock(p.mu);
      if (p.finished()) break;
      p.cv.wait_for(lock, std::chrono::milliseconds(stdin_w_ ? 20 : 200));
      if (p.finished()) break;
      lock.unlock();
      if ((active_->cancel || Clock::now() > give_up) && !killed) {
        killed = true;
        s_.sandboxes_.kill_process(p, SIGKILL);
      }
    }
    stdin_w_.reset();
    s_.observe_stage(TaskStage::kExecute, Clock::now() - exec_started_);
    std::optional<int> exit_code, sig;
    bool timed_out;
    std::string failure;
    {
      std::lock_guard lock(p.mu);
      exit_code = p.exit_code;
      sig = p.signal;
      timed_out = p.timed_out;
      if (p.phase == ProcessEntry::Phase::kFailed) failure = p.failure;
    }
    judge_command(exit_code, sig, timed_out, killed, failure);
    // Stored with its outcome: a daemon that dies from here on resumes at
    // collect and ends the task with this result.
    TaskUpdate u;
    u.exit_code = exit_code;
    u.signal = sig;
    u.stage = TaskStage::kCollect;
    if (outcome_) {
      u.reason = outcome_->reason;
      u.detail = outcome_->detail;
    }
    if (!update(u)) return false;
    return !outcome_;
  }

  // The command's end as the task's outcome (outcome_ empty: success).
  void judge_command(std::optional<int> exit_code, std::optional<int> sig, bool timed_out,
                     bool killed, const std::string& failure) {
    if (active_->cancel) {
      fail("cancelled", "cancelled while the command ran");
    } else if (timed_out || killed) {
      fail("timeout", "the command ran longer than its timeout of " +
                          std::to_string(timeout_ms()) + " ms");
    } else if (!failure.empty()) {
      fail("setup", "the command could not start: " + failure);
    } else if (!exit_code && !sig) {
      fail("daemon_restart",
           "the daemon restarted while the command ran and its end was never observed");
    } else if (sig) {
      // Read from the sandbox whatever its state: on cgroup v2 the OOM
      // kill took the whole sandbox (SandboxService::oom_kills).
      auto after = s_.sandboxes_.oom_kills(*sandbox_);
      if (after && *after > oom_kills_before_.value_or(0))
        fail("oom", "the command was killed by the out-of-memory killer (signal " +
                        std::to_string(*sig) + ")");
      else if (*sig == SIGXFSZ)  // RLIMIT_FSIZE is the sandbox's disk limit
        fail("disk_quota", "the command was killed by SIGXFSZ: a file grew past the sandbox's "
                           "disk limit (" +
                               std::to_string(sandbox_->spec.limits.disk_bytes) + " bytes)");
      else
        fail("signal", "the command was ended by signal " + std::to_string(*sig));
    } else if (*exit_code != 0) {
      auto after = usage();
      const auto limit = sandbox_->spec.limits.disk_bytes;
      if (after && limit > 0 && after->disk_bytes + (64 << 10) >= limit)
        fail("disk_quota", "the command exited " + std::to_string(*exit_code) +
                               " with the sandbox's disk full (" + std::to_string(limit) +
                               " bytes)");
      else
        fail("exit_code", "the command exited " + std::to_string(*exit_code));
    }
  }

  void write_stdin() {
    while (stdin_off_ < req_.stdin_data.size()) {
      ssize_t n = write(stdin_w_.get(), req_.stdin_data.data() + stdin_off_,
                        req_.stdin_data.size() - stdin_off_);
      if (n > 0) {
        stdin_off_ += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EAGAIN) return;
      break;  // the command closed its stdin
    }
    stdin_w_.reset();
  }

  // ---- collect ---------------------------------------------------------------

  void collect() {
    if (!stage(TaskStage::kCollect)) return;
    const auto t0 = Clock::now();
    store_logs();
    if (!command_ended(outcome_)) return;  // cancelled: its output is kept, not its files
    std::vector<TaskOutputRecord> records;
    std::optional<StageFailure> failure = collect_outputs(records);
    TaskUpdate u;
    u.outputs = records;
    update(u);
    // The command's own failure stays the reason; an output's is next.
    if (!outcome_ && failure) outcome_ = std::move(failure);
    s_.observe_stage(TaskStage::kCollect, Clock::now() - t0);
  }

  std::optional<StageFailure> collect_outputs(std::vector<TaskOutputRecord>& records) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(s_.config_.collect_timeout_ms);
    auto lease = s_.sandboxes_.lease(sandbox_->id);
    if (!lease) return StageFailure{"internal", "the sandbox went away: " + lease.error().message};
    auto root = open_sandbox_root(s_.sandboxes_, *sandbox_);
    if (!root) return StageFailure{"internal", "the sandbox's files: " + root.error().message};
    std::optional<StageFailure> first;
    for (std::size_t i = 0; i < req_.outputs.size(); ++i) {
      const api::TaskOutputSpec& o = req_.outputs[i];
      TaskOutputRecord rec;
      rec.path = o.path;
      const std::string where = "outputs[" + std::to_string(i) + "] (" + o.path + ")";
      auto fail_output = [&](std::string reason, std::string detail) {
        if (!first) first = StageFailure{std::move(reason), where + ": " + std::move(detail)};
      };
      if (auto late = deadline_passed(TaskStage::kCollect, deadline); !late.empty()) {
        fail_output("internal", late);
        records.push_back(rec);
        continue;
      }
      auto fd = root->open_read(o.path);
      if (!fd) {
        // Missing, or not something an output may be (a symlink, a FIFO, a
        // device, a hard link: F6): absent.
        if (o.required)
          fail_output("output_missing",
                      fd.error().code == ErrorCode::kNotFound
                          ? std::string("is missing")
                          : "is not a regular file of the sandbox: " + fd.error().message);
        records.push_back(rec);
        continue;
      }
      const std::uint64_t max = o.max_size.value_or(s_.config_.max_output_size);
      struct stat st;
      if (fstat(fd->get(), &st) == 0 && static_cast<std::uint64_t>(st.st_size) > max) {
        fail_output("output_too_large", std::to_string(st.st_size) + " bytes, over its max_size of " +
                                            std::to_string(max));
        rec.size = static_cast<std::uint64_t>(st.st_size);
        records.push_back(rec);
        continue;
      }
      if (s_.objects_ == nullptr) {
        fail_output("storage_unavailable", "this daemon has no object store");
        records.push_back(rec);
        continue;
      }
      rec.object_key = attempt_prefix(task_) + "/outputs/" + std::to_string(i);
      objstore::PutOptions options;
      options.max_size = max;
      // Metadata is printable ASCII: the task and the output's index (its
      // path may be any bytes).
      options.metadata = {{"task", task_.id}, {"output", std::to_string(i)}};
      auto stored = s_.objects_->put_fd(rec.object_key, fd->get(), options);
      if (!stored) {
        const Error& e = stored.error();
        if (e.code == ErrorCode::kResourceExhausted && e.sys_errno == objstore::kOverMaxSize)
          fail_output("output_too_large", e.message);
        else
          fail_output("storage_unavailable", "storing it: " + e.message);
        rec.object_key.clear();
        records.push_back(rec);
        continue;
      }
      rec.present = true;
      rec.size = stored->size;
      rec.sha256 = stored->sha256;
      s_.sandboxes_.audit_async({{"type", "task.output_stored"},
                                 {"task", task_.id},
                                 {"attempt", task_.attempt},
                                 {"index", i},
                                 {"key", rec.object_key},
                                 {"size", rec.size},
                                 {"sha256", rec.sha256}});
      records.push_back(std::move(rec));
    }
    return first;
  }

  // The command's output, redacted and bounded, kept in the object store
  // after the sandbox is gone (GET /v1/tasks/{id}/log).
  void store_logs() {
    if (s_.objects_ == nullptr || !task_.process_id || !sandbox_ || !sandbox_->live) return;
    auto lease = s_.sandboxes_.lease(sandbox_->id);
    if (!lease) return;
    auto redaction = s_.sandboxes_.redaction(sandbox_->id);
    for (const char* stream : {"stdout", "stderr"}) {
      UniqueFd f(openat(sandbox_->live->layer_root_fd(),
                        output_name(*task_.process_id, stream).c_str(),
                        O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
      if (!f) continue;
      std::optional<secrets::RedactStream> redactor;
      if (redaction) redactor.emplace(redaction);
      std::string kept, clean, buf(256 * 1024, '\0');
      ssize_t n;
      while ((n = read(f.get(), buf.data(), buf.size())) > 0 && kept.size() < s_.config_.max_log) {
        std::string_view data(buf.data(), static_cast<std::size_t>(n));
        if (redactor) {
          clean.clear();
          redactor->feed(data, clean);
          data = clean;
        }
        kept.append(data.substr(0, s_.config_.max_log - kept.size()));
      }
      if (redactor && kept.size() < s_.config_.max_log) {
        clean.clear();
        redactor->finish(clean);
        kept.append(std::string_view(clean).substr(0, s_.config_.max_log - kept.size()));
      }
      // No object for a stream without output (the log reads a missing one
      // as empty): each stored object costs the store several fsyncs.
      if (!kept.empty())
        (void)s_.objects_->put_bytes(attempt_prefix(task_) + "/log/" + stream, kept, {});
    }
  }

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
  std::string input_sha_;  // of the input push_input wrote last
  std::uint64_t input_size_ = 0;
};

void TaskService::run_one(const std::string& id) {
  auto a = active(id);
  auto t = store_.get_task(id);
  if (!a || !t || is_finished(t->status)) return;  // cancelled while queued, or pruned
  Runner(*this, std::move(*t), std::move(a)).run();
}

}  // namespace corral::daemon
