// Checking the audit log's hash chain (docs/audit.md): one file, a log
// given as bytes (tests, the fuzzer), and a rotated set (the active
// audit.log and its rotated files audit.log.<first seq>), where the chain
// continues from file to file and retention may have deleted the oldest
// files, saying so in an `audit.retention` record first.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace corral {

// `prev` of the first record.
inline constexpr std::string_view kAuditGenesisPrev =
    "0000000000000000000000000000000000000000000000000000000000000000";

// The record types the log writes about itself.
inline constexpr std::string_view kAuditRotateType = "audit.rotate";
inline constexpr std::string_view kAuditRetentionType = "audit.retention";
// Written by AuditLog::open when it removed a torn last line (a write cut
// short by a crash): where the bytes were, how many, their SHA-256.
inline constexpr std::string_view kAuditRepairType = "audit.repair";

enum class AuditProblem {
  kNone,
  kBadJson,    // a line is not JSON (or is empty)
  kBadRecord,  // JSON, but not a record (missing/mistyped seq, time, prev, hash)
  kEdited,     // the content no longer matches its hash, or the line was rewritten
  kReordered,  // a record appears before one with a lower seq
  kMissing,    // one or more records (or whole files) were removed
  kTruncated,  // the last line is cut short (no final newline)
};

std::string_view audit_problem_name(AuditProblem problem);

// An audit.repair record found by a verifier: the daemon removed a torn
// last line there (docs/audit.md).
struct AuditRepair {
  std::string file;          // where the record is now (set by verify_audit_set)
  std::uint64_t line = 0;    // its line, 1-based
  std::uint64_t seq = 0;     // its seq
  std::uint64_t offset = 0;  // where the removed bytes began: the record's own line starts there
  std::uint64_t dropped_bytes = 0;
  std::string dropped_sha256;
};

struct VerifyReport {
  bool ok = true;
  std::uint64_t records = 0;  // complete, valid records before the first problem
  // First bad line, 1-based (0 when ok), what is wrong with it, and details.
  std::uint64_t bad_line = 0;
  AuditProblem problem = AuditProblem::kNone;
  std::string reason;
  // SHA-256 of the last valid line (the start's prev if none): compare it
  // with an anchored copy to detect a removed suffix.
  std::string last_line_hash = std::string(kAuditGenesisPrev);
  // seq of the first and last valid records (0 if none).
  std::uint64_t first_seq = 0;
  std::uint64_t last_seq = 0;
  // The audit.repair records among the valid ones, in order.
  std::vector<AuditRepair> repairs;
};

// Where a chain starts: the seq and prev its first record must have. A
// whole log starts at seq 1 with the genesis prev; a rotated file at the
// seq after its predecessor's last, chained to its last line.
// `from_first_record`: take whatever the first record says (one rotated
// file checked on its own).
struct AuditChainStart {
  std::uint64_t seq = 1;
  std::string prev = std::string(kAuditGenesisPrev);
  bool from_first_record = false;
};

// Checks the whole file from `start`. An error only when it cannot be
// read; a damaged log is a VerifyReport with ok == false. An empty file is
// a valid log.
Result<VerifyReport> verify_audit_log(const std::string& path, const AuditChainStart& start = {});

// The same for a log held in memory (lines separated by '\n'). Never
// fails and never throws, whatever the bytes: the fuzz target's entry.
VerifyReport verify_audit_bytes(std::string_view bytes, const AuditChainStart& start = {});

// One file of a rotated set, oldest first.
struct AuditFile {
  std::string path;
  std::uint64_t name_seq = 0;  // from the name (audit.log.<seq>); 0 for the active file
  bool active = false;
};

// The rotated files next to `active_path` (<active_path>.<digits>, ordered
// by that number), then the active file itself (if it exists).
Result<std::vector<AuditFile>> list_audit_files(const std::string& active_path);

struct SetVerifyReport {
  bool ok = true;
  std::size_t files = 0;
  std::uint64_t records = 0;  // valid records in the files present
  std::uint64_t first_seq = 0;
  std::uint64_t last_seq = 0;
  // Records 1..retained_from-1 were deleted by retention, as an
  // audit.retention record in the set says (0: none were).
  std::uint64_t removed_by_retention_through = 0;
  std::string last_line_hash = std::string(kAuditGenesisPrev);
  // The torn last lines the daemon removed, as its audit.repair records
  // say, oldest first.
  std::vector<AuditRepair> repairs;
  // Where the first problem is: the file, its line (1-based; 0 when it is
  // about the file as a whole, e.g. a file before it is gone).
  std::string bad_file;
  std::uint64_t bad_line = 0;
  AuditProblem problem = AuditProblem::kNone;
  std::string reason;
};

// Checks every file of the set in order, the chain between them, and that
// records missing before the oldest file were deleted by retention (an
// audit.retention record names them and the hash of the last one).
Result<SetVerifyReport> verify_audit_set(const std::string& active_path);

// The last `n` lines of the log (without their newlines), oldest first. A
// truncated last line is included as it is.
Result<std::vector<std::string>> tail_audit_log(const std::string& path, std::size_t n);

// The canonical serialization the hash covers: compact JSON, keys sorted,
// invalid UTF-8 replaced by U+FFFD. Exposed for tests and other verifiers.
std::string audit_canonical(const nlohmann::json& record);

}  // namespace corral
