// TokenLimits: what was decided about a sandbox's broker tokens after they
// were issued (issue 15, S4): a deadline they may not outlive (a task's
// 1.5 x timeout) and whether they were revoked (the task ended, the
// sandbox is kept). Kept as one small JSON file per sandbox under
// <data_dir>/token-limits, so that a daemon restarted with the sandbox still
// running does not hand it fresh, unbounded tokens (SecretService::reattach
// issues new ones and applies this). Holds no token and no value.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "base/result.h"

namespace corral::daemon {

struct TokenLimit {
  std::optional<std::chrono::system_clock::time_point> deadline;  // not after
  bool revoked = false;
  bool any() const { return deadline.has_value() || revoked; }
};

class TokenLimits {
 public:
  explicit TokenLimits(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }

  // Creates the directory (0700).
  Status open() const;
  // The sandbox's limit; an empty one when none was stored. A file that
  // cannot be read or parsed is an error (the caller fails closed).
  Result<TokenLimit> get(const std::string& sandbox_id) const;
  // Replaces it (written to a temporary file, then renamed).
  Status put(const std::string& sandbox_id, const TokenLimit& limit) const;
  // Forgets it (the sandbox ended). Absent is no error.
  Status erase(const std::string& sandbox_id) const;

 private:
  Result<std::string> path_of(const std::string& sandbox_id) const;
  std::string dir_;
};

}  // namespace corral::daemon
