// The egress policy of a sandbox (ADR 0005, N1-N4): a mode, allow and deny
// rules, and the limits that go with them; the decision for one connection
// or DNS name; and the named templates a spec can start from.
//
// A rule is written as text, the same in the CLI, the API and YAML:
//
//   [protocol://]host[:ports]
//
//   protocol  http | tls (or https) | tcp; default: http and tls
//   host      a domain (pypi.org), a glob for its subdomains (*.pythonhosted.org),
//             * (any name), an IPv4 address or prefix (203.0.113.0/24), or an
//             IPv6 one in brackets ([2001:db8::/32])
//   ports     443 | 80,443 | 8000-8100 | *; default: 80 for http, 443 for
//             tls, both for http+tls; a tcp rule must name its ports
//
// Deny rules use the same form (default: every port and protocol) and win
// over allow rules. A tcp rule allows any bytes to the addresses that
// corral's DNS answered for that name; http and tls rules are matched on
// the Host header and the TLS SNI.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "netns/ip_address.h"

namespace corral::net {

enum Protocol : std::uint8_t { kHttp = 1, kTls = 2, kTcp = 4 };
using ProtocolSet = std::uint8_t;
const char* protocol_name(Protocol p);

struct PortRange {
  std::uint16_t first = 0;
  std::uint16_t last = 0;
  bool operator==(const PortRange&) const = default;
};

struct NetworkRule {
  std::string text;  // normalised: protocol://host:ports
  bool deny = false;
  std::string domain;  // lower case: "pypi.org", "*.example.com", "*"; empty for address rules
  std::optional<IpPrefix> prefix;
  std::vector<PortRange> ports;  // never empty
  ProtocolSet protocols = kHttp | kTls;

  bool matches_name(std::string_view name) const;  // domain rules only
  bool matches_address(const IpAddress& a) const;  // prefix rules only
  bool matches_port(std::uint16_t port) const;
  bool all_ports() const;
};

// Parses one rule; the error says what is wrong and shows the form.
Result<NetworkRule> parse_rule(std::string_view text, bool deny);

enum class NetworkMode { kNone, kAllowlist, kOpen };
const char* network_mode_name(NetworkMode m);
std::optional<NetworkMode> parse_network_mode(std::string_view name);

// New connections (and DNS queries) per second, with a burst. 0: unlimited.
struct RateLimit {
  double per_second = 0;
  double burst = 0;
  bool operator==(const RateLimit&) const = default;
};

struct NetworkPolicy {
  NetworkMode mode = NetworkMode::kNone;
  std::vector<NetworkRule> rules;                     // allow and deny, in the order given
  std::vector<std::string> dns_servers;               // "ip" or "ip:port"; empty: the daemon's
  // Dry-run (X2, docs/dry-run.md): the proxy records every connection and
  // answers it itself; nothing is resolved or sent upstream.
  bool dry_run = false;
  std::chrono::milliseconds request_timeout{10'000};  // connect, and idle per connection
  RateLimit rate{20, 40};
  std::vector<std::string> gateway_services;  // granted services (N5)
  std::string template_name;                  // "code-exec@1", or empty
  // Whether anything at all may leave: an empty allowlist is no network.
  bool has_network() const;
};

// What the proxy knows about one connection.
struct EgressQuery {
  std::string name;                  // SNI, Host or CONNECT host (lower case), or empty
  std::optional<IpAddress> address;  // the literal or resolved destination, if known
  std::uint16_t port = 0;
  Protocol protocol = kTcp;
};

struct Decision {
  bool allowed = false;
  std::string rule;    // the text of the rule that decided, empty if none
  std::string reason;  // for the audit record and the refusal
};

// Names: deny rules first, then allow rules (or everything, in open mode).
// An address alone (an IP literal) can only be allowed by an address rule.
Decision decide(const NetworkPolicy& policy, const EgressQuery& query);

// The rebinding defence, after resolution, for a connection to `port`
// carrying `protocol`: a public address passes; any other (loopback,
// private, link-local, metadata, ...) only if an allow rule for that port
// and protocol names it by address, and never if a deny rule for them does. A rule names such an
// address only with a prefix inside the address's own class (10.0.0.0/8
// names 10.1.2.3; 0.0.0.0/0 names no private address), and a metadata
// address only by itself (169.254.169.254, not 169.254.0.0/16).
Decision check_address(const NetworkPolicy& policy, const IpAddress& address, std::uint16_t port,
                       Protocol protocol);

// Whether corral's DNS should resolve `name` for this sandbox: some allow
// rule matches it (any port) and no deny rule covers all of its ports and
// protocols.
Decision check_dns_name(const NetworkPolicy& policy, std::string_view name);

// Named, versioned rule sets per task type (N2). The daemon config may
// add its own or replace these; a spec names one and adds or removes rules.
struct NetworkTemplate {
  std::string name;
  int version = 1;
  NetworkMode mode = NetworkMode::kAllowlist;
  std::vector<std::string> allow;
  std::vector<std::string> deny;
  std::string description;
};
const std::vector<NetworkTemplate>& default_network_templates();

// What a spec asks for, before templates are applied.
struct NetworkRequest {
  std::string mode;           // "", "none", "allowlist", "open"
  std::string template_name;  // "", "code-exec" (latest) or "code-exec@1"
  std::vector<std::string> allow;
  std::vector<std::string> deny;
  std::vector<std::string> remove;  // template rules to drop, by their text
  std::vector<std::string> dns_servers;
  std::optional<std::chrono::milliseconds> request_timeout;
  std::optional<RateLimit> rate;
  std::vector<std::string> gateway;
};

// Template, then removals, then the spec's own rules. Errors name the
// offending rule or template and say what to fix.
Result<NetworkPolicy> resolve_policy(const NetworkRequest& request,
                                     const std::vector<NetworkTemplate>& templates);

}  // namespace corral::net
