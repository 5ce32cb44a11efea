// The network part of a sandbox's plan (ADR 0005): the spec's request
// resolved against the templates into a policy and, when that policy lets
// anything out, an address slot, the sandbox's resolv.conf and the proxy
// variables. The creator makes the veth pair between clone and "go"
// (net/sandbox_link.h); the owner (daemon or `corral run`) serves the
// proxy and DNS on the slot's host end.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "jail/stage.h"
#include "netns/net_slot.h"
#include "netns/network_policy.h"
#include "spec/sandbox_spec.h"

namespace corral {

struct NetworkOptions {
  const std::vector<net::NetworkTemplate>* templates = nullptr;  // null: the shipped ones
  net::NetSlotPool pool;
  std::uint16_t proxy_port = 15001;  // on the host end (firewall.h)
  // A warm pool's sandbox (C4, ADR 0015): made without network, but its
  // init holds a free address slot (never linked), so that a claim can
  // give it the caller's network and a restarted daemon finds the slot
  // held by init as for a cold create.
  bool reserve_slot = false;
};

// The spec's fields as the policy resolver takes them; allow_domains (the
// design source's form) become http+tls rules.
net::NetworkRequest network_request(const NetworkSpec& spec);

struct SandboxNetwork {
  net::NetworkPolicy policy;
  std::optional<net::NetSlot> slot;  // only when the policy lets something out
  std::optional<net::NetSlot> reserved;  // reserve_slot without network: held, not linked
  std::uint16_t proxy_port = 0;

  std::string host_address() const;  // "10.211.0.1"
  // The lock init keeps: the linked slot's or the reserved one's (-1: none).
  int slot_lock_fd() const;
  // nameserver <host end>: UDP 53 to anywhere is redirected to corral's
  // DNS anyway; this only saves programs a wrong first guess.
  std::string resolv_conf() const;
  // HTTP_PROXY, HTTPS_PROXY, NO_PROXY and their lower-case forms, for the
  // tools that prefer an explicit proxy; both paths reach one decision.
  std::vector<std::pair<std::string, std::string>> proxy_env() const;
};

// Fails at kNetworkPolicy (the request is wrong: the message says how) or
// kNetworkSlot (no free slot, or the lock directory).
Result<SandboxNetwork> plan_sandbox_network(const NetworkSpec& spec, const NetworkOptions& options,
                                            Stage& failed_stage);

}  // namespace corral
