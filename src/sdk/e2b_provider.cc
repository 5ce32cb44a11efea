#include "sdk/e2b_provider.h"

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "base/sha256.h"
#include "e2b/connect_protocol.h"
#include "e2b/control_messages.h"
#include "e2b/envd_messages.h"
#include "http/multipart.h"

namespace corral::sdk {

namespace {

constexpr std::size_t kMaxAnswer = std::size_t{64} << 20;
constexpr std::uint64_t kMaxUpload = std::uint64_t{256} << 20;

Error status_error(int status, std::string message) {
  ErrorCode code = ErrorCode::kInternal;
  switch (status) {
    case 400: code = ErrorCode::kInvalidArgument; break;
    case 401:
    case 403: code = ErrorCode::kPermissionDenied; break;
    case 404: code = ErrorCode::kNotFound; break;
    case 409: code = ErrorCode::kAlreadyExists; break;
    case 413:
    case 429:
    case 507: code = ErrorCode::kResourceExhausted; break;
    case 502:
    case 503:
    case 501: code = ErrorCode::kUnavailable; break;
    case 504: code = ErrorCode::kTimeout; break;
    default: break;
  }
  Error e;
  e.code = code;
  e.message = std::move(message);
  return e;
}

Error connect_error(const e2b::ConnectError& c) {
  using e2b::ConnectCode;
  ErrorCode code = ErrorCode::kInternal;
  switch (c.code) {
    case ConnectCode::kInvalidArgument:
    case ConnectCode::kFailedPrecondition:
    case ConnectCode::kOutOfRange: code = ErrorCode::kInvalidArgument; break;
    case ConnectCode::kNotFound: code = ErrorCode::kNotFound; break;
    case ConnectCode::kAlreadyExists: code = ErrorCode::kAlreadyExists; break;
    case ConnectCode::kPermissionDenied:
    case ConnectCode::kUnauthenticated: code = ErrorCode::kPermissionDenied; break;
    case ConnectCode::kResourceExhausted: code = ErrorCode::kResourceExhausted; break;
    case ConnectCode::kUnavailable:
    case ConnectCode::kUnimplemented: code = ErrorCode::kUnavailable; break;
    case ConnectCode::kDeadlineExceeded:
    case ConnectCode::kCanceled: code = ErrorCode::kTimeout; break;
    default: break;
  }
  Error e;
  e.code = code;
  e.message = std::string(e2b::connect_code_name(c.code)) + ": " + c.message;
  return e;
}

int signal_of(const std::string& status) {
  // Go's ProcessState strings ("signal: killed").
  static const std::pair<const char*, int> kNames[] = {
      {"killed", SIGKILL}, {"terminated", SIGTERM}, {"interrupt", SIGINT},
      {"hangup", SIGHUP},  {"aborted", SIGABRT},    {"segmentation fault", SIGSEGV}};
  const std::string prefix = "signal: ";
  if (status.rfind(prefix, 0) != 0) return SIGKILL;
  const std::string name = status.substr(prefix.size());
  for (const auto& [n, sig] : kNames)
    if (name.rfind(n, 0) == 0) return sig;
  return SIGKILL;
}

api::SandboxInfo info_of(const e2b::SandboxView& v) {
  api::SandboxInfo info;
  info.id = v.sandbox_id;
  info.state = v.state == "running" ? "running" : v.state;
  info.spec.metadata = v.metadata;
  info.spec.image = v.template_id == "base" ? "" : v.template_id;
  info.spec.limits.cpus = v.cpu_count;
  info.spec.limits.memory_bytes = v.memory_mb << 20;
  info.spec.limits.disk_bytes = v.disk_size_mb << 20;
  info.created_at_ms = v.started_at_ms;
  info.updated_at_ms = v.started_at_ms;
  if (v.end_at_ms != 0) info.expires_at_ms = v.end_at_ms;
  return info;
}

}  // namespace

E2bOptions E2bOptions::from_environment() {
  E2bOptions o;
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr ? std::string(v) : std::string();
  };
  o.api_url = env("E2B_API_URL");
  o.sandbox_url = env("E2B_SANDBOX_URL");
  o.api_key = env("E2B_API_KEY");
  return o;
}

Result<E2bProvider::Base> E2bProvider::split_url(std::string_view url, std::string_view what) {
  const std::string_view scheme = "http://";
  if (url.rfind(scheme, 0) != 0)
    return make_error(ErrorCode::kInvalidArgument,
                      std::string(what) + " must be an http:// URL (\"" + std::string(url) + "\")",
                      "put a TLS-terminating proxy in front of an https service");
  std::size_t slash = url.find('/', scheme.size());
  std::string_view origin = url.substr(0, slash);
  std::string prefix = slash == std::string_view::npos ? "" : std::string(url.substr(slash));
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  auto endpoint = http::Endpoint::parse(origin);
  if (!endpoint) return tl::unexpected(endpoint.error().wrap(what));
  return Base{std::move(*endpoint), std::move(prefix)};
}

Result<std::unique_ptr<E2bProvider>> E2bProvider::open(E2bOptions options) {
  if (options.api_key.empty())
    return make_error(ErrorCode::kInvalidArgument, "the E2B provider needs an API key",
                      "set E2B_API_KEY or E2bOptions::api_key");
  auto api = split_url(options.api_url, "the E2B API URL");
  if (!api) return tl::unexpected(api.error());
  auto envd = split_url(options.sandbox_url, "the E2B sandbox URL");
  if (!envd) return tl::unexpected(envd.error());
  return std::unique_ptr<E2bProvider>(
      new E2bProvider(std::move(*api), std::move(*envd), std::move(options)));
}

Result<std::string> E2bProvider::control(std::string_view method, const std::string& path,
                                         std::string_view body, int* status) {
  auto client = http::Client::connect(api_.endpoint, options_.timeout);
  if (!client) return tl::unexpected(client.error());
  http::Headers headers{{"x-api-key", options_.api_key}, {"host", api_.endpoint.host_header()}};
  if (!body.empty()) headers.push_back({"content-type", "application/json"});
  auto head = client->send(method, api_.prefix + path, headers, body);
  if (!head) return tl::unexpected(head.error());
  auto text = client->read_all(kMaxAnswer);
  if (!text) return tl::unexpected(text.error());
  if (status != nullptr) *status = head->status;
  if (head->status / 100 != 2)
    return tl::unexpected(status_error(head->status, "the E2B service answered " +
                                                         std::to_string(head->status) + ": " +
                                                         e2b::error_message(*text)));
  return std::move(*text);
}

Result<std::string> E2bProvider::token_of(std::string_view id) {
  {
    std::lock_guard lock(mu_);
    if (auto it = tokens_.find(id); it != tokens_.end()) return it->second;
  }
  auto detail = control("GET", "/sandboxes/" + http::percent_encode(id), {});
  if (!detail) return tl::unexpected(detail.error());
  auto view = e2b::parse_sandbox_view(*detail);
  if (!view) return tl::unexpected(view.error());
  std::string token = view->envd_access_token.value_or("");
  std::lock_guard lock(mu_);
  tokens_[std::string(id)] = token;
  return token;
}

http::Headers E2bProvider::envd_headers(std::string_view id, const std::string& token,
                                        std::string_view content_type) const {
  http::Headers h{{"host", envd_.endpoint.host_header()},
                  {"e2b-sandbox-id", std::string(id)},
                  {"e2b-sandbox-port", "49983"},
                  {"connect-protocol-version", "1"}};
  if (!token.empty()) h.push_back({"x-access-token", token});
  if (!content_type.empty()) h.push_back({"content-type", std::string(content_type)});
  return h;
}

Result<api::SandboxInfo> E2bProvider::create_sandbox(const api::CreateSandboxRequest& request,
                                                     std::optional<std::string> idempotency_key) {
  const SandboxSpec& s = request.spec;
  if (idempotency_key)
    return make_error(ErrorCode::kInvalidArgument,
                      "the E2B protocol has no idempotency keys: a retried create makes a second "
                      "sandbox",
                      "leave the key out, or use corral's own API (RemoteProvider)");
  if (!s.mounts.empty() || !s.volumes.empty() || !s.secrets.empty())
    return make_error(ErrorCode::kInvalidArgument,
                      "mounts, volumes and secrets cannot be asked for over the E2B protocol",
                      "map a template to a sandbox that has them (serve.e2b.templates)");
  e2b::CreateRequest c;
  c.template_id = s.image.empty() ? options_.template_id : s.image;
  c.metadata = s.metadata;
  c.env_vars = s.env;
  c.timeout_s = std::max<std::int64_t>(1, s.limits.max_lifetime.count() / 1000);
  if (s.network.mode == "none") {
    c.allow_internet_access = false;
  } else if (s.network.mode == "open") {
    c.allow_internet_access = true;
    if (!s.network.deny.empty()) c.deny_out = s.network.deny;
  } else if (!s.network.allow.empty()) {
    c.allow_out = s.network.allow;
    if (!s.network.deny.empty()) c.deny_out = s.network.deny;
  } else {
    c.allow_internet_access = false;  // an allowlist of nothing: no network
  }
  auto answer = control("POST", "/v2/sandboxes", e2b::create_request_json(c));
  if (!answer) return tl::unexpected(answer.error());
  auto view = e2b::parse_sandbox_view(*answer);
  if (!view) return tl::unexpected(view.error().wrap("the E2B service's create answer"));
  {
    std::lock_guard lock(mu_);
    tokens_[view->sandbox_id] = view->envd_access_token.value_or("");
  }
  return inspect(view->sandbox_id);
}

Result<api::ExecResult> E2bProvider::run(std::string_view id, const api::ExecRequest& request,
                                         const OutputSink* sink) {
  std::vector<std::string> argv = request.argv;
  if (argv.empty() && request.cmd) argv = {"/bin/sh", "-c", *request.cmd};
  if (argv.empty()) return make_error(ErrorCode::kInvalidArgument, "exec: no argv and no cmd");
  auto token = token_of(id);
  if (!token) return tl::unexpected(token.error());
  e2b::StartRequest start;
  start.process.cmd = argv[0];
  start.process.args.assign(argv.begin() + 1, argv.end());
  start.process.envs = request.env;
  start.process.cwd = request.cwd;
  start.stdin = !request.stdin_data.empty();
  auto client = http::Client::connect(envd_.endpoint, options_.timeout);
  if (!client) return tl::unexpected(client.error());
  http::Headers headers = envd_headers(id, *token, "application/connect+json");
  if (request.timeout_ms) headers.push_back({"connect-timeout-ms", std::to_string(*request.timeout_ms)});
  headers.push_back({"keepalive-ping-interval", "30"});
  const auto started = std::chrono::steady_clock::now();
  auto head = client->send("POST", envd_.prefix + "/process.Process/Start", headers,
                           e2b::envelope(0, e2b::start_request_json(start)));
  if (!head) return tl::unexpected(head.error());
  if (head->status != 200) {
    auto body = client->read_all(1 << 20);
    if (auto c = e2b::parse_connect_error(body ? *body : ""))
      return tl::unexpected(connect_error(*c));
    return tl::unexpected(status_error(head->status, "envd answered " + std::to_string(head->status)));
  }
  // Without a deadline of its own the stream may be quiet for long: the
  // keepalives every 30 s keep the read going.
  client->set_io_timeout(std::chrono::milliseconds(request.timeout_ms.value_or(0) > 0
                                                       ? *request.timeout_ms + 60000
                                                       : 0));
  api::ExecResult result;
  e2b::EnvelopeReader reader;
  std::string buf(64 * 1024, '\0');
  std::uint32_t pid = 0;
  bool ended = false;
  std::optional<Error> failure;
  auto take = [&](std::string& out, bool* truncated, std::string_view data) {
    const std::size_t room = request.max_output_bytes > out.size() ? request.max_output_bytes - out.size() : 0;
    if (data.size() > room) *truncated = true;
    out.append(data.substr(0, room));
  };
  while (!ended && !failure) {
    auto n = client->read_body(buf.data(), buf.size());
    if (!n) return tl::unexpected(n.error().wrap("reading the process's events"));
    if (*n == 0) break;
    if (auto st = reader.feed(std::string_view(buf.data(), *n)); !st)
      return tl::unexpected(st.error().wrap("the process's events"));
    while (auto env = reader.next()) {
      if (env->flags & e2b::kEnvelopeEndStream) {
        auto j = nlohmann::json::parse(env->message, nullptr, false);
        if (j.is_object() && j.contains("error")) {
          auto c = e2b::parse_connect_error(json_text(j["error"]));
          failure = c ? connect_error(*c) : status_error(500, "the stream ended with an error");
        }
        ended = true;
        break;
      }
      auto ev = e2b::parse_process_event(env->message);
      if (!ev) return tl::unexpected(ev.error().wrap("a process event"));
      using Kind = e2b::ProcessEvent::Kind;
      if (ev->kind == Kind::kStart) {
        pid = ev->pid;
        result.process_id = std::to_string(pid);
        if (!request.stdin_data.empty()) {
          // The input, then EOF, on another connection while this one reads.
          auto in = http::Client::connect(envd_.endpoint, options_.timeout);
          if (!in) return tl::unexpected(in.error());
          for (auto [method, body] :
               {std::pair<const char*, std::string>{"SendInput", e2b::send_input_json(pid, request.stdin_data)},
                std::pair<const char*, std::string>{"CloseStdin", e2b::selector_json(pid)}}) {
            auto h = in->send("POST", envd_.prefix + "/process.Process/" + method,
                              envd_headers(id, *token, "application/json"), body);
            if (!h) return tl::unexpected(h.error());
            auto answer = in->read_all(1 << 20);
            if (h->status != 200)
              return tl::unexpected(status_error(h->status, std::string(method) + ": " +
                                                                e2b::error_message(answer ? *answer : "")));
          }
        }
      } else if (ev->kind == Kind::kData) {
        if (sink != nullptr) {
          (*sink)(ev->is_stderr ? api::ExecEvent::kStderr : api::ExecEvent::kStdout, ev->data);
        } else if (ev->is_stderr) {
          take(result.stderr_data, &result.stderr_truncated, ev->data);
        } else {
          take(result.stdout_data, &result.stdout_truncated, ev->data);
        }
      } else if (ev->kind == Kind::kEnd) {
        if (ev->end.exited) result.exit_code = ev->end.exit_code;
        else result.signal = signal_of(ev->end.status);
      }
    }
  }
  if (failure) return tl::unexpected(*failure);
  if (!result.exit_code && !result.signal)
    return make_error(ErrorCode::kSystem, "the process's stream ended without its end event");
  result.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - started)
                           .count();
  return result;
}

Result<api::ExecResult> E2bProvider::exec(std::string_view id, const api::ExecRequest& request) {
  return run(id, request, nullptr);
}

Result<api::ExecResult> E2bProvider::exec_stream(std::string_view id,
                                                 const api::ExecRequest& request,
                                                 const OutputSink& sink) {
  return run(id, request, &sink);
}

Result<api::UploadResult> E2bProvider::put_file_from(std::string_view id, std::string_view path,
                                                     const ByteSource& source,
                                                     std::optional<std::uint64_t> length,
                                                     std::uint32_t mode) {
  (void)mode;  // E2B's upload sets no mode: the file is 0644
  if (length && *length > kMaxUpload)
    return make_error(ErrorCode::kResourceExhausted,
                      "the E2B provider uploads at most " + std::to_string(kMaxUpload) + " bytes");
  std::string data;
  std::string buf(256 * 1024, '\0');
  for (;;) {
    auto n = source(buf.data(), buf.size());
    if (!n) return tl::unexpected(n.error());
    if (*n == 0) break;
    data.append(buf.data(), *n);
    if (data.size() > kMaxUpload)
      return make_error(ErrorCode::kResourceExhausted,
                        "the E2B provider uploads at most " + std::to_string(kMaxUpload) + " bytes");
  }
  if (length && *length != data.size())
    return make_error(ErrorCode::kInvalidArgument,
                      "the source gave " + std::to_string(data.size()) + " bytes, not " +
                          std::to_string(*length));
  auto token = token_of(id);
  if (!token) return tl::unexpected(token.error());
  const std::string p(path);
  const std::string boundary = http::new_form_boundary({data});
  std::vector<http::FormPart> parts{{"file", p, "application/octet-stream", data}};
  const std::string body = http::write_form_data(parts, boundary);
  auto client = http::Client::connect(envd_.endpoint, options_.timeout);
  if (!client) return tl::unexpected(client.error());
  auto head = client->send("POST", envd_.prefix + "/files?path=" + http::percent_encode(p),
                           envd_headers(id, *token, "multipart/form-data; boundary=" + boundary), body);
  if (!head) return tl::unexpected(head.error());
  auto answer = client->read_all(1 << 20);
  if (!answer) return tl::unexpected(answer.error());
  if (head->status != 200)
    return tl::unexpected(status_error(head->status, "upload of " + p + ": " + e2b::error_message(*answer)));
  api::UploadResult r;
  r.path = p;
  r.bytes = data.size();
  r.sha256 = sha256_hex(data);
  return r;
}

Result<std::uint64_t> E2bProvider::get_file_to(std::string_view id, std::string_view path,
                                               const ByteSink& sink) {
  auto token = token_of(id);
  if (!token) return tl::unexpected(token.error());
  auto client = http::Client::connect(envd_.endpoint, options_.timeout);
  if (!client) return tl::unexpected(client.error());
  auto head = client->send("GET", envd_.prefix + "/files?path=" + http::percent_encode(path),
                           envd_headers(id, *token, ""), "");
  if (!head) return tl::unexpected(head.error());
  if (head->status != 200) {
    auto answer = client->read_all(1 << 20);
    return tl::unexpected(status_error(head->status, "download of " + std::string(path) + ": " +
                                                         e2b::error_message(answer ? *answer : "")));
  }
  std::uint64_t total = 0;
  std::string buf(256 * 1024, '\0');
  for (;;) {
    auto n = client->read_body(buf.data(), buf.size());
    if (!n) return tl::unexpected(n.error());
    if (*n == 0) break;
    if (auto st = sink(std::string_view(buf.data(), *n)); !st) return tl::unexpected(st.error());
    total += *n;
  }
  return total;
}

Result<api::SandboxInfo> E2bProvider::inspect(std::string_view id) {
  auto detail = control("GET", "/sandboxes/" + http::percent_encode(id), {});
  if (!detail) return tl::unexpected(detail.error());
  auto view = e2b::parse_sandbox_view(*detail);
  if (!view) return tl::unexpected(view.error());
  if (view->envd_access_token) {
    std::lock_guard lock(mu_);
    tokens_[view->sandbox_id] = *view->envd_access_token;
  }
  return info_of(*view);
}

Result<std::vector<api::SandboxInfo>> E2bProvider::list(bool include_cleaned) {
  (void)include_cleaned;  // E2B lists live sandboxes only
  std::vector<api::SandboxInfo> out;
  auto answer = control("GET", "/v2/sandboxes?limit=1000", {});
  if (!answer) return tl::unexpected(answer.error());
  auto views = e2b::parse_sandbox_list(*answer);
  if (!views) return tl::unexpected(views.error());
  for (const auto& v : *views) out.push_back(info_of(v));
  return out;
}

Result<api::SandboxInfo> E2bProvider::destroy_sandbox(std::string_view id) {
  int status = 0;
  auto answer = control("DELETE", "/sandboxes/" + http::percent_encode(id), {}, &status);
  if (!answer) return tl::unexpected(answer.error());
  {
    std::lock_guard lock(mu_);
    tokens_.erase(std::string(id));
  }
  api::SandboxInfo info;
  info.id = std::string(id);
  info.state = "cleaned";
  return info;
}

}  // namespace corral::sdk
