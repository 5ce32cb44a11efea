// RoutingProvider: picks a back-end per task class (REQUIREMENTS.md P3;
// issue 17). Business code names the class of its work in the sandbox's
// metadata ("class": "batch"); the configuration says which back-end
// serves each class (a local daemon, a remote corral, a hosted
// E2B-compatible service) and what to do when that back-end is down: fail,
// or use another. The choice is recorded with the sandbox (its metadata
// "corral.backend") and counted (counts(), and the Prometheus text of
// metrics_text()).
//
//   routing:                       # the file of RoutingProvider::from_yaml
//     backends:
//       local:  {kind: corral, url: "unix:/run/corral/corral.sock"}
//       hosted: {kind: e2b, api_url: "http://10.0.0.7:7070/e2b",
//                sandbox_url: "http://10.0.0.7:7070/e2b/envd", api_key_env: E2B_API_KEY}
//     classes:
//       core:  {backend: local}                     # when_down: fail (default)
//       batch: {backend: hosted, when_down: local}  # else use local
//     default_class: core
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sdk/sandbox_provider.h"

namespace corral::sdk {

struct RouteRule {
  std::string backend;
  std::string when_down;  // "" or "fail": fail; else the back-end to use instead
};

struct RoutingConfig {
  std::map<std::string, std::unique_ptr<SandboxProvider>> backends;
  std::map<std::string, RouteRule> classes;
  std::string default_class = "core";
};

class RoutingProvider : public SandboxProvider {
 public:
  // The metadata key that names a create's class, and the one the choice
  // is recorded under.
  static constexpr const char* kClassKey = "class";
  static constexpr const char* kBackendKey = "corral.backend";

  // Every class's back-ends must exist; kInvalidArgument naming the class.
  static Result<std::unique_ptr<RoutingProvider>> open(RoutingConfig config);
  // The YAML above (a file's text); "api_key_env" and "api_key_file" name
  // where a key is, never the key itself.
  static Result<std::unique_ptr<RoutingProvider>> from_yaml(std::string_view text,
                                                            std::string_view source = "routing");

  struct Count {
    std::string cls, backend;
    bool fallback = false;
    std::uint64_t n = 0;
  };
  std::vector<Count> counts() const;
  // corral_routing_creates_total{class,backend,fallback} in Prometheus' text format.
  std::string metrics_text() const;
  // The back-end that holds sandbox `id` ("" when unknown here).
  std::string backend_of(std::string_view id) const;

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
  explicit RoutingProvider(RoutingConfig config) : config_(std::move(config)) {}
  // The back-end of sandbox `id`: remembered from its create, else found
  // by asking each back-end.
  Result<SandboxProvider*> owner(std::string_view id);
  void count(const std::string& cls, const std::string& backend, bool fallback);

  RoutingConfig config_;
  mutable std::mutex mu_;
  std::map<std::string, std::string, std::less<>> owners_;  // sandbox id -> back-end
  std::map<std::tuple<std::string, std::string, bool>, std::uint64_t> counts_;
};

// Whether an error says the back-end is down (unreachable, unavailable,
// not answering), as opposed to refusing the request.
bool backend_down(const Error& e);

}  // namespace corral::sdk
