// Running a host tool (mmdebstrap, tar and umoci for images; nft for the
// firewall): fork and exec with an argv array, never a shell. The child
// gets stdin from a text or /dev/null, stdout and stderr on pipes, the
// parent-death signal, and none of the caller's other fds. Output is
// captured with a bound or streamed to a callback; an optional timeout
// kills the process.
//
// posix_spawn would be simpler but cannot set PR_SET_PDEATHSIG. Between
// fork and exec the child makes only async-signal-safe calls, so this is
// safe in a process with threads (the daemon).
#pragma once

#include <signal.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace corral {

// While in scope, SIGINT, SIGTERM and SIGHUP no longer end this process:
// they are recorded, and forwarded to the process group of a subprocess run
// with SubprocessOptions::forward_signals. The handlers are process-wide,
// so there is one scope at a time per process; the old handlers come back
// at the end of the scope. The caller decides what a recorded signal means
// (the image store gives up and removes its partial tree).
class ForwardedSignals {
 public:
  ForwardedSignals();
  ~ForwardedSignals();
  ForwardedSignals(const ForwardedSignals&) = delete;
  ForwardedSignals& operator=(const ForwardedSignals&) = delete;

  // The last signal received in this scope, 0 if none.
  int pending() const;

 private:
  struct sigaction old_[3] {};
};

struct SubprocessOptions {
  // argv[0] names the program in messages; it is executed as `program`, or
  // as argv[0] itself when `program` is empty. No PATH search happens after
  // fork (execvp is not async-signal-safe): see find_program().
  std::vector<std::string> argv;
  std::string program;
  // "NAME=value" entries; unset: this process's environment.
  std::optional<std::vector<std::string>> env;
  std::string cwd;                        // empty: ours
  std::optional<std::string> stdin_text;  // unset: /dev/null

  // stderr bytes as they arrive. When unset, stderr is captured into
  // SubprocessResult::err.
  std::function<void(std::string_view)> on_stderr;
  // stdout goes where stderr goes (the same pipe, so the order of lines
  // holds) instead of into SubprocessResult::out.
  bool merge_stdout = false;
  // A captured stream larger than this kills the process (its group with
  // new_process_group) and the run fails with kResourceExhausted.
  std::size_t output_limit = std::size_t{64} << 20;

  // 0: none. When it passes, the process (group) gets SIGKILL and the run
  // fails with kTimeout.
  std::chrono::milliseconds timeout{0};
  // Sent to the child when the thread that started it dies.
  int death_signal = SIGKILL;
  // The child leads a process group of its own (so that a signal reaches
  // the tools it starts as well).
  bool new_process_group = false;
  // Signals recorded by this scope are forwarded to the child's process
  // group (needs new_process_group); `signal_grace` after the first one,
  // the group gets SIGKILL.
  const ForwardedSignals* forward_signals = nullptr;
  std::chrono::seconds signal_grace{60};
  // One fd the child and its descendants keep open (a lock they hold);
  // every other fd above 2 is closed at exec, CLOEXEC or not.
  int keep_fd = -1;
  // The hint for an exec that failed with this errno ("install it: ...").
  std::function<std::string(int err)> exec_hint;
};

struct SubprocessResult {
  int wait_status = 0;  // as from waitpid
  std::string out;      // stdout, unless merge_stdout
  std::string err;      // stderr, unless on_stderr
  bool exited_ok() const;
};

// Runs the program to its end. An error only if it could not be run, its
// output outgrew the bound, or the timeout passed; its exit status is the
// caller's to judge. Messages: "exec ARGV0 (in CWD): ENOENT (hint)",
// "ARGV0: output larger than N bytes", "ARGV...: no answer after N s
// (killed)".
Result<SubprocessResult> run_subprocess(const SubprocessOptions& options);

// `name` looked up in $PATH (or a default PATH when it is unset), skipping
// relative directories; a name with a '/' is returned as it is. nullopt if
// no executable is found.
std::optional<std::string> find_program(const std::string& name);

// "exit status 2", "killed by SIGTERM".
std::string describe_wait_status(int status);

}  // namespace corral
