#include "daemon/network_service.h"

#include <chrono>

#include "egress/dns_message.h"
#include "egress/gateway_token.h"
#include "netns/ip_address.h"
#include "netns/net_slot.h"
#include "netns/sandbox_link.h"

namespace corral::daemon {

using nlohmann::json;

namespace {

// The shipped templates, with the config's on top (same name and version:
// the config's wins).
std::vector<net::NetworkTemplate> merged_templates(const std::vector<net::NetworkTemplate>& own) {
  std::vector<net::NetworkTemplate> out = net::default_network_templates();
  for (const auto& t : own) {
    bool replaced = false;
    for (auto& o : out) {
      if (o.name == t.name && o.version == t.version) {
        o = t;
        replaced = true;
      }
    }
    if (!replaced) out.push_back(t);
  }
  return out;
}

}  // namespace

NetworkService::NetworkService(const DaemonConfig::Network& config, std::string secret_path,
                               MetricsRegistry& metrics)
    : config_(config),
      secret_path_(std::move(secret_path)),
      templates_(merged_templates(config.templates)),
      metrics_(metrics) {
  options_.templates = &templates_;
  options_.proxy_port = config.proxy_port;
  auto pool = net::NetSlotPool::make(config.subnet, config.interface_prefix);
  if (!pool) {
    unavailable_ = "serve.network: " + pool.error().message;
    return;
  }
  options_.pool = std::move(*pool);
  pool_ok_ = true;
}

void NetworkService::start() {
  if (!pool_ok_) return;
  const DaemonConfig::Network& config = config_;
  net::NetworkEngineConfig engine;
  engine.firewall.table = config.firewall_table;
  engine.firewall.iface_prefix = config.interface_prefix;
  engine.firewall.proxy_port = config.proxy_port;
  engine.firewall.dns_port = config.dns_port;
  engine.dns_servers = config.dns_servers;
  engine.gateway_services = config.gateway;
  auto secret = net::load_or_create_gateway_secret(secret_path_);
  if (!secret) {
    unavailable_ = "the gateway token key: " + secret.error().message;
    return;
  }
  engine.gateway_secret = std::move(*secret);
  engine.proxy.swapper = swapper_;
  engine.proxy.ca = ca_;
  engine.proxy.upstream_ca_file = config.upstream_ca_file;
  engine.gateway.swapper = swapper_;
  engine.gateway.ca_file = config.upstream_ca_file;
  net::NetworkAuditSinks sinks;
  sinks.egress = [this](const net::EgressEvent& e) { on_egress(e); };
  sinks.dns = [this](const net::DnsLogEntry& e) { on_dns(e); };
  sinks.gateway = [this](const net::GatewayEvent& e) { on_gateway(e); };
  auto started = net::NetworkEngine::start(std::move(engine), std::move(sinks));
  if (!started) {
    unavailable_ = started.error().message;
    if (!started.error().hint.empty()) unavailable_ += " (" + started.error().hint + ")";
    return;
  }
  engine_ = std::move(*started);
  register_metrics();
}

NetworkService::~NetworkService() {
  // Sandboxes keep running for the next daemon; only the listeners go.
  engine_.reset();
}

NetworkOptions NetworkService::factory_options() const { return options_; }

Result<net::NetworkPolicy> NetworkService::resolve(const NetworkSpec& spec) const {
  auto policy = net::resolve_policy(network_request(spec), templates_);
  if (!policy) return policy;
  for (const auto& name : policy->gateway_services) {
    bool known = false;
    std::string names;
    for (const auto& s : config_.gateway) {
      known |= s.name == name;
      names += (names.empty() ? "" : ", ") + s.name;
    }
    if (!known)
      return make_error(ErrorCode::kInvalidArgument,
                        "no gateway service \"" + name + "\" in this daemon",
                        names.empty() ? "this daemon declares no gateway services "
                                        "(serve.network.gateway)"
                                      : "the daemon declares: " + names);
  }
  return policy;
}

std::optional<std::string> NetworkService::gateway_token(const std::string& id,
                                                         std::int64_t expires_at_unix) const {
  if (!engine_) return std::nullopt;
  {
    std::lock_guard lock(mu_);
    auto it = served_.find(id);
    if (it == served_.end() || it->second.policy.gateway_services.empty()) return std::nullopt;
  }
  return engine_->gateway_token(id, expires_at_unix);
}

std::optional<std::string> NetworkService::unavailable() const {
  if (engine_) return std::nullopt;
  return unavailable_;
}

Status NetworkService::attach(const std::string& id, std::uint32_t slot_index,
                              const net::NetworkPolicy& policy) {
  if (!engine_)
    return make_error(ErrorCode::kUnavailable,
                      "the network engine is not running: " + unavailable_);
  auto slot = net::NetSlot::at(options_.pool, slot_index);
  if (!slot) return tl::unexpected(slot.error());
  CORRAL_TRY(engine_->add_sandbox(id, net::IpAddress::v4(slot->host_address()).str(),
                                  net::IpAddress::v4(slot->sandbox_address()).str(), policy));
  std::lock_guard lock(mu_);
  served_[id] = Served{slot_index, policy};
  return ok();
}

Status NetworkService::reattach(const std::string& id, std::uint32_t slot_index, pid_t holder,
                                const net::NetworkPolicy& policy) {
  auto slot = net::NetSlot::reattach(options_.pool, slot_index, holder);
  if (!slot) return tl::unexpected(slot.error());
  auto present = net::sandbox_link_present(*slot);
  if (!present) return tl::unexpected(present.error());
  if (!*present)
    return make_error(ErrorCode::kNotFound,
                      "the link " + slot->host_ifname() + " of the sandbox is gone");
  return attach(id, slot_index, policy);
}

Status NetworkService::update(const std::string& id, const net::NetworkPolicy& policy) {
  if (!engine_)
    return make_error(ErrorCode::kUnavailable,
                      "the network engine is not running: " + unavailable_);
  CORRAL_TRY(engine_->set_policy(id, policy));
  std::lock_guard lock(mu_);
  if (auto it = served_.find(id); it != served_.end()) it->second.policy = policy;
  return ok();
}

std::vector<std::string> NetworkService::detach(const std::string& id,
                                                std::optional<std::uint32_t> slot_index) {
  std::vector<std::string> residue;
  if (engine_) engine_->remove_sandbox(id);
  {
    std::lock_guard lock(mu_);
    if (auto it = served_.find(id); it != served_.end()) {
      if (!slot_index) slot_index = it->second.slot;
      served_.erase(it);
    }
  }
  if (!slot_index) return residue;
  auto slot = net::NetSlot::at(options_.pool, *slot_index);
  if (!slot) {
    residue.push_back("network slot " + std::to_string(*slot_index) + ": " + slot.error().message);
    return residue;
  }
  // The sandbox's namespace is gone, and with it the pair, unless a
  // process still holds the namespace: delete the host end then.
  if (auto st = net::teardown_sandbox_link(*slot); !st)
    residue.push_back("link " + slot->host_ifname() + ": " + st.error().message);
  return residue;
}

std::optional<api::NetworkStatus> NetworkService::status(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = served_.find(id);
  if (it == served_.end()) return std::nullopt;
  api::NetworkStatus s;
  if (auto slot = net::NetSlot::at(options_.pool, it->second.slot)) {
    s.address = net::IpAddress::v4(slot->sandbox_address()).str();
    s.host_address = net::IpAddress::v4(slot->host_address()).str();
  }
  const net::NetworkPolicy& p = it->second.policy;
  s.mode = net::network_mode_name(p.mode);
  s.template_name = p.template_name;
  for (const auto& r : p.rules) (r.deny ? s.deny : s.allow).push_back(r.text);
  s.gateway = p.gateway_services;
  return s;
}

bool NetworkService::serves(const std::string& id) const {
  std::lock_guard lock(mu_);
  return served_.count(id) != 0;
}

void NetworkService::set_audit(AuditSink sink) {
  std::lock_guard lock(audit_mu_);
  audit_ = std::move(sink);
}

void NetworkService::audit(json event) const {
  std::lock_guard lock(audit_mu_);
  if (audit_) audit_(std::move(event));
}

// One counter for every refusal, whichever layer made it (/metrics).
void NetworkService::count_blocked(std::string_view layer, std::string_view reason) {
  metrics_
      .counter("corral_network_blocked_total",
               "Connections and queries refused, by layer and reason",
               {{"layer", std::string(layer)}, {"reason", std::string(reason)}})
      .inc();
}

void NetworkService::on_egress(const net::EgressEvent& e) {
  // The self-check's connection sends nothing and has no name.
  const bool probe = e.name.empty() && probes_.take(e.sandbox, "proxy", "");
  if (!e.allowed && !probe) count_blocked("proxy", net::egress_refusal_name(e.refusal));
  json ev{{"type", "network.connection"},
          {"sandbox", e.sandbox},
          {"decision", e.allowed ? "allow" : "deny"},
          {"name", e.name},
          {"port", e.port},
          {"protocol", e.protocol},
          {"rule", e.rule},
          {"reason", e.reason},
          {"bytes_up", e.bytes_up},
          {"bytes_down", e.bytes_down},
          {"duration_ms", e.duration_ms},
          {"explicit_proxy", e.explicit_proxy}};
  if (!e.sni.empty()) ev["sni"] = e.sni;
  if (!e.host.empty()) ev["host"] = e.host;
  if (!e.connect_host.empty()) ev["connect_host"] = e.connect_host;
  if (!e.original_address.empty()) ev["original_address"] = e.original_address;
  if (!e.address.empty()) ev["address"] = e.address;
  if (!e.allowed) ev["refusal"] = std::string(net::egress_refusal_name(e.refusal));
  if (!e.end.empty()) ev["end"] = e.end;
  if (probe) ev["self_check"] = true;
  // Set only in a dry run (X2): a path can carry a token.
  if (!e.method.empty()) ev["method"] = e.method;
  if (!e.path.empty()) ev["path"] = e.path;
  audit(std::move(ev));
}

void NetworkService::on_dns(const net::DnsLogEntry& e) {
  const bool blocked = e.outcome == net::DnsOutcome::kDenied ||
                       e.outcome == net::DnsOutcome::kRefused ||
                       e.outcome == net::DnsOutcome::kTypeRefused;
  const bool probe = probes_.take(e.sandbox_id, "dns", e.name);
  if (blocked && !probe) count_blocked("dns", net::dns_outcome_name(e.outcome));
  json ev{{"type", "network.dns"},
          {"sandbox", e.sandbox_id},
          {"name", e.name},
          {"qtype", net::dns::type_name(e.qtype)},
          {"outcome", std::string(net::dns_outcome_name(e.outcome))},
          {"decision", blocked ? "deny" : "allow"},
          {"reason", e.reason},
          {"addresses", e.addresses},
          {"cached", e.cached},
          {"latency_us", e.latency.count()}};
  if (!e.upstream_error.empty()) ev["upstream_error"] = e.upstream_error;
  if (probe) ev["self_check"] = true;
  audit(std::move(ev));
}

void NetworkService::on_gateway(const net::GatewayEvent& e) {
  if (!e.allowed) count_blocked("gateway", net::gateway_refusal_name(e.refusal));
  audit(json{{"type", "network.gateway"},
             {"sandbox", e.sandbox},
             {"service", e.service},
             {"method", e.method},
             {"path", e.path},
             {"status", e.status},
             {"decision", e.allowed ? "allow" : "deny"},
             {"reason", e.reason},
             {"upstream", e.upstream},
             {"bytes_up", e.bytes_up},
             {"bytes_down", e.bytes_down},
             {"duration_ms", e.duration_ms}});
}

void NetworkService::register_metrics() {
  net::NetworkEngine* engine = engine_.get();
  metrics_.counter_fn("corral_network_connections_total",
                      "TCP connections from sandboxes that reached the egress proxy", [engine] {
                        return static_cast<double>(engine->egress_metrics().connections);
                      });
  metrics_.counter_fn("corral_network_bytes_total", "Bytes relayed by the egress proxy",
                      [engine] { return static_cast<double>(engine->egress_metrics().bytes_up); },
                      {{"direction", "up"}});
  metrics_.counter_fn("corral_network_bytes_total", "Bytes relayed by the egress proxy",
                      [engine] { return static_cast<double>(engine->egress_metrics().bytes_down); },
                      {{"direction", "down"}});
  metrics_.gauge_fn("corral_network_connections_open", "Relayed connections open now",
                    [engine] { return static_cast<double>(engine->egress_metrics().active); });
  metrics_.gauge_fn("corral_network_sandboxes", "Sandboxes served by the network engine", [this] {
    std::lock_guard lock(mu_);
    return static_cast<double>(served_.size());
  });
  // The firewall's drop counters live in the kernel; one `nft` run per
  // scrape at most, shared by the series.
  struct Cache {
    std::mutex mu;
    std::chrono::steady_clock::time_point at;
    net::FirewallCounters counters;
  };
  auto cache = std::make_shared<Cache>();
  for (const auto& info : net::kFirewallCounters) {
    if (!info.name.starts_with("drop_")) continue;
    const std::string name(info.name);
    metrics_.counter_fn(
        "corral_network_firewall_dropped_packets_total",
        "Packets from sandboxes dropped by the firewall, by counter (docs/network.md)",
        [engine, cache, name] {
          std::lock_guard lock(cache->mu);
          auto now = std::chrono::steady_clock::now();
          if (now - cache->at > std::chrono::seconds(1)) {
            if (auto c = engine->firewall_counters()) cache->counters = std::move(*c);
            cache->at = now;
          }
          return static_cast<double>(cache->counters.get(name).packets);
        },
        {{"counter", name}});
  }
}

}  // namespace corral::daemon
