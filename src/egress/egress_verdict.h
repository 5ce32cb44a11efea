// What an egress connection is for, and whether a sandbox's policy lets it
// through: the proxy's verdict on a connection (egress_proxy.h), decided
// when it starts and again when the policy changes (set_policy).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "netns/ip_address.h"
#include "netns/network_policy.h"

namespace corral::net::egress_detail {

// What a connection is for, as far as the policy is concerned.
struct Target {
  std::vector<std::string> names;    // one (CONNECT host, SNI, Host), or tcp: corral's DNS names
  bool names_from_dns = false;       // the names are what corral's DNS answered for `address`
  std::optional<IpAddress> address;  // an IP literal, or the original destination
  std::uint16_t port = 0;
  Protocol protocol = kTcp;
  // Transparent: if no rule allows the name, a rule naming the original
  // destination by address still may (the sandbox's own choice of address
  // is then what the rule granted).
  bool address_fallback = false;
};

struct Verdict {
  bool allowed = false;
  bool via_name = false;  // connect to what names[0] resolves to, else to `address`
  std::string rule;
  std::string reason;
};

Verdict decide_target(const NetworkPolicy& policy, const Target& t);
// Still allowed under `policy`: the decision and the address connected to.
Verdict reevaluate(const NetworkPolicy& policy, const Target& t, const IpAddress& connected);

}  // namespace corral::net::egress_detail
