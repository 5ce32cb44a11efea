// What the owner declares for the internal-service gateway (gateway.h):
// its services (name, internal URL, methods, path prefixes, rate), parsed
// from the daemon config or `corral run --gateway-service`, and the path
// grammar a request target and a declared prefix share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "netns/network_policy.h"

namespace corral::net {

struct GatewayService {
  std::string name;         // [a-z0-9][a-z0-9-]*, at most 63: the first path segment
  std::string url;          // as declared: http[s]://host[:port][/base]
  std::string host;         // lower case; an IP literal (no brackets) or a DNS name
  std::uint16_t port = 80;  // 443 for https without a port
  bool tls = false;         // https: TLS to the service, its certificate verified
  std::string base_path;    // "" or "/base" (no trailing '/')
  std::vector<std::string> methods{"GET", "HEAD"};  // upper case
  std::vector<std::string> path_prefixes{"/"};      // of the path after /<service>
  RateLimit rate{10, 20};                           // requests/s per sandbox; 0: unlimited
};

// http[s]://host[:port][/base]: no user info, query or fragment.
struct GatewayUrl {
  std::string host;
  std::uint16_t port = 80;  // 443 for https
  std::string base_path;
  bool tls = false;  // https
};
Result<GatewayUrl> parse_gateway_url(std::string_view url);

bool is_valid_gateway_service_name(std::string_view name);

// Plain fields, as a config file has them (the daemon config uses this).
// Empty `methods`: GET and HEAD; empty `path_prefixes`: "/" (everything);
// no `rate`: 10/s with a burst of 20. Errors name the service and the field.
Result<GatewayService> parse_gateway_service(std::string_view name, std::string_view url,
                                             const std::vector<std::string>& methods,
                                             const std::vector<std::string>& path_prefixes,
                                             std::optional<RateLimit> rate);

// "10/s", "600/min", "2/s,burst=5" (burst defaults to twice the rate,
// at least 1); "0" or "unlimited": no limit.
Result<RateLimit> parse_gateway_rate(std::string_view text);

// The `corral run --gateway-service` form:
// NAME=URL[;methods=GET,POST][;paths=/v1/,/health][;rate=10/s]
Result<GatewayService> parse_gateway_service_flag(std::string_view text);

// The target of a gateway request, split and checked: /<service>[/rest][?query].
struct GatewayTarget {
  std::string service;
  std::string rest;          // raw (as sent, percent-encoded), "/" at least
  std::string decoded_rest;  // percent-decoded: what prefixes are matched against
  std::string query;         // raw, without '?'
};
// kInvalidArgument (the message says what to fix) for a target that is
// not normalised: a "." or ".." segment (also percent-encoded), an empty
// segment ("//"), an encoded '/' or '\', a backslash, a NUL or control
// byte, or no service segment.
Result<GatewayTarget> split_gateway_target(std::string_view origin_target);

// A prefix ending in '/' matches the paths that start with it; another
// matches itself and the paths below it ("/health" matches "/health" and
// "/health/x", not "/healthz").
bool gateway_path_allowed(const GatewayService& service, std::string_view decoded_rest);

}  // namespace corral::net
