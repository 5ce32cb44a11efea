// Fuzz target for the audit-log verifier (verify_audit_log in
// src/store/audit_log.cc): `corral audit verify` reads a file an attacker
// may have edited. The first input byte picks what is fuzzed (its value
// modulo 2, so corpus files can start with '0' or '1'):
//   0 the rest of the input is the log file, as it is
//   1 a valid log is built (byte 1: how many records; the detail strings
//     come from the input up to the first "\n\n"), checked, then edited
//     by the ops that follow (flip, cut, insert, truncate, swap, drop or
//     duplicate lines) and checked again
// Properties, beyond "no crash": a log reported OK has as many records as
// lines and names the hash of its last line; a report that is not OK names
// a line of the file and says why in printable text; a log as written
// verifies; and an edited log never verifies, unless the edit only removed
// whole lines at its end (which the report's last-line hash then shows).
// An edit that only cut the log inside its last line (a write cut short),
// repaired as AuditLog::open does (an audit.repair record where the torn
// bytes began), verifies and lists the repair; the same record anywhere
// else does not verify.
// Works on a memfd, so the fuzzer never touches the disk.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/sha256.h"
#include "fuzz_checks.h"
#include "store/audit_log.h"

namespace {

using corral::fuzz::printable;
using corral::fuzz::require;
using nlohmann::json;

corral::VerifyReport verify(std::string_view bytes) {
  int fd = ::memfd_create("audit-fuzz", MFD_CLOEXEC);
  require(fd >= 0);
  require(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  auto report = corral::verify_audit_log("/proc/self/fd/" + std::to_string(fd));
  ::close(fd);
  require(report.has_value());
  return *report;
}

std::vector<std::string> lines_of(std::string_view bytes) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    std::size_t nl = bytes.find('\n', pos);
    if (nl == std::string_view::npos) nl = bytes.size();
    out.emplace_back(bytes.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

// What every report promises about itself.
void check_report(const corral::VerifyReport& r, std::string_view bytes) {
  auto lines = lines_of(bytes);
  if (r.ok) {
    require(r.problem == corral::AuditProblem::kNone && r.bad_line == 0);
    require(bytes.empty() || bytes.back() == '\n');
    require(r.records == lines.size());
    require(r.last_line_hash == (lines.empty() ? std::string(corral::kAuditGenesisPrev)
                                               : corral::sha256_hex(lines.back())));
    return;
  }
  require(r.problem != corral::AuditProblem::kNone);
  require(r.bad_line >= 1 && r.bad_line <= lines.size());
  require(r.records < r.bad_line);
  require(!r.reason.empty() && printable(r.reason));
}

// One record as AuditLog writes it (without its newline).
std::string record_line(json record, std::size_t seq, const std::string& prev) {
  record["seq"] = seq;
  record["time"] = "2026-12-01T00:00:00.000Z";
  record["prev"] = prev;
  record["hash"] = corral::sha256_hex(corral::audit_canonical(record));
  return corral::audit_canonical(record);
}

// A log as AuditLog::append writes it.
std::string build_log(const std::vector<std::string>& details) {
  std::string log;
  std::string prev(corral::kAuditGenesisPrev);
  for (std::size_t i = 0; i < details.size(); ++i) {
    std::string line = record_line({{"type", "fuzz"}, {"detail", details[i]}}, i + 1, prev);
    prev = corral::sha256_hex(line);
    log += line + "\n";
  }
  return log;
}

// `torn` is a log cut inside its last line: repaired as AuditLog::open
// repairs it, it verifies with the repair listed, and the repair record
// placed one line earlier (not where the torn bytes began) does not.
void check_repair(const std::string& torn) {
  const std::size_t nl = torn.rfind('\n');
  const std::string kept = nl == std::string::npos ? std::string() : torn.substr(0, nl + 1);
  const std::string cut = torn.substr(kept.size());
  const auto lines = lines_of(kept);
  const std::string prev = lines.empty() ? std::string(corral::kAuditGenesisPrev)
                                         : corral::sha256_hex(lines.back());
  const json repair = {{"type", std::string(corral::kAuditRepairType)},
                       {"offset", kept.size()},
                       {"dropped_bytes", cut.size()},
                       {"dropped_sha256", corral::sha256_hex(cut)},
                       {"reason", "fuzz"}};
  const std::string repaired = kept + record_line(repair, lines.size() + 1, prev) + "\n";
  auto r = verify(repaired);
  check_report(r, repaired);
  require(r.ok && r.records == lines.size() + 1 && r.repairs.size() == 1);
  require(r.repairs[0].offset == kept.size() && r.repairs[0].dropped_bytes == cut.size());
  require(r.repairs[0].dropped_sha256 == corral::sha256_hex(cut));
  if (lines.empty()) return;
  // The same claim, chained in one line earlier: its offset is not where it stands.
  const std::string before = kept.substr(0, kept.size() - lines.back().size() - 1);
  const auto earlier = lines_of(before);
  const std::string misplaced =
      before + record_line(repair, earlier.size() + 1,
                           earlier.empty() ? std::string(corral::kAuditGenesisPrev)
                                           : corral::sha256_hex(earlier.back())) +
      "\n";
  require(!verify(misplaced).ok);
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// Applies the edit ops in `ops` (3 bytes each) to `log`.
std::string edit(std::string log, std::string_view ops) {
  for (std::size_t i = 0; i + 3 <= ops.size(); i += 3) {
    auto op = static_cast<unsigned char>(ops[i]);
    auto a = static_cast<unsigned char>(ops[i + 1]);
    auto b = static_cast<unsigned char>(ops[i + 2]);
    std::size_t at = log.empty() ? 0 : (a * 257u + b) % log.size();
    auto lines = lines_of(log);
    std::size_t la = lines.empty() ? 0 : a % lines.size();
    std::size_t lb = lines.empty() ? 0 : b % lines.size();
    switch (op % 7) {
      case 0:  // flip bits of one byte
        if (!log.empty()) log[at] = static_cast<char>(log[at] ^ (1 + b % 255));
        break;
      case 1:  // cut a few bytes
        log.erase(at, 1 + b % 16);
        break;
      case 2:  // insert a byte
        log.insert(log.begin() + static_cast<std::ptrdiff_t>(at), static_cast<char>(b));
        break;
      case 3:  // truncate
        log.resize(at);
        break;
      case 4:  // swap two lines
        if (!lines.empty()) std::swap(lines[la], lines[lb]);
        log = join(lines);
        break;
      case 5:  // drop a line
        if (!lines.empty()) lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(la));
        log = join(lines);
        break;
      case 6:  // duplicate a line
        if (!lines.empty())
          lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(lb), lines[la]);
        log = join(lines);
        break;
    }
  }
  return log;
}

void fuzz_edits(std::string_view in) {
  if (in.empty()) return;
  std::size_t count = 1 + static_cast<unsigned char>(in[0]) % 6;
  in.remove_prefix(1);
  std::size_t end = in.find("\n\n");
  std::string_view text = in.substr(0, end);
  std::string_view ops = end == std::string_view::npos ? std::string_view() : in.substr(end + 2);
  std::vector<std::string> details;
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t from = text.size() * i / count;
    std::size_t to = text.size() * (i + 1) / count;
    details.emplace_back(text.substr(from, to - from));
  }

  const std::string log = build_log(details);
  auto pristine = verify(log);
  require(pristine.ok && pristine.records == count);
  check_report(pristine, log);

  const std::string edited = edit(log, ops);
  if (edited == log) return;
  if (!edited.empty() && edited.back() != '\n' && log.starts_with(edited)) check_repair(edited);
  auto r = verify(edited);
  check_report(r, edited);
  if (r.ok) {
    // Only a removed tail of whole lines passes; its hash tells it apart.
    require(log.starts_with(edited) && (edited.empty() || edited.back() == '\n'));
    require(r.last_line_hash != pristine.last_line_hash);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    check_report(verify(in), in);
  } else {
    fuzz_edits(in);
  }
  return 0;
}
