// NetworkService: the daemon's side of the network engine (ADR 0005). One
// engine (firewall table, DNS server, egress proxy) serves every networked
// sandbox of the daemon; this class resolves a spec's network into a
// policy, registers a sandbox with the engine once the factory has made
// its veth pair, changes its policy while it runs, takes it out again and
// checks that its link is gone, and turns the engine's decisions into
// audit records and /metrics series.
//
// Fail closed: if the engine cannot start (no nft, a port taken), the
// daemon still serves sandboxes without network, and refuses every create
// that asks for network with the reason.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/api_model.h"
#include "base/result.h"
#include "daemon/daemon_config.h"
#include "daemon/metrics.h"
#include "daemon/self_check_probes.h"
#include "jail/sandbox_network.h"
#include "egress/cert_authority.h"
#include "egress/network_engine.h"
#include "secrets/token_swapper.h"
#include "spec/sandbox_spec.h"

namespace corral::daemon {

class NetworkService {
 public:
  using AuditSink = std::function<void(nlohmann::json)>;

  // Takes the settings; starts nothing (the factory is forked before any
  // thread, and must get factory_options() first).
  // `secret_path`: the gateway's token key (created 0600 if missing), so
  // tokens of re-attached sandboxes stay valid across restarts.
  NetworkService(const DaemonConfig::Network& config, std::string secret_path,
                 MetricsRegistry& metrics);
  // Broker mode (issue 5): the proxy and the gateway swap tokens through
  // `swapper`; the proxy intercepts TLS for marked hosts with `ca`,
  // verifying upstreams against the system store and `upstream_ca_file`.
  // Call before start().
  void set_secrets(std::shared_ptr<secrets::TokenSwapper> swapper,
                   std::shared_ptr<net::CertAuthority> ca) {
    swapper_ = std::move(swapper);
    ca_ = std::move(ca);
  }
  // Starts the engine. Never fails: an engine that cannot start leaves the
  // service unavailable (see unavailable()).
  void start();
  ~NetworkService();

  // Where audit records go (the daemon's journal). Set before the first
  // sandbox is attached; set to {} before whatever the sink refers to goes
  // away (the engine's threads call it until this service is destroyed).
  void set_audit(AuditSink sink);

  // The options the factory plans networks with: the same pool, templates
  // and proxy port as the engine.
  NetworkOptions factory_options() const;

  // The policy a spec asks for; kInvalidArgument says what to fix.
  Result<net::NetworkPolicy> resolve(const NetworkSpec& spec) const;
  // Why networked sandboxes cannot start, if they cannot.
  std::optional<std::string> unavailable() const;

  // Serves sandbox `id`, whose slot `slot` the factory linked (or that a
  // re-attaching daemon found held by init `holder`).
  Status attach(const std::string& id, std::uint32_t slot, const net::NetworkPolicy& policy);
  // Checks that init `holder` still holds `slot`, then attach().
  Status reattach(const std::string& id, std::uint32_t slot, pid_t holder,
                  const net::NetworkPolicy& policy);
  // New connections follow `policy` at once; open ones it no longer allows
  // are closed. kNotFound if the sandbox has no network.
  Status update(const std::string& id, const net::NetworkPolicy& policy);
  // Takes the sandbox out of the engine and removes its link if the kernel
  // has not (the sandbox's namespace is gone by then). Returns what is
  // left on the host (empty: nothing).
  std::vector<std::string> detach(const std::string& id, std::optional<std::uint32_t> slot);

  // A token for the gateway, valid until `expires_at_unix`, if sandbox `id`
  // is granted any gateway service now (nullopt otherwise).
  std::optional<std::string> gateway_token(const std::string& id,
                                           std::int64_t expires_at_unix) const;

  // The network of a served sandbox (nullopt: loopback only).
  std::optional<api::NetworkStatus> status(const std::string& id) const;
  bool serves(const std::string& id) const;

 private:
  void on_egress(const net::EgressEvent& e);
  void on_dns(const net::DnsLogEntry& e);
  void on_gateway(const net::GatewayEvent& e);
  void audit(nlohmann::json event) const;
  void count_blocked(std::string_view layer, std::string_view reason);
  void register_metrics();

  DaemonConfig::Network config_;
  std::string secret_path_;
  bool pool_ok_ = false;
  NetworkOptions options_;
  std::vector<net::NetworkTemplate> templates_;
  std::unique_ptr<net::NetworkEngine> engine_;
  std::string unavailable_;
  std::shared_ptr<secrets::TokenSwapper> swapper_;
  std::shared_ptr<net::CertAuthority> ca_;
  MetricsRegistry& metrics_;
  mutable std::mutex audit_mu_;  // guards audit_ (engine threads read it)
  AuditSink audit_;

  mutable std::mutex mu_;
  struct Served {
    std::uint32_t slot = 0;
    net::NetworkPolicy policy;
  };
  std::map<std::string, Served> served_;

 public:
  // The self-check's probes (T3): not counted as blocked requests.
  SelfCheckProbes& self_check_probes() { return probes_; }

 private:
  SelfCheckProbes probes_;
};

}  // namespace corral::daemon
