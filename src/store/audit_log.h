// AuditLog: the daemon's append-only, hash-chained record of what happened
// (sandbox lifecycle transitions, exec start and exit, every file operation).
// One JSON object per line. Each record carries `seq` (1, 2, ...), `time`
// (RFC 3339 UTC, milliseconds), `prev` (hex SHA-256 of the previous line's
// exact bytes, 64 zeros for the first) and `hash` (hex SHA-256 of the
// record's canonical serialization without `hash`). verify_audit_log() then
// finds an edited, reordered, removed or truncated line; verify_audit_set()
// does so across rotated files (store/audit_verify.h). Format and limits:
// docs/audit.md.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "store/audit_verify.h"

namespace corral {

// Rotation and retention (serve.audit; docs/audit.md). When a record
// would take the active file past `max_file_size`, the file is renamed
// <path>.<seq of its first record, 12 digits> and a new one begins with an
// audit.rotate record; the chain (seq and prev) runs on across files.
// Retention then deletes the oldest rotated files beyond `keep_files` or
// older than `max_age`, after an audit.retention record in the new file
// names them and the hash of the last record they held, so that a
// verifier tells retention from someone deleting a file.
struct AuditRotation {
  std::uint64_t max_file_size = 0;  // 0: never rotate
  std::uint32_t keep_files = 0;     // rotated files kept; 0: all
  std::chrono::seconds max_age{0};  // rotated files older are deleted; 0: no limit
};

class AuditLog {
 public:
  // Opens (creating it 0600 if absent) the log at `path` for appending. Holds
  // an exclusive flock for the object's lifetime: one writer per file; a
  // second open fails with kUnavailable. Checks the last record (and its
  // link to the one before) and continues the chain from it; a log whose
  // tail is damaged (edited, not JSON, not chained) is refused, so nothing
  // is ever written after a tampered point. One exception: bytes after the
  // last newline (a write cut short by a crash, at most a record's size)
  // are replaced by an audit.repair record in the chain, once the records
  // before them have passed the same checks (repair_note() says so). An
  // empty (or absent) active file next to rotated files continues the
  // chain from the newest of them.
  static Result<AuditLog> open(const std::string& path);

  AuditLog(AuditLog&&) noexcept;
  AuditLog& operator=(AuditLog&&) noexcept;
  ~AuditLog();

  // Rotation and retention from now on (applied at the next append).
  void set_rotation(const AuditRotation& rotation);

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
  // What open() repaired, for the daemon's log ("" when nothing).
  const std::string& repair_note() const;

 private:
  struct State;
  explicit AuditLog(std::unique_ptr<State> state);
  static Result<std::string> format_record(const State& s, nlohmann::json record,
                                           std::string& line_hash);
  static Status write_record(State& s, nlohmann::json record);
  static Status repair_torn_tail(State& s, const std::string& torn);
  static Status rotate(State& s);
  static Status apply_retention(State& s);
  std::unique_ptr<State> state_;
};

}  // namespace corral
