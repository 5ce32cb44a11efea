#include "daemon/api_router.h"

#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/json_text.h"
#include "daemon/api_keys.h"
#include "daemon/metrics.h"
#include "daemon/node_forwarder.h"
#include "daemon/node_service.h"
#include "daemon/sandbox_service.h"
#include "spec/volume_ref.h"

namespace corral::daemon {

namespace {

using HandlerFn = void (*)(ApiContext&, ApiRequest&);

struct Route {
  const char* method;
  const char* pattern;
  HandlerFn handler;
};

// The whole API surface, one line per route (docs/api.md, docs/openapi.yaml).
const Route kRoutes[] = {
    {"POST", "/v1/sandboxes", handle_create_sandbox},
    {"GET", "/v1/sandboxes", handle_list_sandboxes},
    {"GET", "/v1/sandboxes/{id}", handle_get_sandbox},
    {"DELETE", "/v1/sandboxes/{id}", handle_delete_sandbox},
    {"POST", "/v1/sandboxes/{id}/timeout", handle_extend_sandbox},
    {"PUT", "/v1/sandboxes/{id}/network", handle_set_network},
    {"POST", "/v1/sandboxes/{id}/secrets/revoke", handle_revoke_secrets},
    {"POST", "/v1/sandboxes/{id}/exec", handle_exec},
    {"POST", "/v1/sandboxes/{id}/processes", handle_start_process},
    {"GET", "/v1/sandboxes/{id}/processes", handle_list_processes},
    {"GET", "/v1/sandboxes/{id}/processes/{pid}", handle_get_process},
    {"GET", "/v1/sandboxes/{id}/processes/{pid}/output", handle_process_output},
    {"POST", "/v1/sandboxes/{id}/processes/{pid}/stdin", handle_process_stdin},
    {"POST", "/v1/sandboxes/{id}/processes/{pid}/signal", handle_process_signal},
    {"POST", "/v1/sandboxes/{id}/processes/{pid}/wait", handle_process_wait},
    {"PUT", "/v1/sandboxes/{id}/files", handle_file_upload},
    {"GET", "/v1/sandboxes/{id}/files", handle_file_download},
    {"DELETE", "/v1/sandboxes/{id}/files", handle_file_delete},
    {"GET", "/v1/sandboxes/{id}/files/list", handle_file_list},
    {"GET", "/v1/sandboxes/{id}/files/stat", handle_file_stat},
    {"POST", "/v1/sandboxes/{id}/files/mkdir", handle_file_mkdir},
    {"POST", "/v1/sandboxes/{id}/files/rename", handle_file_rename},
    {"POST", "/v1/tasks", handle_submit_task},
    {"GET", "/v1/tasks", handle_list_tasks},
    {"GET", "/v1/tasks/{id}", handle_get_task},
    {"POST", "/v1/tasks/{id}/cancel", handle_cancel_task},
    {"POST", "/v1/tasks/{id}/replay", handle_replay_task},
    {"GET", "/v1/tasks/{id}/outputs/{n}", handle_task_output},
    {"GET", "/v1/tasks/{id}/log", handle_task_log},
    {"POST", "/v1/volumes", handle_create_volume},
    {"GET", "/v1/volumes", handle_list_volumes},
    {"GET", "/v1/volumes/{name}", handle_get_volume},
    {"DELETE", "/v1/volumes/{name}", handle_delete_volume},
    {"POST", "/v1/sandboxes/{id}/snapshot", handle_snapshot_sandbox},
    {"GET", "/v1/snapshots", handle_list_snapshots},
    {"GET", "/v1/snapshots/{id}", handle_get_snapshot},
    {"DELETE", "/v1/snapshots/{id}", handle_delete_snapshot},
    {"GET", "/v1/snapshots/{id}/archive", handle_download_snapshot},
    // Diagnostics (T1, issue 16).
    {"GET", "/v1/sandboxes/{id}/diagnostics", handle_sandbox_diagnostics},
    // Dry-run (X2, issue 16).
    {"GET", "/v1/sandboxes/{id}/dry-run", handle_sandbox_dry_run},
    {"GET", "/v1/pools", handle_list_pools},
    {"POST", "/v1/pools", handle_create_pool},
    {"GET", "/v1/pools/{name}", handle_get_pool},
    {"DELETE", "/v1/pools/{name}", handle_delete_pool},
    // The fleet (issue 18).
    {"GET", "/v1/nodes", handle_list_nodes},
    {"POST", "/v1/nodes/{id}/cordon", handle_cordon_node},
    {"POST", "/v1/nodes/{id}/uncordon", handle_uncordon_node},
};

// The segments of an absolute path, or nothing when one is empty: "//", a
// trailing "/" and "/" itself name no route. Paths are matched as sent,
// never normalized, so one resource has one path.
std::optional<std::vector<std::string_view>> split_path(std::string_view path) {
  if (path.empty() || path.front() != '/') return std::nullopt;
  std::vector<std::string_view> parts;
  std::size_t i = 1;
  for (;;) {
    std::size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j == i) return std::nullopt;  // an empty segment
    parts.push_back(path.substr(i, j - i));
    if (j == path.size()) return parts;
    i = j + 1;
  }
}

// HEAD is served on every GET route by the GET handler (RFC 9110 9.3.2):
// the HTTP layer sends its status and fields and drops its body.
bool method_matches(std::string_view route_method, std::string_view method) {
  return method == route_method || (method == "HEAD" && route_method == "GET");
}

// Matches `path` against `pattern`; fills {params} in order.
bool match(std::string_view pattern, const std::vector<std::string_view>& path,
           std::vector<std::string>* params) {
  auto pat = split_path(pattern);
  if (!pat || pat->size() != path.size()) return false;
  params->clear();
  for (size_t i = 0; i < pat->size(); ++i) {
    if ((*pat)[i].front() == '{') {
      params->emplace_back(path[i]);
    } else if ((*pat)[i] != path[i]) {
      return false;
    }
  }
  return true;
}

}  // namespace

ApiRouter::ApiRouter(ApiContext& context, const ApiKeys& keys) : ctx_(context), keys_(keys) {}

std::vector<RouteInfo> ApiRouter::routes() {
  std::vector<RouteInfo> out = {{"GET", "/healthz"}, {"GET", "/readyz"}, {"GET", "/metrics"}};
  for (const Route& r : kRoutes) out.push_back({r.method, r.pattern});
  return out;
}

bool ApiRouter::authenticated(const http::Peer& peer, const http::RequestHead& head) const {
  // The unix socket is reachable only by root (mode 0600): no key there.
  if (peer.kind != http::Peer::kTcp) return true;
  // A call another node of the fleet forwarded, signed with the cluster key.
  if (ctx_.forwarder != nullptr && NodeForwarder::is_forwarded(head))
    return ctx_.forwarder->forwarded_namespace(head).has_value();
  auto header = head.header("authorization");
  if (!header) return false;
  auto key = ApiKeys::parse_bearer(*header);
  return key && keys_.verify(*key);
}

ApiResult<std::string> ApiRouter::caller_namespace(const http::Peer& peer,
                                                   const http::RequestHead& head) const {
  auto asked = head.header("x-corral-namespace");
  if (peer.kind != http::Peer::kTcp) {
    // Root on the 0600 socket may act for any namespace (an admin feature).
    if (!asked) return std::string(ApiKeys::kDefaultNamespace);
    if (!is_valid_volume_name(*asked))
      return api_fail(api::ApiErrorCode::kInvalidValue,
                      "X-Corral-Namespace is not a namespace name ([a-z0-9][a-z0-9._-]{0,62})",
                      "X-Corral-Namespace");
    return std::string(*asked);
  }
  std::optional<std::string> ns;
  if (ctx_.forwarder != nullptr && NodeForwarder::is_forwarded(head)) {
    // The namespace the forwarding node authenticated, under the signature.
    if (auto forwarded = ctx_.forwarder->forwarded_namespace(head); forwarded) return *forwarded;
    return api_fail(api::ApiErrorCode::kUnauthorized,
                    "the forwarded call's signature is not valid");
  }
  if (auto header = head.header("authorization"); header) {
    if (auto key = ApiKeys::parse_bearer(*header); key) ns = keys_.namespace_of(*key);
  }
  if (!ns)  // authenticated() let it through: a key was checked
    return api_fail(api::ApiErrorCode::kUnauthorized, "this route needs an API key");
  // Over TCP the key decides; a header naming another namespace is refused
  // rather than ignored, so a client that expects it learns it has no effect.
  if (asked && *asked != *ns)
    return api_fail(api::ApiErrorCode::kForbidden,
                    "X-Corral-Namespace is honoured on the unix socket only; this key belongs to "
                    "namespace " +
                        *ns,
                    "X-Corral-Namespace", "leave the header out, or use a key of that namespace");
  return std::move(*ns);
}

void ApiRouter::handle(const http::Peer& peer, const http::RequestHead& head,
                       http::BodyReader& body, http::ResponseWriter& out) {
  ctx_.metrics.counter("corral_http_requests_total", "HTTP requests received").inc();
  // Liveness (/healthz: the daemon answers) and readiness (/readyz: send
  // it work; 503 while its heartbeat is not written), without a key.
  const bool healthz = head.path == "/healthz", readyz = head.path == "/readyz";
  if ((healthz || readyz) && method_matches("GET", head.method)) {
    NodeService::Readiness r{true, ""};
    if (ctx_.node != nullptr) r = ctx_.node->readiness();
    nlohmann::json j = {{"status", healthz ? "ok" : (r.ready ? "ready" : "unready")},
                        {"ready", r.ready},
                        {"sandboxes", ctx_.sandboxes.live_count()}};
    if (!r.ready) j["reason"] = r.reason;
    send_json(out, readyz && !r.ready ? 503 : 200, json_text(j));
    return;
  }
  if (!authenticated(peer, head)) {
    auto header = head.header("authorization");
    ctx_.metrics
        .counter("corral_http_unauthorized_total", "Requests refused for a missing or wrong key")
        .inc();
    api::ApiError e = api::make_api_error(
        api::ApiErrorCode::kUnauthorized,
        header ? "the API key is not valid" : "this route needs an API key", "",
        "send Authorization: Bearer <key> (the key file is printed when corral serve starts)");
    // The connection closes after the 401: a client without a key must not
    // keep a connection open by asking again (issue 14).
    (void)out.send(401,
                   {{"content-type", "application/json"},
                    {"www-authenticate", "Bearer"},
                    {"connection", "close"}},
                   api::to_json(e));
    return;
  }
  if (head.path == "/metrics" && method_matches("GET", head.method)) {
    (void)out.send(200, {{"content-type", "text/plain; version=0.0.4; charset=utf-8"}},
                   ctx_.metrics.render());
    return;
  }
  std::vector<std::string> params;
  HandlerFn handler = route(head, out, &params);
  if (handler == nullptr) return;
  auto query = http::parse_query(head.query);
  if (!query) {
    send_error(
        out, api::make_api_error(api::ApiErrorCode::kInvalidValue, query.error().message, "query"));
    return;
  }
  auto ns = caller_namespace(peer, head);
  if (!ns) {
    send_error(out, ns.error());
    return;
  }
  // A sandbox another node runs, or a task another node holds: the call
  // goes there (docs/fleet.md).
  if (ctx_.forwarder != nullptr && !params.empty() && head.path.starts_with("/v1/sandboxes/") &&
      !ctx_.sandboxes.registered(params[0]) &&
      ctx_.forwarder->relay(head, body, out, *ns, params[0]))
    return;
  if (ctx_.forwarder != nullptr && !params.empty() && head.path.starts_with("/v1/tasks/") &&
      ctx_.forwarder->relay_task(head, body, out, *ns, params[0], *query))
    return;
  ApiRequest r{peer, head, body, out, std::move(params), *query, std::move(*ns)};
  handler(ctx_, r);
}

ApiRouter::Handler ApiRouter::route(const http::RequestHead& head, http::ResponseWriter& out,
                                    std::vector<std::string>* params) {
  const auto parts = split_path(head.path);
  bool path_known = false;
  if (parts) {
    for (const Route& r : kRoutes) {
      if (!match(r.pattern, *parts, params)) continue;
      path_known = true;
      if (method_matches(r.method, head.method)) return r.handler;
    }
  }
  params->clear();
  if (path_known) {
    std::string allowed;
    std::vector<std::string> ignored;
    for (const Route& r : kRoutes) {
      if (!match(r.pattern, *parts, &ignored)) continue;
      allowed += (allowed.empty() ? "" : ", ") + std::string(r.method);
      if (std::string_view(r.method) == "GET") allowed += ", HEAD";
    }
    api::ApiError e = api::make_api_error(
        api::ApiErrorCode::kMethodNotAllowed,
        head.method + " is not allowed on " + head.path + " (allowed: " + allowed + ")");
    (void)out.send(e.http_status, {{"content-type", "application/json"}, {"allow", allowed}},
                   api::to_json(e));
    return nullptr;
  }
  send_error(out, api::make_api_error(api::ApiErrorCode::kNotFound,
                                      "no route " + head.method + " " + head.path, "",
                                      "the API is described in docs/api.md"));
  return nullptr;
}

// ---- helpers shared by the handlers -----------------------------------------

void send_json(http::ResponseWriter& out, int status, const std::string& json) {
  (void)out.send(status, {{"content-type", "application/json"}}, json);
}

void send_error(http::ResponseWriter& out, const api::ApiError& error) {
  if (out.started()) return;  // too late for a status: the stream says it
  send_json(out, error.http_status, api::to_json(error));
}

ApiResult<std::string> read_json_body(ApiRequest& r, std::size_t limit) {
  if (auto ct = r.head.header("content-type"); ct) {
    std::string_view v = *ct;
    if (v.substr(0, v.find(';')) != "application/json")
      return api_fail(api::ApiErrorCode::kUnsupportedMediaType,
                      "Content-Type " + std::string(v) + " is not accepted here", "",
                      "send the body as application/json");
  }
  return read_body(r, limit);
}

ApiResult<std::string> read_body(ApiRequest& r, std::size_t limit) {
  if (auto len = r.body.declared_length(); len && *len > limit)
    return api_fail(api::ApiErrorCode::kBodyTooLarge,
                    "the body is " + std::to_string(*len) + " bytes; at most " +
                        std::to_string(limit) + " are accepted here");
  auto text = r.body.read_all(limit);
  if (!text) {
    if (text.error().code == ErrorCode::kResourceExhausted)
      return api_fail(
          api::ApiErrorCode::kBodyTooLarge,
          "the body is larger than the " + std::to_string(limit) + " bytes accepted here");
    if (text.error().code == ErrorCode::kTimeout)
      return api_fail(api::ApiErrorCode::kRequestTimeout,
                      "the request body did not arrive in time: " + text.error().message);
    return api_fail(api::ApiErrorCode::kBadJson,
                    "could not read the body: " + text.error().message);
  }
  return *text;
}

bool query_flag(const ApiRequest& r, std::string_view name) {
  auto v = r.query_value(name);
  return v && (v->empty() || *v == "1" || *v == "true" || *v == "yes");
}

}  // namespace corral::daemon
