// The collect stage of a task (task_runner.h): its outputs read through
// the confined root, hashed and stored in the object store, and its
// command's output kept (redacted, bounded) as the task's log.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "daemon/file_ops.h"
#include "daemon/task_runner.h"
#include "secrets/redactor.h"

namespace corral::daemon {

void TaskService::Runner::collect() {
  if (!stage(TaskStage::kCollect)) return;
  const auto t0 = Clock::now();
  store_logs();
  // X2: a dry run's report, while the sandbox lives, kept with what replay
  // keeps (shown as the task's "dry_run").
  if (sandbox_ && sandbox_->spec.dry_run) {
    auto report = s_.sandboxes_.dry_run_report(sandbox_->id);
    resolved_["dry_run"] =
        report ? *report : nlohmann::json{{"error", report.error().message}};
    resolved_unsaved_ = true;
  }
  if (!command_ended(outcome_)) return;  // cancelled: its output is kept, not its files
  std::vector<TaskOutputRecord> records;
  std::optional<StageFailure> failure = collect_outputs(records);
  // Stored with the outcome (end_stages): a restart before then collects
  // again, into the same keys.
  unsaved_outputs_ = std::move(records);
  // The command's own failure stays the reason; an output's is next.
  if (!outcome_ && failure) outcome_ = std::move(failure);
  s_.observe_stage(TaskStage::kCollect, Clock::now() - t0);
}

std::optional<StageFailure> TaskService::Runner::collect_outputs(
    std::vector<TaskOutputRecord>& records) {
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
    const objstore::PutOptions options = output_put_options(i);
    const std::uint64_t max = *options.max_size;
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
    rec.object_key = output_key(i);
    std::unique_ptr<objstore::PendingPut> pending;
    if (i < pending_outputs_.size()) pending = std::move(pending_outputs_[i]);
    auto stored = pending ? pending->put_fd(fd->get())
                          : s_.objects_->put_fd(rec.object_key, fd->get(), options);
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
  pending_outputs_.clear();  // those of outputs not stored: their temp files go
  return first;
}

// Where output `i` is stored, and how.
std::string TaskService::Runner::output_key(std::size_t i) const {
  return attempt_prefix(task_) + "/outputs/" + std::to_string(i);
}

objstore::PutOptions TaskService::Runner::output_put_options(std::size_t i) const {
  objstore::PutOptions options;
  options.max_size = req_.outputs[i].max_size.value_or(s_.config_.max_output_size);
  // Metadata is printable ASCII: the task and the output's index (its
  // path may be any bytes).
  options.metadata = {{"task", task_.id}, {"output", std::to_string(i)}};
  return options;
}

// The outputs' puts begun while the command runs: the object store makes
// their directories and temp files then, so that collect only copies and
// hashes. One that cannot be begun is put the usual way at collect.
void TaskService::Runner::begin_output_puts() {
  if (s_.objects_ == nullptr) return;
  pending_outputs_.clear();
  for (std::size_t i = 0; i < req_.outputs.size(); ++i) {
    auto pending = s_.objects_->begin_put(output_key(i), output_put_options(i));
    pending_outputs_.push_back(pending ? std::move(*pending) : nullptr);
  }
}

// The command's output, redacted and bounded, kept in the object store
// after the sandbox is gone (GET /v1/tasks/{id}/log).
void TaskService::Runner::store_logs() {
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

}  // namespace corral::daemon
