// What a warm pool's claim binds inside the running sandbox's namespaces
// (C4, docs/adr/0015-warm-pools.md): the caller's network (claim_network.cc)
// and its mounts and volumes (claim_mounts.cc), each as a cold create
// would have made it. Prepared from the request alone before a pooled
// sandbox is taken (a request that cannot be bound, or is wrong, is a
// miss and never costs a pooled sandbox); bound after, with the sandbox's
// own identity (its uid block, its namespaces). A binding that fails
// leaves the sandbox to be destroyed by the claim: never handed out.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "daemon/sandbox_service.h"
#include "jail/mount_source.h"
#include "netns/network_policy.h"

namespace corral::daemon {

struct ClaimBinding {
  // The caller's policy when it lets anything out (nullopt: loopback only,
  // which the pooled sandbox has already).
  std::optional<net::NetworkPolicy> policy;
  // The sources of spec.mounts and then of spec.volumes, opened and
  // checked (confined beneath the mount roots, or the volume's sub-path).
  std::vector<OpenedMount> mounts;
  // Volumes taken as in use by the claimed sandbox (VolumeStore::acquire),
  // released as a create's are (creation_done) when the claim ends.
  std::vector<std::string> acquired_volumes;

  // Set by the network binding: what a cold create's planner puts in the
  // layer and the base env.
  std::string resolv_conf;
  std::vector<std::pair<std::string, std::string>> proxy_env;

  bool binds_anything() const { return policy.has_value() || !mounts.empty(); }
};

class SandboxService::ClaimBinder {
 public:
  ClaimBinder(SandboxService& s, const SandboxSpec& spec, std::string ns)
      : s_(s), spec_(spec), ns_(std::move(ns)) {}

  // Before a sandbox is taken. An empty string: bindable; else the miss's
  // reason ("network", "mounts", "volumes"), and the cold create answers
  // the request (with its error, if it is wrong).
  std::string prepare_network(ClaimBinding& b);
  std::string prepare_mounts(ClaimBinding& b);

  // After: the reserved slot linked and served (claim_network.cc), then
  // the mounts attached and resolv.conf written (claim_mounts.cc).
  Status bind_network(SandboxEntry& e, ClaimBinding& b);
  Status bind_mounts(SandboxEntry& e, ClaimBinding& b);
  // The volumes' creates are over (bound or not).
  void release_volumes(SandboxEntry& e, ClaimBinding& b);

  // All of it (claim_binding.cc): prepared again (the sources opened now
  // are the ones attached), then bound. Any error: the caller destroys
  // the sandbox.
  Status bind(SandboxEntry& e, ClaimBinding& b);
  // The claim's base env gets the proxy variables a cold create's planner
  // sets, unless the claim's own env names them (as the planner orders it).
  static void set_proxy_env(std::vector<std::string>& env, const ClaimBinding& b,
                            const SandboxSpec& claim);

 private:
  SandboxService& s_;
  const SandboxSpec& spec_;
  std::string ns_;
};

}  // namespace corral::daemon
