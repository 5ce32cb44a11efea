// The initialize stage of a task (task_runner.h): a replay's snapshot
// files, then each input (inline, from the object store or from a volume)
// pushed through the sandbox's confined root with its hash verified, and a
// copy kept for a replay.
#include <unistd.h>

#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "daemon/file_ops.h"
#include "daemon/task_replay.h"
#include "daemon/task_runner.h"
#include "volume/volume_store.h"

namespace corral::daemon {

namespace {

std::string parent_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

bool TaskService::Runner::initialize() {
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
  // Stored with the execute stage's write, before the command starts: a
  // restart before then runs the task from its start anyway.
  resolved_unsaved_ = true;
  s_.observe_stage(TaskStage::kInitialize, Clock::now() - t0);
  return true;
}

// T2: a copy of input `i` as the command will see it (task_replay.h).
std::optional<nlohmann::json> TaskService::Runner::keep_input_copy(const ConfinedRoot& root,
                                                                   std::size_t i) {
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

// A replay from a failure snapshot: its files (as archived: redacted)
// are written into the new sandbox before the inputs.
bool TaskService::Runner::restore_snapshot(const ConfinedRoot& root, uid_t owner) {
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

nlohmann::json* TaskService::Runner::replay_restored() {
  return &resolved_["replay"]["restored"];
}

bool TaskService::Runner::push_input(const ConfinedRoot& root, uid_t owner, std::size_t i) {
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
  // Bytes held since the submit hashed them are not hashed again.
  const bool held = in.source == api::TaskInput::Source::kContent && in.content_held;
  Sha256 hash;
  std::uint64_t written = 0;
  auto sink = [&](std::span<const char> chunk) -> Status {
    if (!held) hash.update(chunk.data(), chunk.size());
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
  const std::string actual = held ? in.content_sha256 : Sha256::hex(hash.final());
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
tl::expected<UniqueFd, StageFailure> TaskService::Runner::open_volume_input(
    const api::TaskInput& in) {
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

}  // namespace corral::daemon
