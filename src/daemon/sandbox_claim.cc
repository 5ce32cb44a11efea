// The claim of a warm pool's sandbox (C4, docs/adr/0015-warm-pools.md):
// the caller's identity bound to a sandbox that runs already and has never
// run anything of anyone. What is bound here is what a cold create puts in
// the daemon's own per-spawn state (env, workdir, timeout, env secrets and
// broker tokens), its expiry, its host name (UTS namespace and layer
// files) and its file secrets (the pooled sandbox's empty secret tmpfs):
// claim_identity.h. Network, mounts and volumes go into the sandbox's
// namespaces (claim_binding.h). A binding that fails destroys the sandbox,
// never half bound, never handed out.
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "daemon/claim_identity.h"
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

// Host name and secrets (claim_identity.h). `e` is popped from its pool and
// still hidden.
ApiResult<void> bind_identity(SandboxService& service, const std::string& id, SandboxEntry& e,
                              const SandboxSpec& spec, const SandboxSpec& pool_spec) {
  SecretService* secrets = service.secret_service();
  // The request's own mistakes answer as at a cold create (400, 503).
  auto resolved = resolve_spec_secrets(secrets, spec);
  if (!resolved) {
    (void)service.destroy(id, "pool: the claim's secrets were refused");
    return tl::unexpected(resolved.error());
  }
  auto failed = [&](const std::string& what, const Error& why) -> ApiResult<void> {
    // The reason is audited: names and paths, never a value.
    (void)service.destroy(id, "pool: binding the claim's " + what + " failed: " + why.message);
    return api_fail(api::ApiErrorCode::kSetupFailed, what + ": " + why.message, "", why.hint);
  };
  if (spec.hostname != pool_spec.hostname) {
    if (auto st = bind_hostname(*e.live, spec.hostname); !st) return failed("hostname", st.error());
  }
  if (*resolved) {
    if (secrets == nullptr)
      return failed("secrets", Error{ErrorCode::kInternal, "no secret service", "", 0});
    if (auto st = secrets->inject(id, *resolved); !st) return failed("secrets", st.error());
  }
  return {};
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
  // Claimable: still the pool's, ready, never used, not being torn down,
  // and not about to expire.
  auto claimable = [&] {
    return e->pooled && e->state == SandboxState::kReady && e->live && !e->tearing_down &&
           !e->torn && e->processes.empty() && e->expires_at_ms - now_ms() >= kClaimMarginMs;
  };
  {
    std::lock_guard lock(e->mu);
    if (!claimable())
      return api_fail(api::ApiErrorCode::kConflict, "pooled sandbox " + id + " is not claimable");
  }
  // Host name and secrets, bound while it is still hidden (pooled: no
  // route reaches it) and popped (no other claim can): nothing runs in it
  // before they are complete. A failure destroys it, never handed out.
  if (auto bound = bind_identity(*this, id, *e, spec, pool_spec); !bound)
    return tl::unexpected(bound.error());
  const std::int64_t expires = now_ms() + spec.limits.max_lifetime.count();
  bool taken = false;
  {
    std::lock_guard lock(e->mu);
    taken = claimable();
    if (taken) {
      // From here on it is the caller's: it never goes back to a pool.
      e->pooled = false;
      e->env = env_with_hostname(bind_env(e->env, pool_spec, spec), spec);
      // The image's workdir, as a cold create resolves it, unless the
      // claim names its own.
      if (spec.workdir == pool_spec.workdir) spec.workdir = e->spec.workdir;
      e->spec = spec;
      e->expires_at_ms = expires;
      e->ns = ns;
    }
  }
  if (!taken) {
    // Torn down meanwhile: what inject issued goes with it.
    if (secrets_ != nullptr) (void)secrets_->remove(id);
    return api_fail(api::ApiErrorCode::kConflict, "pooled sandbox " + id + " is not claimable");
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
  // slot and namespace; and that it is claimed (other nodes of a fleet
  // read it to list it as the caller's, docs/fleet.md "E2B").
  nlohmann::json claimed = runtime_json(e->live->identity(), e->env, e->net_slot, nullptr, ns);
  claimed["claimed"] = true;
  if (auto st = store_.set_runtime(id, json_text(claimed)); !st) {
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
