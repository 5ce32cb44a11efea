// What every API handler gets: the services, the limits, and one request
// (its head, body, response writer and the path parameters matched by the
// router), plus the helpers that turn values and errors into responses.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/api_model.h"
#include "daemon/api_result.h"
#include "daemon/metrics.h"
#include "http/http_server.h"

namespace corral::objstore {
class ObjectStore;
}
namespace corral::volume {
class VolumeStore;
}

namespace corral::daemon {

class SandboxService;
class TaskService;
class SnapshotService;
class PoolService;
class NodeForwarder;
class SandboxPlacer;
class NodeService;

struct ApiLimits {
  std::size_t max_json_body = 1 << 20;          // create, mkdir, ...
  std::size_t max_exec_body = 16 << 20;         // exec carries stdin
  std::uint64_t max_exec_output = 64ull << 20;  // per stream, wait mode
  std::uint64_t max_upload = 0;                 // one file; 0: only the disk limit
  std::chrono::milliseconds stdin_write_timeout{30000};
};

struct ApiContext {
  SandboxService& sandboxes;
  MetricsRegistry& metrics;
  ApiLimits limits;
  // Task inputs, outputs and snapshots (serve.object_store; D5). Opened at
  // start, so never null in a running daemon.
  objstore::ObjectStore* objects = nullptr;
  TaskService* tasks = nullptr;            // null: the /v1/tasks routes answer 503
  volume::VolumeStore* volumes = nullptr;  // null: volumes are refused (503)
  // Failure snapshots (D4); null when the daemon has no object store.
  SnapshotService* snapshots = nullptr;
  // Warm pools (C4); null: /v1/pools answers 503 and "pool" finds none.
  PoolService* pools = nullptr;
  // Calls on sandboxes of other nodes (issue 18); null: none forwarded.
  NodeForwarder* forwarder = nullptr;
  // Where creates run (issue 18); null: every create runs here.
  SandboxPlacer* placer = nullptr;
  // This daemon as a node (heartbeat, readiness); set before the server
  // runs. Null: /readyz answers ready once the daemon serves.
  const NodeService* node = nullptr;
};

struct ApiRequest {
  const http::Peer& peer;
  const http::RequestHead& head;
  http::BodyReader& body;
  http::ResponseWriter& out;
  std::vector<std::string> params;  // {id}, {pid} in route order
  std::vector<std::pair<std::string, std::string>> query;
  // The caller's namespace (docs/api.md "Namespaces"): its API key's over
  // TCP; on the root-only unix socket "default", or the one named by the
  // X-Corral-Namespace header (an administrator acting for a namespace).
  std::string ns = "default";

  std::optional<std::string> query_value(std::string_view name) const {
    for (const auto& [k, v] : query)
      if (k == name) return v;
    return std::nullopt;
  }
};

void send_json(http::ResponseWriter& out, int status, const std::string& json);
void send_error(http::ResponseWriter& out, const api::ApiError& error);
// Reads a JSON body up to `limit` bytes: body_too_large (413) beyond it,
// request_timeout (408) when the client stalls, unsupported_media_type
// (415) for a Content-Type other than application/json.
ApiResult<std::string> read_json_body(ApiRequest& request, std::size_t limit);
// The same for a body of any Content-Type (the caller checks it).
ApiResult<std::string> read_body(ApiRequest& request, std::size_t limit);
// A boolean query flag: "1", "true", "yes" (or present and empty).
bool query_flag(const ApiRequest& request, std::string_view name);

// Handlers (one file per group: sandbox_api.cc, exec_api.cc, file_api.cc).
void handle_create_sandbox(ApiContext& ctx, ApiRequest& r);
void handle_list_sandboxes(ApiContext& ctx, ApiRequest& r);
void handle_get_sandbox(ApiContext& ctx, ApiRequest& r);
void handle_delete_sandbox(ApiContext& ctx, ApiRequest& r);
void handle_extend_sandbox(ApiContext& ctx, ApiRequest& r);
void handle_set_network(ApiContext& ctx, ApiRequest& r);
void handle_revoke_secrets(ApiContext& ctx, ApiRequest& r);
void handle_sandbox_diagnostics(ApiContext& ctx, ApiRequest& r);  // diagnostics_api.cc
void handle_sandbox_dry_run(ApiContext& ctx, ApiRequest& r);      // sandbox_dry_run.cc

void handle_exec(ApiContext& ctx, ApiRequest& r);
void handle_start_process(ApiContext& ctx, ApiRequest& r);
void handle_list_processes(ApiContext& ctx, ApiRequest& r);
void handle_get_process(ApiContext& ctx, ApiRequest& r);
void handle_process_output(ApiContext& ctx, ApiRequest& r);
void handle_process_stdin(ApiContext& ctx, ApiRequest& r);
void handle_process_signal(ApiContext& ctx, ApiRequest& r);
void handle_process_wait(ApiContext& ctx, ApiRequest& r);

// The volume store's error as the API's (volume_api.cc): 400 naming
// `field`, 403 (another namespace's), 404, 409 (exists, in use), 503, 507.
api::ApiError volume_api_error(const Error& error, const std::string& field = {});

void handle_create_volume(ApiContext& ctx, ApiRequest& r);
void handle_list_volumes(ApiContext& ctx, ApiRequest& r);
void handle_get_volume(ApiContext& ctx, ApiRequest& r);
void handle_delete_volume(ApiContext& ctx, ApiRequest& r);

void handle_file_upload(ApiContext& ctx, ApiRequest& r);
void handle_file_download(ApiContext& ctx, ApiRequest& r);
void handle_file_delete(ApiContext& ctx, ApiRequest& r);
void handle_file_list(ApiContext& ctx, ApiRequest& r);
void handle_file_stat(ApiContext& ctx, ApiRequest& r);
void handle_file_mkdir(ApiContext& ctx, ApiRequest& r);
void handle_file_rename(ApiContext& ctx, ApiRequest& r);

void handle_submit_task(ApiContext& ctx, ApiRequest& r);  // task_api.cc
void handle_list_tasks(ApiContext& ctx, ApiRequest& r);
void handle_get_task(ApiContext& ctx, ApiRequest& r);
void handle_cancel_task(ApiContext& ctx, ApiRequest& r);
void handle_replay_task(ApiContext& ctx, ApiRequest& r);
void handle_task_output(ApiContext& ctx, ApiRequest& r);
void handle_task_log(ApiContext& ctx, ApiRequest& r);
void handle_list_snapshots(ApiContext& ctx, ApiRequest& r);
void handle_get_snapshot(ApiContext& ctx, ApiRequest& r);
void handle_delete_snapshot(ApiContext& ctx, ApiRequest& r);
void handle_download_snapshot(ApiContext& ctx, ApiRequest& r);
void handle_snapshot_sandbox(ApiContext& ctx, ApiRequest& r);

// Warm pools (pool_api.cc; C4).
void handle_list_pools(ApiContext& ctx, ApiRequest& r);
void handle_get_pool(ApiContext& ctx, ApiRequest& r);
void handle_create_pool(ApiContext& ctx, ApiRequest& r);
void handle_delete_pool(ApiContext& ctx, ApiRequest& r);
// The nodes sharing the state store (node_api.cc; issue 18).
void handle_list_nodes(ApiContext& ctx, ApiRequest& r);
void handle_cordon_node(ApiContext& ctx, ApiRequest& r);
void handle_uncordon_node(ApiContext& ctx, ApiRequest& r);
// A create body with its optional "pool": read over that pool's spec, or
// over the daemon's defaults.
ApiResult<api::CreateSandboxRequest> parse_create_with_pool(ApiContext& ctx,
                                                            const std::string& body);

}  // namespace corral::daemon
