// One owner's network engine (ADR 0005): the firewall table, the filtering
// DNS server, the egress proxy and the upstream resolver, and the
// registration of each networked sandbox with them. The daemon has one for
// all its sandboxes; `corral run` has one for its single sandbox.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/result.h"
#include "egress/dns_server.h"
#include "egress/dry_run_addresses.h"
#include "egress/egress_proxy.h"
#include "egress/firewall.h"
#include "egress/gateway.h"
#include "netns/network_policy.h"

namespace corral::net {

// The name sandboxes reach internal services by (N5); corral's DNS answers
// it with the sandbox's host end.
inline constexpr std::string_view kGatewayName = "gateway.corral.internal";
static_assert(kGatewayName == kGatewayHost);

struct NetworkEngineConfig {
  FirewallConfig firewall;
  // Upstream DNS servers ("IP", "IP:PORT"); empty: the host's resolv.conf.
  std::vector<std::string> dns_servers;
  DnsServerConfig dns;  // upstreams are filled from dns_servers
  EgressProxyOptions proxy;
  bool install_firewall = true;  // false: tests that bring their own table
  // The internal services sandboxes may be granted (N5, gateway.h), and
  // the key their tokens are signed with (kGatewaySecretBytes; empty: a
  // random one for this engine's life, so tokens die with it; the daemon
  // keeps one in a 0600 file: load_or_create_gateway_secret).
  std::vector<GatewayService> gateway_services;
  std::string gateway_secret;
  GatewayOptions gateway;
};

// Every decision of the engine, for the owner's audit log and metrics.
struct NetworkAuditSinks {
  EgressAuditSink egress;
  DnsLogSink dns;
  GatewayAuditSink gateway;  // one event per gateway request
};

class NetworkEngine {
 public:
  // Installs the firewall (fail closed: an error here means no networked
  // sandbox may start), then starts the DNS server and the proxy.
  static Result<std::unique_ptr<NetworkEngine>> start(NetworkEngineConfig config,
                                                      NetworkAuditSinks sinks);
  ~NetworkEngine();

  // Serves sandbox `id` on `host_address` (its slot's host end): DNS on
  // the DNS port, the proxy on the proxy port. On error nothing is left
  // registered.
  Status add_sandbox(const std::string& id, const std::string& host_address,
                     const std::string& sandbox_address, const NetworkPolicy& policy);
  // New connections and queries follow `policy` at once; open connections
  // it no longer allows are closed.
  Status set_policy(const std::string& id, const NetworkPolicy& policy);
  // Closes everything of the sandbox. False if it was not registered.
  bool remove_sandbox(const std::string& id);
  std::shared_ptr<const NetworkPolicy> policy(const std::string& id) const;

  const NetworkEngineConfig& config() const { return config_; }
  DnsMetrics dns_metrics() const { return dns_->metrics(); }
  EgressMetrics egress_metrics() const { return proxy_->metrics(); }
  GatewayMetrics gateway_metrics() const { return gateway_->metrics(); }
  // A token for sandbox `id`'s requests to the gateway, valid until
  // `expires_at_unix`: the owner puts it in the workload's environment as
  // CORRAL_GATEWAY_TOKEN.
  std::string gateway_token(const std::string& id, std::int64_t expires_at_unix) const {
    return gateway_->token(id, expires_at_unix);
  }
  Result<FirewallCounters> firewall_counters() const;

 private:
  NetworkEngine() = default;
  DnsPolicy dns_policy(const std::string& id, std::shared_ptr<const NetworkPolicy> policy,
                       const std::string& host_address,
                       std::shared_ptr<DryRunAddresses> dry_run_addresses);

  NetworkEngineConfig config_;
  std::unique_ptr<DnsServer> dns_;
  std::unique_ptr<EgressProxy> proxy_;
  std::shared_ptr<Gateway> gateway_;  // the proxy's threads hold it too
  mutable std::mutex mu_;
  struct Entry {
    std::string host_address;
    std::shared_ptr<const NetworkPolicy> policy;
    std::shared_ptr<DryRunAddresses> dry_run_addresses;  // X2: a dry run's names, for its life
  };
  std::map<std::string, Entry> sandboxes_;
};

}  // namespace corral::net
