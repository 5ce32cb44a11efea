// E2bProvider: the SandboxProvider for any service that speaks E2B's public
// protocol (REQUIREMENTS.md P2; issue 17): E2B's control plane for the
// sandbox's life, envd (Connect with JSON) for commands and files. It
// drives corral's own E2B facade (`corral serve`, docs/e2b.md) as well as
// any other E2B-compatible service reachable over plain HTTP (put a TLS
// terminating proxy in front of an https one), so that business code moves
// between local, remote corral and hosted back-ends by configuration.
//
//   E2bOptions o;
//   o.api_url = "http://127.0.0.1:7070/e2b";        // E2B_API_URL
//   o.sandbox_url = "http://127.0.0.1:7070/e2b/envd"; // E2B_SANDBOX_URL
//   o.api_key = "e2b_...";                            // E2B_API_KEY
//   auto p = E2bProvider::open(o);
//
// What E2B's protocol cannot say is refused or left out: idempotency keys
// (a create is not idempotent there), limits (the template decides),
// mounts, volumes and secrets (kInvalidArgument naming them); a destroy
// of an unknown or already destroyed sandbox is kNotFound.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "http/http_client.h"
#include "sdk/sandbox_provider.h"

namespace corral::sdk {

struct E2bOptions {
  std::string api_url;      // the control plane, with its path prefix
  std::string sandbox_url;  // envd of every sandbox (routed by E2b-Sandbox-Id)
  std::string api_key;
  std::string template_id = "base";  // when the request names no image
  std::chrono::milliseconds timeout{60000};
  // From E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY.
  static E2bOptions from_environment();
};

class E2bProvider : public SandboxProvider {
 public:
  static Result<std::unique_ptr<E2bProvider>> open(E2bOptions options);

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

 private:
  struct Base {
    http::Endpoint endpoint;
    std::string prefix;  // "/e2b", or ""
  };
  E2bProvider(Base api, Base envd, E2bOptions options)
      : api_(std::move(api)), envd_(std::move(envd)), options_(std::move(options)) {}
  static Result<Base> split_url(std::string_view url, std::string_view what);
  // One control-plane request: the answer's body, or the error.
  Result<std::string> control(std::string_view method, const std::string& path,
                              std::string_view body, int* status = nullptr);
  Result<std::string> token_of(std::string_view id);
  http::Headers envd_headers(std::string_view id, const std::string& token,
                             std::string_view content_type) const;
  Result<api::ExecResult> run(std::string_view id, const api::ExecRequest& request,
                              const OutputSink* sink);

  Base api_;
  Base envd_;
  E2bOptions options_;
  std::mutex mu_;
  std::map<std::string, std::string, std::less<>> tokens_;  // sandbox id -> envd access token
};

}  // namespace corral::sdk
