// What the facade's files (e2b_facade.cc, e2b_control_api.cc, envd_*.cc)
// share and nothing else includes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "daemon/api_context.h"
#include "daemon/e2b_facade.h"
#include "daemon/sandbox_entry.h"
#include "daemon/sandbox_lease.h"
#include "e2b/connect_protocol.h"
#include "e2b/control_messages.h"
#include "fs/confined_root.h"

namespace corral::daemon::e2b_internal {

// One control-plane call: the caller's namespace, the path after the
// prefix split into segments, and the request.
struct ControlCall {
  E2bFacade& facade;
  ApiRequest& r;
  std::vector<std::string_view> path;  // {"v2","sandboxes"}, {"sandboxes","<id>","timeout"}
};
void handle_control(ControlCall& call);
// The corral create body of an E2B create: its template's (an image, a
// pool, or a create body of serve.e2b.templates), its timeout, envs,
// metadata and network.
Result<nlohmann::json> create_body(E2bFacade& facade, const e2b::CreateRequest& request);

// One envd call, its sandbox found and its token checked.
struct EnvdCall {
  E2bFacade& facade;
  ApiRequest& r;
  std::string sandbox_id;
  std::string method;  // "process.Process/Start", "files", "health"
};
void handle_process_service(EnvdCall& call);
void handle_filesystem_service(EnvdCall& call);
void handle_files(EnvdCall& call);      // envd_files_api.cc
// envd_watch_api.cc: WatchDir and the polling watchers.
void handle_watch_dir(EnvdCall& call);
void handle_create_watcher(EnvdCall& call);
void handle_get_watcher_events(EnvdCall& call);
void handle_remove_watcher(EnvdCall& call);

// An envd file call's sandbox: leased (`transfer`: the lease holds the
// connection, which a destroy cuts), with its confined root.
struct EnvdTarget {
  SandboxLease lease;
  std::shared_ptr<SandboxEntry> sandbox;
  std::optional<ConfinedRoot> root;
};
// nullopt when the error was answered (`connect`: as a Connect error, else
// as envd's JSON error).
std::optional<EnvdTarget> open_target(EnvdCall& c, bool transfer, bool connect);

// The last component of a path ("/a/b/" -> "b").
std::string last_name(const std::string& path);

// E2B's control-plane error: {"code": status, "message": ...}.
void send_control_error(http::ResponseWriter& out, int status, std::string_view message);
// A corral API error as E2B's control plane says it.
void send_control_error(http::ResponseWriter& out, const api::ApiError& e);
// A Connect unary error.
void send_connect_error(http::ResponseWriter& out, e2b::ConnectCode code, std::string_view message);
// A corral API error as a Connect error.
e2b::ConnectError connect_error_of(const api::ApiError& e);
void send_connect_error(http::ResponseWriter& out, const api::ApiError& e);
// The answer of a stream call that fails: status 200 and the error in the
// end-of-stream message, as Connect has it (after the stream started: the
// end-of-stream message only).
void send_stream_error(http::ResponseWriter& out, e2b::ConnectCode code,
                       const std::string& message);
// A corral API error as a stream's end-of-stream error.
void send_stream_error(http::ResponseWriter& out, const api::ApiError& e);
// Keepalive-Ping-Interval (seconds; at most 50, envd's default).
std::chrono::seconds keepalive_interval(const ApiRequest& r);
// Connect-Timeout-Ms: nullopt when absent; false in *ok when malformed.
std::optional<std::int64_t> connect_timeout_ms(const ApiRequest& r, bool* ok);
// A unary answer.
void send_connect_json(http::ResponseWriter& out, const std::string& json);

// The request's Content-Type is a streaming call's
// (application/connect+json); answers the Connect error itself otherwise.
bool stream_content_type(ApiRequest& r);
// The request's body for a unary call (application/json, at most `limit`
// bytes) or a streaming one (application/connect+json: one envelope);
// answers the Connect error itself and returns nullopt on failure.
std::optional<std::string> read_unary(ApiRequest& r, std::size_t limit);
std::optional<std::string> read_stream_request(ApiRequest& r, std::size_t limit);

// A path as envd takes it: relative ones are under the sandbox's workdir.
std::string sandbox_path(const SandboxEntry& sandbox, std::string_view path);

// The user an envd call asks for (Authorization: Basic base64("user:")),
// checked against the sandbox: "root" only in a sandbox created with root.
// Answers permission_denied itself and returns false.
bool user_allowed(ApiRequest& r, const SandboxEntry& sandbox);

}  // namespace corral::daemon::e2b_internal
