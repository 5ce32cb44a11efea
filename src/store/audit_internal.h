// Helpers shared by the audit log's writer (audit_log.cc) and its
// verifier (audit_verify.cc). Not an API.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"
#include "store/audit_verify.h"

namespace corral::audit_detail {

// One line checked on its own: parses, is a record, is canonical, and its
// hash matches its content. `record` is the parsed line (without "hash").
struct LineCheck {
  AuditProblem problem = AuditProblem::kNone;
  std::string reason;
  std::uint64_t seq = 0;
  std::string prev;
  std::string type;
  nlohmann::json record;
};
LineCheck check_line(const std::string& line);

// Reads an fd line by line, telling whether each line had its newline.
class LineReader {
 public:
  explicit LineReader(int fd) : fd_(fd) {}
  // False at the end of the file.
  Result<bool> next(std::string& line, bool& has_newline);

 private:
  int fd_;
  std::string buf_;
  std::size_t pos_ = 0;
};

// The last `n` lines of the file (oldest first) and whether the last one
// ended with a newline.
struct Tail {
  std::vector<std::string> lines;
  bool last_has_newline = true;
};
Result<Tail> read_tail(int fd, std::size_t n);

// The first line of the file at `path` ("" for an empty file), at most
// `limit` bytes; has_newline false if it has none.
Result<std::string> read_first_line(const std::string& path, bool& has_newline);

// "<active>.<seq>" with the seq zero-padded to 12 digits, so that a
// listing sorts in order.
std::string rotated_name(const std::string& active_path, std::uint64_t first_seq);

std::string missing_hint(int err);

}  // namespace corral::audit_detail
