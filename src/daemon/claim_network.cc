// A claim's network (C4, ADR 0015): a pooled sandbox is made with loopback
// only, in its own network namespace, while its init holds a free address
// slot (NetworkOptions::reserve_slot). A claim that brings a network gives
// it the caller's as a cold create would: the veth pair of that slot with
// its sandbox end moved into the sandbox's namespace and configured there
// (net::setup_sandbox_link, the factory's own step), the engine's DNS,
// proxy and firewall rules for it (NetworkService::attach), and the
// resolv.conf and proxy variables the planner would have written
// (SandboxNetwork). Nothing here is the network's own code: only the order
// in which a running sandbox gets it.
#include <fcntl.h>
#include <unistd.h>

#include "daemon/claim_binding.h"
#include "daemon/sandbox_service_internal.h"
#include "jail/sandbox_network.h"
#include "netns/net_slot.h"
#include "netns/sandbox_link.h"

namespace corral::daemon {

std::string SandboxService::ClaimBinder::prepare_network(ClaimBinding& b) {
  // As a cold create resolves it (Creation::resolve_network): a policy
  // that does not resolve, or no engine to serve one, is a miss, and the
  // cold create says why.
  if (s_.network_ == nullptr) return spec_.network.mode == "none" ? "" : "network";
  auto policy = s_.network_->resolve(spec_.network);
  if (!policy) return "network";
  if (!policy->has_network()) return {};  // loopback only: what it has
  if (s_.network_->unavailable()) return "network";
  b.policy = std::move(*policy);
  return {};
}

Status SandboxService::ClaimBinder::bind_network(SandboxEntry& e, ClaimBinding& b) {
  if (!b.policy) return ok();
  if (!e.reserved_net_slot)
    return make_error(ErrorCode::kUnavailable,
                      "the pooled sandbox holds no address slot (made while the network engine "
                      "was unavailable)");
  const NetworkOptions options = s_.network_->factory_options();
  auto slot = net::NetSlot::at(options.pool, *e.reserved_net_slot);
  if (!slot) return tl::unexpected(std::move(slot).error().wrap("its reserved address slot"));

  // The sandbox's namespace by its init; the pid named init when the fd
  // was opened only if init still runs after.
  const std::string path = "/proc/" + std::to_string(e.live->identity().init_pid) + "/ns/net";
  UniqueFd netns(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!netns) return errno_error("open(" + path + ")");
  if (!e.live->init_alive()) return make_error(ErrorCode::kNotFound, "the sandbox's init has exited");

  CORRAL_TRY(net::setup_sandbox_link(*slot, netns.get()));
  {
    // From here the teardown removes the link and the engine's state.
    std::lock_guard lock(e.mu);
    e.net_slot = *e.reserved_net_slot;
  }
  CORRAL_TRY(s_.network_->attach(e.id, *e.net_slot, *b.policy));

  SandboxNetwork planned;  // what the planner derives from a linked slot
  planned.policy = *b.policy;
  planned.proxy_port = options.proxy_port;
  planned.slot.emplace(std::move(*slot));
  b.resolv_conf = planned.resolv_conf();
  b.proxy_env = planned.proxy_env();
  return ok();
}

}  // namespace corral::daemon
