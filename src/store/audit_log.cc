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
#include "store/audit_internal.h"

namespace corral {

namespace {

using nlohmann::json;

// A record is one line written with one write(2); anything near this size
// is a caller's bug (a file's content instead of its digest, say).
constexpr std::size_t kMaxRecordBytes = 1024 * 1024;
constexpr const char* kReserved[] = {"seq", "time", "prev", "hash"};

std::string damaged_hint(const std::string& path) {
  return "run `corral audit verify --log " + path +
         "` to find the first damaged line; keep the damaged file as evidence and move it "
         "aside, and a new log will be started";
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

}  // namespace
struct AuditLog::State {
  std::mutex mu;
  std::string path;
  UniqueFd fd;
  std::uint64_t seq = 0;                              // of the last record
  std::string prev = std::string(kAuditGenesisPrev);  // sha256 of the last line
  std::uint64_t first_seq = 1;                        // of the active file's first record
  off_t size = 0;                                     // bytes we know are in the file
  std::string broken;                                 // why appends are refused, if they are
  std::string repair_note;                            // what open() repaired, if anything
  bool sync_each_append = true;
  AuditRotation rotation;
  AuditLog::StringFilter filter;  // set before the first append
};

namespace {

// Room the writer's own keys take in a line (seq, time, prev, hash).
constexpr std::size_t kMetaBytes = 220;

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

std::string base_name(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Makes renames, creates and unlinks in the log's directory durable.
void sync_dir(const std::string& path) {
  auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd) (void)fsync(fd.get());
}

// The last record of the newest rotated file next to `path`: where an
// empty active file continues the chain from. nullopt: there is none.
struct ChainEnd {
  std::uint64_t seq = 0;
  std::string hash;
};
Result<std::optional<ChainEnd>> newest_rotated_end(const std::string& path) {
  auto files = list_audit_files(path);
  if (!files) return tl::unexpected(files.error());
  const AuditFile* newest = nullptr;
  for (const auto& f : *files)
    if (!f.active) newest = &f;
  if (newest == nullptr) return std::optional<ChainEnd>();
  UniqueFd fd(::open(newest->path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return errno_error("open(" + newest->path + ")");
  auto tail = audit_detail::read_tail(fd.get(), 1);
  if (!tail) return tl::unexpected(tail.error());
  if (tail->lines.empty() || !tail->last_has_newline)
    return make_error(ErrorCode::kInvalidArgument,
                      "the newest rotated file " + newest->path + " is empty or truncated");
  auto c = audit_detail::check_line(tail->lines.back());
  if (c.problem != AuditProblem::kNone)
    return make_error(ErrorCode::kInvalidArgument, "the last line of " + newest->path + ": " +
                                                       std::string(audit_problem_name(c.problem)) +
                                                       ": " + c.reason);
  return std::optional<ChainEnd>(ChainEnd{c.seq, sha256_hex(tail->lines.back())});
}

// What follows the last newline of the file (`size` bytes): "" when the
// file ends with one. A record line is at most kMaxRecordBytes with its
// newline, so more than that cannot be a write cut short: refused.
Result<std::string> torn_tail(int fd, off_t size) {
  const off_t window = std::min<off_t>(size, static_cast<off_t>(kMaxRecordBytes));
  std::string bytes(static_cast<std::size_t>(window), '\0');
  std::size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::pread(fd, bytes.data() + got, bytes.size() - got,
                        size - window + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("pread");
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got != bytes.size())
    return make_error(ErrorCode::kUnavailable, "the file shrank while it was read");
  const std::size_t nl = bytes.rfind('\n');
  if (nl == std::string::npos && size >= static_cast<off_t>(kMaxRecordBytes))
    return make_error(ErrorCode::kInvalidArgument,
                      "the last " + std::to_string(window) +
                          " bytes hold no newline: longer than any record, so not a write cut "
                          "short; only a partial last line is repaired");
  return nl == std::string::npos ? bytes : bytes.substr(nl + 1);
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

void AuditLog::set_rotation(const AuditRotation& rotation) {
  std::lock_guard lock(state_->mu);
  state_->rotation = rotation;
}

Status AuditLog::sync() {
  // Not under the lock: appends go on while the disk works (a few ms).
  // What was written before the call is on disk when it returns. A
  // rotation in between closes the old fd only after syncing it.
  int fd;
  {
    std::lock_guard lock(state_->mu);
    fd = ::dup(state_->fd.get());
  }
  if (fd < 0) return errno_error("dup");
  UniqueFd owned(fd);
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

const std::string& AuditLog::repair_note() const { return state_->repair_note; }

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
  auto damaged = [&](std::string why) {
    return make_error(
        ErrorCode::kInvalidArgument,
        ctx + ": the end of the log is damaged (" + why + "); refusing to append after it",
        damaged_hint(path));
  };
  // Where the chain stands before this file: the newest rotated file's
  // last record (a rotation makes the new file before writing to it).
  auto before = newest_rotated_end(path);
  if (!before) return damaged(before.error().message);

  // A torn last line (bytes after the last newline: a write cut short)
  // is set aside; it is replaced below, once the rest has passed.
  auto torn = torn_tail(fd.get(), st.st_size);
  if (!torn) return damaged(torn.error().message);

  // Continue the chain from the last complete record, after checking it
  // and its link to the one before; never append after a damaged tail.
  auto tail = audit_detail::read_tail(fd.get(), 3);
  if (!tail) return tl::unexpected(std::move(tail).error().wrap(ctx));
  if (!tail->lines.empty() && !tail->last_has_newline) tail->lines.pop_back();  // == *torn
  if (tail->lines.size() > 2) tail->lines.erase(tail->lines.begin());
  if (tail->lines.empty()) {
    if (*before) {
      state->seq = (*before)->seq;
      state->prev = (*before)->hash;
    }
    state->first_seq = state->seq + 1;
  } else {
    const std::string& last = tail->lines.back();
    auto c = audit_detail::check_line(last);
    if (c.problem != AuditProblem::kNone) {
      return damaged(std::string(audit_problem_name(c.problem)) + ": " + c.reason);
    }
    if (tail->lines.size() == 2) {
      auto prior = audit_detail::check_line(tail->lines.front());
      if (prior.problem != AuditProblem::kNone) {
        return damaged("next-to-last line: " + std::string(audit_problem_name(prior.problem)) +
                       ": " + prior.reason);
      }
      if (c.seq != prior.seq + 1) {
        return damaged("the last two records have seq " + std::to_string(prior.seq) + " and " +
                       std::to_string(c.seq));
      }
      if (c.prev != sha256_hex(tail->lines.front())) {
        return damaged("the last record's \"prev\" does not match the line before it");
      }
    } else if (*before) {
      if (c.seq != (*before)->seq + 1 || c.prev != (*before)->hash)
        return damaged("the only record does not follow the newest rotated file's last");
    } else if (c.seq != 1 || c.prev != kAuditGenesisPrev) {
      return damaged("the only record is not seq 1 with the genesis \"prev\"");
    }
    state->seq = c.seq;
    state->prev = sha256_hex(last);
    bool nl = false;
    auto first = audit_detail::read_first_line(path, nl);
    if (!first) return tl::unexpected(std::move(first).error().wrap(ctx));
    auto f = audit_detail::check_line(*first);
    state->first_seq = f.problem == AuditProblem::kNone ? f.seq : 1;
  }
  state->fd = std::move(fd);
  if (!torn->empty()) {
    if (auto st = repair_torn_tail(*state, *torn); !st)
      return tl::unexpected(std::move(st).error().wrap(ctx));
  }
  return AuditLog(std::move(state));
}

// Replaces the torn last line `torn` (the last bytes of the file, after
// the checked last record) with an audit.repair record naming where they
// were, how many and their SHA-256, never the bytes themselves (a cut
// record may hold anything; docs/audit.md). The record is written over
// them in place and the file then cut after it, so a crash at any point
// leaves the torn bytes, the record, or the record and a shorter torn
// tail, which the next start repairs again: bytes are never removed
// without a record that says so. Only open() calls it, before the log is
// shared.
Status AuditLog::repair_torn_tail(State& s, const std::string& torn) {
  const std::string ctx = "repairing the torn last line of " + s.path;
  const off_t offset = s.size - static_cast<off_t>(torn.size());
  std::string line_hash;
  auto line = format_record(
      s,
      json{{"type", std::string(kAuditRepairType)},
           {"offset", static_cast<std::uint64_t>(offset)},
           {"dropped_bytes", torn.size()},
           {"dropped_sha256", sha256_hex(torn)},
           {"reason",
            "the last line had no final newline (a write cut short by a crash or a full "
            "disk): its bytes were removed"}},
      line_hash);
  if (!line) return tl::unexpected(std::move(line).error().wrap(ctx));
  // pwrite on an O_APPEND fd appends whatever the offset (Linux): the
  // flag is off for the repair (the same open file, locked; nobody else
  // writes to it yet) and back on after it.
  const int fd = s.fd.get();
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_APPEND) != 0)
    return tl::unexpected(errno_error("fcntl(F_SETFL)").value().wrap(ctx));
  struct RestoreAppend {
    int fd, flags;
    ~RestoreAppend() { (void)fcntl(fd, F_SETFL, flags); }
  } restore{fd, flags};
  std::size_t done = 0;
  while (done < line->size()) {
    ssize_t n = ::pwrite(fd, line->data() + done, line->size() - done,
                         offset + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return tl::unexpected(errno_error("pwrite(" + std::to_string(line->size()) + " bytes)",
                                        n < 0 ? errno : ENOSPC,
                                        "free space on the file system holding the audit log")
                                .value()
                                .wrap(ctx));
    done += static_cast<std::size_t>(n);
  }
  const off_t end = offset + static_cast<off_t>(line->size());
  if (ftruncate(fd, end) != 0) return tl::unexpected(errno_error("ftruncate").value().wrap(ctx));
  if (fdatasync(fd) != 0) return tl::unexpected(errno_error("fdatasync").value().wrap(ctx));
  s.repair_note = "removed a torn last line of " + std::to_string(torn.size()) +
                  " bytes at offset " + std::to_string(offset) +
                  " (a write cut short by a crash), recorded as audit.repair seq " +
                  std::to_string(s.seq + 1);
  s.size = end;
  s.seq += 1;
  s.prev = std::move(line_hash);
  return ok();
}

// The record with the writer's keys added (the next seq, chained to the
// last line), as its line with the newline; `line_hash` gets the SHA-256
// the next record's "prev" will name. With s.mu held.
Result<std::string> AuditLog::format_record(const State& s, json record, std::string& line_hash) {
  record["seq"] = s.seq + 1;
  record["time"] = rfc3339_now_ms();
  record["prev"] = s.prev;
  record["hash"] = sha256_hex(audit_canonical(record));
  std::string line = audit_canonical(record);
  if (line.size() + 1 > kMaxRecordBytes) {
    return make_error(ErrorCode::kInvalidArgument,
                      "the record is " + std::to_string(line.size()) +
                          " bytes, over the limit of " + std::to_string(kMaxRecordBytes),
                      "log digests and sizes, not contents");
  }
  line_hash = sha256_hex(line);
  line.push_back('\n');
  return line;
}

// One record, with the writer's keys added, as one line: write(2), then
// fdatasync unless the caller syncs. With s.mu held.
Status AuditLog::write_record(State& s, json record) {
  const std::string ctx = "appending to audit log " + s.path;
  std::string line_hash;
  auto formatted = format_record(s, std::move(record), line_hash);
  if (!formatted) return tl::unexpected(std::move(formatted).error().wrap(ctx));
  std::string line = std::move(*formatted);

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

// Renames the full active file to <path>.<first seq>, starts a new one
// with an audit.rotate record, then applies retention. With s.mu held. A
// rename that fails leaves the active file as it is (tried again at the
// next append); a new file that cannot be made stops appends.
Status AuditLog::rotate(State& s) {
  const std::string ctx = "rotating audit log " + s.path;
  if (fdatasync(s.fd.get()) != 0) {
    s.broken = "fdatasync failed before a rotation; records may not be on disk";
    return tl::unexpected(errno_error("fdatasync").value().wrap(ctx));
  }
  const std::string rotated = audit_detail::rotated_name(s.path, s.first_seq);
  if (::access(rotated.c_str(), F_OK) == 0 || ::rename(s.path.c_str(), rotated.c_str()) != 0)
    return ok();  // keep appending to the active file
  UniqueFd fd(
      ::open(s.path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd || flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    s.broken = "the new file after a rotation could not be created and locked";
    return tl::unexpected(errno_error("open(" + s.path + ")").value().wrap(ctx));
  }
  sync_dir(s.path);
  const std::uint64_t old_first = s.first_seq;
  s.fd = std::move(fd);
  s.size = 0;
  s.first_seq = s.seq + 1;
  CORRAL_TRY(write_record(s, json{{"type", std::string(kAuditRotateType)},
                                  {"previous_file", base_name(rotated)},
                                  {"previous_first_seq", old_first},
                                  {"previous_last_seq", s.seq}}));
  return apply_retention(s);
}

// Deletes the oldest rotated files beyond keep_files or older than
// max_age; first an audit.retention record says which, through which seq,
// and the hash of the last record they held. With s.mu held.
Status AuditLog::apply_retention(State& s) {
  const AuditRotation& r = s.rotation;
  if (r.keep_files == 0 && r.max_age.count() == 0) return ok();
  auto files = list_audit_files(s.path);
  if (!files) return ok();  // nothing deleted; tried again at the next rotation
  std::vector<AuditFile> rotated;
  for (auto& f : *files)
    if (!f.active) rotated.push_back(std::move(f));
  std::size_t remove = 0;
  std::string why;
  if (r.keep_files != 0 && rotated.size() > r.keep_files) {
    remove = rotated.size() - r.keep_files;
    why = "keep_files " + std::to_string(r.keep_files);
  }
  if (r.max_age.count() != 0) {
    const std::size_t by_count = remove;
    const time_t oldest_kept = time(nullptr) - static_cast<time_t>(r.max_age.count());
    struct stat st {};
    while (remove < rotated.size() && stat(rotated[remove].path.c_str(), &st) == 0 &&
           st.st_mtime < oldest_kept)
      ++remove;
    if (remove > by_count)
      why += (why.empty() ? "" : ", ") + std::string("max_age ") +
             std::to_string(r.max_age.count()) + "s";
  }
  if (remove == 0) return ok();
  // The record after the last one deleted names its hash in "prev".
  const std::string& next = remove < rotated.size() ? rotated[remove].path : s.path;
  bool nl = false;
  auto first = audit_detail::read_first_line(next, nl);
  if (!first) return ok();
  auto c = audit_detail::check_line(*first);
  if (c.problem != AuditProblem::kNone || c.seq < 2) return ok();  // never delete past damage
  json removed = json::array();
  for (std::size_t i = 0; i < remove; ++i) removed.push_back(base_name(rotated[i].path));
  CORRAL_TRY(write_record(s, json{{"type", std::string(kAuditRetentionType)},
                                  {"removed_files", std::move(removed)},
                                  {"removed_through_seq", c.seq - 1},
                                  {"removed_last_hash", c.prev},
                                  {"reason", why}}));
  if (!s.sync_each_append) (void)fdatasync(s.fd.get());  // the record before the deletion
  for (std::size_t i = 0; i < remove; ++i) (void)::unlink(rotated[i].path.c_str());
  sync_dir(s.path);
  return ok();
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
  if (s.rotation.max_file_size != 0 && s.size > 0 &&
      static_cast<std::uint64_t>(s.size) + audit_canonical(record).size() + kMetaBytes >
          s.rotation.max_file_size) {
    CORRAL_TRY(rotate(s));
  }
  return write_record(s, std::move(record));
}

}  // namespace corral
