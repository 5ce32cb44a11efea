#include "daemon/e2b_facade.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "api/base64.h"
#include "base/fs.h"
#include "base/json_text.h"
#include "base/key_file.h"
#include "base/random.h"
#include "base/strings.h"
#include "daemon/e2b_facade_internal.h"
#include "daemon/metrics.h"
#include "daemon/node_forwarder.h"
#include "daemon/sandbox_service.h"
#include "e2b/control_messages.h"

namespace corral::daemon {

using namespace e2b_internal;

namespace {

constexpr std::size_t kKeyBytes = 32;

// "e2b_<hex>" is the spelling of a corral key "crl_<hex>" that the Python
// SDK accepts; any other key is taken as it is.
std::string corral_key(std::string_view presented) {
  if (presented.size() > 4 && presented.substr(0, 4) == "e2b_")
    return "crl_" + std::string(presented.substr(4));
  return std::string(presented);
}


std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view path) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    out.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

}  // namespace

E2bFacade::E2bFacade(ApiContext& context, const ApiKeys& keys, E2bSettings settings,
                     std::string token_key)
    : ctx_(context),
      keys_(keys),
      settings_(std::move(settings)),
      token_key_(std::move(token_key)) {}

Result<std::string> E2bFacade::load_or_make_key(const std::string& path) {
  return load_or_make_hex_file(path, kKeyBytes, "tokens already given out stop working");
}

Status E2bFacade::check_templates() {
  for (const auto& [name, t] : settings_.templates) {
    e2b::CreateRequest probe;
    probe.template_id = name;
    auto body = e2b_internal::create_body(*this, probe);
    if (!body) return tl::unexpected(body.error());
    auto parsed = parse_create_with_pool(ctx_, json_text(*body));
    if (!parsed)
      return make_error(ErrorCode::kInvalidArgument,
                        "serve.e2b.templates." + name + ": " + parsed.error().message,
                        parsed.error().hint);
  }
  return ok();
}

bool E2bFacade::owns(const http::RequestHead& head) const {
  if (!settings_.enabled) return false;
  const std::string& p = head.path;
  return p.size() > settings_.prefix.size() &&
         p.compare(0, settings_.prefix.size(), settings_.prefix) == 0 &&
         p[settings_.prefix.size()] == '/';
}

std::string E2bFacade::access_token(std::string_view sandbox_id) const {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  const std::string data = "corral-e2b-envd-token:" + std::string(sandbox_id);
  HMAC(EVP_sha256(), token_key_.data(), static_cast<int>(token_key_.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &len);
  return to_hex(mac, len);
}

bool E2bFacade::token_matches(std::string_view sandbox_id, std::string_view presented) const {
  const std::string want = access_token(sandbox_id);
  return presented.size() == want.size() &&
         CRYPTO_memcmp(presented.data(), want.data(), want.size()) == 0;
}

bool E2bFacade::authenticated(const http::Peer& peer, const http::RequestHead& head) const {
  const std::string_view rest = std::string_view(head.path).substr(settings_.prefix.size());
  if (rest.substr(0, 6) == "/envd/") {
    auto id = head.header("e2b-sandbox-id");
    auto token = head.header("x-access-token");
    return id && token && token_matches(trim(*id), trim(*token));
  }
  // A call another node of the fleet forwarded, signed with the cluster key.
  if (ctx_.forwarder != nullptr && NodeForwarder::is_forwarded(head))
    return ctx_.forwarder->forwarded_namespace(head).has_value();
  if (peer.kind != http::Peer::kTcp) return true;
  auto key = head.header("x-api-key");
  return key && keys_.verify(corral_key(trim(*key)));
}

void E2bFacade::handle(const http::Peer& peer, const http::RequestHead& head,
                       http::BodyReader& body, http::ResponseWriter& out) {
  const std::string_view rest = std::string_view(head.path).substr(settings_.prefix.size());
  const bool envd = rest.substr(0, 6) == "/envd/";
  ctx_.metrics.counter("corral_http_requests_total", "HTTP requests received").inc();
  ctx_.metrics
      .counter("corral_e2b_requests_total", "Requests to the E2B facade, by surface",
               {{"surface", envd ? "envd" : "control"}})
      .inc();
  auto query = http::parse_query(head.query);
  if (envd) {
    const std::string method(rest.substr(6));
    auto id = head.header("e2b-sandbox-id");
    auto token = head.header("x-access-token");
    if (!id || id->empty()) {
      return send_connect_error(out, e2b::ConnectCode::kInvalidArgument,
                                "the E2b-Sandbox-Id header is missing: set E2B_SANDBOX_URL to "
                                "this URL and use a sandbox the SDK created or connected to");
    }
    if (!token || !token_matches(trim(*id), trim(*token))) {
      ctx_.metrics
          .counter("corral_http_unauthorized_total", "Requests refused for a missing or wrong key")
          .inc();
      return send_connect_error(out, e2b::ConnectCode::kUnauthenticated,
                                token ? "the X-Access-Token is not this sandbox's"
                                      : "the X-Access-Token header is missing");
    }
    if (!query)
      return send_connect_error(out, e2b::ConnectCode::kInvalidArgument, query.error().message);
    // A sandbox another node of the fleet runs: the call goes there (the
    // token, the fleet's, was checked here and is checked there again).
    const std::string sandbox_id(trim(*id));
    if (relayed_to_owner(head, body, out, sandbox_id, "default", /*envd=*/true)) return;
    ApiRequest r{peer, head, body, out, {sandbox_id}, *query, "default"};
    EnvdCall call{*this, r, sandbox_id, method};
    // A sandbox that is gone answers 502, as E2B's proxy does (the SDK's
    // isRunning() is false on 502 only).
    auto live = ctx_.sandboxes.live(call.sandbox_id);
    if (!live || ctx_.sandboxes.unclaimed_pooled(call.sandbox_id)) {
      (void)out.send(502, {{"content-type", "application/json"}},
                     e2b::error_json(502, "sandbox " + call.sandbox_id + " is not running"));
      return;
    }
    {
      std::lock_guard lock((*live)->mu);  // a claim sets it under mu
      r.ns = (*live)->ns;
    }
    if (method == "health") {
      if (head.method != "GET" && head.method != "HEAD")
        return send_connect_error(out, e2b::ConnectCode::kUnimplemented, "GET /health only");
      (void)out.send(204, {}, "");
      return;
    }
    if (method == "files") return handle_files(call);
    if (head.method != "POST")
      return send_connect_error(out, e2b::ConnectCode::kUnimplemented,
                                "Connect calls are POST (" + head.method + " " + method + ")");
    if (method.rfind("process.Process/", 0) == 0) return handle_process_service(call);
    if (method.rfind("filesystem.Filesystem/", 0) == 0) return handle_filesystem_service(call);
    return send_connect_error(out, e2b::ConnectCode::kUnimplemented, "no envd method " + method);
  }
  // The control plane.
  std::string ns(ApiKeys::kDefaultNamespace);
  if (ctx_.forwarder != nullptr && NodeForwarder::is_forwarded(head)) {
    // Forwarded by another node of the fleet: the namespace it
    // authenticated, under the cluster key's signature.
    auto forwarded = ctx_.forwarder->forwarded_namespace(head);
    if (!forwarded) {
      (void)out.send(401, {{"content-type", "application/json"}, {"connection", "close"}},
                     e2b::error_json(401, "the forwarded call's signature is not valid"));
      return;
    }
    ns = std::move(*forwarded);
  } else if (peer.kind == http::Peer::kTcp) {
    auto key = head.header("x-api-key");
    std::optional<std::string> found;
    if (key) found = keys_.namespace_of(corral_key(trim(*key)));
    if (!found) {
      ctx_.metrics
          .counter("corral_http_unauthorized_total", "Requests refused for a missing or wrong key")
          .inc();
      (void)out.send(401, {{"content-type", "application/json"}, {"connection", "close"}},
                     e2b::error_json(401, key ? "the API key is not valid"
                                              : "the X-API-Key header is missing (E2B_API_KEY)"));
      return;
    }
    ns = std::move(*found);
  }
  if (!query) return send_control_error(out, 400, query.error().message);
  const std::vector<std::string_view> parts = split(rest.substr(1));
  // A call on a sandbox another node of the fleet runs goes there.
  std::string_view target_id;
  if (parts.size() >= 2 && parts[0] == "sandboxes") target_id = parts[1];
  else if (parts.size() >= 3 && parts[0] == "v2" && parts[1] == "sandboxes") target_id = parts[2];
  if (!target_id.empty() &&
      relayed_to_owner(head, body, out, std::string(target_id), ns, /*envd=*/false))
    return;
  ApiRequest r{peer, head, body, out, {}, *query, ns};
  ControlCall call{*this, r, parts};
  handle_control(call);
}

bool E2bFacade::relayed_to_owner(const http::RequestHead& head, http::BodyReader& body,
                                 http::ResponseWriter& out, const std::string& id,
                                 const std::string& ns, bool envd) {
  if (ctx_.forwarder == nullptr || ctx_.sandboxes.registered(id)) return false;
  auto owner = ctx_.forwarder->e2b_owner(head, id);
  if (!owner) return false;
  ctx_.metrics
      .counter("corral_e2b_forwarded_total", "E2B calls sent on to the node that runs the sandbox",
               {{"surface", envd ? "envd" : "control"}})
      .inc();
  if (ctx_.forwarder->forward_e2b(*owner, head, body, out, ns)) return true;
  // As E2B's proxy answers for a sandbox it cannot reach.
  (void)out.send(502, {{"content-type", "application/json"}},
                 e2b::error_json(502, "sandbox " + id + " runs on node " + owner->id + " (" +
                                          owner->address + "), which cannot be reached"));
  return true;
}

// ---- shared helpers ---------------------------------------------------------

namespace e2b_internal {

void send_control_error(http::ResponseWriter& out, int status, std::string_view message) {
  if (out.started()) return;
  (void)out.send(status, {{"content-type", "application/json"}}, e2b::error_json(status, message));
}

void send_control_error(http::ResponseWriter& out, const api::ApiError& e) {
  std::string message = e.message;
  if (!e.hint.empty()) message += " (" + e.hint + ")";
  send_control_error(out, e.http_status, message);
}

void send_connect_error(http::ResponseWriter& out, e2b::ConnectCode code,
                        std::string_view message) {
  if (out.started()) return;
  (void)out.send(e2b::connect_http_status(code), {{"content-type", "application/json"}},
                 e2b::connect_error_json({code, std::string(message)}));
}

e2b::ConnectError connect_error_of(const api::ApiError& e) {
  using e2b::ConnectCode;
  ConnectCode code = ConnectCode::kInternal;
  switch (e.http_status) {
    case 400:
    case 413:
    case 415:
    case 422:
      code = ConnectCode::kInvalidArgument;
      break;
    case 401:
      code = ConnectCode::kUnauthenticated;
      break;
    case 403:
      code = ConnectCode::kPermissionDenied;
      break;
    case 404:
      code = ConnectCode::kNotFound;
      break;
    case 408:
      code = ConnectCode::kDeadlineExceeded;
      break;
    case 409:
      code = ConnectCode::kFailedPrecondition;
      break;
    case 429:
      code = ConnectCode::kResourceExhausted;
      break;
    case 501:
      code = ConnectCode::kUnimplemented;
      break;
    case 503:
      code = ConnectCode::kUnavailable;
      break;
    case 507:
      code = ConnectCode::kResourceExhausted;
      break;
    default:
      break;
  }
  std::string message = e.message;
  if (!e.hint.empty()) message += " (" + e.hint + ")";
  return {code, std::move(message)};
}

void send_connect_error(http::ResponseWriter& out, const api::ApiError& e) {
  const e2b::ConnectError c = connect_error_of(e);
  send_connect_error(out, c.code, c.message);
}

void send_stream_error(http::ResponseWriter& out, e2b::ConnectCode code,
                       const std::string& message) {
  if (out.started()) {
    (void)out.write(e2b::end_stream_envelope(e2b::ConnectError{code, message}));
    (void)out.finish();
    return;
  }
  (void)out.send(200, {{"content-type", "application/connect+json"}},
                 e2b::end_stream_envelope(e2b::ConnectError{code, message}));
}

void send_stream_error(http::ResponseWriter& out, const api::ApiError& e) {
  const e2b::ConnectError c = connect_error_of(e);
  send_stream_error(out, c.code, c.message);
}

std::chrono::seconds keepalive_interval(const ApiRequest& r) {
  long secs = 50;
  if (auto v = r.head.header("keepalive-ping-interval"); v) {
    const std::string s(*v);
    char* end = nullptr;
    const long n = std::strtol(s.c_str(), &end, 10);
    if (!s.empty() && *end == '\0' && n > 0) secs = std::min(n, 50L);
  }
  return std::chrono::seconds(secs);
}

std::optional<std::int64_t> connect_timeout_ms(const ApiRequest& r, bool* ok) {
  *ok = true;
  auto v = r.head.header("connect-timeout-ms");
  if (!v) return std::nullopt;
  const std::string s(*v);
  if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos) {
    *ok = false;
    return std::nullopt;
  }
  return std::stoll(s);
}

void send_connect_json(http::ResponseWriter& out, const std::string& json) {
  (void)out.send(200, {{"content-type", "application/json"}}, json);
}

namespace {

std::optional<std::string> read_limited(ApiRequest& r, std::size_t limit) {
  if (auto len = r.body.declared_length(); len && *len > limit) {
    send_connect_error(r.out, e2b::ConnectCode::kResourceExhausted,
                       "the request is " + std::to_string(*len) + " bytes; at most " +
                           std::to_string(limit) + " are accepted");
    return std::nullopt;
  }
  auto text = r.body.read_all(limit);
  if (!text) {
    send_connect_error(r.out,
                       text.error().code == ErrorCode::kResourceExhausted
                           ? e2b::ConnectCode::kResourceExhausted
                           : e2b::ConnectCode::kInvalidArgument,
                       "could not read the request: " + text.error().message);
    return std::nullopt;
  }
  return std::move(*text);
}

bool content_type_is(const ApiRequest& r, std::string_view want) {
  auto ct = r.head.header("content-type");
  if (!ct) return false;
  std::string_view v = trim(ct->substr(0, ct->find(';')));
  return v == want;
}

}  // namespace

bool stream_content_type(ApiRequest& r) {
  if (content_type_is(r, "application/connect+json")) return true;
  send_connect_error(r.out, e2b::ConnectCode::kInvalidArgument,
                     "a streaming call takes Content-Type: application/connect+json "
                     "(binary protobuf is not supported)");
  return false;
}

std::optional<std::string> read_unary(ApiRequest& r, std::size_t limit) {
  if (!content_type_is(r, "application/json")) {
    send_connect_error(r.out, e2b::ConnectCode::kInvalidArgument,
                       "this facade speaks Connect with JSON: send Content-Type: application/json "
                       "(binary protobuf is not supported)");
    return std::nullopt;
  }
  return read_limited(r, limit);
}

std::optional<std::string> read_stream_request(ApiRequest& r, std::size_t limit) {
  if (!stream_content_type(r)) return std::nullopt;
  auto body = read_limited(r, limit + 5);
  if (!body) return std::nullopt;
  auto message = e2b::single_envelope(*body);
  if (!message) {
    send_connect_error(r.out, e2b::ConnectCode::kInvalidArgument, message.error().message);
    return std::nullopt;
  }
  return std::move(*message);
}

std::string sandbox_path(const SandboxEntry& sandbox, std::string_view path) {
  if (!path.empty() && path.front() == '/') return std::string(path);
  std::string base = sandbox.spec.workdir.empty() ? "/" : sandbox.spec.workdir;
  if (base.back() != '/') base += '/';
  if (path == "." || path.empty()) return base;
  return base + std::string(path);
}

bool user_allowed(ApiRequest& r, const SandboxEntry& sandbox) {
  auto auth = r.head.header("authorization");
  if (!auth) return true;
  std::string_view v = trim(*auth);
  if (v.size() < 6 || strncasecmp(v.data(), "basic ", 6) != 0) return true;
  auto decoded = api::base64_decode(trim(v.substr(6)));
  if (!decoded) return true;  // not ours to judge: the SDK sends only "user:"
  const std::string user = decoded->substr(0, decoded->find(':'));
  if (user == "root" && !sandbox.spec.root) {
    send_connect_error(r.out, e2b::ConnectCode::kPermissionDenied,
                       "this sandbox runs its commands as an unprivileged user; create it from a "
                       "template mapped to a root sandbox to run as root");
    return false;
  }
  return true;
}

}  // namespace e2b_internal

}  // namespace corral::daemon
