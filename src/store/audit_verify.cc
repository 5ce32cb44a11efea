#include "store/audit_verify.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <functional>
#include <optional>

#include "base/sha256.h"
#include "base/unique_fd.h"
#include "store/audit_internal.h"

namespace corral {

using nlohmann::json;

namespace audit_detail {

namespace {

constexpr std::size_t kChunk = 64 * 1024;
// A first line longer than a record can be is not a record.
constexpr std::size_t kMaxFirstLine = 1024 * 1024 + 1;

bool is_hex64(const json& v) {
  if (!v.is_string()) return false;
  const auto& s = v.get_ref<const std::string&>();
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Records are shallow (a spec is a few levels); a line nested deeper is
// refused before it is parsed and re-serialized, which recurses.
constexpr int kMaxDepth = 128;

bool nested_too_deep(const std::string& line) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char ch : line) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (ch == '\\') {
        escaped = true;
      } else if (ch == '"') {
        in_string = false;
      }
      continue;
    }
    if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > kMaxDepth) return true;
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace

std::string missing_hint(int err) {
  if (err == ENOENT)
    return "no audit log there yet (the daemon creates it); pass another with --log";
  if (err == EACCES) return "the audit log is readable by root only; run as root";
  return {};
}

LineCheck check_line(const std::string& line) {
  LineCheck c;
  auto fail = [&](AuditProblem p, std::string why) {
    c.problem = p;
    c.reason = std::move(why);
    return std::move(c);
  };
  if (line.empty()) return fail(AuditProblem::kBadJson, "empty line");
  if (nested_too_deep(line))
    return fail(AuditProblem::kBadRecord,
                "nested deeper than " + std::to_string(kMaxDepth) + " levels: not a record");
  json record = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (record.is_discarded()) return fail(AuditProblem::kBadJson, "not valid JSON");
  if (!record.is_object()) return fail(AuditProblem::kBadRecord, "not a JSON object");
  auto seq = record.find("seq");
  if (seq == record.end() || !seq->is_number_unsigned() || seq->get<std::uint64_t>() == 0) {
    return fail(AuditProblem::kBadRecord, "\"seq\" is missing or not a positive integer");
  }
  auto time = record.find("time");
  if (time == record.end() || !time->is_string()) {
    return fail(AuditProblem::kBadRecord, "\"time\" is missing or not a string");
  }
  auto prev = record.find("prev");
  if (prev == record.end() || !is_hex64(*prev)) {
    return fail(AuditProblem::kBadRecord, "\"prev\" is missing or not 64 lower-case hex digits");
  }
  auto hash = record.find("hash");
  if (hash == record.end() || !is_hex64(*hash)) {
    return fail(AuditProblem::kBadRecord, "\"hash\" is missing or not 64 lower-case hex digits");
  }
  c.seq = seq->get<std::uint64_t>();
  c.prev = prev->get<std::string>();
  std::string stored_hash = hash->get<std::string>();
  // The line must be exactly the canonical form, so that no byte outside the
  // hashed content (spacing, key order, escapes) can change unnoticed.
  if (audit_canonical(record) != line) {
    return fail(AuditProblem::kEdited,
                "the line is not in canonical form: its bytes were changed after it was written");
  }
  record.erase("hash");
  if (sha256_hex(audit_canonical(record)) != stored_hash) {
    return fail(AuditProblem::kEdited, "the content does not match its \"hash\"");
  }
  if (auto t = record.find("type"); t != record.end() && t->is_string())
    c.type = t->get<std::string>();
  c.record = std::move(record);
  return c;
}

Result<bool> LineReader::next(std::string& line, bool& has_newline) {
  for (;;) {
    std::size_t nl = buf_.find('\n', pos_);
    if (nl != std::string::npos) {
      line.assign(buf_, pos_, nl - pos_);
      pos_ = nl + 1;
      has_newline = true;
      return true;
    }
    buf_.erase(0, pos_);
    pos_ = 0;
    std::size_t old = buf_.size();
    buf_.resize(old + kChunk);
    ssize_t n;
    do {
      n = ::read(fd_, buf_.data() + old, kChunk);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      int err = errno;
      buf_.resize(old);
      return errno_error("read", err);
    }
    buf_.resize(old + static_cast<std::size_t>(n));
    if (n == 0) {
      if (buf_.empty()) return false;
      line = std::move(buf_);
      buf_.clear();
      has_newline = false;
      return true;
    }
  }
}

Result<Tail> read_tail(int fd, std::size_t n) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return errno_error("fstat");
  Tail tail;
  if (n == 0 || st.st_size == 0) return tail;
  std::string buf;
  off_t off = st.st_size;
  bool stripped = false;
  for (;;) {
    std::size_t want = static_cast<std::size_t>(std::min<off_t>(off, kChunk));
    std::string chunk(want, '\0');
    std::size_t got = 0;
    while (got < want) {
      ssize_t r = ::pread(fd, chunk.data() + got, want - got,
                          off - static_cast<off_t>(want) + static_cast<off_t>(got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return errno_error("pread");
      if (r == 0) break;  // shrank under us; what we have is what there is
      got += static_cast<std::size_t>(r);
    }
    chunk.resize(got);
    off -= static_cast<off_t>(want);
    buf.insert(0, chunk);
    if (!stripped && !buf.empty()) {
      stripped = true;
      tail.last_has_newline = buf.back() == '\n';
      if (tail.last_has_newline) buf.pop_back();
    }
    std::size_t newlines = 0;
    for (char ch : buf) newlines += ch == '\n';
    if (newlines >= n || off <= 0) break;
  }
  // Split from the end: at most n segments.
  std::size_t end = buf.size();
  while (tail.lines.size() < n) {
    std::size_t nl = end == 0 ? std::string::npos : buf.rfind('\n', end - 1);
    if (nl == std::string::npos) {
      // Only reached once the whole file is read: this is the first line.
      tail.lines.push_back(buf.substr(0, end));
      break;
    }
    tail.lines.push_back(buf.substr(nl + 1, end - nl - 1));
    end = nl;
  }
  std::reverse(tail.lines.begin(), tail.lines.end());
  return tail;
}

Result<std::string> read_first_line(const std::string& path, bool& has_newline) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    int err = errno;
    return errno_error("open(" + path + ")", err, missing_hint(err));
  }
  std::string out;
  has_newline = false;
  char buf[4096];
  while (out.size() < kMaxFirstLine) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("read(" + path + ")");
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (auto nl = out.find('\n'); nl != std::string::npos) {
      out.resize(nl);
      has_newline = true;
      break;
    }
  }
  return out;
}

std::string rotated_name(const std::string& active_path, std::uint64_t first_seq) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%012llu", static_cast<unsigned long long>(first_seq));
  return active_path + "." + digits;
}

}  // namespace audit_detail

using audit_detail::check_line;
using audit_detail::LineCheck;

std::string audit_canonical(const json& record) {
  // nlohmann::json objects are std::map: keys come out sorted.
  return record.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

std::string_view audit_problem_name(AuditProblem problem) {
  switch (problem) {
    case AuditProblem::kNone:
      return "ok";
    case AuditProblem::kBadJson:
      return "bad JSON";
    case AuditProblem::kBadRecord:
      return "bad record";
    case AuditProblem::kEdited:
      return "edited";
    case AuditProblem::kReordered:
      return "reordered";
    case AuditProblem::kMissing:
      return "missing line";
    case AuditProblem::kTruncated:
      return "truncated last line";
  }
  return "unknown";
}

namespace {

// Yields the next line: false at the end.
using NextLine = std::function<Result<bool>(std::string& line, bool& has_newline)>;
// Sees every valid audit.retention record.
using OnRetention = std::function<void(const json& record)>;

// An audit.repair record (`c`, on line `line_no`, whose line starts at
// byte `line_start` of its file): what it says, or why it cannot be one
// the writer made. Its removed bytes began where its own line begins
// (AuditLog::open writes it over them).
Result<AuditRepair> read_repair(const LineCheck& c, std::uint64_t line_no,
                                std::uint64_t line_start) {
  const json& r = c.record;
  auto number = [&](const char* key) -> std::optional<std::uint64_t> {
    auto it = r.find(key);
    if (it == r.end() || !it->is_number_unsigned()) return std::nullopt;
    return it->get<std::uint64_t>();
  };
  auto offset = number("offset");
  auto dropped = number("dropped_bytes");
  auto hash = r.find("dropped_sha256");
  if (!offset || !dropped || *dropped == 0 || hash == r.end() || !hash->is_string() ||
      hash->get_ref<const std::string&>().size() != 64)
    return make_error(ErrorCode::kInvalidArgument,
                      "an audit.repair record without \"offset\", a positive \"dropped_bytes\" "
                      "and a \"dropped_sha256\"");
  if (*offset != line_start)
    return make_error(ErrorCode::kInvalidArgument,
                      "an audit.repair record says the bytes it replaced began at offset " +
                          std::to_string(*offset) + ", but its own line starts at byte " +
                          std::to_string(line_start) + " of the file");
  return AuditRepair{{}, line_no, c.seq, *offset, *dropped, hash->get<std::string>()};
}

// The chain check over lines, wherever they come from.
Result<VerifyReport> verify_lines(const NextLine& next, const AuditChainStart& start,
                                  const OnRetention& on_retention) {
  VerifyReport report;
  report.last_line_hash = start.prev;
  auto bad = [&](std::uint64_t line_no, AuditProblem p, std::string why) {
    report.ok = false;
    report.bad_line = line_no;
    report.problem = p;
    report.reason = std::move(why);
    return report;
  };

  std::string line;
  bool has_newline = true;
  std::uint64_t line_no = 0;
  std::uint64_t expected = start.seq;
  std::string prev_hash = start.prev;
  std::uint64_t line_start = 0;  // byte offset of this line in the file
  std::uint64_t next_start = 0;
  for (;;) {
    auto more = next(line, has_newline);
    if (!more) return tl::unexpected(std::move(more).error());
    if (!*more) break;
    ++line_no;
    line_start = next_start;
    next_start += line.size() + 1;
    if (!has_newline) {
      return bad(line_no, AuditProblem::kTruncated,
                 "the last line has no final newline: the log was cut short (or a write was "
                 "interrupted)");
    }
    LineCheck c = check_line(line);
    if (c.problem != AuditProblem::kNone) return bad(line_no, c.problem, c.reason);
    if (line_no == 1 && start.from_first_record) {
      expected = c.seq;
      prev_hash = c.prev;
    }
    if (c.seq < expected) {
      return bad(
          line_no, AuditProblem::kReordered,
          "seq " + std::to_string(c.seq) + " comes after seq " + std::to_string(expected - 1));
    }
    if (c.seq > expected) {
      // Either the expected record comes later (reordered) or it is gone.
      std::uint64_t later = line_no;
      std::string rest;
      bool nl = true;
      for (;;) {
        auto r = next(rest, nl);
        if (!r) return tl::unexpected(std::move(r).error());
        if (!*r) break;
        ++later;
        json j = json::parse(rest, nullptr, false);
        if (j.is_object() && j.contains("seq") && j["seq"] == expected) {
          return bad(line_no, AuditProblem::kReordered,
                     "expected seq " + std::to_string(expected) + ", found seq " +
                         std::to_string(c.seq) + "; seq " + std::to_string(expected) +
                         " is on line " + std::to_string(later));
        }
      }
      std::uint64_t gone = c.seq - expected;
      return bad(line_no, AuditProblem::kMissing,
                 "expected seq " + std::to_string(expected) + ", found seq " +
                     std::to_string(c.seq) + ": " + std::to_string(gone) +
                     (gone == 1 ? " record was" : " records were") + " removed before this line");
    }
    if (c.prev != prev_hash) {
      if (line_no == 1) {
        return bad(line_no, AuditProblem::kEdited,
                   start.seq == 1 && start.prev == kAuditGenesisPrev
                       ? "the first record's \"prev\" is not the genesis value (64 zeros)"
                       : "the first record's \"prev\" is not the hash of the last line before "
                         "it (the previous file's last line was rewritten, or this one was)");
      }
      // Both lines hash correctly on their own, so one of them was rewritten
      // with a recomputed hash; name the earlier.
      report.records -= 1;
      return bad(line_no - 1, AuditProblem::kEdited,
                 "this line was rewritten with a recomputed hash: its sha256 does not match "
                 "\"prev\" of line " +
                     std::to_string(line_no));
    }
    if (on_retention && c.type == kAuditRetentionType) on_retention(c.record);
    if (c.type == kAuditRepairType) {
      auto repair = read_repair(c, line_no, line_start);
      if (!repair) return bad(line_no, AuditProblem::kBadRecord, repair.error().message);
      report.repairs.push_back(std::move(*repair));
    }
    prev_hash = sha256_hex(line);
    report.last_line_hash = prev_hash;
    if (report.first_seq == 0) report.first_seq = c.seq;
    report.last_seq = c.seq;
    ++expected;
    ++report.records;
  }
  return report;
}

Result<VerifyReport> verify_file(const std::string& path, const AuditChainStart& start,
                                 const OnRetention& on_retention) {
  const std::string ctx = "verifying audit log " + path;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    int err = errno;
    return tl::unexpected(
        errno_error("open(" + path + ")", err, audit_detail::missing_hint(err)).value().wrap(ctx));
  }
  audit_detail::LineReader reader(fd.get());
  auto report = verify_lines([&](std::string& l, bool& nl) { return reader.next(l, nl); }, start,
                             on_retention);
  if (!report) return tl::unexpected(std::move(report).error().wrap(ctx));
  return report;
}

std::string base_name(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

Result<VerifyReport> verify_audit_log(const std::string& path, const AuditChainStart& start) {
  return verify_file(path, start, {});
}

VerifyReport verify_audit_bytes(std::string_view bytes, const AuditChainStart& start) {
  std::size_t pos = 0;
  auto next = [&](std::string& line, bool& has_newline) -> Result<bool> {
    if (pos >= bytes.size()) return false;
    std::size_t nl = bytes.find('\n', pos);
    has_newline = nl != std::string_view::npos;
    std::size_t end = has_newline ? nl : bytes.size();
    line.assign(bytes.substr(pos, end - pos));
    pos = has_newline ? nl + 1 : bytes.size();
    return true;
  };
  auto report = verify_lines(next, start, {});
  return report ? *report : VerifyReport{};  // reading memory cannot fail
}

Result<std::vector<AuditFile>> list_audit_files(const std::string& active_path) {
  auto slash = active_path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : active_path.substr(0, slash + 1);
  const std::string prefix = base_name(active_path) + ".";
  std::vector<AuditFile> files;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    int err = errno;
    return errno_error("opendir(" + dir + ")", err, audit_detail::missing_hint(err));
  }
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (!name.starts_with(prefix) || name.size() == prefix.size() ||
        name.size() > prefix.size() + 20)
      continue;
    std::string digits = name.substr(prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
    files.push_back(AuditFile{active_path + "." + digits, std::stoull(digits), false});
  }
  closedir(d);
  std::sort(files.begin(), files.end(),
            [](const AuditFile& a, const AuditFile& b) { return a.name_seq < b.name_seq; });
  struct stat st {};
  if (stat(active_path.c_str(), &st) == 0) files.push_back(AuditFile{active_path, 0, true});
  return files;
}

Result<SetVerifyReport> verify_audit_set(const std::string& active_path) {
  auto files = list_audit_files(active_path);
  if (!files)
    return tl::unexpected(std::move(files).error().wrap("verifying audit log set " + active_path));
  if (files->empty()) {
    return make_error(ErrorCode::kNotFound,
                      "verifying audit log set " + active_path + ": no audit log there",
                      audit_detail::missing_hint(ENOENT));
  }
  SetVerifyReport set;
  set.files = files->size();
  // The newest retention statement: records through this seq were deleted,
  // and the last of them hashed to this.
  std::uint64_t retention_through = 0;
  std::string retention_hash;
  OnRetention on_retention = [&](const json& r) {
    auto through = r.find("removed_through_seq");
    auto hash = r.find("removed_last_hash");
    if (through == r.end() || !through->is_number_unsigned() || hash == r.end() ||
        !hash->is_string())
      return;
    if (through->get<std::uint64_t>() >= retention_through) {
      retention_through = through->get<std::uint64_t>();
      retention_hash = hash->get<std::string>();
    }
  };
  auto bad = [&](const std::string& file, std::uint64_t line, AuditProblem p, std::string why) {
    set.ok = false;
    set.bad_file = file;
    set.bad_line = line;
    set.problem = p;
    set.reason = std::move(why);
    return set;
  };

  AuditChainStart start;
  bool first = true;
  std::string previous;  // the file before, for messages
  for (const AuditFile& f : *files) {
    if (first) {
      // The oldest file may start later than seq 1 (retention): take its
      // start from its first record; checked against retention below.
      start.from_first_record = true;
    }
    auto r = verify_file(f.path, start, on_retention);
    if (!r) return tl::unexpected(std::move(r).error());
    if (!r->ok) {
      // A gap at a file's first line is about the files, not the line.
      if (!first && r->bad_line == 1 && r->problem == AuditProblem::kMissing) {
        return bad(f.path, 1, AuditProblem::kMissing,
                   "records " + std::to_string(start.seq) + " and on are missing between " +
                       base_name(previous) + " and " + base_name(f.path) + ": " + r->reason +
                       " (a file was deleted, not by retention, or a file was cut)");
      }
      set.records += r->records;
      // A crash cuts only the file being written; the daemon mends that
      // one at its next start (AuditLog::open), never a rotated file.
      if (f.active && r->problem == AuditProblem::kTruncated)
        r->reason +=
            "; `corral serve` removes such a partial last line of the active file at its next "
            "start and records it as audit.repair";
      return bad(f.path, r->bad_line, r->problem, r->reason);
    }
    for (AuditRepair& repair : r->repairs) {
      repair.file = f.path;
      set.repairs.push_back(std::move(repair));
    }
    if (r->records == 0) {
      if (!f.active) {
        return bad(f.path, 0, AuditProblem::kTruncated,
                   "a rotated file is empty: it always holds at least one record");
      }
      continue;
    }
    if (first) {
      set.first_seq = r->first_seq;
      first = false;
    }
    set.records += r->records;
    set.last_seq = r->last_seq;
    set.last_line_hash = r->last_line_hash;
    start = AuditChainStart{r->last_seq + 1, r->last_line_hash, false};
    previous = f.path;
  }

  // Records before the oldest file: deleted by retention, which said so
  // (and named the hash the oldest file's first record chains to), or gone.
  if (set.first_seq >= 1) {
    const std::string& oldest = (*files)[0].path;
    bool has_newline = false;
    auto line = audit_detail::read_first_line(oldest, has_newline);
    if (!line) return tl::unexpected(std::move(line).error());
    LineCheck c = check_line(*line);
    if (set.first_seq == 1) {
      if (c.prev != kAuditGenesisPrev)
        return bad(oldest, 1, AuditProblem::kEdited,
                   "the first record's \"prev\" is not the genesis value (64 zeros)");
      return set;
    }
    if (retention_through == 0) {
      return bad(oldest, 1, AuditProblem::kMissing,
                 "records 1 to " + std::to_string(set.first_seq - 1) +
                     " are missing before this file, and no audit.retention record says "
                     "retention deleted them: a file was deleted or cut");
    }
    if (retention_through + 1 < set.first_seq) {
      return bad(oldest, 1, AuditProblem::kMissing,
                 "retention deleted records through seq " + std::to_string(retention_through) +
                     ", but records " + std::to_string(retention_through + 1) + " to " +
                     std::to_string(set.first_seq - 1) +
                     " are missing too: a file was deleted or cut after retention");
    }
    if (retention_through + 1 == set.first_seq && c.prev != retention_hash) {
      return bad(oldest, 1, AuditProblem::kEdited,
                 "the first record's \"prev\" is not the hash retention recorded for the last "
                 "record it deleted (seq " +
                     std::to_string(retention_through) + ")");
    }
    // retention_through >= first_seq: retention said it deleted files that
    // are still here (it stopped between its record and the unlink).
    set.removed_by_retention_through = set.first_seq - 1;
  }
  return set;
}

Result<std::vector<std::string>> tail_audit_log(const std::string& path, std::size_t n) {
  const std::string ctx = "reading audit log " + path;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    int err = errno;
    return tl::unexpected(
        errno_error("open(" + path + ")", err, audit_detail::missing_hint(err)).value().wrap(ctx));
  }
  auto tail = audit_detail::read_tail(fd.get(), n);
  if (!tail) return tl::unexpected(std::move(tail).error().wrap(ctx));
  return std::move(tail->lines);
}

}  // namespace corral
