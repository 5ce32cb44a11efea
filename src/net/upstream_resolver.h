// The proxy's own name resolution (ADR 0005): A and AAAA queries over UDP
// to the configured upstream servers, tried in order, with the answers'
// CNAME chains followed. The proxy never connects to the address a
// sandbox chose for a name; it connects to what this returns, after the
// rebinding check.
#pragma once

#include <string>
#include <vector>

#include "net/resolver.h"

namespace corral::net {

// "IP", "IP:PORT" or "[IPv6]:PORT" -> a sockaddr-ready pair; nullopt if bad.
struct DnsEndpoint {
  IpAddress address;
  std::uint16_t port = 53;
};
std::optional<DnsEndpoint> parse_dns_endpoint(std::string_view text);

// The nameservers of a resolv.conf text (the host's default upstreams).
std::vector<std::string> resolv_conf_nameservers(std::string_view text);

class UpstreamResolver : public Resolver {
 public:
  explicit UpstreamResolver(std::vector<std::string> servers) : servers_(std::move(servers)) {}
  Result<std::vector<IpAddress>> resolve(const std::string& name,
                                         std::chrono::milliseconds timeout) override;

 private:
  std::vector<std::string> servers_;
};

}  // namespace corral::net
