// Running mmdebstrap, tar and umoci for the image store (internal to
// src/image), on base/subprocess.h: in its own process group, stdin from
// /dev/null, output lines streamed to the caller's progress callback. While
// a build or import runs, SIGINT/SIGTERM/SIGHUP are forwarded to the tool's
// process group; the operation then fails and removes its partial tree
// instead of dying half-way.
#pragma once

#include <sys/wait.h>

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/subprocess.h"
#include "image/image_store.h"

namespace corral::image_detail {

// "<what> interrupted by SIGINT; the partial image was removed" once one
// of the forwarded signals arrived.
Status check_interrupted(const ForwardedSignals& signals, std::string_view what);

struct RunOptions {
  std::string cwd;              // empty: inherit
  bool capture_stdout = false;  // else stdout joins the line stream
  std::size_t stdout_limit = 64u << 20;
  const ForwardedSignals* signals = nullptr;  // forward signals to the tool
  int inherit_fd = -1;                        // an fd the tool and its descendants keep open
};

struct ToolResult {
  int wait_status = 0;
  std::string out;               // stdout when captured
  std::deque<std::string> tail;  // last lines of the stream
  bool ok() const { return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0; }
  // The line that says best what went wrong: mmdebstrap's last "E:" line,
  // else the first line that is not tar's closing "Exiting with failure".
  std::string error_line() const {
    for (auto it = tail.rbegin(); it != tail.rend(); ++it) {
      if (it->rfind("E: ", 0) == 0) return *it;
    }
    for (const auto& l : tail) {
      if (l.find("Exiting with failure status") == std::string::npos) return l;
    }
    return tail.empty() ? std::string() : tail.back();
  }
};

Result<ToolResult> run_tool(const std::vector<std::string>& args, const ProgressFn& progress,
                            const RunOptions& opts);

// "<tool> failed (exit status 1): <its best error line>".
Status tool_failed(const std::vector<std::string>& args, const ToolResult& r,
                   std::string hint = {});

}  // namespace corral::image_detail
