// The addresses corral's DNS hands a dry-run sandbox (X2, ADR 0016): one
// synthetic IPv4 address per name, from 198.18.0.0/15 (RFC 2544's
// benchmarking range, never a real destination), so that the egress proxy
// can tell which name a raw TCP connection meant (DnsServer::names_for)
// while no query ever goes upstream.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace corral::net {

class DryRunAddresses {
 public:
  // The address for `name`: the same one every time it is asked; a new
  // one for each new name, in order (198.18.0.1, 198.18.0.2, ...). After
  // the range is used up (131070 names) the oldest addresses are reused.
  std::string address_for(std::string_view name);

 private:
  std::mutex mu_;
  std::map<std::string, std::string, std::less<>> by_name_;
  std::uint32_t next_ = 0;
};

}  // namespace corral::net
