// Replay (task_replay.h; docs/tasks.md "Replay"; REQUIREMENTS.md T2): what
// a task keeps for a replay, the failure snapshot's files written into a new
// sandbox, and POST /v1/tasks/{id}/replay turned into a new task.
#include "daemon/task_replay.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "base/fs.h"
#include "base/json_text.h"
#include "base/sha256.h"
#include "daemon/file_ops.h"
#include "daemon/sandbox_service.h"
#include "daemon/snapshot_service.h"
#include "daemon/task_service.h"
#include "image/image_store.h"
#include "spec/image_ref.h"
#include "snapshot/layer_unpacker.h"

namespace corral::daemon {

using nlohmann::json;

namespace {

std::string parent_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Files corral writes into every sandbox at its setup: a restore keeps the
// new sandbox's (its hostname, its network's resolver, its user).
bool corral_setup_file(std::string_view path) {
  for (const char* own : {"etc/passwd", "etc/group", "etc/hostname", "etc/hosts",
                          "etc/resolv.conf"})
    if (path == own) return true;
  return false;
}

}  // namespace

json image_identity(std::string_view image) {
  if (image.empty()) return json{{"name", ""}, {"base", "host"}};
  // Named by its manifest's digest: that is its identity.
  if (valid_digest(image)) return json{{"name", std::string(image)}, {"digest", image}};
  if (auto ref = parse_digest_reference(image))
    return json{{"name", std::string(image)}, {"digest", ref->digest}};
  ImageStore images(ImageStore::default_dir());
  auto info = images.get(image);
  if (!info) return json{{"name", std::string(image)}, {"error", info.error().message}};
  json id = {{"name", info->name},
             {"source", info->source},
             {"created", info->created},
             {"size_bytes", info->size_bytes}};
  Sha256 h;
  h.update(json_text(id));
  id["digest"] = "sha256:" + Sha256::hex(h.final());
  return id;
}

Result<json> keep_input_copy(objstore::ObjectStore* objects, const std::string& key,
                             const std::string& task, std::size_t index, const api::TaskInput& in,
                             const ConfinedRoot& root, const std::string& sha256,
                             std::uint64_t size) {
  json rec = {{"path", in.path}, {"sha256", sha256}, {"size", size}};
  switch (in.source) {
    case api::TaskInput::Source::kContent:
      // Inline bytes are kept by the state store from the submit on
      // (StateStore::task_input_content): no second copy.
      rec["source"] = "content";
      rec["kept_in"] = "state";
      return rec;
    case api::TaskInput::Source::kObject:
      rec["source"] = "object";
      rec["object"] = in.object_key;
      break;
    case api::TaskInput::Source::kVolume:
      // The volume's file may change after the task, as an object may.
      rec["source"] = "volume";
      rec["volume"] = in.volume;
      rec["volume_path"] = in.volume_path;
      break;
  }
  if (objects == nullptr) {
    rec["stored_at"] = nullptr;
    rec["not_kept"] = "this daemon has no object store";
    return rec;
  }
  objstore::PutOptions options;
  options.expected_sha256 = sha256;
  options.metadata = {{"task", task}, {"input", std::to_string(index)}};
  // Read back from the sandbox: what the command will see. The object
  // itself may change or vanish after the task (docs/tasks.md).
  auto fd = root.open_read(in.path);
  if (!fd) return tl::unexpected(fd.error().wrap("reading it back to keep a copy"));
  Result<objstore::ObjectInfo> stored = objects->put_fd(key, fd->get(), options);
  if (!stored) {
    if (stored.error().code == ErrorCode::kInvalidArgument)
      return tl::unexpected(stored.error().wrap("it changed while its copy was kept"));
    Error e = stored.error().wrap("keeping a copy for replay");
    if (e.code != ErrorCode::kResourceExhausted) e.code = ErrorCode::kUnavailable;
    return tl::unexpected(std::move(e));
  }
  rec["stored_at"] = key;
  return rec;
}

Result<RestoredFiles> restore_snapshot_files(SnapshotService& snapshots, std::string_view id,
                                             const ConfinedRoot& root, uid_t owner) {
  const std::string what = "restoring snapshot " + std::string(id);
  auto info = snapshots.store().get(id);
  if (!info)
    return make_error(ErrorCode::kNotFound,
                      what + ": it is gone (expired or deleted): " + info.error().message);
  // The archive waits in a scratch file (O_TMPFILE: nothing stays behind)
  // for libarchive, which reads a file.
  const std::string& scratch = snapshots.store().config().scratch_dir;
  UniqueFd file(open(scratch.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!file) return tl::unexpected(errno_error("open(" + scratch + ", O_TMPFILE)").value().wrap(what));
  auto got = snapshots.store().download(id, [&](std::span<const char> chunk) -> Status {
    if (!write_all(file.get(), std::string_view(chunk.data(), chunk.size())))
      return errno_error("writing the scratch copy");
    return ok();
  });
  if (!got) {
    Error e = got.error().wrap(what);
    if (e.code != ErrorCode::kNotFound) e.code = ErrorCode::kUnavailable;
    return tl::unexpected(std::move(e));
  }
  if (got->sha256 != info->sha256)
    return make_error(ErrorCode::kInvalidArgument,
                      what + ": its archive's sha256 is " + got->sha256 + ", recorded " +
                          info->sha256);
  if (lseek(file.get(), 0, SEEK_SET) != 0) return tl::unexpected(errno_error("lseek").value());

  RestoredFiles restored;
  auto visit = [&](const snapshot::UnpackedEntry& e,
                   const snapshot::ContentReader& read) -> Status {
    const std::string path = "/" + e.path;
    using Kind = snapshot::UnpackedEntry::Kind;
    if (e.kind == Kind::kSymlink || corral_setup_file(e.path)) {
      ++restored.skipped;
      return ok();
    }
    if (e.kind == Kind::kDirectory) {
      if (!root.mkdir(path, e.mode | 0700, true, owner, owner)) ++restored.skipped;
      else ++restored.dirs;
      return ok();
    }
    if (!root.mkdir(parent_of(path), 0755, true, owner, owner)) {
      ++restored.skipped;
      return ok();
    }
    WriteOptions options;
    options.mode = e.mode;
    auto fd = root.open_write(path, options);
    if (!fd) {
      // A name the confined root refuses (a mount point, a sealed file
      // system, a symlink on the way): not restored, counted.
      ++restored.skipped;
      return ok();
    }
    (void)fchown(fd->get(), owner, owner);
    std::uint64_t written = 0;
    CORRAL_TRY(read([&](std::span<const char> chunk) -> Status {
      if (auto err = write_upload_chunk(fd->get(), std::string_view(chunk.data(), chunk.size()),
                                        written))
        return make_error(ErrorCode::kResourceExhausted, e.path + ": " + err->message);
      return ok();
    }));
    ++restored.files;
    return ok();
  };
  auto report = snapshot::unpack_layer(file.get(), snapshot::UnpackLimits{}, visit);
  if (!report) return tl::unexpected(report.error().wrap(what));
  restored.skipped += report->skipped;
  return restored;
}

// ---- POST /v1/tasks/{id}/replay ---------------------------------------------

namespace {

api::ApiError conflict(std::string message, std::string field, std::string hint = {}) {
  return api::make_api_error(api::ApiErrorCode::kConflict, std::move(message), std::move(field),
                             std::move(hint));
}

// The inputs of the replay: every input read from the copy the original
// kept, with its sha256 (verified when it is pushed: input_mismatch).
ApiResult<std::vector<api::TaskInput>> kept_inputs(StateStore& store, const TaskRecord& orig,
                                                   const api::TaskRequest& req, const json& kept) {
  std::vector<api::TaskInput> inputs;
  const json* list = kept.contains("inputs") ? &kept["inputs"] : nullptr;
  for (std::size_t i = 0; i < req.inputs.size(); ++i) {
    const std::string field = "inputs[" + std::to_string(i) + "]";
    if (list == nullptr || !list->is_array() || list->size() <= i)
      return tl::unexpected(conflict("task " + orig.id + " kept no copy of " + field +
                                         ": it ended before its inputs were pushed",
                                     field, "submit it again as a new task"));
    const json& in = (*list)[i];
    if (in.value("kept_in", std::string()) == "state") {
      // An inline input: its bytes as submitted, from the state store.
      api::TaskInput copy = req.inputs[i];
      if (!copy.content_held) {
        auto bytes = store.task_input_content(orig.id, i);
        if (!bytes)
          return tl::unexpected(conflict("task " + orig.id + " kept no copy of " + field + ": " +
                                             bytes.error().message,
                                         field));
        copy.content = std::move(bytes->bytes);
        copy.content_held = true;
      }
      copy.sha256 = in.value("sha256", std::string());
      inputs.push_back(std::move(copy));
      continue;
    }
    if (!in.contains("stored_at") || !in["stored_at"].is_string())
      return tl::unexpected(conflict("task " + orig.id + " kept no copy of " + field + ": " +
                                         in.value("not_kept", std::string("unknown why")),
                                     field));
    api::TaskInput copy;
    copy.path = req.inputs[i].path;
    copy.source = api::TaskInput::Source::kObject;
    copy.object_key = in["stored_at"].get<std::string>();
    copy.sha256 = in.value("sha256", std::string());
    inputs.push_back(std::move(copy));
  }
  return inputs;
}

// The replay's request: the original's, on its resolved sandbox spec with
// the chosen network and exactly its environment, its inputs read from the
// kept copies, its timeout (or the override).
ApiResult<api::TaskRequest> replay_request(StateStore& store, const TaskRecord& orig,
                                           const json& kept,
                                           const api::TaskReplayRequest& rr,
                                           const SandboxSpec& defaults,
                                           std::int64_t max_timeout_ms) {
  auto orig_req = api::parse_stored_task_request(orig.request_json);
  if (!orig_req) return api_fail(orig_req.error().wrap("the stored request of " + orig.id));
  auto spec = api::spec_from_json(json_text(kept["sandbox"]));
  if (!spec) return api_fail(spec.error().wrap("the resolved sandbox spec of " + orig.id));

  // The same image, or no replay: another image is another experiment.
  const json image_now = image_identity(spec->image);
  if (kept.contains("image") && kept["image"].value("digest", "") != image_now.value("digest", ""))
    return tl::unexpected(conflict(
        "the image \"" + spec->image + "\" is not the one task " + orig.id +
            " ran on (made " + kept["image"].value("created", std::string("?")) + ", now " +
            image_now.value("created", std::string("absent")) + ")",
        "image", "submit the task again as a new task to run it on today's image"));

  switch (rr.network) {
    case api::TaskReplayRequest::Network::kNone:
      spec->network = NetworkSpec{};
      break;
    case api::TaskReplayRequest::Network::kAsOriginal:
      break;
    case api::TaskReplayRequest::Network::kExplicit:
      spec->network = rr.network_spec;
      break;
  }
  auto inputs = kept_inputs(store, orig, *orig_req, kept);
  if (!inputs) return tl::unexpected(inputs.error());

  api::TaskRequest req = std::move(*orig_req);
  api::CreateSandboxRequest create;
  create.spec = *spec;
  create.spec.argv.clear();
  // Exactly the original's environment: a variable the daemon's defaults
  // gained since is removed.
  for (const auto& var : defaults.env)
    if (std::none_of(spec->env.begin(), spec->env.end(),
                     [&](const auto& kept_var) { return kept_var.first == var.first; }))
      create.env_unset.push_back(var.first);
  req.sandbox_json = api::to_json(create);
  req.volumes_json = "[]";  // in the resolved spec already
  req.inputs = std::move(*inputs);
  if (rr.timeout_ms) req.timeout_ms = rr.timeout_ms;
  else if (kept.contains("timeout_ms") && kept["timeout_ms"].is_number_integer())
    req.timeout_ms = kept["timeout_ms"].get<std::int64_t>();
  if (req.timeout_ms && *req.timeout_ms > max_timeout_ms)
    return api_fail(api::ApiErrorCode::kInvalidValue,
                    "timeout: at most " + std::to_string(max_timeout_ms / 1000) +
                        " s (serve.tasks.max_timeout)",
                    "timeout");
  if (auto checked = api::parse_create_sandbox_over(req.sandbox_json, defaults); !checked) {
    api::ApiError e = api::to_api_error(checked.error());
    return tl::unexpected(conflict("this daemon refuses the sandbox task " + orig.id +
                                       " ran in: " + e.message,
                                   e.field.empty() ? "network" : e.field));
  }
  return req;
}

// The snapshot a from_snapshot replay starts from; none when not asked.
ApiResult<std::optional<std::string>> replay_snapshot(const TaskRecord& orig, bool wanted,
                                                    SnapshotService* snapshots) {
  if (!wanted) return std::optional<std::string>();
  if (!orig.snapshot_id)
    return tl::unexpected(conflict(
        "task " + orig.id + " has no failure snapshot" +
            (orig.snapshot_error ? ": " + *orig.snapshot_error
                                  : std::string(" (it succeeded, or its snapshot mode is never)")),
        "from_snapshot", "replay it without from_snapshot"));
  if (snapshots == nullptr || !snapshots->store().get(*orig.snapshot_id))
    return tl::unexpected(conflict("the snapshot " + *orig.snapshot_id + " of task " +
                                       orig.id + " is gone (expired or deleted)",
                                   "from_snapshot", "replay it without from_snapshot"));
  return orig.snapshot_id;
}

}  // namespace

ApiResult<TaskService::Submitted> TaskService::replay(const std::string& ns, std::string_view id,
                                                      std::string_view body) {
  auto rr = api::parse_task_replay(body);
  if (!rr) return api_fail(rr.error());
  auto orig = get(ns, id);
  if (!orig) return tl::unexpected(orig.error());
  if (!is_finished(orig->status))
    return tl::unexpected(conflict(
        "task " + orig->id + " is still " + std::string(task_status_name(orig->status)) +
            ": only a finished task can be replayed",
        "status", "wait for its end (GET /v1/tasks/" + orig->id + "?wait=60s) or cancel it"));
  const json kept = json::parse(orig->resolved_json.empty() ? "{}" : orig->resolved_json, nullptr,
                                false);
  if (!kept.is_object() || !kept.contains("sandbox") || !kept["sandbox"].is_object())
    return tl::unexpected(conflict("task " + orig->id +
                                       " kept nothing to replay: it ended before its sandbox was "
                                       "made, or an older daemon ran it",
                                   "id", "submit it again as a new task"));
  auto req =
      replay_request(store_, *orig, kept, *rr, sandboxes_.defaults(), config_.max_timeout_ms);
  if (!req) return tl::unexpected(req.error());
  auto snap = replay_snapshot(*orig, rr->from_snapshot, snapshots_);
  if (!snap) return tl::unexpected(snap.error());

  const std::string canonical = api::to_canonical_json(*rr);
  // One replay submission at a time: the default id's "next free N" and
  // the explicit id's check-then-submit are each one step.
  std::lock_guard replaying(replay_mu_);
  std::string new_id;
  if (rr->id) {
    new_id = *rr->id;
  } else {
    for (int n = 1;; ++n) {
      new_id = orig->id + "-replay-" + std::to_string(n);
      if (!api::valid_task_id(new_id))
        return api_fail(api::ApiErrorCode::kInvalidValue,
                        "the default id " + new_id + " is longer than 128 characters", "id",
                        "give the replay an \"id\"");
      auto taken = store_.get_task(new_id);
      if (!taken && taken.error().code == ErrorCode::kNotFound) break;
      if (!taken) return api_fail(taken.error());
    }
  }
  std::lock_guard guard(submit_lock(new_id));
  if (rr->id) {
    auto existing = store_.get_task(new_id);
    if (existing) {
      if (existing->ns != ns || existing->replay_of != orig->id)
        return tl::unexpected(conflict("task id \"" + new_id + "\" is taken; choose another id",
                                       "id"));
      const json stored = json::parse(existing->resolved_json, nullptr, false);
      const std::string before =
          stored.is_object() && stored.contains("replay") && stored["replay"].contains("request")
              ? json_text(stored["replay"]["request"])
              : std::string("{}");
      if (std::string field = first_differing_field(before, canonical); !field.empty())
        return tl::unexpected(conflict("replay " + new_id + " of task " + orig->id +
                                           " exists with another request: field " + field +
                                           " differs",
                                       field, "use a new id for a different replay"));
      return Submitted{std::move(*existing), false, false};
    }
    if (existing.error().code != ErrorCode::kNotFound) return api_fail(existing.error());
  }
  req->id = new_id;
  TaskRecord record;
  record.id = new_id;
  record.ns = ns;
  record.replay_of = orig->id;
  record.request_json = api::to_canonical_json(*req);
  record.resolved_json = json_text(json{{"replay",
                                         {{"of", orig->id},
                                          {"of_attempt", orig->attempt},
                                          {"request", json::parse(canonical, nullptr, false)},
                                          {"from_snapshot", *snap ? json(**snap) : json(nullptr)}}}});
  auto submitted = store_.submit_task(record, take_inline_contents(*req));
  if (!submitted) {
    if (submitted.error().code == ErrorCode::kAlreadyExists)
      return tl::unexpected(conflict("task id \"" + new_id + "\" is taken; choose another id",
                                     "id"));
    return api_fail(submitted.error());
  }
  if (!submitted->created && submitted->task.replay_of != orig->id)
    return tl::unexpected(conflict("task id \"" + new_id + "\" is taken; choose another id", "id"));
  if (submitted->created || submitted->retried) {
    sandboxes_.audit_async({{"type", "task.replay"},
                            {"task", new_id},
                            {"original", orig->id},
                            {"original_attempt", orig->attempt},
                            {"ns", ns},
                            {"network", json::parse(canonical, nullptr, false)["network"]},
                            {"from_snapshot", *snap ? json(**snap) : json(nullptr)}});
    enqueue(new_id);
  }
  return Submitted{std::move(submitted->task), submitted->created, submitted->retried};
}

}  // namespace corral::daemon
