// Helpers for integration and security tests: run the real `corral`
// binary, capture its output and JSON report, and skip (or, with
// CORRAL_MUST_WORK=1, fail) when the host lacks a needed feature.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace corral::testing {

struct RunOutcome {
  int exit_code = -1;      // corral's exit status (or 128+signal)
  std::string out;         // stdout
  std::string err;         // stderr
  nlohmann::json report;   // parsed --report file (null if none)
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

bool must_work();

// Makes a fresh temporary directory (removed by the caller or left in /tmp
// for debugging on failure). 0755, owned by root.
std::string make_temp_dir(std::string_view tag);

}  // namespace corral::testing

// Skips with the reason printed, unless CORRAL_MUST_WORK=1 makes it a failure.
#define CORRAL_SKIP_OR_FAIL(reason)                                      \
  do {                                                                   \
    if (::corral::testing::must_work()) {                                \
      FAIL() << "required feature missing (CORRAL_MUST_WORK=1): " << (reason); \
    }                                                                    \
    GTEST_SKIP() << (reason);                                            \
  } while (0)
