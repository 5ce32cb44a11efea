// Helpers for integration and security tests: run the real `corral`
// binary, capture its output and JSON report, and skip (or, with
// CORRAL_MUST_WORK=1, fail) when the host lacks a needed feature.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "support/skip.h"  // CORRAL_SKIP_OR_FAIL, must_work

namespace corral::testing {

struct RunOutcome {
  int exit_code = -1;     // corral's exit status (or 128+signal)
  std::string out;        // stdout
  std::string err;        // stderr
  nlohmann::json report;  // parsed --report file (null if none)
  std::chrono::milliseconds wall{0};
};

// Path of the binaries under test (from the environment ctest sets).
std::string corral_bin();
std::string probe_bin();
std::string source_dir();

// Runs `corral <args...>` with `stdin_data` on stdin. A --report file is
// added automatically (before "--", if present) and parsed into `report`.
// Kills corral after `timeout`.
RunOutcome run_corral(std::vector<std::string> args, std::string_view stdin_data = {},
                      std::chrono::seconds timeout = std::chrono::seconds(120));

// Shorthand: `corral run <opts...> -- <cmd...>`.
RunOutcome run_sandbox(std::vector<std::string> opts, std::vector<std::string> cmd,
                       std::string_view stdin_data = {},
                       std::chrono::seconds timeout = std::chrono::seconds(120));

// Runs a host command (sh -c) and returns its stdout; exit status in *status.
std::string host_sh(const std::string& script, int* status = nullptr);

// The whole content of a host file ("" when it cannot be read).
std::string read_host_file(const std::string& path);

// Makes a fresh temporary directory (removed by the caller or left in /tmp
// for debugging on failure). 0755, owned by root. Its name carries this
// process's pid ("/tmp/corral-test-<tag>-p<pid>-XXXXXX"); the first call in
// a process sweeps the dirs of dead ones first.
std::string make_temp_dir(std::string_view tag);

// Removes the temp dirs of test processes that died without their
// destructors (a crash, a timeout's SIGKILL), after detaching what is
// mounted below them (a daemon's secret tmpfs). Dirs of live processes,
// and anything not named by make_temp_dir, are left alone.
void sweep_dead_temp_dirs();

// ---------------------------------------------------------------------------
// Added for the `corral run` integration tests (tests/integration/run_*).

// `corral <args...>` started in the background, for tests that must act
// while the sandbox runs (send signals, look at the host). Like run_corral,
// a --report file is added before "--" when args[0] is "run". stdin is a
// pipe kept open until close_stdin() or wait(). If the test ends without
// wait(), the destructor SIGKILLs this corral process (only it) and reaps it.
class CorralProcess {
 public:
  explicit CorralProcess(std::vector<std::string> args);
  ~CorralProcess();
  CorralProcess(const CorralProcess&) = delete;
  CorralProcess& operator=(const CorralProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  void close_stdin();
  // Sends `sig` to the corral process itself.
  bool send_signal(int sig);
  // Collects output until stdout contains `needle` (true), or the timeout
  // passes or both outputs reach EOF (false).
  bool wait_for_stdout(std::string_view needle, std::chrono::milliseconds timeout);
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }
  // Reads to EOF, reaps corral (SIGKILL after `timeout`, recorded as a
  // failure) and parses the report. wall counts from the start.
  RunOutcome wait(std::chrono::seconds timeout = std::chrono::seconds(120));

 private:
  // One poll round over stdout/stderr of at most `ms`; false when both are closed.
  bool pump(int ms);
  pid_t pid_ = -1;
  int in_fd_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_, err_;
  std::string report_dir_, report_path_;
  std::chrono::steady_clock::time_point start_;
  bool reaped_ = false;
};

// Host processes (any pid namespace) whose command line, arguments joined
// by spaces, contains `needle` (or, with `exact`, equals it); each entry is
// "PID: CMDLINE". The calling process is left out.
std::vector<std::string> host_processes_matching(std::string_view needle, bool exact = false);

// /proc/<pid>/stat field 22 (start time in clock ticks since boot), or 0
// when there is no such process: read from the host, not through corral.
std::uint64_t host_start_time(std::int64_t pid);

// The host interface that has IPv4 `address` ("" if none, or `address` is "").
std::string interface_with(const std::string& address);

// Bytes available to unprivileged users on the file system holding `path`
// (statvfs f_bavail * f_frsize); 0 if statvfs fails.
std::uint64_t free_disk_bytes(const std::string& path);

// F3: asserts (non-fatally) that the sandbox of `report` left nothing on the
// host: residue_bytes 0, residue empty, no cgroup named after its
// sandbox_id under /sys/fs/cgroup/*/corral/ (or /sys/fs/cgroup/corral/), no
// line of /proc/self/mountinfo naming it or corral's staging directory, and
// no <run_dir>/sandboxes/<id>.lock. `what` labels the failures.
void expect_sandbox_cleaned_up(const nlohmann::json& report, std::string_view what);

}  // namespace corral::testing
