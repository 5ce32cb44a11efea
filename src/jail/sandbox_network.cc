#include "jail/sandbox_network.h"

#include "jail/stage.h"
#include "netns/ip_address.h"

namespace corral {

net::NetworkRequest network_request(const NetworkSpec& spec) {
  net::NetworkRequest r;
  r.mode = spec.mode;
  r.template_name = spec.template_name;
  r.allow = spec.allow_domains;
  r.allow.insert(r.allow.end(), spec.allow.begin(), spec.allow.end());
  r.deny = spec.deny;
  r.remove = spec.remove;
  r.dns_servers = spec.dns_servers;
  if (spec.timeout_ms > 0) r.request_timeout = std::chrono::milliseconds(spec.timeout_ms);
  if (spec.rate_per_second >= 0 || spec.rate_burst >= 0) {
    net::RateLimit rate;
    rate.per_second = spec.rate_per_second >= 0 ? spec.rate_per_second : 20;
    rate.burst = spec.rate_burst >= 0 ? spec.rate_burst : 2 * rate.per_second;
    r.rate = rate;
  }
  r.gateway = spec.gateway;
  return r;
}

std::string SandboxNetwork::host_address() const {
  return slot ? net::IpAddress::v4(slot->host_address()).str() : std::string();
}

int SandboxNetwork::slot_lock_fd() const {
  if (slot) return slot->lock_fd();
  return reserved ? reserved->lock_fd() : -1;
}

std::string SandboxNetwork::resolv_conf() const {
  return "# corral: answers only the names this sandbox may reach\nnameserver " + host_address() +
         "\noptions ndots:0 attempts:2 timeout:2\n";
}

std::vector<std::pair<std::string, std::string>> SandboxNetwork::proxy_env() const {
  const std::string url = "http://" + host_address() + ":" + std::to_string(proxy_port);
  const std::string no_proxy = "localhost,127.0.0.1,::1";
  return {{"HTTP_PROXY", url}, {"HTTPS_PROXY", url}, {"NO_PROXY", no_proxy},
          {"http_proxy", url}, {"https_proxy", url}, {"no_proxy", no_proxy}};
}

Result<SandboxNetwork> plan_sandbox_network(const NetworkSpec& spec, const NetworkOptions& options,
                                            Stage& failed_stage) {
  failed_stage = Stage::kNetworkPolicy;
  const auto& templates =
      options.templates != nullptr ? *options.templates : net::default_network_templates();
  auto policy = net::resolve_policy(network_request(spec), templates);
  if (!policy) return tl::unexpected(policy.error());
  SandboxNetwork out;
  out.policy = std::move(*policy);
  out.proxy_port = options.proxy_port;
  if (!out.policy.has_network() && !options.reserve_slot)
    return out;  // loopback only, as mode none

  failed_stage = Stage::kNetworkSlot;
  auto slot = net::NetSlot::acquire(options.pool);
  if (!slot) return tl::unexpected(slot.error());
  if (out.policy.has_network())
    out.slot.emplace(std::move(*slot));
  else
    out.reserved.emplace(std::move(*slot));
  return out;
}

}  // namespace corral
