// One process the daemon started in a sandbox: an exec (bound to its
// request) or a background process (bound to nothing but its own timeout,
// a kill, or the sandbox's end). Shared between the request thread that
// started it, the monitor that hears from the zygote, and the reaper.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/unique_fd.h"

namespace corral::daemon {

class TerminalPump;

struct ProcessEntry {
  enum class Phase { kStarting, kRunning, kExited, kFailed };

  // Fixed at creation.
  std::string id;  // "p-" + 16 hex digits of request_id
  std::string sandbox_id;
  std::uint64_t request_id = 0;
  std::vector<std::string> argv;
  bool background = false;
  std::optional<std::string> tag;  // set at its start, never changed
  bool reattached = false;         // started by an earlier daemon run: its stdin is gone
  bool has_terminal = false;       // runs on a terminal (its output is the terminal's)
  std::int64_t started_at_ms = 0;
  std::chrono::steady_clock::time_point started{};
  std::optional<std::chrono::steady_clock::time_point> deadline;  // its timeout
  UniqueFd event;  // execs: eventfd, written when the process ends (poll it)

  // Guarded by mu.
  std::mutex mu;
  std::condition_variable cv;
  Phase phase = Phase::kStarting;
  UniqueFd pidfd;  // closed once a background process has finished
  pid_t host_pid = -1;
  std::uint32_t ns_pid = 0;  // its pid inside the sandbox (0: not known)
  int wait_status = 0;
  std::optional<int> exit_code;  // set in kExited and kFailed (126/127/125)
  std::optional<int> signal;
  std::string failure;  // kFailed: why it could not start
  bool timed_out = false;
  int pending_signal = 0;  // asked for before the zygote said it runs
  std::int64_t ended_at_ms = 0;
  UniqueFd stdin_writer;  // background: the daemon's end of its stdin, until it ends
  UniqueFd terminal;      // a terminal's process: the master (input, window size)
  // A terminal's pump (sandbox_terminal.h): told of the end, it copies
  // what is left into the output file.
  std::shared_ptr<TerminalPump> terminal_pump;

  bool finished() const { return phase == Phase::kExited || phase == Phase::kFailed; }
};

}  // namespace corral::daemon
