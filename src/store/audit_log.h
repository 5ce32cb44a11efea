// AuditLog: the daemon's append-only, hash-chained record of what happened
// (sandbox lifecycle transitions, exec start and exit, every file operation).
// One JSON object per line. Each record carries `seq` (1, 2, ...), `time`
// (RFC 3339 UTC, milliseconds), `prev` (hex SHA-256 of the previous line's
// exact bytes, 64 zeros for the first) and `hash` (hex SHA-256 of the
// record's canonical serialization without `hash`). verify_audit_log() then
// finds an edited, reordered, removed or truncated line. Format and limits:
// docs/audit.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace corral {

// `prev` of the first record.
inline constexpr std::string_view kAuditGenesisPrev =
    "0000000000000000000000000000000000000000000000000000000000000000";

class AuditLog {
 public:
  // Opens (creating it 0600 if absent) the log at `path` for appending. Holds
  // an exclusive flock for the object's lifetime: one writer per file; a
  // second open fails with kUnavailable. Checks the last record (and its
  // link to the one before) and continues the chain from it; a log whose
  // tail is damaged (truncated, edited, not JSON) is refused, so nothing is
  // ever written after a tampered point.
  static Result<AuditLog> open(const std::string& path);

  AuditLog(AuditLog&&) noexcept;
  AuditLog& operator=(AuditLog&&) noexcept;
  ~AuditLog();

  // Appends `event` (a JSON object with a non-empty string "type"; the keys
  // seq, time, prev and hash are reserved) as one line: one write(2), then
  // fdatasync. Thread-safe. A failed write is rolled back with ftruncate;
  // if even that fails, the log refuses further appends.
  Status append(const nlohmann::json& event);

  // Default true: each append is fdatasync'd before it returns (survives a
  // power cut). false: each append is write(2)n before it returns (survives
  // a kill -9 of the daemon) and sync() makes it durable; the daemon calls
  // it every 100 ms (docs/audit.md).
  void set_sync_each_append(bool sync);

  // Every string of every record (values and keys) passes through `filter`
  // before it is hashed and written: the daemon's secret redactor (issue 5,
  // S3), the last step before a record leaves memory.
  using StringFilter = std::function<std::string(std::string_view)>;
  void set_string_filter(StringFilter filter);
  Status sync();

  const std::string& path() const;
  // seq of the last record written (0 for an empty log).
  std::uint64_t last_seq() const;
  // SHA-256 of the last line's bytes: the value to anchor elsewhere
  // (kAuditGenesisPrev for an empty log).
  std::string last_line_hash() const;

 private:
  struct State;
  explicit AuditLog(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

enum class AuditProblem {
  kNone,
  kBadJson,    // a line is not JSON (or is empty)
  kBadRecord,  // JSON, but not a record (missing/mistyped seq, time, prev, hash)
  kEdited,     // the content no longer matches its hash, or the line was rewritten
  kReordered,  // a record appears before one with a lower seq
  kMissing,    // one or more records were removed
  kTruncated,  // the last line is cut short (no final newline)
};

std::string_view audit_problem_name(AuditProblem problem);

struct VerifyReport {
  bool ok = true;
  std::uint64_t records = 0;  // complete, valid records before the first problem
  // First bad line, 1-based (0 when ok), what is wrong with it, and details.
  std::uint64_t bad_line = 0;
  AuditProblem problem = AuditProblem::kNone;
  std::string reason;
  // SHA-256 of the last valid line (kAuditGenesisPrev if none): compare it
  // with an anchored copy to detect a removed suffix.
  std::string last_line_hash = std::string(kAuditGenesisPrev);
};

// Checks the whole log. An error only when it cannot be read; a damaged log
// is a VerifyReport with ok == false. An empty file is a valid log.
Result<VerifyReport> verify_audit_log(const std::string& path);

// The last `n` lines of the log (without their newlines), oldest first. A
// truncated last line is included as it is.
Result<std::vector<std::string>> tail_audit_log(const std::string& path, std::size_t n);

// The canonical serialization the hash covers: compact JSON, keys sorted,
// invalid UTF-8 replaced by U+FFFD. Exposed for tests and other verifiers.
std::string audit_canonical(const nlohmann::json& record);

}  // namespace corral
