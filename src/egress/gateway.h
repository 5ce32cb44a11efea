// The internal-service gateway (N5; ADR 0005, user guide docs/network.md
// "Gateway to internal services").
//
// The owner (daemon config, `corral run --gateway-service`) declares
// services: a name, an internal URL (http://host:port/base, or https://:
// the gateway then speaks TLS to the service, verified), the methods
// and path prefixes allowed, and a rate limit. A sandbox whose policy
// grants a service (NetworkPolicy::gateway_services) reaches it only as
//
//   http://gateway.corral.internal/<service>/<path>
//
// with its token (gateway_token.h) in `Authorization: Bearer <token>` or
// `X-Corral-Gateway-Token: <token>`. corral's DNS answers that name with
// the sandbox's host end, and the egress proxy hands such connections
// (transparent to the host end's port 80, or an explicit proxy request for
// an http://gateway.corral.internal/ URL) to Gateway::serve instead of the
// egress policy. The internal address itself stays unreachable for the
// sandbox: the egress policy refuses private addresses unless a rule names
// them.
//
// One request per connection: the head is read (bounded in size and
// time), checked (token, grant, method, path, rate), rewritten (path =
// base + rest, Host = the internal host, the token and hop-by-hop fields
// dropped, X-Corral-Sandbox and Connection: close added), forwarded with
// its Content-Length body, and the response is streamed back until the
// service closes. Every request ends in exactly one GatewayEvent.
//
// Broker mode (issue 5): with a swapper (GatewayOptions), the rewritten
// head is given to swapper->swap() (via "gateway", host = the service's
// host) once the service is connected (https: verified) and before
// anything is sent: a broker token of the sandbox whose
// secret names that host is replaced by the secret's value, any other
// token refuses the request (403, kSecretRefused). A broker token in
// `Authorization: Bearer corral_tok_...` is never taken for the gateway
// token: the gateway token then goes in X-Corral-Gateway-Token.
#pragma once

#include <openssl/types.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "egress/gateway_config.h"
#include "netns/network_policy.h"
#include "egress/resolver.h"
#include "secrets/token_swapper.h"

namespace corral::net {

// The name sandboxes reach the gateway by (network_engine.h's kGatewayName).
inline constexpr std::string_view kGatewayHost = "gateway.corral.internal";
// The runtime endpoint of broker secrets (secrets/token_swapper.h read_value).
inline constexpr std::string_view kSecretReadPath = "/_secret";

enum class GatewayRefusal : std::uint8_t {
  kNone,             // forwarded
  kMalformed,        // 400: not an HTTP/1 request head, or one we do not forward
  kPath,             // 400: a path that is not normalised ("..", "//", ...)
  kNoToken,          // 401
  kBadToken,         // 401: malformed, bad signature, expired, another sandbox
  kUnknownService,   // 404
  kNotGranted,       // 403: the sandbox's policy does not grant the service
  kMethod,           // 403
  kPathNotAllowed,   // 403
  kRateLimited,      // 429
  kLengthRequired,   // 411: a chunked request body
  kUpstreamFailed,   // 502: resolution, connect, or an empty answer
  kUpstreamTimeout,  // 504
  kTimeout,          // 408: no complete head in time (or the client vanished)
  kSecretRefused,    // 403: a broker token that may not go to this service (issue 5)
  kUpstreamTls,      // 502: https service: TLS handshake or certificate failed
  kDryRun,           // 503: a dry run (X2): checked and recorded, never forwarded
  kCount,
};
// "none", "malformed", "path", "no_token", "bad_token", "unknown_service",
// "not_granted", "method", "path_not_allowed", "rate_limited",
// "length_required", "upstream_failed", "upstream_timeout", "timeout",
// "secret_refused", "upstream_tls", "dry_run".
std::string_view gateway_refusal_name(GatewayRefusal r);

struct GatewayEvent {
  std::string sandbox;
  std::string service;
  std::string method;
  std::string path;  // as the sandbox sent it (origin form, with the query)
  int status = 0;    // the status the sandbox got (ours or the service's; 0: none)
  bool allowed = false;
  GatewayRefusal refusal = GatewayRefusal::kNone;
  std::string reason;
  std::string upstream;              // "host:port" forwarded to
  std::vector<std::string> secrets;  // broker secrets swapped in (or, refused, refused)
  std::uint64_t bytes_up = 0;        // to the service (head and body)
  std::uint64_t bytes_down = 0;      // to the sandbox
  std::uint64_t duration_ms = 0;
};
using GatewayAuditSink = std::function<void(const GatewayEvent&)>;

struct GatewayMetrics {
  std::uint64_t requests = 0;
  std::uint64_t forwarded = 0;
  std::array<std::uint64_t, static_cast<std::size_t>(GatewayRefusal::kCount)> refused{};
  std::uint64_t count(GatewayRefusal r) const { return refused[static_cast<std::size_t>(r)]; }
};

struct GatewayOptions {
  std::chrono::milliseconds head_timeout{10'000};    // the whole request head
  std::chrono::milliseconds connect_timeout{5'000};  // to the service (resolution included)
  std::chrono::milliseconds idle_timeout{30'000};    // no progress either way
  std::size_t max_head_bytes = 16 * 1024;
  // https services: CA certificates (PEM) trusted besides the system's.
  std::string ca_file;
  // Broker mode (issue 5): swaps broker tokens in forwarded heads.
  std::shared_ptr<secrets::TokenSwapper> swapper;
};

// A connection the egress proxy hands over.
struct GatewayConnection {
  std::string sandbox;
  int client = -1;                              // connected, non-blocking; not closed by serve()
  std::string already_read;                     // bytes the proxy read from it first
  std::shared_ptr<const NetworkPolicy> policy;  // the sandbox's, for its grants
};

class Gateway {
 public:
  // Duplicate service names and an empty secret are refused. `resolver`
  // may be null (then only IP-literal hosts work).
  static Result<std::unique_ptr<Gateway>> create(std::vector<GatewayService> services,
                                                 std::string secret,
                                                 std::shared_ptr<Resolver> resolver,
                                                 GatewayAuditSink audit,
                                                 GatewayOptions options = {});

  // Serves one request, blocking (bounded by the options' timeouts; it
  // also ends when the client socket is shut down from outside), and
  // audits it. Thread-safe.
  void serve(const GatewayConnection& conn);

  std::string token(const std::string& sandbox_id, std::int64_t expires_at_unix) const;
  // Drops the sandbox's rate buckets.
  void forget(const std::string& sandbox_id);
  GatewayMetrics metrics() const;
  const std::vector<GatewayService>& services() const { return services_; }

 private:
  class Session;  // one request's steps (gateway_session.cc)
  Gateway() = default;
  struct Bucket {
    double tokens = -1;
    std::chrono::steady_clock::time_point last{};
  };
  // One request from the sandbox's bucket for the service; false: over its rate.
  bool take(const std::string& sandbox, const GatewayService& service);
  // The request is over: its duration, the metrics, the audit sink.
  void count_and_audit(GatewayEvent& ev, std::chrono::steady_clock::time_point start);

  std::vector<GatewayService> services_;
  std::string secret_;
  std::shared_ptr<Resolver> resolver_;
  GatewayAuditSink audit_;
  GatewayOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, Bucket> buckets_;  // sandbox + '\n' + service
  GatewayMetrics metrics_;
  std::shared_ptr<SSL_CTX> tls_;  // client context for https services
};

}  // namespace corral::net
