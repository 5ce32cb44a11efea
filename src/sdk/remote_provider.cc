#include "sdk/remote_provider.h"

#include <cstdlib>
#include <cstdio>

#include "base/paths.h"

namespace corral::sdk {

namespace {

constexpr std::size_t kMaxJsonResponse = std::size_t{256} << 20;  // a long ls, an exec result
constexpr std::size_t kMaxErrorBody = 1 << 20;
constexpr std::size_t kMaxEventLine = std::size_t{16} << 20;
constexpr std::size_t kReadChunk = 256 * 1024;
constexpr std::size_t kMaxIdle = 8;

std::string octal(std::uint32_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%o", static_cast<unsigned>(mode & 07777));
  return buf;
}

}  // namespace

std::string sandbox_path(std::string_view id) { return "/v1/sandboxes/" + http::percent_encode(id); }

// ---- connections ------------------------------------------------------------------

class RemoteProvider::Lease {
 public:
  Lease(RemoteProvider* owner, http::Client client) : owner_(owner), client_(std::move(client)) {}
  Lease(Lease&& other) noexcept : owner_(other.owner_), client_(std::move(other.client_)) {
    other.owner_ = nullptr;
  }
  Lease& operator=(Lease&&) = delete;
  ~Lease() {
    if (owner_ == nullptr || !client_) return;
    // A connection with an unread body or a broken socket is replaced by
    // the client itself on its next request: every one can go back.
    std::lock_guard lock(owner_->mu_);
    if (owner_->idle_.size() < kMaxIdle) owner_->idle_.push_back(std::move(*client_));
  }
  http::Client& operator*() { return *client_; }
  http::Client* operator->() { return &*client_; }

 private:
  RemoteProvider* owner_;
  std::optional<http::Client> client_;
};

Result<std::unique_ptr<RemoteProvider>> RemoteProvider::open(RemoteOptions options) {
  auto endpoint = http::Endpoint::parse(options.url);
  if (!endpoint) return tl::unexpected(std::move(endpoint).error());
  return std::unique_ptr<RemoteProvider>(new RemoteProvider(std::move(*endpoint), std::move(options)));
}

RemoteOptions RemoteProvider::options_from_environment() {
  RemoteOptions o;
  o.url = "unix:" + run_dir() + "/corral.sock";
  if (const char* url = std::getenv("CORRAL_URL"); url != nullptr && *url != '\0') o.url = url;
  if (const char* key = std::getenv("CORRAL_API_KEY"); key != nullptr) o.api_key = key;
  return o;
}

Result<RemoteProvider::Lease> RemoteProvider::lease() {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      http::Client c = std::move(idle_.back());
      idle_.pop_back();
      c.set_io_timeout(options_.timeout);
      return Lease(this, std::move(c));
    }
  }
  auto c = http::Client::connect(endpoint_, options_.timeout);
  if (!c) return tl::unexpected(std::move(c).error());
  return Lease(this, std::move(*c));
}

http::Headers RemoteProvider::with_auth(http::Headers headers) const {
  if (!options_.api_key.empty() && !endpoint_.is_unix)
    headers.push_back({"authorization", "Bearer " + options_.api_key});
  return headers;
}

Error RemoteProvider::read_error(http::Client& client, const http::ResponseHead& head,
                                 api::ApiError* refusal) {
  auto body = client.read_all(kMaxErrorBody);
  api::ApiError e = api::parse_api_error(head.status, body ? *body : std::string());
  Error err = error_from_api(e);
  if (head.status == 401 && err.hint.empty())
    err.hint = "set CORRAL_API_KEY to the daemon's key (its key file is printed when corral serve starts)";
  if (refusal != nullptr) *refusal = std::move(e);
  return err;
}

Result<std::string> RemoteProvider::call(std::string_view method, std::string_view target,
                                         std::string_view json_body, const http::Headers& headers) {
  return call_waiting(options_.timeout, method, target, json_body, headers);
}

Result<std::string> RemoteProvider::call_waiting(std::chrono::milliseconds io_timeout,
                                                 std::string_view method, std::string_view target,
                                                 std::string_view json_body,
                                                 const http::Headers& headers,
                                                 api::ApiError* refusal) {
  auto c = lease();
  if (!c) return tl::unexpected(std::move(c).error());
  (*c)->set_io_timeout(io_timeout);
  http::Headers h = with_auth(headers);
  if (!json_body.empty() && !http::find_header(h, "content-type"))
    h.push_back({"content-type", "application/json"});
  auto head = (*c)->send(method, target, h, json_body);
  if (!head) return tl::unexpected(std::move(head).error());
  if (head->status < 200 || head->status > 299)
    return tl::unexpected(read_error(**c, *head, refusal));
  auto body = (*c)->read_all(kMaxJsonResponse);
  if (!body) return tl::unexpected(std::move(body).error().wrap("reading the daemon's answer"));
  return body;
}

// ---- sandboxes --------------------------------------------------------------------

Result<api::SandboxInfo> RemoteProvider::create_sandbox(const api::CreateSandboxRequest& request,
                                                        std::optional<std::string> idempotency_key) {
  http::Headers h;
  if (idempotency_key) h.push_back({"idempotency-key", *idempotency_key});
  auto body = call("POST", "/v1/sandboxes", api::to_json(request), h);
  if (!body) return tl::unexpected(std::move(body).error());
  return api::parse_sandbox_info(*body);
}

Result<api::SandboxInfo> RemoteProvider::inspect(std::string_view id) {
  auto body = call("GET", sandbox_path(id));
  if (!body) return tl::unexpected(std::move(body).error());
  return api::parse_sandbox_info(*body);
}

Result<std::vector<api::SandboxInfo>> RemoteProvider::list(bool include_cleaned) {
  auto body = call("GET", include_cleaned ? "/v1/sandboxes?all=true" : "/v1/sandboxes");
  if (!body) return tl::unexpected(std::move(body).error());
  return api::parse_sandbox_list(*body);
}

Result<api::SandboxInfo> RemoteProvider::destroy_sandbox(std::string_view id) {
  auto body = call("DELETE", sandbox_path(id));
  if (!body) return tl::unexpected(std::move(body).error());
  return api::parse_sandbox_info(*body);
}

// ---- exec -------------------------------------------------------------------------

Result<api::ExecResult> RemoteProvider::exec(std::string_view id, const api::ExecRequest& request) {
  api::ExecRequest r = request;
  r.stream.clear();
  auto c = lease();
  if (!c) return tl::unexpected(std::move(c).error());
  (*c)->set_io_timeout(std::chrono::milliseconds(0));  // as long as the command runs
  const std::string body = api::to_json(r);
  auto head = (*c)->send("POST", sandbox_path(id) + "/exec",
                         with_auth({{"content-type", "application/json"}}), body);
  if (!head) return tl::unexpected(std::move(head).error());
  if (head->status != 200) return tl::unexpected(read_error(**c, *head));
  auto text = (*c)->read_all(kMaxJsonResponse);
  if (!text) return tl::unexpected(std::move(text).error().wrap("reading the exec result"));
  return api::parse_exec_result(*text);
}

Result<api::ExecResult> RemoteProvider::exec_stream(std::string_view id,
                                                    const api::ExecRequest& request,
                                                    const OutputSink& sink) {
  api::ExecRequest r = request;
  r.stream = "ndjson";
  auto c = lease();
  if (!c) return tl::unexpected(std::move(c).error());
  (*c)->set_io_timeout(std::chrono::milliseconds(0));
  const std::string body = api::to_json(r);
  auto head = (*c)->send(
      "POST", sandbox_path(id) + "/exec",
      with_auth({{"content-type", "application/json"}, {"accept", "application/x-ndjson"}}), body);
  if (!head) return tl::unexpected(std::move(head).error());
  if (head->status != 200) return tl::unexpected(read_error(**c, *head));

  std::string pending;  // an incomplete line
  std::string buf(kReadChunk, '\0');
  std::optional<api::ExecResult> result;
  for (;;) {
    auto n = (*c)->read_body(buf.data(), buf.size());
    if (!n) return tl::unexpected(std::move(n).error().wrap("reading the exec stream"));
    if (*n == 0) break;
    pending.append(buf.data(), *n);
    std::size_t start = 0;
    for (;;) {
      std::size_t nl = pending.find('\n', start);
      if (nl == std::string::npos) break;
      std::string_view line(pending.data() + start, nl - start);
      start = nl + 1;
      if (line.empty()) continue;
      auto event = api::parse_exec_event(line);
      if (!event) return tl::unexpected(std::move(event).error().wrap("an exec stream event"));
      switch (event->kind) {
        case api::ExecEvent::kStdout:
        case api::ExecEvent::kStderr:
          if (sink) sink(event->kind, event->data);
          break;
        case api::ExecEvent::kExit:
          result = std::move(event->result);
          break;
        case api::ExecEvent::kError:
          return tl::unexpected(error_from_api(event->error));
      }
    }
    pending.erase(0, start);
    if (pending.size() > kMaxEventLine)
      return make_error(ErrorCode::kInternal, "an exec stream event is longer than " +
                                                  std::to_string(kMaxEventLine) + " bytes");
  }
  if (!result)
    return make_error(ErrorCode::kSystem, "the daemon ended the exec stream before the command's exit",
                      "the sandbox may have been destroyed meanwhile; `corral inspect` it");
  return *result;
}

// ---- files ------------------------------------------------------------------------

Result<api::UploadResult> RemoteProvider::put_file_from(std::string_view id, std::string_view path,
                                                        const ByteSource& source,
                                                        std::optional<std::uint64_t> length,
                                                        std::uint32_t mode) {
  auto c = lease();
  if (!c) return tl::unexpected(std::move(c).error());
  const std::string target = sandbox_path(id) + "/files?path=" + http::percent_encode(path) +
                             "&mode=" + octal(mode & 0777);
  // 100-continue: a refused upload (unknown id, bad path) sends no body.
  auto head = (*c)->send_streaming(
      "PUT", target,
      with_auth({{"content-type", "application/octet-stream"}, {"expect", "100-continue"}}), source,
      length);
  if (!head) return tl::unexpected(std::move(head).error());
  if (head->status != 201 && head->status != 200) return tl::unexpected(read_error(**c, *head));
  auto body = (*c)->read_all(kMaxErrorBody);
  if (!body) return tl::unexpected(std::move(body).error().wrap("reading the upload result"));
  return api::parse_upload_result(*body);
}

Result<std::uint64_t> RemoteProvider::get_file_to(std::string_view id, std::string_view path,
                                                  const ByteSink& sink) {
  auto total = download(sandbox_path(id) + "/files?path=" + http::percent_encode(path), sink);
  if (!total) return tl::unexpected(std::move(total).error().wrap("downloading " + std::string(path)));
  return total;
}

Result<std::uint64_t> RemoteProvider::download(std::string_view target, const ByteSink& sink,
                                               http::Headers* response_headers) {
  auto c = lease();
  if (!c) return tl::unexpected(std::move(c).error());
  auto head = (*c)->send("GET", target, with_auth({}), {});
  if (!head) return tl::unexpected(std::move(head).error());
  if (head->status != 200) return tl::unexpected(read_error(**c, *head));
  if (response_headers) *response_headers = head->headers;
  std::uint64_t total = 0;
  std::string buf(kReadChunk, '\0');
  for (;;) {
    auto n = (*c)->read_body(buf.data(), buf.size());
    if (!n) return tl::unexpected(std::move(n).error());
    if (*n == 0) break;
    if (auto st = sink(std::string_view(buf.data(), *n)); !st) return tl::unexpected(st.error());
    total += *n;
  }
  if (head->content_length && total != *head->content_length)
    return make_error(ErrorCode::kSystem, "the download ended after " + std::to_string(total) +
                                              " of " + std::to_string(*head->content_length) +
                                              " bytes");
  return total;
}

}  // namespace corral::sdk
