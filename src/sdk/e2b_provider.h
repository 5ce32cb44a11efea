// E2bProvider: the SandboxProvider for any service that speaks E2B's public
// protocol (REQUIREMENTS.md P2; issue 17): E2B's control plane for the
// sandbox's life, envd (Connect with JSON) for commands and files. It
// drives corral's own E2B facade (`corral serve`, docs/e2b.md) as well as
// E2B's cloud or another E2B-compatible service, over http or https
// (libcurl, loaded when the provider is opened), so that business code
// moves between local, remote corral and hosted back-ends by configuration.
//
//   E2bOptions o;                                     // corral's facade:
//   o.api_url = "http://127.0.0.1:7070/e2b";          //   E2B_API_URL
//   o.sandbox_url = "http://127.0.0.1:7070/e2b/envd"; //   E2B_SANDBOX_URL
//   o.api_key = "e2b_...";                            //   E2B_API_KEY
//   auto p = E2bProvider::open(o);
//   // E2B's cloud: only the key; the URLs follow from domain "e2b.app".
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

#include "e2b/control_messages.h"
#include "http/curl_exchange.h"
#include "http/http_message.h"
#include "sdk/sandbox_provider.h"

namespace corral::sdk {

struct E2bOptions {
  // The control plane, with its path prefix; empty: https://api.<domain>.
  std::string api_url;
  // One envd URL for every sandbox (routed by the E2b-Sandbox-Id header);
  // empty: each sandbox's own, from its domain (e2b_envd_url).
  std::string sandbox_url;
  // E2B's cloud, or a service that hosts sandboxes as <port>-<id>.<domain>;
  // host[:port].
  std::string domain = "e2b.app";
  std::string api_key;
  // A PEM bundle that verifies the service's certificate; empty: the
  // system's CA bundle.
  std::string ca_file;
  std::string template_id = "base";  // when the request names no image
  std::chrono::milliseconds timeout{60000};
  // From E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN and E2B_API_KEY (the
  // variables of E2B's own SDKs), and SSL_CERT_FILE for ca_file.
  static E2bOptions from_environment();
};

// Where envd of one sandbox answers, by the rules of E2B's SDK: sandbox_url
// when set; https://sandbox.<domain> for E2B's own domains (routed by the
// header); otherwise https://49983-<id>.<domain>. `sandbox_domain` is the
// create answer's (empty: the options'). kInvalidArgument when the domain
// or the id cannot be part of a host name.
Result<std::string> e2b_envd_url(const E2bOptions& options, std::string_view sandbox_id,
                                 std::string_view sandbox_domain);

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
  // What envd calls to one sandbox need, from its create or detail answer.
  struct Envd {
    std::string url;      // without a trailing '/'
    std::string token;    // X-Access-Token; empty when the service gave none
    std::string version;  // envdVersion, which gates raw uploads (0.5.7)
  };
  E2bProvider(std::string api_url, E2bOptions options)
      : api_url_(std::move(api_url)), options_(std::move(options)), session_(options_.ca_file) {}
  // One control-plane request: the answer's body, or the error.
  Result<std::string> control(std::string_view method, const std::string& path,
                              std::string_view body, int* status = nullptr);
  Result<Envd> envd_of(std::string_view id);
  Result<Envd> remember(const e2b::SandboxView& view);
  http::Headers envd_headers(std::string_view id, const Envd& envd,
                             std::string_view content_type) const;
  Result<api::ExecResult> run(std::string_view id, const api::ExecRequest& request,
                              const OutputSink* sink);

  std::string api_url_;  // without a trailing '/'
  E2bOptions options_;
  http::CurlSession session_;
  std::mutex mu_;
  std::map<std::string, Envd, std::less<>> envd_;  // by sandbox id
};

}  // namespace corral::sdk
