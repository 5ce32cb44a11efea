// A task's command output (GET /v1/tasks/{id}/log): read from the files
// on its sandbox's layer while the command runs, redacted as they are read
// (S3); from the copy kept in the object store once the task has ended.
#include <fcntl.h>
#include <unistd.h>

#include "daemon/sandbox_service.h"
#include "daemon/task_service.h"
#include "secrets/redactor.h"

namespace corral::daemon {

namespace {

class LiveLog {
 public:
  LiveLog(SandboxService& sandboxes, const std::shared_ptr<SandboxEntry>& sandbox,
          const std::string& pid)
      : redaction_(sandboxes.redaction(sandbox->id)) {
    for (int i = 0; i < 2; ++i) {
      std::string name = "corral-daemon/" + pid + (i == 0 ? ".stdout" : ".stderr");
      files_[i] = UniqueFd(openat(sandbox->live->layer_root_fd(), name.c_str(),
                                  O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
      if (redaction_) redactors_[i].emplace(redaction_);
    }
  }

  // What was written since the last call; at the end, what the redactors hold.
  bool pump(const TaskService::LogSink& emit, bool end) {
    std::string buf(64 * 1024, '\0'), clean;
    for (int i = 0; i < 2; ++i) {
      const char* stream = i == 0 ? "stdout" : "stderr";
      if (!files_[i]) continue;
      ssize_t n;
      while ((n = pread(files_[i].get(), buf.data(), buf.size(), offsets_[i])) > 0) {
        offsets_[i] += n;
        std::string_view data(buf.data(), static_cast<std::size_t>(n));
        if (redactors_[i]) {
          clean.clear();
          redactors_[i]->feed(data, clean);
          data = clean;
        }
        if (!data.empty() && !emit(stream, data)) return false;
      }
      if (end && redactors_[i]) {
        clean.clear();
        redactors_[i]->finish(clean);
        if (!clean.empty() && !emit(stream, clean)) return false;
      }
    }
    return true;
  }

 private:
  std::shared_ptr<const secrets::RedactionSet> redaction_;
  UniqueFd files_[2];
  off_t offsets_[2] = {0, 0};
  std::optional<secrets::RedactStream> redactors_[2];
};

}  // namespace

ApiResult<TaskRecord> TaskService::stream_log(const std::string& ns, std::string_view id,
                                              bool follow, const LogSink& emit,
                                              const std::function<bool()>& gone) {
  auto t = get(ns, id);
  if (!t) return t;
  // While it runs: the live files (its sandbox leased for as long as they
  // are open; a teardown waits for the lease).
  if (t->status == TaskStatus::kRunning && t->stage == TaskStage::kExecute && t->process_id &&
      t->sandbox_id) {
    auto lease = sandboxes_.lease(*t->sandbox_id);
    if (lease) {
      auto sandbox = lease->sandbox();
      auto process = sandboxes_.find_process(*sandbox, *t->process_id);
      if (process) {
        std::optional<LiveLog> log;
        log.emplace(sandboxes_, sandbox, *t->process_id);
        for (;;) {
          bool finished;
          {
            std::unique_lock lock(process->mu);
            finished = process->finished();
          }
          if (!log->pump(emit, finished)) return get(ns, id);
          if (finished || !follow || gone()) break;
          std::unique_lock lock(process->mu);
          process->cv.wait_for(lock, std::chrono::milliseconds(200));
        }
        if (!follow) return get(ns, id);
        log.reset();
        lease->release();  // before waiting: the task's destroy waits for it
        return wait(ns, id, std::chrono::seconds(60));
      }
    }
  }
  if (follow && !is_finished(t->status)) {
    // Queued, or between stages: wait for the end, then give the kept copy.
    while (!gone()) {
      t = wait(ns, id, std::chrono::seconds(5));
      if (!t || is_finished(t->status)) break;
      if (t->stage == TaskStage::kExecute && t->process_id)
        return stream_log(ns, id, follow, emit, gone);
    }
    if (!t) return t;
  }
  if (objects_ != nullptr && is_finished(t->status)) {
    for (const char* stream : {"stdout", "stderr"}) {
      auto sent = objects_->get(attempt_prefix(*t) + "/log/" + stream,
                                [&](std::span<const char> chunk) -> Status {
                                  if (!emit(stream, std::string_view(chunk.data(), chunk.size())))
                                    return make_error(ErrorCode::kSystem, "the client went away");
                                  return ok();
                                });
      (void)sent;  // no log kept (no output, or the store was away)
    }
  }
  return t;
}

}  // namespace corral::daemon
