// Replay (REQUIREMENTS.md T2; docs/tasks.md "Replay"): what a task keeps so
// that it can be run again in isolation, and the pieces a replay starts
// from. The runner (task_stage_create.cc, task_stage_inputs.cc) records,
// in the task's resolved_json:
//   sandbox       the sandbox spec after the daemon's defaults (spec_to_json:
//                 secrets by name and mode, never a value)
//   image         what identifies the image (image_identity)
//   argv, env, timeout_ms, secret_names
//   inputs        each input's path, sha256, size, and where its copy is
//                 kept (tasks/<id>/<attempt>/inputs/<n>)
//   create_key    the sandbox create's idempotency key (restart re-attach)
//   replay        on a replay task: what it replays and how (of, request,
//                 from_snapshot, restored)
// TaskService::replay (task_replay.cc) turns that into a new task.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "api/task_model.h"
#include "base/result.h"
#include "fs/confined_root.h"
#include "objstore/object_store.h"

namespace corral::daemon {

class SnapshotService;

// What identifies the image a sandbox is made from. corral's images have
// no content digest (docs/images.md): an image is identified by its name,
// where it came from, when it was made and its size, and "digest" is the
// sha256 of those four (a rebuild under the same name changes it). The
// host base (no image) is {"name": "", "base": "host"}.
nlohmann::json image_identity(std::string_view image);

// A copy of input `in`, just written to the sandbox with `sha256` and
// `size`, kept at `key`: inline bytes from the request, an object input
// read back from the sandbox's file. Errors: kInvalidArgument when the
// bytes differ from `sha256` (the task's input_mismatch), kUnavailable or
// another code from the object store (storage_unavailable), kNotFound /
// kPermissionDenied reading the file back (setup). Without an object store
// the record says the copy was not kept.
Result<nlohmann::json> keep_input_copy(objstore::ObjectStore* objects, const std::string& key,
                                       const std::string& task, std::size_t index,
                                       const api::TaskInput& in, const ConfinedRoot& root,
                                       const std::string& sha256, std::uint64_t size);

struct RestoredFiles {
  std::uint64_t files = 0, dirs = 0;
  std::uint64_t skipped = 0;  // symlinks, corral's own files, names refused
};
// Writes snapshot `id`'s files (as archived: redacted) into a sandbox
// through its confined root, owned by `owner`; corral's own setup files
// (/etc/passwd, group, hostname, hosts, resolv.conf) keep the new
// sandbox's. Errors: kNotFound (the snapshot is gone), kResourceExhausted
// (the sandbox's disk is full, or the archive is over its bounds),
// kUnavailable (the object store), others (a broken archive).
Result<RestoredFiles> restore_snapshot_files(SnapshotService& snapshots, std::string_view id,
                                             const ConfinedRoot& root, uid_t owner);

}  // namespace corral::daemon
