// The claim of a warm pool's sandbox (C4, docs/adr/0015-warm-pools.md):
// the caller's identity bound to a sandbox that runs already and has never
// run anything of anyone. What is bound here is what a cold create puts in
// the daemon's own per-spawn state (env, workdir, timeout) or its expiry;
// network, mounts and volumes go into the sandbox's namespaces
// (claim_binding.h), and a binding that fails destroys the sandbox.
#include <nlohmann/json.hpp>

#include "base/json_text.h"

#include "daemon/claim_binding.h"
#include "daemon/sandbox_service.h"
#include "daemon/self_check.h"
#include "daemon/sandbox_service_internal.h"

namespace corral::daemon {

using namespace service_internal;
using nlohmann::json;

namespace {

// A claimed sandbox this close to its pool expiry may be in the reaper's
// hands already: it is left to expire, never handed out.
constexpr std::int64_t kClaimMarginMs = 5000;

// The base env of the claim: the sandbox's (the image's, the daemon's and
// the pool spec's variables) without the pool spec's, with the claim's.
std::vector<std::string> bind_env(const std::vector<std::string>& made,
                                  const SandboxSpec& pool_spec, const SandboxSpec& claim) {
  auto named = [](const std::string& entry, const std::string& name) {
    return entry.size() > name.size() && entry[name.size()] == '=' &&
           entry.compare(0, name.size(), name) == 0;
  };
  std::vector<std::string> env;
  for (const std::string& e : made) {
    bool pool_var = false;
    for (const auto& kv : pool_spec.env) pool_var |= named(e, kv.first);
    for (const auto& kv : claim.env) pool_var |= named(e, kv.first);
    if (!pool_var) env.push_back(e);
  }
  for (const auto& [k, v] : claim.env) env.push_back(k + "=" + v);
  return env;
}

}  // namespace

ApiResult<SandboxService::Created> SandboxService::claim_pooled(
    const std::string& id, const api::CreateSandboxRequest& claim, const SandboxSpec& pool_spec,
    const std::string& pool, const std::optional<std::string>& key, const std::string& ns) {
  auto e = entry(id);
  if (!e)
    return api_fail(api::ApiErrorCode::kConflict, "pooled sandbox " + id + " is gone");
  SandboxSpec spec = claim.spec;
  spec.argv.clear();
  const std::int64_t expires = now_ms() + spec.limits.max_lifetime.count();
  {
    std::lock_guard lock(e->mu);
    // Claimable: still the pool's, ready, never used, not being torn down,
    // and not about to expire.
    if (!e->pooled || e->state != SandboxState::kReady || !e->live || e->tearing_down ||
        e->torn || !e->processes.empty() || e->expires_at_ms - now_ms() < kClaimMarginMs)
      return api_fail(api::ApiErrorCode::kConflict, "pooled sandbox " + id + " is not claimable");
    // From here on it is the caller's: it never goes back to a pool.
    e->pooled = false;
    e->env = bind_env(e->env, pool_spec, spec);
    // The image's workdir, as a cold create resolves it, unless the claim
    // names its own.
    if (spec.workdir == pool_spec.workdir) spec.workdir = e->spec.workdir;
    e->spec = spec;
    e->expires_at_ms = expires;
    e->ns = ns;
  }
  // Network, mounts and volumes, into its namespaces (C4): all of it, or
  // the sandbox is destroyed, never handed out, and the create goes cold.
  ClaimBinding binding;
  if (auto st = ClaimBinder(*this, spec, ns).bind(*e, binding); !st) {
    (void)destroy(id, "pool: binding the claim failed: " + st.error().message);
    return api_fail(api::ApiErrorCode::kSetupFailed,
                    "the pooled sandbox could not be given the claim's network or mounts: " +
                        st.error().message);
  }
  if (!binding.proxy_env.empty()) {
    std::lock_guard lock(e->mu);
    ClaimBinder::set_proxy_env(e->env, binding, spec);
  }
  std::optional<std::string_view> row_key;
  if (key) row_key = *key;
  if (auto st = store_.set_claimed(id, api::spec_to_json(spec), expires, row_key); !st) {
    (void)destroy(id, "pool: the claim could not be stored");
    return api_fail(st.error());
  }
  // What a restarted daemon re-attaches with: the claim's env, network
  // slot and namespace.
  if (auto st = store_.set_runtime(
          id, json_text(runtime_json(e->live->identity(), e->env, e->net_slot, nullptr, ns)));
      !st) {
    (void)destroy(id, "pool: the claim's runtime record could not be stored");
    return api_fail(st.error());
  }
  e->live->set_deadline(expires);
  reaper_cv_.notify_all();
  audit_now(json{{"type", "sandbox.claim"},
                 {"sandbox", id},
                 {"pool", pool},
                 {"spec", json::parse(api::spec_to_json(spec))},
                 {"expires_at_ms", expires}});
  // T3: checked again now that the caller's identity is bound, before
  // anything has run in it; a failure destroys it and the pool's claim
  // takes the next one (or falls back to a cold create).
  if (limits_.self_check) {
    SelfCheckReport report = run_self_check(*this, *e, SelfCheckStage::kClaim);
    record_self_check(*this, id, report, SelfCheckStage::kClaim);
    {
      std::lock_guard lock(e->mu);
      e->self_check = report;
    }
    if (!report.ok) {
      (void)destroy(id, "pool: the self-check at claim failed (" + report.failed + ")");
      return api_fail(api::ApiErrorCode::kSelfCheckFailed,
                      "the pooled sandbox failed its self-check at claim: " + report.failed);
    }
  }
  auto record = store_.get(id);
  if (!record) return api_fail(record.error());
  auto info = info_of(*record, e);
  if (!info) return tl::unexpected(info.error());
  return Created{*info, true};
}

}  // namespace corral::daemon
