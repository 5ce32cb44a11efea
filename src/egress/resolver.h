// What the egress proxy asks of name resolution (ADR 0005, "Proxy"), as two
// small interfaces so that the proxy depends on neither the upstream DNS
// client nor the filtering DNS server, and tests use fakes:
//   - Resolver: the proxy resolves every name itself (it never connects to
//     the address the sandbox chose for a name); the owner wires it to the
//     configured upstream DNS servers.
//   - DnsAnswers: what corral's DNS answered each sandbox, for `tcp` rules,
//     which allow raw TCP to the addresses the DNS returned for an allowed
//     name (implemented by the DnsServer).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/result.h"
#include "netns/ip_address.h"

namespace corral::net {

class Resolver {
 public:
  virtual ~Resolver();
  // The addresses of `name` (lower case, no trailing dot; never an IP
  // literal), IPv4 and IPv6, in the order to try. Called from the proxy's
  // connection threads, concurrently; must return within `timeout`.
  // An empty list or an error refuses the connection.
  virtual Result<std::vector<IpAddress>> resolve(const std::string& name,
                                                 std::chrono::milliseconds timeout) = 0;
};

class DnsAnswers {
 public:
  virtual ~DnsAnswers();
  // Whether `address` was handed to `sandbox` as an answer for `name` and
  // has not expired.
  virtual bool answered(const std::string& sandbox, const std::string& name,
                        const IpAddress& address) = 0;
  // The names for which `address` was handed to `sandbox` and has not
  // expired (lower case, no trailing dot).
  virtual std::vector<std::string> names_for(const std::string& sandbox,
                                             const IpAddress& address) = 0;
};

}  // namespace corral::net
