#include "daemon/background_process.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "daemon/file_ops.h"
#include "daemon/sandbox_service.h"
#include "daemon/sandbox_terminal.h"

namespace corral::daemon {

namespace {

constexpr const char* kOutputDir = "corral-daemon";  // in the layer root, not under upper/
// A background process's stdin is a pipe the daemon keeps: the initial
// input must fit in it; the rest goes through the stdin routes.
constexpr std::size_t kInitialStdin = 1 << 20;

}  // namespace

std::string process_output_name(const std::string& process_id, std::string_view stream) {
  return std::string(kOutputDir) + "/" + process_id + "." + std::string(stream);
}

ApiResult<std::shared_ptr<ProcessEntry>> start_background_process(
    SandboxService& sandboxes, const std::shared_ptr<SandboxEntry>& sandbox,
    const api::ExecRequest& request, std::optional<std::string> tag) {
  if (request.stdin_data.size() > kInitialStdin)
    return api_fail(api::ApiErrorCode::kInvalidValue,
                    "the initial stdin of a background process is at most 1 MiB (" +
                        std::to_string(request.stdin_data.size()) + " bytes given)",
                    "stdin", "send the rest with POST .../processes/{pid}/stdin");
  const int layer = sandbox->live->layer_root_fd();
  if (mkdirat(layer, kOutputDir, 0700) != 0 && errno != EEXIST)
    return api_fail(api::ApiErrorCode::kInternal, std::string("output dir: ") + strerror(errno));
  const std::uint64_t rid = new_request_id();
  const std::string pid = process_id_for(rid);
  UniqueFd files[2];
  for (int i = 0; i < 2; ++i) {
    std::string name = process_output_name(pid, i == 0 ? "stdout" : "stderr");
    files[i] =
        UniqueFd(openat(layer, name.c_str(),
                        O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!files[i]) {
      int e = errno;
      if (e == ENOSPC || e == EDQUOT)
        return api_fail(api::ApiErrorCode::kInsufficientStorage,
                        "the sandbox's disk is full; no room for process output");
      return api_fail(api::ApiErrorCode::kInternal, "output file: " + std::string(strerror(e)));
    }
  }
  UniqueFd stdio[3];
  UniqueFd stdin_w, master;
  std::shared_ptr<TerminalPump> pump;
  if (request.terminal) {
    // A terminal: the slave is all three stdio fds; what the process
    // writes reaches the stdout file through the pump (stderr stays empty:
    // a terminal has one output).
    auto root = open_sandbox_root(sandboxes, *sandbox);
    if (!root) return tl::unexpected(root.error());
    auto term = open_sandbox_terminal(*root, sandbox->live->host_user_uid(), request.terminal->cols,
                                      request.terminal->rows);
    if (!term) return tl::unexpected(term.error());
    for (auto& fd : stdio) fd = UniqueFd(fcntl(term->slave.get(), F_DUPFD_CLOEXEC, 0));
    if (!stdio[0] || !stdio[1] || !stdio[2])
      return api_fail(api::ApiErrorCode::kInternal, "could not duplicate the terminal");
    UniqueFd pump_end(fcntl(term->master.get(), F_DUPFD_CLOEXEC, 0));
    if (!pump_end)
      return api_fail(api::ApiErrorCode::kInternal, "could not duplicate the terminal");
    pump = TerminalPump::start(std::move(pump_end), std::move(term->slave), std::move(files[0]));
    master = std::move(term->master);
  } else {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
      return api_fail(api::ApiErrorCode::kInternal, "could not make a pipe");
    stdio[0] = UniqueFd(fds[0]);
    stdio[1] = std::move(files[0]);
    stdio[2] = std::move(files[1]);
    stdin_w = UniqueFd(fds[1]);
  }
  auto proc = sandboxes.spawn(sandbox, request, true, stdio, rid, std::move(tag));
  if (!proc) return tl::unexpected(proc.error());
  ProcessEntry& p = **proc;
  {
    std::lock_guard lock(p.mu);
    if (!p.finished()) p.terminal = std::move(master);
    p.terminal_pump = pump;
    if (pump && p.finished()) pump->process_ended();
    // A process can end before we get here (`true` under load): its end
    // closed the fds it had then, so a writer kept now would stay open for
    // as long as the finished process is listed.
    if (p.finished())
      stdin_w.reset();
    else
      p.stdin_writer = std::move(stdin_w);
    if (p.stdin_writer && !request.stdin_data.empty()) {
      // Initial stdin, into the empty pipe grown to hold it (at most 1 MiB,
      // checked above); never blocking on a process that does not read.
      (void)fcntl(p.stdin_writer.get(), F_SETPIPE_SZ, 1 << 20);
      (void)fcntl(p.stdin_writer.get(), F_SETFL, fcntl(p.stdin_writer.get(), F_GETFL) | O_NONBLOCK);
      (void)!write(p.stdin_writer.get(), request.stdin_data.data(), request.stdin_data.size());
    }
  }
  // Reported once the zygote said whether it runs (bounded wait).
  std::string failure;
  {
    std::unique_lock lock(p.mu);
    p.cv.wait_for(lock, std::chrono::seconds(5),
                  [&] { return p.phase != ProcessEntry::Phase::kStarting; });
    if (p.phase == ProcessEntry::Phase::kFailed) failure = p.failure;
  }
  if (!failure.empty()) {
    // Why it could not start, where its output is read (as an exec's stderr
    // says it): exit code 127 alone does not tell which name was missing.
    UniqueFd err(openat(layer, process_output_name(pid, "stderr").c_str(),
                        O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW));
    const std::string line = "corral: " + failure + "\n";
    if (err) (void)!write(err.get(), line.data(), line.size());
  }
  return std::move(*proc);
}

std::optional<OutputFollower> OutputFollower::open(
    int layer_fd, const std::string& process_id, std::string_view stream,
    std::shared_ptr<const secrets::RedactionSet> redaction, bool from_end) {
  OutputFollower f;
  f.file_ = UniqueFd(openat(layer_fd, process_output_name(process_id, stream).c_str(),
                            O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!f.file_) return std::nullopt;
  if (from_end) {
    struct stat st;
    if (fstat(f.file_.get(), &st) == 0) f.pos_ = static_cast<std::uint64_t>(st.st_size);
  }
  if (redaction) f.redactor_ = std::make_unique<secrets::RedactStream>(std::move(redaction));
  return std::optional<OutputFollower>(std::move(f));
}

std::string OutputFollower::read_some(std::size_t max) {
  if (raw_.size() < max) raw_.resize(max);
  ssize_t n = pread(file_.get(), raw_.data(), max, static_cast<off_t>(pos_));
  if (n <= 0) return {};
  pos_ += static_cast<std::uint64_t>(n);
  const std::string_view got(raw_.data(), static_cast<std::size_t>(n));
  if (!redactor_) return std::string(got);
  std::string clean;
  redactor_->feed(got, clean);
  return clean;
}

std::string OutputFollower::finish() {
  std::string clean;
  if (redactor_) redactor_->finish(clean);
  return clean;
}

}  // namespace corral::daemon
