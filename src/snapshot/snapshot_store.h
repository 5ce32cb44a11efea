// SnapshotStore: failure snapshots (REQUIREMENTS.md D4) kept in the object
// store, with retention, a quota and a sweeper. User guide:
// docs/snapshots.md.
//
// A snapshot is two objects, so both back-ends (local, S3) hold everything:
//   snapshots/<id>.tar.zst  the archive (layer_archiver.h), with its task,
//                           reason and times as object metadata too;
//   snapshots/<id>.json     its metadata (SnapshotInfo), written last: a
//                           snapshot exists once its .json does.
// An in-memory index (loaded from the store by load()) answers list/get.
//
// take() archives into a scratch file first, so nothing half-written ever
// reaches the store; an archive larger than the quota alone is refused;
// otherwise the oldest snapshots are evicted until it fits. A failure of
// the archiver or the store returns an error and leaves no object behind:
// the caller records it as the task's snapshot_error (the task's own result
// stands).
//
// Times come from an injectable clock (unix ms) so tests drive retention
// and the quota without sleeping. Every deletion reports its why
// (expired|quota|api) to the events, which the daemon audits and counts.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "objstore/object_store.h"
#include "snapshot/layer_archiver.h"

namespace corral::snapshot {

using Clock = std::function<std::int64_t()>;  // unix ms
std::int64_t system_clock_ms();

struct SnapshotConfig {
  std::int64_t retention_ms = 7LL * 24 * 3600 * 1000;  // snapshots.retention
  std::uint64_t quota_bytes = 10ULL << 30;             // snapshots.quota
  std::int64_t sweep_interval_ms = 60 * 1000;          // snapshots.sweep_interval
  ArchiveLimits limits;                                // snapshots.max_files, ...
  std::string scratch_dir = "/tmp";                    // the daemon's data dir
};

struct SnapshotInfo {
  std::string id;  // snap-<32 hex>
  std::string task;
  std::string reason;
  std::string sandbox;
  std::uint64_t size = 0;  // of the .tar.zst
  std::string sha256;      // of the .tar.zst, lowercase hex
  std::int64_t created_ms = 0;
  std::int64_t expires_ms = 0;
  bool partial = false;
  std::vector<std::string> partial_reasons;
  std::vector<std::string> env_secret_names;
  std::uint64_t files = 0;
  std::uint64_t redactions = 0;
};

std::string snapshot_to_json(const SnapshotInfo& info);
Result<SnapshotInfo> snapshot_from_json(std::string_view text);
std::string archive_key(std::string_view id);   // snapshots/<id>.tar.zst
std::string metadata_key(std::string_view id);  // snapshots/<id>.json
// "snap-" and 32 lowercase hex digits.
bool valid_snapshot_id(std::string_view id);

struct SnapshotRequest {
  std::string task;  // may be empty (an admin snapshot of a sandbox)
  std::string reason;
  std::string sandbox;
  std::vector<std::string> env_secret_names;  // names only, never values
  std::vector<ArchiveSource> sources;
  std::shared_ptr<const secrets::RedactionSet> redaction;
  std::vector<dev_t> sealed_devices;  // layer_archiver.h
};

// What the daemon audits and counts. Each may be empty.
struct SnapshotEvents {
  std::function<void(const SnapshotInfo&)> created;
  std::function<void(const SnapshotInfo&, std::string_view why)> deleted;
  std::function<void(const SnapshotRequest&, const Error&)> failed;
};

struct SnapshotPage {
  std::vector<SnapshotInfo> snapshots;  // newest first
  std::string next_cursor;              // empty: no more
};

// Where every snapshot's objects live in the object store; nothing else
// is put there (the task service refuses it as a task's input object).
inline constexpr std::string_view kSnapshotObjectPrefix = "snapshots/";

class SnapshotStore {
 public:
  SnapshotStore(objstore::ObjectStore& store, SnapshotConfig config, Clock clock = {},
                SnapshotEvents events = {});
  ~SnapshotStore();
  SnapshotStore(const SnapshotStore&) = delete;
  SnapshotStore& operator=(const SnapshotStore&) = delete;

  // Reads the index from the store: every snapshots/<id>.json; an archive
  // without its .json (a take cut short by a crash) is removed. sweep()
  // calls it until it succeeds once.
  Status load();

  Result<SnapshotInfo> take(const SnapshotRequest& request);
  // take() in two steps, so that a caller can let go of the layer (a
  // sandbox's lease) before the upload: archive() reads the sources into a
  // scratch file, store() puts it in the object store. Each reports its
  // failure to events.failed.
  struct Archived {
    UniqueFd file;
    ArchiveReport report;
  };
  Result<Archived> archive(const SnapshotRequest& request);
  Result<SnapshotInfo> store(const SnapshotRequest& request, Archived archived);
  Result<SnapshotInfo> get(std::string_view id) const;
  // `task` empty: all. `limit` 1..1000. `cursor` from a previous page.
  Result<SnapshotPage> list(std::string_view task, std::size_t limit,
                            std::string_view cursor) const;
  // kNotFound for an unknown id. `why`: expired|quota|api.
  Status remove(std::string_view id, std::string_view why);
  // Streams the archive; the info has its size and sha256.
  Result<objstore::ObjectInfo> download(std::string_view id, const objstore::ObjectSink& sink);
  // Deletes every snapshot whose expiry has passed; returns how many.
  std::size_t sweep();
  // A thread calling sweep() every sweep_interval_ms until the store goes.
  void start_sweeper();

  std::uint64_t total_bytes() const;
  std::size_t count() const;
  const SnapshotConfig& config() const { return config_; }

 private:
  Result<SnapshotInfo> store_archive(const SnapshotRequest& request, int fd,
                                     const ArchiveReport& report);
  // Evicts oldest first until `incoming` more bytes fit. mutex_ held.
  Status make_room(std::uint64_t incoming);
  // Removes both objects, then the index entry; reports the deletion once.
  Status remove_one(const std::string& id, std::string_view why);
  std::int64_t now() const { return clock_(); }

  objstore::ObjectStore& store_;
  SnapshotConfig config_;
  Clock clock_;
  SnapshotEvents events_;
  std::mutex take_mutex_;  // quota check to index, one take at a time
  mutable std::mutex mutex_;  // index_ and total_bytes_
  std::map<std::string, SnapshotInfo> index_;  // by id
  std::uint64_t total_bytes_ = 0;
  bool loaded_ = false;  // load() succeeded once
  std::mutex sweeper_mutex_;
  std::condition_variable sweeper_wake_;
  bool stopping_ = false;
  std::thread sweeper_;
};

}  // namespace corral::snapshot
