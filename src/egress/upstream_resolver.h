// The proxy's own name resolution (ADR 0005): A and AAAA queries over UDP
// to the configured upstream servers, tried in order, with the answers'
// CNAME chains followed. The proxy never connects to the address a
// sandbox chose for a name; it connects to what this returns, after the
// rebinding check (which runs on every connection, cached answer or not).
//
// Answers are kept for their TTL (at most max_ttl): without that every
// proxied connection paid two upstream round trips, milliseconds each on
// a real network. Both questions go out at once, on one socket.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "egress/resolver.h"

namespace corral::net {

// "IP", "IP:PORT" or "[IPv6]:PORT" -> a sockaddr-ready pair; nullopt if bad.
struct DnsEndpoint {
  IpAddress address;
  std::uint16_t port = 53;
};
std::optional<DnsEndpoint> parse_dns_endpoint(std::string_view text);

// The nameservers of a resolv.conf text (the host's default upstreams).
std::vector<std::string> resolv_conf_nameservers(std::string_view text);

struct ResolverCacheOptions {
  std::size_t max_entries = 4096;  // 0: no cache
  std::chrono::seconds max_ttl{300};
};

class UpstreamResolver : public Resolver {
 public:
  explicit UpstreamResolver(std::vector<std::string> servers, ResolverCacheOptions cache = {})
      : servers_(std::move(servers)), cache_options_(cache) {}
  Result<std::vector<IpAddress>> resolve(const std::string& name,
                                         std::chrono::milliseconds timeout) override;

  std::uint64_t cache_hits() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    std::vector<IpAddress> addresses;
    Clock::time_point expires;
  };
  void remember(const std::string& name, const std::vector<IpAddress>& addresses,
                std::uint32_t ttl);

  std::vector<std::string> servers_;
  ResolverCacheOptions cache_options_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> cache_;
  std::uint64_t hits_ = 0;
};

}  // namespace corral::net
