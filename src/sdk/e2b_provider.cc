#include "sdk/e2b_provider.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <tuple>

#include "base/json_text.h"
#include "base/sha256.h"
#include "base/strings.h"
#include "e2b/connect_protocol.h"
#include "e2b/envd_messages.h"
#include "http/curl_library.h"
#include "http/multipart.h"

namespace corral::sdk {

namespace {

constexpr std::size_t kMaxAnswer = std::size_t{64} << 20;
constexpr std::uint64_t kMaxUpload = std::uint64_t{256} << 20;
constexpr std::string_view kEnvdPort = "49983";

std::string trimmed(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

// "e2b.app", "sbx.localhost:8443": a host name and an optional port, and
// nothing that could change what a URL built around it means.
bool is_host_and_port(std::string_view text) {
  const std::size_t colon = text.find(':');
  const std::string_view host = text.substr(0, colon);
  if (host.empty() || host.size() > 253 || host.front() == '.' || host.front() == '-' ||
      host.back() == '.' || host.find("..") != std::string_view::npos)
    return false;
  for (char c : host)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '.'))
      return false;
  if (colon == std::string_view::npos) return true;
  const std::string_view port = text.substr(colon + 1);
  if (port.empty() || port.size() > 5) return false;
  return std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// envdVersion "0.5.7" (or "0.5.7-rc1") at least major.minor.patch.
bool version_at_least(std::string_view version, int major, int minor, int patch) {
  int parts[3] = {0, 0, 0};
  std::size_t i = 0;
  for (int k = 0; k < 3 && i < version.size(); ++k) {
    int v = 0;
    std::size_t digits = 0;
    while (i < version.size() && version[i] >= '0' && version[i] <= '9' && digits < 6) {
      v = v * 10 + (version[i++] - '0');
      ++digits;
    }
    parts[k] = v;
    if (i < version.size() && version[i] == '.')
      ++i;
    else
      break;
  }
  return std::tie(parts[0], parts[1], parts[2]) >= std::tie(major, minor, patch);
}

Error status_error(int status, std::string message) {
  ErrorCode code = ErrorCode::kInternal;
  switch (status) {
    case 400:
      code = ErrorCode::kInvalidArgument;
      break;
    case 401:
    case 403:
      code = ErrorCode::kPermissionDenied;
      break;
    case 404:
      code = ErrorCode::kNotFound;
      break;
    case 409:
      code = ErrorCode::kAlreadyExists;
      break;
    case 413:
    case 429:
    case 507:
      code = ErrorCode::kResourceExhausted;
      break;
    case 502:
    case 503:
    case 501:
      code = ErrorCode::kUnavailable;
      break;
    case 504:
      code = ErrorCode::kTimeout;
      break;
    default:
      break;
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
    case ConnectCode::kOutOfRange:
      code = ErrorCode::kInvalidArgument;
      break;
    case ConnectCode::kNotFound:
      code = ErrorCode::kNotFound;
      break;
    case ConnectCode::kAlreadyExists:
      code = ErrorCode::kAlreadyExists;
      break;
    case ConnectCode::kPermissionDenied:
    case ConnectCode::kUnauthenticated:
      code = ErrorCode::kPermissionDenied;
      break;
    case ConnectCode::kResourceExhausted:
      code = ErrorCode::kResourceExhausted;
      break;
    case ConnectCode::kUnavailable:
    case ConnectCode::kUnimplemented:
      code = ErrorCode::kUnavailable;
      break;
    case ConnectCode::kDeadlineExceeded:
    case ConnectCode::kCanceled:
      code = ErrorCode::kTimeout;
      break;
    default:
      break;
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
  if (auto d = env("E2B_DOMAIN"); !d.empty()) o.domain = d;
  o.api_key = env("E2B_API_KEY");
  o.ca_file = env("SSL_CERT_FILE");
  return o;
}

Result<std::string> e2b_envd_url(const E2bOptions& options, std::string_view sandbox_id,
                                 std::string_view sandbox_domain) {
  if (!options.sandbox_url.empty()) return trimmed(options.sandbox_url);
  const std::string_view domain =
      sandbox_domain.empty() ? std::string_view(options.domain) : sandbox_domain;
  if (!is_host_and_port(domain))
    return make_error(ErrorCode::kInvalidArgument,
                      "\"" + printable_ascii(domain, 100) + "\" is not a domain (host[:port])",
                      "set E2bOptions::domain (E2B_DOMAIN), or sandbox_url (E2B_SANDBOX_URL)");
  // E2B's own clouds route envd by the sandbox header on one host.
  for (std::string_view own : {"e2b.app", "e2b.dev", "e2b.pro", "e2b-staging.dev"})
    if (domain == own) return "https://sandbox." + std::string(domain);
  if (sandbox_id.empty() || sandbox_id.size() > 56 ||
      !std::all_of(sandbox_id.begin(), sandbox_id.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-';
      }))
    return make_error(
        ErrorCode::kInvalidArgument,
        "sandbox id \"" + printable_ascii(sandbox_id, 100) + "\" cannot be part of a host name");
  return "https://" + std::string(kEnvdPort) + "-" + std::string(sandbox_id) + "." +
         std::string(domain);
}

Result<std::unique_ptr<E2bProvider>> E2bProvider::open(E2bOptions options) {
  if (options.api_key.empty())
    return make_error(ErrorCode::kInvalidArgument, "the E2B provider needs an API key",
                      "set E2B_API_KEY or E2bOptions::api_key");
  if (options.sandbox_url.empty() && !is_host_and_port(options.domain))
    return make_error(
        ErrorCode::kInvalidArgument,
        "\"" + printable_ascii(options.domain, 100) + "\" is not a domain (host[:port])",
        "set E2B_DOMAIN or E2bOptions::domain, or E2B_SANDBOX_URL");
  std::string api =
      options.api_url.empty() ? "https://api." + options.domain : trimmed(options.api_url);
  for (const auto& [url, what] : {std::pair<std::string, const char*>{api, "the E2B API URL"},
                                  {options.sandbox_url, "the E2B sandbox URL"}}) {
    if (url.empty() || url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0) continue;
    return make_error(ErrorCode::kInvalidArgument, std::string(what) +
                                                       " must be an http:// or https:// URL (\"" +
                                                       printable_ascii(url, 200) + "\")");
  }
  // libcurl is loaded now, so that a host without it fails here.
  if (auto lib = http::curl_library(); !lib)
    return tl::unexpected(lib.error().wrap("the E2B provider"));
  return std::unique_ptr<E2bProvider>(new E2bProvider(std::move(api), std::move(options)));
}

Result<std::string> E2bProvider::control(std::string_view method, const std::string& path,
                                         std::string_view body, int* status) {
  http::CurlRequest r;
  r.method = std::string(method);
  r.url = api_url_ + path;
  r.headers = {{"x-api-key", options_.api_key}};
  if (!body.empty()) r.headers.push_back({"content-type", "application/json"});
  r.body = body;
  r.connect_timeout = options_.timeout;
  r.timeout = options_.timeout;
  auto answer = session_.fetch(r, kMaxAnswer);
  if (!answer) return tl::unexpected(answer.error());
  if (status != nullptr) *status = answer->status;
  if (answer->status / 100 != 2)
    return tl::unexpected(status_error(answer->status, "the E2B service answered " +
                                                           std::to_string(answer->status) + ": " +
                                                           e2b::error_message(answer->body)));
  return std::move(answer->body);
}

Result<E2bProvider::Envd> E2bProvider::remember(const e2b::SandboxView& view) {
  auto url = e2b_envd_url(options_, view.sandbox_id, view.domain.value_or(""));
  if (!url) return tl::unexpected(url.error());
  Envd envd{std::move(*url), view.envd_access_token.value_or(""), view.envd_version};
  std::lock_guard lock(mu_);
  auto& slot = envd_[view.sandbox_id];
  // A listed sandbox comes without its token: keep the one known.
  if (!view.envd_access_token && !slot.token.empty()) envd.token = slot.token;
  slot = envd;
  return envd;
}

Result<E2bProvider::Envd> E2bProvider::envd_of(std::string_view id) {
  {
    std::lock_guard lock(mu_);
    if (auto it = envd_.find(id); it != envd_.end()) return it->second;
  }
  auto detail = control("GET", "/sandboxes/" + http::percent_encode(id), {});
  if (!detail) return tl::unexpected(detail.error());
  auto view = e2b::parse_sandbox_view(*detail);
  if (!view) return tl::unexpected(view.error());
  return remember(*view);
}

http::Headers E2bProvider::envd_headers(std::string_view id, const Envd& envd,
                                        std::string_view content_type) const {
  http::Headers h{{"e2b-sandbox-id", std::string(id)},
                  {"e2b-sandbox-port", std::string(kEnvdPort)},
                  {"connect-protocol-version", "1"}};
  if (!envd.token.empty()) h.push_back({"x-access-token", envd.token});
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
  if (auto envd = remember(*view); !envd) return tl::unexpected(envd.error());
  return inspect(view->sandbox_id);
}

Result<api::ExecResult> E2bProvider::run(std::string_view id, const api::ExecRequest& request,
                                         const OutputSink* sink) {
  std::vector<std::string> argv = request.argv;
  if (argv.empty() && request.cmd) argv = {"/bin/sh", "-c", *request.cmd};
  if (argv.empty()) return make_error(ErrorCode::kInvalidArgument, "exec: no argv and no cmd");
  auto envd = envd_of(id);
  if (!envd) return tl::unexpected(envd.error());
  e2b::StartRequest start;
  start.process.cmd = argv[0];
  start.process.args.assign(argv.begin() + 1, argv.end());
  start.process.envs = request.env;
  start.process.cwd = request.cwd;
  start.stdin = !request.stdin_data.empty();
  const std::string body = e2b::envelope(0, e2b::start_request_json(start));
  http::CurlRequest r;
  r.method = "POST";
  r.url = envd->url + "/process.Process/Start";
  r.headers = envd_headers(id, *envd, "application/connect+json");
  if (request.timeout_ms)
    r.headers.push_back({"connect-timeout-ms", std::to_string(*request.timeout_ms)});
  // Keepalives every 30 s: a stream quiet for 90 s has lost its server.
  r.headers.push_back({"keepalive-ping-interval", "30"});
  r.body = body;
  r.connect_timeout = options_.timeout;
  r.stall_timeout = std::chrono::seconds(90);
  if (request.timeout_ms.value_or(0) > 0)
    r.timeout = std::chrono::milliseconds(*request.timeout_ms + 60000);
  const auto started = std::chrono::steady_clock::now();

  api::ExecResult result;
  e2b::EnvelopeReader reader;
  std::string refusal;  // the body of a non-200 answer
  bool ended = false;
  std::optional<Error> failure;
  auto take = [&](std::string& out, bool* truncated, std::string_view data) {
    const std::size_t room =
        request.max_output_bytes > out.size() ? request.max_output_bytes - out.size() : 0;
    if (data.size() > room) *truncated = true;
    out.append(data.substr(0, room));
  };
  // The input, then EOF, on another connection while this one reads.
  auto send_stdin = [&](std::uint32_t pid) -> Result<void> {
    for (auto [method, payload] :
         {std::pair<const char*, std::string>{"SendInput",
                                              e2b::send_input_json(pid, request.stdin_data)},
          std::pair<const char*, std::string>{"CloseStdin", e2b::selector_json(pid)}}) {
      http::CurlRequest in;
      in.method = "POST";
      in.url = envd->url + "/process.Process/" + method;
      in.headers = envd_headers(id, *envd, "application/json");
      in.body = payload;
      in.connect_timeout = options_.timeout;
      in.timeout = options_.timeout;
      auto answer = session_.fetch(in, 1 << 20);
      if (!answer) return tl::unexpected(answer.error());
      if (answer->status != 200)
        return tl::unexpected(status_error(
            answer->status, std::string(method) + ": " + e2b::error_message(answer->body)));
    }
    return {};
  };
  auto on_piece = [&](int status, std::string_view piece) -> Result<void> {
    if (status != 200) {
      if (refusal.size() < (1 << 20)) refusal.append(piece.substr(0, (1 << 20) - refusal.size()));
      return {};
    }
    if (ended) return {};  // nothing is meant to follow the end of the stream
    if (auto st = reader.feed(piece); !st)
      return tl::unexpected(st.error().wrap("the process's events"));
    while (auto env = reader.next()) {
      if (env->flags & e2b::kEnvelopeEndStream) {
        auto j = nlohmann::json::parse(env->message, nullptr, false);
        if (j.is_object() && j.contains("error")) {
          auto c = e2b::parse_connect_error(json_text(j["error"]));
          failure = c ? connect_error(*c) : status_error(500, "the stream ended with an error");
        }
        ended = true;
        return {};
      }
      auto ev = e2b::parse_process_event(env->message);
      if (!ev) return tl::unexpected(ev.error().wrap("a process event"));
      using Kind = e2b::ProcessEvent::Kind;
      if (ev->kind == Kind::kStart) {
        result.process_id = std::to_string(ev->pid);
        if (!request.stdin_data.empty()) {
          if (auto st = send_stdin(ev->pid); !st) return st;
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
        if (ev->end.exited)
          result.exit_code = ev->end.exit_code;
        else
          result.signal = signal_of(ev->end.status);
      }
    }
    return {};
  };
  auto status = session_.perform(r, on_piece);
  if (!status) return tl::unexpected(status.error().wrap("the process's events"));
  if (*status != 200) {
    if (auto c = e2b::parse_connect_error(refusal)) return tl::unexpected(connect_error(*c));
    return tl::unexpected(status_error(*status, "envd answered " + std::to_string(*status)));
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
  const std::string too_big =
      "the E2B provider uploads at most " + std::to_string(kMaxUpload) + " bytes";
  if (length && *length > kMaxUpload) return make_error(ErrorCode::kResourceExhausted, too_big);
  auto envd = envd_of(id);
  if (!envd) return tl::unexpected(envd.error());
  const std::string p(path);
  http::CurlRequest r;
  r.method = "POST";
  r.url = envd->url + "/files?path=" + http::percent_encode(p);
  r.connect_timeout = options_.timeout;
  r.stall_timeout = options_.timeout;
  Sha256 hasher;
  std::uint64_t sent = 0;
  std::string form;  // the multipart body, for an envd older than 0.5.7
  const http::BodySource counted = [&](char* buf, std::size_t cap) -> Result<std::size_t> {
    auto n = source(buf, cap);
    if (!n) return n;
    sent += *n;
    if (sent > kMaxUpload) return make_error(ErrorCode::kResourceExhausted, too_big);
    if (length && sent > *length)
      return make_error(ErrorCode::kInvalidArgument,
                        "the source gave more than " + std::to_string(*length) + " bytes");
    hasher.update(buf, *n);
    return n;
  };
  if (version_at_least(envd->version, 0, 5, 7)) {
    // envd 0.5.7 takes the file as the body: streamed, never held whole.
    r.headers = envd_headers(id, *envd, "application/octet-stream");
    r.source = &counted;
    r.source_length = length;
  } else {
    std::string data;
    std::string buf(256 * 1024, '\0');
    for (;;) {
      auto n = counted(buf.data(), buf.size());
      if (!n) return tl::unexpected(n.error());
      if (*n == 0) break;
      data.append(buf.data(), *n);
    }
    const std::string boundary = http::new_form_boundary({data});
    form = http::write_form_data({{"file", p, "application/octet-stream", data}}, boundary);
    r.headers = envd_headers(id, *envd, "multipart/form-data; boundary=" + boundary);
    r.body = form;
  }
  auto answer = session_.fetch(r, 1 << 20);
  if (!answer) return tl::unexpected(answer.error().wrap("upload of " + p));
  if (answer->status != 200)
    return tl::unexpected(
        status_error(answer->status, "upload of " + p + ": " + e2b::error_message(answer->body)));
  if (length && sent != *length)
    return make_error(ErrorCode::kInvalidArgument, "the source gave " + std::to_string(sent) +
                                                       " bytes, not " + std::to_string(*length));
  api::UploadResult result;
  result.path = p;
  result.bytes = sent;
  result.sha256 = Sha256::hex(hasher.final());
  return result;
}

Result<std::uint64_t> E2bProvider::get_file_to(std::string_view id, std::string_view path,
                                               const ByteSink& sink) {
  auto envd = envd_of(id);
  if (!envd) return tl::unexpected(envd.error());
  http::CurlRequest r;
  r.url = envd->url + "/files?path=" + http::percent_encode(path);
  r.headers = envd_headers(id, *envd, "");
  r.connect_timeout = options_.timeout;
  r.stall_timeout = options_.timeout;
  std::uint64_t total = 0;
  std::string refusal;
  auto status = session_.perform(r, [&](int status, std::string_view piece) -> Result<void> {
    if (status != 200) {
      if (refusal.size() < (1 << 20)) refusal.append(piece.substr(0, (1 << 20) - refusal.size()));
      return {};
    }
    total += piece.size();
    return sink(piece);
  });
  if (!status) return tl::unexpected(status.error().wrap("download of " + std::string(path)));
  if (*status != 200)
    return tl::unexpected(status_error(
        *status, "download of " + std::string(path) + ": " + e2b::error_message(refusal)));
  return total;
}

Result<api::SandboxInfo> E2bProvider::inspect(std::string_view id) {
  auto detail = control("GET", "/sandboxes/" + http::percent_encode(id), {});
  if (!detail) return tl::unexpected(detail.error());
  auto view = e2b::parse_sandbox_view(*detail);
  if (!view) return tl::unexpected(view.error());
  if (auto envd = remember(*view); !envd) return tl::unexpected(envd.error());
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
    envd_.erase(std::string(id));
  }
  api::SandboxInfo info;
  info.id = std::string(id);
  info.state = "cleaned";
  return info;
}

}  // namespace corral::sdk
