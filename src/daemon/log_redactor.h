// LogRedactor: the daemon's own output (stdout and stderr: start-up lines,
// warnings, whatever a library prints) passes a redactor before it
// reaches the terminal or the journal (issue 5, S3: "daemon logs").
// fds 1 and 2 are replaced by pipes; one thread reads them, redacts, and
// writes to the original fds. Being the fds, not a logging call, nothing
// written by this process can go around it.
#pragma once

#include <memory>

#include "base/result.h"
#include "secrets/redactor.h"

namespace corral::daemon {

class LogRedactor {
 public:
  // Call when the daemon is still one thread... or at least before any
  // thread writes to fds 1 and 2 concurrently with the swap.
  static Result<std::unique_ptr<LogRedactor>> start(
      std::shared_ptr<const secrets::RedactionSet> set);
  // Puts the original fds back, then writes out what is still held.
  ~LogRedactor();
  LogRedactor(const LogRedactor&) = delete;
  LogRedactor& operator=(const LogRedactor&) = delete;

  struct Impl;

 private:
  explicit LogRedactor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace corral::daemon
