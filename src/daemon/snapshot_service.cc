// SnapshotService: see snapshot_service.h.
#include "daemon/snapshot_service.h"

#include <fcntl.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "daemon/sandbox_entry.h"
#include "daemon/sandbox_service.h"

namespace corral::daemon {

using nlohmann::json;

namespace {

// A directory of the layer's root, never through a symlink.
ApiResult<UniqueFd> open_layer_dir(int root_fd, const char* name, const std::string& id) {
  int fd = openat(root_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return api_fail(api::ApiErrorCode::kConflict, "the writable layer of sandbox " + id +
                                                      " has no readable " + name + "/ dir");
  return UniqueFd(fd);
}

json info_json(const snapshot::SnapshotInfo& s) {
  return json{{"snapshot", s.id}, {"task", s.task},   {"reason", s.reason},
              {"sandbox", s.sandbox}, {"size", s.size}, {"sha256", s.sha256}};
}

}  // namespace

ApiResult<WritableLayerView> open_writable_layer(SandboxService& sandboxes, std::string_view id) {
  auto lease = sandboxes.lease(id);
  if (!lease) return tl::unexpected(lease.error());
  const auto& entry = lease->sandbox();
  int root = entry->live ? entry->live->layer_root_fd() : -1;
  if (root < 0)
    return api_fail(api::ApiErrorCode::kConflict,
                    "sandbox " + entry->id + " has no writable layer to read");
  WritableLayerView view;
  auto upper = open_layer_dir(root, "upper", entry->id);
  if (!upper) return tl::unexpected(upper.error());
  auto tmp = open_layer_dir(root, "tmp", entry->id);
  if (!tmp) return tl::unexpected(tmp.error());
  auto shm = open_layer_dir(root, "shm", entry->id);
  if (!shm) return tl::unexpected(shm.error());
  view.upper = std::move(*upper);
  view.tmp = std::move(*tmp);
  view.shm = std::move(*shm);
  view.lease = std::move(*lease);
  return view;
}

SnapshotService::SnapshotService(SandboxService& sandboxes, objstore::ObjectStore& objects,
                                 snapshot::SnapshotConfig config, MetricsRegistry& metrics,
                                 snapshot::Clock clock)
    : sandboxes_(sandboxes), metrics_(metrics) {
  static constexpr const char* kTotalHelp = "Failure snapshots taken, by result.";
  static constexpr const char* kDeletedHelp = "Failure snapshots deleted, by why.";
  snapshot::SnapshotEvents events;
  events.created = [this](const snapshot::SnapshotInfo& s) {
    metrics_.counter("corral_snapshots_total", kTotalHelp, {{"result", s.partial ? "partial" : "ok"}})
        .inc();
    json record = info_json(s);
    record["type"] = "snapshot.created";
    record["partial"] = s.partial;
    if (s.partial) record["partial_reasons"] = s.partial_reasons;
    sandboxes_.audit_now(record);
  };
  events.deleted = [this](const snapshot::SnapshotInfo& s, std::string_view why) {
    metrics_.counter("corral_snapshots_deleted_total", kDeletedHelp, {{"why", std::string(why)}})
        .inc();
    json record = info_json(s);
    record["type"] = "snapshot.deleted";
    record["why"] = std::string(why);
    sandboxes_.audit_now(record);
  };
  events.failed = [this](const snapshot::SnapshotRequest& r, const Error& e) {
    metrics_.counter("corral_snapshots_total", kTotalHelp, {{"result", "failed"}}).inc();
    sandboxes_.audit_now(json{{"type", "snapshot.failed"},
                              {"task", r.task},
                              {"reason", r.reason},
                              {"sandbox", r.sandbox},
                              {"error", e.message}});
  };
  store_ = std::make_unique<snapshot::SnapshotStore>(objects, std::move(config), std::move(clock),
                                                     std::move(events));
  for (const char* result : {"ok", "partial", "failed"})
    metrics_.counter("corral_snapshots_total", kTotalHelp, {{"result", result}});
  metrics_.gauge_fn("corral_snapshot_bytes", "Bytes of all stored failure snapshots.",
                    [this] { return static_cast<double>(store_->total_bytes()); });
}

Status SnapshotService::start() {
  store_->start_sweeper();  // it retries a load that fails here
  CORRAL_TRY_CTX(store_->load(), "loading the failure snapshots");
  return ok();
}

ApiResult<snapshot::SnapshotInfo> SnapshotService::take_sandbox(
    std::string_view sandbox_id, std::string task, std::string reason,
    std::vector<std::string> env_secret_names) {
  auto layer = open_writable_layer(sandboxes_, sandbox_id);
  if (!layer) return tl::unexpected(layer.error());
  const std::shared_ptr<SandboxEntry> entry = layer->lease.sandbox();
  snapshot::SnapshotRequest request;
  request.task = std::move(task);
  request.reason = std::move(reason);
  request.sandbox = entry->id;
  // Names only: the sandbox's secrets (whatever their mode), and the
  // caller's.
  for (const auto& s : entry->spec.secrets) env_secret_names.push_back(s.name);
  std::sort(env_secret_names.begin(), env_secret_names.end());
  env_secret_names.erase(std::unique(env_secret_names.begin(), env_secret_names.end()),
                         env_secret_names.end());
  request.env_secret_names = std::move(env_secret_names);
  request.redaction = sandboxes_.redaction(entry->id);
  auto devices = sandboxes_.secret_devices(entry->id);
  if (!devices)
    return api_fail(api::ApiErrorCode::kUnavailable,
                    "the secret files of sandbox " + entry->id +
                        " cannot be told apart from its other files: " + devices.error().message);
  request.sealed_devices = *devices;
  // The sandbox's "/" changes, its /tmp and its /dev/shm; /run/secrets is
  // a mount of its own, never in the layer, and excluded by name as well.
  request.sources.push_back({layer->upper.get(), "rootfs/", {"run/secrets", "tmp", "dev/shm"}});
  request.sources.push_back({layer->tmp.get(), "rootfs/tmp/", {}});
  request.sources.push_back({layer->shm.get(), "rootfs/dev/shm/", {}});
  auto archived = store_->archive(request);
  const std::string id = entry->id;
  // The layer is read: the sandbox may go while the archive is uploaded.
  request.sources.clear();
  layer->upper.reset();
  layer->tmp.reset();
  layer->shm.reset();
  layer->lease.release();
  if (!archived) return api_fail(archived.error().wrap("snapshot of sandbox " + id));
  auto taken = store_->store(request, std::move(*archived));
  if (!taken) return api_fail(taken.error().wrap("snapshot of sandbox " + id));
  return *taken;
}

}  // namespace corral::daemon
