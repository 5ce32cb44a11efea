// SnapshotStore: see snapshot_store.h.
#include "snapshot/snapshot_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "base/random.h"
#include "base/unique_fd.h"

namespace corral::snapshot {
namespace {

constexpr std::string_view kPrefix = kSnapshotObjectPrefix;
constexpr std::string_view kArchiveSuffix = ".tar.zst";
constexpr std::string_view kMetaSuffix = ".json";

std::string random_id() {
  static constexpr char kHex[] = "0123456789abcdef";
  unsigned char bytes[16];
  fill_random(bytes, sizeof bytes);
  std::string id = "snap-";
  for (unsigned char b : bytes) {
    id.push_back(kHex[b >> 4]);
    id.push_back(kHex[b & 15]);
  }
  return id;
}

bool valid_label(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == ':' || c == '-';
  });
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Newest first; ties by id so the order (and the cursor) is total.
bool newer(const SnapshotInfo& a, const SnapshotInfo& b) {
  if (a.created_ms != b.created_ms) return a.created_ms > b.created_ms;
  return a.id > b.id;
}

std::string cursor_of(const SnapshotInfo& s) { return std::to_string(s.created_ms) + "." + s.id; }

std::string manifest_fields(const SnapshotRequest& r) {
  nlohmann::json j;
  j["task"] = r.task;
  j["reason"] = r.reason;
  j["sandbox"] = r.sandbox;
  j["env_secret_names"] = r.env_secret_names;
  std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return text.substr(1, text.size() - 2);  // without the braces
}

}  // namespace

std::int64_t system_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string archive_key(std::string_view id) {
  return std::string(kPrefix) + std::string(id) + std::string(kArchiveSuffix);
}
std::string metadata_key(std::string_view id) {
  return std::string(kPrefix) + std::string(id) + std::string(kMetaSuffix);
}

bool valid_snapshot_id(std::string_view id) {
  if (id.size() != 5 + 32 || id.substr(0, 5) != "snap-") return false;
  return std::all_of(id.begin() + 5, id.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string snapshot_to_json(const SnapshotInfo& s) {
  nlohmann::json j = {{"id", s.id},
                      {"task", s.task},
                      {"reason", s.reason},
                      {"sandbox", s.sandbox},
                      {"size", s.size},
                      {"sha256", s.sha256},
                      {"created_ms", s.created_ms},
                      {"expires_ms", s.expires_ms},
                      {"partial", s.partial},
                      {"partial_reasons", s.partial_reasons},
                      {"env_secret_names", s.env_secret_names},
                      {"files", s.files},
                      {"redactions", s.redactions}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<SnapshotInfo> snapshot_from_json(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error(ErrorCode::kInvalidArgument, "snapshot metadata is not a JSON object");
  SnapshotInfo s;
  try {
    s.id = j.at("id").get<std::string>();
    s.task = j.value("task", "");
    s.reason = j.value("reason", "");
    s.sandbox = j.value("sandbox", "");
    s.size = j.at("size").get<std::uint64_t>();
    s.sha256 = j.at("sha256").get<std::string>();
    s.created_ms = j.at("created_ms").get<std::int64_t>();
    s.expires_ms = j.at("expires_ms").get<std::int64_t>();
    s.partial = j.value("partial", false);
    s.partial_reasons = j.value("partial_reasons", std::vector<std::string>{});
    s.env_secret_names = j.value("env_secret_names", std::vector<std::string>{});
    s.files = j.value("files", std::uint64_t{0});
    s.redactions = j.value("redactions", std::uint64_t{0});
  } catch (const nlohmann::json::exception& e) {
    return make_error(ErrorCode::kInvalidArgument,
                      std::string("snapshot metadata: ") + e.what());
  }
  if (!valid_snapshot_id(s.id))
    return make_error(ErrorCode::kInvalidArgument, "snapshot metadata: bad id");
  return s;
}

SnapshotStore::SnapshotStore(objstore::ObjectStore& store, SnapshotConfig config, Clock clock,
                             SnapshotEvents events)
    : store_(store),
      config_(std::move(config)),
      clock_(clock ? std::move(clock) : Clock(system_clock_ms)),
      events_(std::move(events)) {}

SnapshotStore::~SnapshotStore() {
  {
    std::lock_guard<std::mutex> lock(sweeper_mutex_);
    stopping_ = true;
  }
  sweeper_wake_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
}

Status SnapshotStore::load() {
  // No take between its archive and its .json while this decides what is
  // an orphan.
  std::lock_guard<std::mutex> take_lock(take_mutex_);
  auto objects = store_.list(kPrefix);
  if (!objects) return tl::unexpected(objects.error().wrap("listing snapshots"));
  std::map<std::string, SnapshotInfo> index;
  std::vector<std::string> archives;
  for (const auto& o : *objects) {
    if (ends_with(o.key, kArchiveSuffix)) {
      archives.push_back(o.key);
      continue;
    }
    if (!ends_with(o.key, kMetaSuffix)) continue;
    std::string text;
    auto got = store_.get(o.key, [&](std::span<const char> b) {
      if (text.size() + b.size() > 1 << 20)
        return Status(make_error(ErrorCode::kResourceExhausted, "metadata over 1 MiB"));
      text.append(b.data(), b.size());
      return ok();
    });
    if (!got) return tl::unexpected(got.error().wrap("reading " + o.key));
    auto info = snapshot_from_json(text);
    if (!info || metadata_key(info->id) != o.key) continue;  // not ours: left alone
    index[info->id] = *info;
  }
  std::set<std::string> have;
  for (const auto& a : archives) have.insert(a);
  for (auto it = index.begin(); it != index.end();) {
    if (have.count(archive_key(it->first)) == 0) {  // its archive is gone
      (void)store_.remove(metadata_key(it->first));
      it = index.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& a : archives) {
    std::string id = a.substr(kPrefix.size(), a.size() - kPrefix.size() - kArchiveSuffix.size());
    if (valid_snapshot_id(id) && index.count(id) == 0) (void)store_.remove(a);  // take cut short
  }
  std::lock_guard<std::mutex> lock(mutex_);
  // Snapshots taken since start (before this load) stay in the index.
  for (auto& [id, s] : index) index_.emplace(id, std::move(s));
  total_bytes_ = 0;
  for (const auto& [id, s] : index_) total_bytes_ += s.size;
  loaded_ = true;
  return ok();
}

Result<SnapshotInfo> SnapshotStore::take(const SnapshotRequest& request) {
  auto archived = archive(request);
  if (!archived) return tl::unexpected(archived.error());
  return store(request, std::move(*archived));
}

Result<SnapshotStore::Archived> SnapshotStore::archive(const SnapshotRequest& request) {
  auto fail = [&](Error e) -> Result<Archived> {
    if (events_.failed) events_.failed(request, e);
    return tl::unexpected(std::move(e));
  };
  // They go into object metadata (printable ASCII) and audit records.
  if (!request.task.empty() && !valid_label(request.task))
    return make_error(ErrorCode::kInvalidArgument, "a snapshot's task must be 1-128 of [A-Za-z0-9._:-]");
  if (!valid_label(request.reason))
    return make_error(ErrorCode::kInvalidArgument, "a snapshot's reason must be 1-128 of [A-Za-z0-9._:-]");
  int raw = open(config_.scratch_dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (raw < 0) return fail(errno_error("open(" + config_.scratch_dir + ", O_TMPFILE)").value());
  Archived out{UniqueFd(raw), {}};
  ArchiveRequest req;
  req.sources = request.sources;
  req.redaction = request.redaction;
  req.sealed_devices = request.sealed_devices;
  req.limits = config_.limits;
  req.scratch_dir = config_.scratch_dir;
  req.manifest_fields = manifest_fields(request);
  auto report = archive_layer(req, out.file.get());
  if (!report) return fail(report.error().wrap("archiving the writable layer"));
  out.report = std::move(*report);
  return out;
}

Result<SnapshotInfo> SnapshotStore::store(const SnapshotRequest& request, Archived archived) {
  auto stored = store_archive(request, archived.file.get(), archived.report);
  if (!stored) {
    if (events_.failed) events_.failed(request, stored.error());
    return stored;
  }
  if (events_.created) events_.created(*stored);
  return stored;
}

Result<SnapshotInfo> SnapshotStore::store_archive(const SnapshotRequest& request, int fd,
                                                  const ArchiveReport& report) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return errno_error("fstat(snapshot archive)");
  auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > config_.quota_bytes)
    return make_error(ErrorCode::kResourceExhausted,
                      "the snapshot (" + std::to_string(size) +
                          " bytes) is larger than snapshots.quota (" +
                          std::to_string(config_.quota_bytes) + " bytes)",
                      "raise snapshots.quota or lower snapshots.max_bytes");
  if (lseek(fd, 0, SEEK_SET) != 0) return errno_error("lseek(snapshot archive)");

  SnapshotInfo info;
  info.id = random_id();
  info.task = request.task;
  info.reason = request.reason;
  info.sandbox = request.sandbox;
  info.created_ms = now();
  info.expires_ms = info.created_ms + config_.retention_ms;
  info.partial = report.partial;
  info.partial_reasons = report.partial_reasons;
  info.env_secret_names = request.env_secret_names;
  info.files = report.files;
  info.redactions = report.redactions;

  // One take at a time from the quota check to the index: two takes never
  // both fit in the room one of them made.
  std::lock_guard<std::mutex> take_lock(take_mutex_);
  CORRAL_TRY_CTX(make_room(size), "making room for a snapshot");
  objstore::PutOptions options;
  options.max_size = config_.quota_bytes;
  options.metadata = {{"task", info.task},
                      {"reason", info.reason},
                      {"created-ms", std::to_string(info.created_ms)},
                      {"expires-ms", std::to_string(info.expires_ms)}};
  auto put = store_.put_fd(archive_key(info.id), fd, options);
  if (!put) {
    (void)store_.remove(archive_key(info.id));
    return tl::unexpected(put.error().wrap("storing " + archive_key(info.id)));
  }
  info.size = put->size;
  info.sha256 = put->sha256;
  auto meta = store_.put_bytes(metadata_key(info.id), snapshot_to_json(info), {});
  if (!meta) {
    (void)store_.remove(archive_key(info.id));
    (void)store_.remove(metadata_key(info.id));
    return tl::unexpected(meta.error().wrap("storing " + metadata_key(info.id)));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  index_[info.id] = info;
  total_bytes_ += info.size;
  return info;
}

Status SnapshotStore::make_room(std::uint64_t incoming) {
  for (;;) {
    std::string victim;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (total_bytes_ + incoming <= config_.quota_bytes || index_.empty()) return ok();
      auto oldest = std::min_element(index_.begin(), index_.end(), [](const auto& a, const auto& b) {
        return newer(b.second, a.second);
      });
      victim = oldest->first;
    }
    CORRAL_TRY(remove_one(victim, "quota"));
  }
}

Status SnapshotStore::remove_one(const std::string& id, std::string_view why) {
  // The .json first: once it is gone the snapshot no longer exists (a
  // crash between the two leaves an archive load() removes).
  CORRAL_TRY(store_.remove(metadata_key(id)));
  CORRAL_TRY(store_.remove(archive_key(id)));
  std::optional<SnapshotInfo> gone;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(id);
    if (it != index_.end()) {
      gone = it->second;
      total_bytes_ -= it->second.size;
      index_.erase(it);
    }
  }
  if (gone && events_.deleted) events_.deleted(*gone, why);
  return ok();
}

Status SnapshotStore::remove(std::string_view id, std::string_view why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (index_.count(std::string(id)) == 0)
      return make_error(ErrorCode::kNotFound, "no snapshot " + std::string(id));
  }
  return remove_one(std::string(id), why);
}

Result<SnapshotInfo> SnapshotStore::get(std::string_view id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(std::string(id));
  if (it == index_.end()) return make_error(ErrorCode::kNotFound, "no snapshot " + std::string(id));
  return it->second;
}

Result<SnapshotPage> SnapshotStore::list(std::string_view task, std::size_t limit,
                                         std::string_view cursor) const {
  if (limit == 0 || limit > 1000)
    return make_error(ErrorCode::kInvalidArgument, "limit must be 1..1000");
  std::vector<SnapshotInfo> all;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [id, s] : index_)
      if (task.empty() || s.task == task) all.push_back(s);
  }
  std::sort(all.begin(), all.end(), newer);
  SnapshotPage page;
  std::size_t start = 0;
  if (!cursor.empty()) {
    auto dot = cursor.find('.');
    std::int64_t created = 0;
    try {
      if (dot == std::string_view::npos) throw std::invalid_argument("no dot");
      created = std::stoll(std::string(cursor.substr(0, dot)));
    } catch (const std::exception&) {
      return make_error(ErrorCode::kInvalidArgument, "bad cursor",
                        "pass the next_cursor of the previous page as it is");
    }
    SnapshotInfo mark;
    mark.created_ms = created;
    mark.id = std::string(cursor.substr(dot + 1));
    while (start < all.size() && !newer(mark, all[start])) ++start;
  }
  for (std::size_t i = start; i < all.size() && page.snapshots.size() < limit; ++i)
    page.snapshots.push_back(all[i]);
  if (start + page.snapshots.size() < all.size() && !page.snapshots.empty())
    page.next_cursor = cursor_of(page.snapshots.back());
  return page;
}

Result<objstore::ObjectInfo> SnapshotStore::download(std::string_view id,
                                                     const objstore::ObjectSink& sink) {
  CORRAL_TRY(get(id));
  return store_.get(archive_key(id), sink);
}

std::size_t SnapshotStore::sweep() {
  bool loaded;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    loaded = loaded_;
  }
  if (!loaded) (void)load();  // the store could not be read at start
  std::vector<std::string> expired;
  std::int64_t t = now();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [id, s] : index_)
      if (s.expires_ms <= t) expired.push_back(id);
  }
  std::size_t removed = 0;
  for (const auto& id : expired)
    if (remove_one(id, "expired")) ++removed;
  return removed;
}

void SnapshotStore::start_sweeper() {
  if (sweeper_.joinable()) return;
  sweeper_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(sweeper_mutex_);
    while (!stopping_) {
      sweeper_wake_.wait_for(lock, std::chrono::milliseconds(config_.sweep_interval_ms),
                             [this] { return stopping_; });
      if (stopping_) break;
      lock.unlock();
      sweep();
      lock.lock();
    }
  });
}

std::uint64_t SnapshotStore::total_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return total_bytes_;
}

std::size_t SnapshotStore::count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return index_.size();
}

}  // namespace corral::snapshot
