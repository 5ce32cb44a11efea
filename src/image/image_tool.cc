#include "image/image_tool.h"

#include <signal.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace corral::image_detail {

namespace {

class LineSplitter {
 public:
  explicit LineSplitter(const ProgressFn& progress, std::deque<std::string>& tail)
      : progress_(progress), tail_(tail) {}
  void feed(const char* data, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      char c = data[i];
      if (c == '\n' || c == '\r') {
        flush();
      } else if (partial_.size() < 4096) {
        partial_.push_back(c);
      }
    }
  }
  void flush() {
    if (partial_.empty()) return;
    if (progress_) progress_(partial_);
    tail_.push_back(partial_);
    if (tail_.size() > 20) tail_.pop_front();
    partial_.clear();
  }

 private:
  const ProgressFn& progress_;
  std::deque<std::string>& tail_;
  std::string partial_;
};

std::string install_hint(const std::string& tool) {
  if (tool == "tar") return "install GNU tar: apt-get install -y tar";
  return "install it: apt-get install -y " + tool;
}

}  // namespace

Status check_interrupted(const ForwardedSignals& signals, std::string_view what) {
  int sig = signals.pending();
  if (sig == 0) return ok();
  const char* name = sigabbrev_np(sig);
  return make_error(ErrorCode::kSystem, std::string(what) + " interrupted by SIG" +
                                            (name != nullptr ? name : "?") +
                                            "; the partial image was removed");
}

Result<ToolResult> run_tool(const std::vector<std::string>& args, const ProgressFn& progress,
                            const RunOptions& opts) {
  if (args.empty()) return make_error(ErrorCode::kInternal, "run_tool: empty argv");
  // Looked up in PATH here, so that the child only has to call execve.
  auto exe = find_program(args[0]);
  if (!exe) {
    return errno_error("exec " + args[0] + " (not found in PATH)", ENOENT, install_hint(args[0]));
  }
  if (opts.signals != nullptr) CORRAL_TRY(check_interrupted(*opts.signals, args[0]));

  ToolResult result;
  LineSplitter lines(progress, result.tail);
  SubprocessOptions sub;
  sub.argv = args;
  sub.program = *exe;
  sub.cwd = opts.cwd;
  sub.on_stderr = [&](std::string_view chunk) { lines.feed(chunk.data(), chunk.size()); };
  sub.merge_stdout = !opts.capture_stdout;
  sub.output_limit = opts.stdout_limit;
  sub.death_signal = SIGTERM;  // mmdebstrap cleans up its mounts on SIGTERM
  sub.new_process_group = true;
  sub.forward_signals = opts.signals;
  sub.keep_fd = opts.inherit_fd;
  sub.exec_hint = [&](int err) { return err == ENOENT ? install_hint(args[0]) : std::string(); };
  auto run = run_subprocess(sub);
  lines.flush();
  if (!run) return tl::unexpected(run.error());
  result.wait_status = run->wait_status;
  result.out = std::move(run->out);
  return result;
}

Status tool_failed(const std::vector<std::string>& args, const ToolResult& r, std::string hint) {
  std::string msg = args[0] + " failed (" + describe_wait_status(r.wait_status) + ")";
  std::string detail = r.error_line();
  if (!detail.empty()) msg += ": " + detail;
  return make_error(ErrorCode::kSystem, std::move(msg), std::move(hint));
}

}  // namespace corral::image_detail
