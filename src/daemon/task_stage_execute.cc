// The execute stage of a task (task_runner.h): the command as a background
// process, its id stored before the spawn; the wait for its end (or the
// re-attach to it after a restart) and what that end means for the task.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <string>

#include "daemon/task_runner.h"

namespace corral::daemon {

std::int64_t TaskService::Runner::timeout_ms() const {
  return req_.timeout_ms.value_or(s_.config_.default_timeout_ms);
}

bool TaskService::Runner::execute() {
  return start_command() && wait_command();
}

// Opens the command's output files on the layer (leased while they are
// open here) and spawns it; its process id is stored first.
bool TaskService::Runner::start_command() {
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
  begin_output_puts();  // while the command runs
  stdin_w_ = std::move(stdin_w);
  fcntl(stdin_w_.get(), F_SETFL, fcntl(stdin_w_.get(), F_GETFL) | O_NONBLOCK);
  if (req_.stdin_data.empty()) stdin_w_.reset();
  return true;
}

bool TaskService::Runner::reattach() {
  if (!task_.process_id || !reattach_sandbox()) return false;
  auto p = s_.sandboxes_.find_process(*sandbox_, *task_.process_id);
  if (!p) return false;
  process_ = p;
  std::lock_guard lock(active_->mu);
  active_->process = p;
  exec_started_ = Clock::now();
  return true;
}

std::optional<api::SandboxUsage> TaskService::Runner::usage() {
  auto info = s_.sandboxes_.get(sandbox_->id);
  if (!info || !info->usage) return std::nullopt;
  return info->usage;
}

// Until the command ends (its own timeout is the reaper's), writing its
// stdin; a cancel kills it; the daemon stopping leaves it running.
bool TaskService::Runner::wait_command() {
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
void TaskService::Runner::judge_command(std::optional<int> exit_code, std::optional<int> sig,
                                        bool timed_out, bool killed, const std::string& failure) {
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

void TaskService::Runner::write_stdin() {
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

}  // namespace corral::daemon
