// RemoteProvider: SandboxProvider over the HTTP API of a `corral serve`
// daemon (docs/api.md), on its unix socket (root only, no key) or on TCP
// with an API key (Authorization: Bearer). The CLI client verbs (`corral
// create|ls|inspect|exec|cp|rm`) use it too.
//
// Connections are kept alive and pooled: calls from several threads run at
// once, each on a connection of its own. File transfers stream with bounded
// memory in both directions; exec_stream reads the daemon's NDJSON event
// stream and hands each chunk to the sink as it arrives.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_client.h"
#include "sdk/sandbox_provider.h"

namespace corral::sdk {

struct RemoteOptions {
  // "unix:/run/corral/corral.sock" or "http://127.0.0.1:7070" (see
  // http::Endpoint::parse).
  std::string url = "unix:/run/corral/corral.sock";
  // Sent as a bearer token when set (needed on TCP, ignored on the socket).
  std::string api_key;
  // Connect timeout, and the longest wait for any one read or write of a
  // request that does not run a command. Execs wait as long as their
  // command runs (its own timeout bounds it on the daemon's side).
  std::chrono::milliseconds timeout{30000};
};

class RemoteProvider : public SandboxProvider {
 public:
  // Checks the URL; connects on the first call.
  static Result<std::unique_ptr<RemoteProvider>> open(RemoteOptions options);
  // The options from the environment: CORRAL_URL (default the unix socket
  // under run_dir()) and CORRAL_API_KEY.
  static RemoteOptions options_from_environment();

  Result<api::SandboxInfo> create_sandbox(const api::CreateSandboxRequest& request,
                                          std::optional<std::string> idempotency_key) override;
  Result<api::ExecResult> exec(std::string_view id, const api::ExecRequest& request) override;
  Result<api::ExecResult> exec_stream(std::string_view id, const api::ExecRequest& request,
                                      const OutputSink& sink) override;
  Result<api::UploadResult> put_file_from(std::string_view id, std::string_view path,
                                          const ByteSource& source,
                                          std::optional<std::uint64_t> length,
                                          std::uint32_t mode) override;
  Result<std::uint64_t> get_file_to(std::string_view id, std::string_view path,
                                    const ByteSink& sink) override;
  Result<api::SandboxInfo> inspect(std::string_view id) override;
  Result<std::vector<api::SandboxInfo>> list(bool include_cleaned) override;
  Result<api::SandboxInfo> destroy_sandbox(std::string_view id) override;

  // One request with a JSON body (or none): the body of a 2xx answer, or
  // the API error as an Error (error_from_api). For routes the typed calls
  // do not cover (files/stat, processes, ...) and for raw JSON output.
  Result<std::string> call(std::string_view method, std::string_view target,
                           std::string_view json_body = {}, const http::Headers& headers = {});

  // GET of a byte resource (a snapshot archive, ...) into `sink`; the
  // answer's headers in `response_headers` if given. An answer shorter than
  // its Content-Length is an error.
  Result<std::uint64_t> download(std::string_view target, const ByteSink& sink,
                                 http::Headers* response_headers = nullptr);

  const http::Endpoint& endpoint() const { return endpoint_; }

 private:
  RemoteProvider(http::Endpoint endpoint, RemoteOptions options)
      : endpoint_(std::move(endpoint)), options_(std::move(options)) {}
  // A pooled connection, returned to the pool by the guard.
  class Lease;
  Result<Lease> lease();
  http::Headers with_auth(http::Headers headers) const;
  // Reads an error response's body into an Error.
  Error read_error(http::Client& client, const http::ResponseHead& head);

  http::Endpoint endpoint_;
  RemoteOptions options_;
  std::mutex mu_;
  std::vector<http::Client> idle_;
};

// "/v1/sandboxes/<id>" with the id percent-encoded.
std::string sandbox_path(std::string_view id);

}  // namespace corral::sdk
