// The host-side firewall of the network engine (ADR 0005, "Firewall"): one
// nftables table, `inet corral`, whose rules never change per sandbox. From
// an interface whose name starts with the sandbox prefix (`crl`), TCP is
// redirected to the owner's transparent proxy and UDP 53 to its DNS server,
// on the sandbox's own host end; everything else (IPv6, ICMP, other UDP,
// spoofed sources, other protocols, forwarding) is counted by reason and
// dropped. The proxy and DNS ports refuse every other interface.
//
// The table is installed by one `nft -f -` run that creates or replaces it
// in a single transaction, so there is never a moment without it; nothing
// else on the host is touched (no other table, never `flush ruleset`).
// Nothing per sandbox needs nftables: a sandbox's interface matches the
// prefix the moment it exists.
//
// The table name, the prefix and the ports are parameters so that tests use
// throwaway ones next to a live `inet corral`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/result.h"

namespace corral::net {

// Default ports on each sandbox's host end. Both lie below Linux's default
// ephemeral range (net.ipv4.ip_local_port_range 32768-60999), so the host
// never picks them as the local port of an outgoing connection. They must
// be reserved for corral on the host: traffic to them from any interface
// other than a sandbox's is dropped.
inline constexpr std::uint16_t kDefaultProxyPort = 15001;  // transparent + explicit proxy (TCP)
inline constexpr std::uint16_t kDefaultDnsPort = 15053;    // DNS (UDP)

struct FirewallConfig {
  // nftables table in the `inet` family. Letters, digits and '_' (must
  // start with a letter), at most 32 bytes.
  std::string table = "corral";
  // Interfaces whose name starts with this are sandboxes' host ends
  // (`crl<slot>`). Letters, digits, '_' and '-', 1 to 10 bytes (so that
  // `<prefix><slot>` fits in an interface name); no other interface on the
  // host may start with it.
  std::string iface_prefix = "crl";
  std::uint16_t proxy_port = kDefaultProxyPort;
  std::uint16_t dns_port = kDefaultDnsPort;
  // The nft program (Debian: package nftables).
  std::string nft = "/usr/sbin/nft";
};

// kInvalidArgument naming the field if the config cannot be rendered safely
// (names that nft would misparse, ports 0 or equal, a relative nft path).
Status validate_firewall_config(const FirewallConfig& config);

// The named counters of the table, each with why it counts. drop_* count
// dropped packets; redirect_* count connections (first packets) redirected.
struct FirewallCounterInfo {
  std::string_view name;
  std::string_view help;
};
inline constexpr FirewallCounterInfo kFirewallCounters[] = {
    {"drop_ipv6", "IPv6 packets from a sandbox"},
    {"drop_spoofed", "packets from a sandbox whose source address is not routed back to it"},
    {"drop_icmp", "new ICMP from a sandbox (echo requests included)"},
    {"drop_udp", "new UDP from a sandbox to a port other than 53"},
    {"drop_other", "anything else from a sandbox (other protocols, invalid or untracked state)"},
    {"drop_forward", "packets the host would route from or to a sandbox"},
    {"drop_foreign", "packets to the proxy or DNS port from an interface that is not a sandbox's"},
    {"redirect_tcp", "TCP connections from sandboxes redirected to the proxy"},
    {"redirect_dns", "UDP DNS flows from sandboxes redirected to the DNS server"},
};

// The nft script that defines table `inet <table>` (without the lines that
// replace an existing one; see install_firewall). The config must pass
// validate_firewall_config (checked: an invalid one aborts).
std::string render_ruleset(const FirewallConfig& config);

// Creates the table, or replaces it atomically if it exists: one `nft -f -`
// run whose script (on stdin) is `table inet X {}`, `delete table inet X`
// and the full table, applied by the kernel as one transaction. Counters
// start at zero again. On failure the error carries nft's stderr; the
// caller must then refuse networked sandboxes (fail closed).
Status install_firewall(const FirewallConfig& config);

// Whether the table exists with all of its chains hooked where they should
// be and all of its counters (`nft -j list table`). false if the table is
// missing or incomplete; an error only if nft itself cannot be asked.
Result<bool> firewall_installed(const FirewallConfig& config);

struct FirewallCounter {
  std::uint64_t packets = 0;
  std::uint64_t bytes = 0;
};
struct FirewallCounters {
  std::map<std::string, FirewallCounter, std::less<>> by_name;
  // The counter of that name (zero if the table has no such counter).
  FirewallCounter get(std::string_view name) const;
};

// The table's named counters (all of kFirewallCounters when installed).
// kNotFound if the table does not exist.
Result<FirewallCounters> read_firewall_counters(const FirewallConfig& config);

// Deletes the table if it exists (one transaction; fine if it does not).
Status remove_firewall(const FirewallConfig& config);

}  // namespace corral::net
