#include "egress/network_engine.h"

#include <fstream>
#include <sstream>

#include "egress/gateway_token.h"
#include "egress/upstream_resolver.h"

namespace corral::net {

namespace {

// What the proxy asks the DNS server about tcp destinations.
class ServerAnswers : public DnsAnswers {
 public:
  explicit ServerAnswers(DnsServer* server) : server_(server) {}
  bool answered(const std::string& sandbox, const std::string& name,
                const IpAddress& address) override {
    return server_->answered(sandbox, name, address.str());
  }
  std::vector<std::string> names_for(const std::string& sandbox,
                                     const IpAddress& address) override {
    return server_->names_for(sandbox, address.str());
  }

 private:
  DnsServer* server_;
};

std::vector<std::string> host_nameservers() {
  std::ifstream in("/etc/resolv.conf");
  std::stringstream ss;
  ss << in.rdbuf();
  return resolv_conf_nameservers(ss.str());
}

}  // namespace

Result<std::unique_ptr<NetworkEngine>> NetworkEngine::start(NetworkEngineConfig config,
                                                            NetworkAuditSinks sinks) {
  std::unique_ptr<NetworkEngine> e(new NetworkEngine());
  CORRAL_TRY(validate_firewall_config(config.firewall));
  if (config.dns_servers.empty()) config.dns_servers = host_nameservers();
  for (const auto& s : config.dns_servers) {
    if (!parse_dns_endpoint(s))
      return make_error(ErrorCode::kInvalidArgument, "network.dns_servers: \"" + s +
                                                         "\" is not an IP address (with an "
                                                         "optional :port)");
  }
  if (config.install_firewall) {
    // Already there with exactly these rules (another daemon's, a `corral
    // run`'s): left alone, so its counters keep counting. Anything else
    // (missing, damaged, another version) is replaced in one transaction.
    auto present = firewall_installed(config.firewall);
    if (!present || !*present) {
      if (auto st = install_firewall(config.firewall); !st)
        return tl::unexpected(st.error().wrap("installing the network firewall"));
    }
  }
  config.dns.upstreams = config.dns_servers;
  auto dns = DnsServer::start(config.dns, std::move(sinks.dns));
  if (!dns) return tl::unexpected(dns.error().wrap("starting the sandbox DNS server"));
  e->dns_ = std::move(*dns);
  auto resolver = std::make_shared<UpstreamResolver>(config.dns_servers);
  auto answers = std::make_shared<ServerAnswers>(e->dns_.get());
  if (config.gateway_secret.empty()) {
    auto secret = random_gateway_secret();
    if (!secret) return tl::unexpected(secret.error().wrap("making the gateway token secret"));
    config.gateway_secret = std::move(*secret);
  }
  auto gateway = Gateway::create(config.gateway_services, config.gateway_secret, resolver,
                                 std::move(sinks.gateway), config.gateway);
  if (!gateway) return tl::unexpected(gateway.error().wrap("starting the gateway"));
  e->gateway_ = std::move(*gateway);
  config.proxy.gateway = [gw = e->gateway_](const GatewayConnection& c) { gw->serve(c); };
  auto proxy = EgressProxy::start(resolver, answers, std::move(sinks.egress), config.proxy);
  if (!proxy) return tl::unexpected(proxy.error().wrap("starting the egress proxy"));
  e->proxy_ = std::move(*proxy);
  e->config_ = std::move(config);
  return e;
}

NetworkEngine::~NetworkEngine() {
  // The proxy first: its threads may still ask the DNS server.
  proxy_.reset();
  dns_.reset();
}

DnsPolicy NetworkEngine::dns_policy(const std::string& id,
                                    std::shared_ptr<const NetworkPolicy> policy,
                                    const std::string& host_address,
                                    std::shared_ptr<DryRunAddresses> dry_run_addresses) {
  (void)id;
  return [policy, host_address, dry_run_addresses](const DnsQuestionContext& q) {
    DnsVerdict v;
    if (q.name == kGatewayName) {
      if (policy->gateway_services.empty()) {
        v.action = DnsAction::kNxDomain;
        v.reason = "no gateway service granted";
        return v;
      }
      v.action = DnsAction::kResolve;
      v.fixed_ipv4 = host_address;
      v.reason = "the gateway";
      return v;
    }
    Decision d = check_dns_name(*policy, q.name);
    v.action = d.allowed ? DnsAction::kResolve : DnsAction::kNxDomain;
    v.reason = d.rule.empty() ? d.reason : d.reason + ": " + d.rule;
    if (policy->dry_run && d.allowed) {
      // X2: a name a real run would resolve gets a synthetic address of
      // its own, never an upstream query; the proxy maps it back.
      v.fixed_ipv4 = dry_run_addresses->address_for(q.name);
      v.reason = "dry run: answered locally; " + v.reason;
    }
    return v;
  };
}

Status NetworkEngine::add_sandbox(const std::string& id, const std::string& host_address,
                                  const std::string& sandbox_address, const NetworkPolicy& policy) {
  auto shared = std::make_shared<const NetworkPolicy>(policy);
  auto dry = std::make_shared<DryRunAddresses>();
  {
    std::lock_guard lock(mu_);
    if (sandboxes_.count(id) != 0)
      return make_error(ErrorCode::kAlreadyExists, "sandbox " + id + " already has a network");
  }
  auto dns_port = dns_->add_sandbox(id, host_address, config_.firewall.dns_port,
                                    dns_policy(id, shared, host_address, dry), sandbox_address);
  if (!dns_port) return tl::unexpected(dns_port.error().wrap("DNS for sandbox " + id));
  if (auto st = dns_->set_upstreams(id, policy.dns_servers); !st) {
    dns_->remove_sandbox(id);
    return tl::unexpected(st.error().wrap("DNS servers of sandbox " + id));
  }
  auto proxy_port = proxy_->add_sandbox(id, host_address, config_.firewall.proxy_port, shared);
  if (!proxy_port) {
    dns_->remove_sandbox(id);
    return tl::unexpected(proxy_port.error().wrap("proxy for sandbox " + id));
  }
  std::lock_guard lock(mu_);
  sandboxes_[id] = Entry{host_address, shared, dry};
  return ok();
}

Status NetworkEngine::set_policy(const std::string& id, const NetworkPolicy& policy) {
  auto shared = std::make_shared<const NetworkPolicy>(policy);
  std::string host_address;
  std::shared_ptr<DryRunAddresses> dry;
  {
    std::lock_guard lock(mu_);
    auto it = sandboxes_.find(id);
    if (it == sandboxes_.end())
      return make_error(ErrorCode::kNotFound, "sandbox " + id + " has no network");
    host_address = it->second.host_address;
    dry = it->second.dry_run_addresses;
    it->second.policy = shared;
  }
  CORRAL_TRY(dns_->set_upstreams(id, policy.dns_servers));
  CORRAL_TRY(dns_->set_policy(id, dns_policy(id, shared, host_address, dry)));
  return proxy_->set_policy(id, shared);
}

bool NetworkEngine::remove_sandbox(const std::string& id) {
  {
    std::lock_guard lock(mu_);
    if (sandboxes_.erase(id) == 0) return false;
  }
  proxy_->remove_sandbox(id);
  dns_->remove_sandbox(id);
  gateway_->forget(id);
  return true;
}

std::shared_ptr<const NetworkPolicy> NetworkEngine::policy(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  return it == sandboxes_.end() ? nullptr : it->second.policy;
}

Result<FirewallCounters> NetworkEngine::firewall_counters() const {
  return read_firewall_counters(config_.firewall);
}

}  // namespace corral::net
