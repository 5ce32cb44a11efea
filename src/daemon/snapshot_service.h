// SnapshotService: the daemon's failure snapshots (REQUIREMENTS.md D4;
// docs/snapshots.md). It opens a live sandbox's writable layer under a
// lease (a teardown waits for it), archives it with the sandbox's own
// redactor (snapshot/layer_archiver.h) and keeps it in the object store
// (snapshot/snapshot_store.h); it audits every creation, failure and
// deletion and counts them:
//   corral_snapshots_total{result="ok"|"partial"|"failed"}
//   corral_snapshots_deleted_total{why="expired"|"quota"|"api"}
//   corral_snapshot_bytes   (all stored snapshots)
//
// The layer is read under the lease; the lease is let go before the upload.
//
// For the task service: when a task fails, call
//   take_sandbox(task.sandbox_id, task.id, task.reason, secret_names)
// while the sandbox still lives (before its destroy). A failure is the
// task's snapshot_error (the error's message); the task's result stands.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/api_result.h"
#include "base/unique_fd.h"
#include "daemon/metrics.h"
#include "daemon/sandbox_lease.h"
#include "objstore/object_store.h"
#include "snapshot/snapshot_store.h"

namespace corral::daemon {

class SandboxService;

// The writable layer of a live sandbox, opened for reading, with the lease
// that keeps the sandbox from being wiped while it is read.
struct WritableLayerView {
  SandboxLease lease;
  UniqueFd upper;  // the sandbox's changes to "/" (overlay upper dir)
  UniqueFd tmp;    // its /tmp
  UniqueFd shm;    // its /dev/shm
};

// 404 for an unknown sandbox, 409 while it is being destroyed.
ApiResult<WritableLayerView> open_writable_layer(SandboxService& sandboxes, std::string_view id);

class SnapshotService {
 public:
  SnapshotService(SandboxService& sandboxes, objstore::ObjectStore& objects,
                  snapshot::SnapshotConfig config, MetricsRegistry& metrics,
                  snapshot::Clock clock = {});

  // Reads the snapshots already in the object store; starts the sweeper.
  Status start();

  // Snapshots sandbox `sandbox_id`'s writable layer. `env_secret_names`:
  // names the task gave as secrets (the sandbox's own secret names are
  // added). Errors: not_found / conflict for the sandbox, resource_exhausted
  // (quota, full disk), unavailable (the object store).
  ApiResult<snapshot::SnapshotInfo> take_sandbox(std::string_view sandbox_id, std::string task,
                                                 std::string reason,
                                                 std::vector<std::string> env_secret_names);

  snapshot::SnapshotStore& store() { return *store_; }

 private:
  SandboxService& sandboxes_;
  MetricsRegistry& metrics_;
  std::unique_ptr<snapshot::SnapshotStore> store_;
};

}  // namespace corral::daemon
