// The order of a claim's binding (C4, ADR 0015; claim_binding.h): network
// first (its resolv.conf goes in with the mounts), then mounts and volumes.
#include "daemon/claim_binding.h"

namespace corral::daemon {

std::string SandboxService::claim_unbindable(const SandboxSpec& spec, const std::string& ns) {
  ClaimBinding b;
  ClaimBinder binder(*this, spec, ns);
  std::string why = binder.prepare_network(b);
  if (why.empty()) why = binder.prepare_mounts(b);
  return why;
}

Status SandboxService::ClaimBinder::bind(SandboxEntry& e, ClaimBinding& b) {
  std::string why = prepare_network(b);
  if (why.empty()) why = prepare_mounts(b);
  if (!why.empty())
    return make_error(ErrorCode::kInvalidArgument,
                      "the claim's " + why + " cannot be bound any more (changed since checked)");
  if (!b.binds_anything()) return ok();
  Status st = bind_network(e, b);
  if (st) st = bind_mounts(e, b);
  release_volumes(e, b);
  return st;
}

void SandboxService::ClaimBinder::set_proxy_env(std::vector<std::string>& env,
                                                const ClaimBinding& b, const SandboxSpec& claim) {
  for (const auto& [k, v] : b.proxy_env) {
    bool named = false;
    for (const auto& kv : claim.env) named |= kv.first == k;
    if (named) continue;  // the claim's own value stands
    const std::string prefix = k + "=";
    bool set = false;
    for (std::string& e : env) {
      if (e.compare(0, prefix.size(), prefix) == 0) {
        e = prefix + v;
        set = true;
      }
    }
    if (!set) env.push_back(prefix + v);
  }
}

}  // namespace corral::daemon
