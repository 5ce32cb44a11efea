#include "store/audit_log.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <optional>
#include <utility>

#include "base/sha256.h"
#include "base/unique_fd.h"

namespace corral {

namespace {

using nlohmann::json;

constexpr std::size_t kChunk = 64 * 1024;
// A record is one line written with one write(2); anything near this size
// is a caller's bug (a file's content instead of its digest, say).
constexpr std::size_t kMaxRecordBytes = 1024 * 1024;
constexpr const char* kReserved[] = {"seq", "time", "prev", "hash"};

std::string damaged_hint(const std::string& path) {
  return "run `corral audit verify --log " + path +
         "` to find the first damaged line; keep the damaged file as evidence and move it "
         "aside, and a new log will be started";
}

std::string missing_hint(int err) {
  if (err == ENOENT)
    return "no audit log there yet (the daemon creates it); pass another with --log";
  if (err == EACCES) return "the audit log is readable by root only; run as root";
  return {};
}

bool is_hex64(const json& v) {
  if (!v.is_string()) return false;
  const auto& s = v.get_ref<const std::string&>();
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string rfc3339_now_ms() {
  struct timespec ts {};
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm {};
  gmtime_r(&ts.tv_sec, &tm);
  char buf[40];
  std::size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf + n, sizeof buf - n, ".%03ldZ", ts.tv_nsec / 1000000);
  return buf;
}

// Deeper than any record corral writes. The serialiser that checks a line's
// canonical form recurses once per level, so an edited line nested
// thousands deep would overflow the stack (found by fuzzing the verifier).
constexpr std::size_t kMaxRecordDepth = 64;

bool nested_deeper_than(std::string_view line, std::size_t limit) {
  std::size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : line) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

// One line checked on its own: parses, is a record, is canonical, and its
// hash matches its content.
struct LineCheck {
  AuditProblem problem = AuditProblem::kNone;
  std::string reason;
  std::uint64_t seq = 0;
  std::string prev;
};

LineCheck check_line(const std::string& line) {
  LineCheck c;
  auto fail = [&](AuditProblem p, std::string why) {
    c.problem = p;
    c.reason = std::move(why);
    return c;
  };
  if (line.empty()) return fail(AuditProblem::kBadJson, "empty line");
  if (nested_deeper_than(line, kMaxRecordDepth)) {
    return fail(AuditProblem::kBadRecord, "nested deeper than " + std::to_string(kMaxRecordDepth) +
                                              " levels: not a record corral writes");
  }
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
  return c;
}

// Reads an fd line by line, telling whether each line had its newline.
class LineReader {
 public:
  explicit LineReader(int fd) : fd_(fd) {}

  // False at the end of the file.
  Result<bool> next(std::string& line, bool& has_newline) {
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

}  // namespace

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

struct AuditLog::State {
  std::mutex mu;
  std::string path;
  UniqueFd fd;
  std::uint64_t seq = 0;                              // of the last record
  std::string prev = std::string(kAuditGenesisPrev);  // sha256 of the last line
  off_t size = 0;                                     // bytes we know are in the file
  std::string broken;                                 // why appends are refused, if they are
  bool sync_each_append = true;
  AuditLog::StringFilter filter;  // set before the first append
};

namespace {

// Applies `filter` to every string in `v` (keys too: a key can carry data).
json filter_strings(const json& v, const AuditLog::StringFilter& filter) {
  if (v.is_string()) return json(filter(v.get_ref<const std::string&>()));
  if (v.is_array()) {
    json out = json::array();
    for (const auto& item : v) out.push_back(filter_strings(item, filter));
    return out;
  }
  if (v.is_object()) {
    json out = json::object();
    for (auto it = v.begin(); it != v.end(); ++it)
      out[filter(it.key())] = filter_strings(it.value(), filter);
    return out;
  }
  return v;
}

}  // namespace

void AuditLog::set_string_filter(StringFilter filter) {
  std::lock_guard lock(state_->mu);
  state_->filter = std::move(filter);
}

void AuditLog::set_sync_each_append(bool sync) {
  std::lock_guard lock(state_->mu);
  state_->sync_each_append = sync;
}

Status AuditLog::sync() {
  // Not under the lock: appends go on while the disk works (a few ms).
  // What was written before the call is on disk when it returns.
  int fd;
  {
    std::lock_guard lock(state_->mu);
    fd = state_->fd.get();
  }
  if (fdatasync(fd) != 0) {
    const int err = errno;
    std::lock_guard lock(state_->mu);
    state_->broken = "fdatasync failed; records may not be on disk";
    return errno_error("fdatasync(" + state_->path + ")", err);
  }
  return ok();
}

AuditLog::AuditLog(std::unique_ptr<State> state) : state_(std::move(state)) {}
AuditLog::AuditLog(AuditLog&&) noexcept = default;
AuditLog& AuditLog::operator=(AuditLog&&) noexcept = default;
AuditLog::~AuditLog() = default;

const std::string& AuditLog::path() const { return state_->path; }

std::uint64_t AuditLog::last_seq() const {
  std::lock_guard lock(state_->mu);
  return state_->seq;
}

std::string AuditLog::last_line_hash() const {
  std::lock_guard lock(state_->mu);
  return state_->prev;
}

Result<AuditLog> AuditLog::open(const std::string& path) {
  const std::string ctx = "opening audit log " + path;
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) {
    int err = errno;
    return tl::unexpected(errno_error("open(" + path + ")", err,
                                      err == ELOOP
                                          ? "the audit log must not be a symlink"
                                          : "check that the directory exists and is writable")
                              .value()
                              .wrap(ctx));
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return tl::unexpected(errno_error("fstat").value().wrap(ctx));
  if (!S_ISREG(st.st_mode)) {
    return make_error(ErrorCode::kInvalidArgument, ctx + ": not a regular file",
                      "point --log at a regular file");
  }
  if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    if (err == EWOULDBLOCK) {
      return make_error(ErrorCode::kUnavailable,
                        ctx + ": another writer holds it (flock); one writer per log",
                        "stop the other corral daemon using this data directory, or give this "
                        "one its own log");
    }
    return tl::unexpected(errno_error("flock(LOCK_EX)", err).value().wrap(ctx));
  }
  auto state = std::make_unique<State>();
  state->path = path;
  state->size = st.st_size;

  // Continue the chain from the last record, after checking it and its link
  // to the one before; never append after a damaged tail.
  auto tail = read_tail(fd.get(), 2);
  if (!tail) return tl::unexpected(std::move(tail).error().wrap(ctx));
  if (!tail->lines.empty()) {
    auto damaged = [&](std::string why) {
      return make_error(
          ErrorCode::kInvalidArgument,
          ctx + ": the end of the log is damaged (" + why + "); refusing to append after it",
          damaged_hint(path));
    };
    if (!tail->last_has_newline) {
      return damaged("the last line has no final newline: truncated");
    }
    const std::string& last = tail->lines.back();
    LineCheck c = check_line(last);
    if (c.problem != AuditProblem::kNone) {
      return damaged(std::string(audit_problem_name(c.problem)) + ": " + c.reason);
    }
    if (tail->lines.size() == 2) {
      LineCheck before = check_line(tail->lines.front());
      if (before.problem != AuditProblem::kNone) {
        return damaged("next-to-last line: " + std::string(audit_problem_name(before.problem)) +
                       ": " + before.reason);
      }
      if (c.seq != before.seq + 1) {
        return damaged("the last two records have seq " + std::to_string(before.seq) + " and " +
                       std::to_string(c.seq));
      }
      if (c.prev != sha256_hex(tail->lines.front())) {
        return damaged("the last record's \"prev\" does not match the line before it");
      }
    } else if (c.seq != 1 || c.prev != kAuditGenesisPrev) {
      return damaged("the only record is not seq 1 with the genesis \"prev\"");
    }
    state->seq = c.seq;
    state->prev = sha256_hex(last);
  }
  state->fd = std::move(fd);
  return AuditLog(std::move(state));
}

Status AuditLog::append(const json& event) {
  const std::string ctx = "appending to audit log " + state_->path;
  if (!event.is_object()) {
    return make_error(ErrorCode::kInvalidArgument, ctx + ": the event must be a JSON object");
  }
  auto type = event.find("type");
  if (type == event.end() || !type->is_string() || type->get_ref<const std::string&>().empty()) {
    return make_error(ErrorCode::kInvalidArgument,
                      ctx + ": the event needs a non-empty string \"type\"");
  }
  for (const char* key : kReserved) {
    if (event.contains(key)) {
      return make_error(
          ErrorCode::kInvalidArgument,
          ctx + ": the event field \"" + key + "\" is reserved for the audit log; rename it");
    }
  }

  std::lock_guard lock(state_->mu);
  State& s = *state_;
  if (!s.broken.empty()) {
    return make_error(ErrorCode::kUnavailable, ctx + ": " + s.broken, damaged_hint(s.path));
  }
  json record = s.filter ? filter_strings(event, s.filter) : event;
  record["seq"] = s.seq + 1;
  record["time"] = rfc3339_now_ms();
  record["prev"] = s.prev;
  record["hash"] = sha256_hex(audit_canonical(record));
  std::string line = audit_canonical(record);
  if (line.size() + 1 > kMaxRecordBytes) {
    return make_error(ErrorCode::kInvalidArgument,
                      ctx + ": the record is " + std::to_string(line.size()) +
                          " bytes, over the limit of " + std::to_string(kMaxRecordBytes),
                      "log digests and sizes, not contents");
  }
  std::string line_hash = sha256_hex(line);
  line.push_back('\n');

  // flock is advisory: make sure nobody wrote to or truncated the file
  // since our last append, or this record would chain onto the wrong line.
  struct stat st {};
  if (fstat(s.fd.get(), &st) != 0) return tl::unexpected(errno_error("fstat").value().wrap(ctx));
  if (st.st_size != s.size) {
    s.broken = "the file changed behind the writer's back (size " + std::to_string(st.st_size) +
               ", expected " + std::to_string(s.size) + ")";
    return make_error(ErrorCode::kUnavailable, ctx + ": " + s.broken, damaged_hint(s.path));
  }

  ssize_t n;
  do {
    n = ::write(s.fd.get(), line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(line.size())) {
    int err = n < 0 ? errno : ENOSPC;
    // Take back a partial line so the log stays well-formed.
    if (n > 0 && ftruncate(s.fd.get(), s.size) != 0) {
      s.broken = "a partial record could not be removed after a failed write";
    }
    return tl::unexpected(errno_error("write(" + std::to_string(line.size()) + " bytes)", err,
                                      "free space on the file system holding the audit log")
                              .value()
                              .wrap(ctx));
  }
  if (s.sync_each_append && fdatasync(s.fd.get()) != 0) {
    int err = errno;
    // After a failed fdatasync the kernel may have dropped the dirty pages:
    // what is on disk is unknown, so no more appends until it is checked.
    s.broken = "fdatasync failed after a write; the record may not be on disk";
    return tl::unexpected(errno_error("fdatasync", err).value().wrap(ctx));
  }
  s.size += static_cast<off_t>(line.size());
  s.seq += 1;
  s.prev = std::move(line_hash);
  return ok();
}

Result<VerifyReport> verify_audit_log(const std::string& path) {
  const std::string ctx = "verifying audit log " + path;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return tl::unexpected(
        errno_error("open(" + path + ")", errno, missing_hint(errno)).value().wrap(ctx));
  }
  VerifyReport report;
  auto bad = [&](std::uint64_t line_no, AuditProblem p, std::string why) {
    report.ok = false;
    report.bad_line = line_no;
    report.problem = p;
    report.reason = std::move(why);
    return report;
  };

  LineReader reader(fd.get());
  std::string line;
  bool has_newline = true;
  std::uint64_t line_no = 0;
  std::uint64_t expected = 1;
  std::string prev_hash(kAuditGenesisPrev);
  for (;;) {
    auto more = reader.next(line, has_newline);
    if (!more) return tl::unexpected(std::move(more).error().wrap(ctx));
    if (!*more) break;
    ++line_no;
    if (!has_newline) {
      return bad(line_no, AuditProblem::kTruncated,
                 "the last line has no final newline: the log was cut short (or a write was "
                 "interrupted)");
    }
    LineCheck c = check_line(line);
    if (c.problem != AuditProblem::kNone) return bad(line_no, c.problem, c.reason);
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
        auto r = reader.next(rest, nl);
        if (!r) return tl::unexpected(std::move(r).error().wrap(ctx));
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
                   "the first record's \"prev\" is not the genesis value (64 zeros)");
      }
      // Both lines hash correctly on their own, so one of them was rewritten
      // with a recomputed hash; name the earlier.
      report.records -= 1;
      return bad(line_no - 1, AuditProblem::kEdited,
                 "this line was rewritten with a recomputed hash: its sha256 does not match "
                 "\"prev\" of line " +
                     std::to_string(line_no));
    }
    prev_hash = sha256_hex(line);
    report.last_line_hash = prev_hash;
    ++expected;
    ++report.records;
  }
  return report;
}

Result<std::vector<std::string>> tail_audit_log(const std::string& path, std::size_t n) {
  const std::string ctx = "reading audit log " + path;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return tl::unexpected(
        errno_error("open(" + path + ")", errno, missing_hint(errno)).value().wrap(ctx));
  }
  auto tail = read_tail(fd.get(), n);
  if (!tail) return tl::unexpected(std::move(tail).error().wrap(ctx));
  return std::move(tail->lines);
}

}  // namespace corral
