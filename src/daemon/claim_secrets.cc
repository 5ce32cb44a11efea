// A claim's secrets (C4, S1-S7, ADR 0015). Env secrets and broker tokens
// are per spawn already (SecretService::env by sandbox id), the redactor
// and the broker's registry are keyed by sandbox id: SecretService::inject
// at claim binds them exactly as at a cold create. File secrets need
// /run/secrets, which a cold create binds before the pivot; a pooled
// sandbox gets the same read-only, idmapped bind of an empty tmpfs of its
// own when it is made, and inject fills it at claim (0400, the sandbox
// user's, as at a cold create). No mount is made in a running sandbox.
#include "daemon/claim_identity.h"

namespace corral::daemon {

ApiResult<std::shared_ptr<secrets::ResolvedSecrets>> resolve_spec_secrets(SecretService* service,
                                                                          const SandboxSpec& spec) {
  if (spec.secrets.empty()) return std::shared_ptr<secrets::ResolvedSecrets>();
  if (service == nullptr)
    return api_fail(api::ApiErrorCode::kInvalidValue, "this daemon serves no secrets", "secrets",
                    "create it without secrets");
  auto r = service->prepare(spec);
  if (!r && r.error().code == ErrorCode::kUnavailable)
    return api_fail(api::ApiErrorCode::kUnavailable, r.error().message, "secrets", r.error().hint);
  if (!r)
    return api_fail(api::ApiErrorCode::kInvalidValue, r.error().message, "secrets", r.error().hint);
  return std::move(*r);
}

bool secrets_bindable_at_claim(const SandboxSpec& spec) {
  for (const SecretSpec& s : spec.secrets)
    for (const SecretHostSpec& h : s.hosts)
      if (h.intercept) return false;
  return true;
}

Result<std::vector<MountSpec>> pooled_secret_mounts(SecretService* service, const std::string& id,
                                                    std::vector<std::string>& mount_roots) {
  std::vector<MountSpec> out;
  // Without the read watch file secrets are refused (prepare), and an
  // empty store (loaded once, at start) has none to give: no tmpfs.
  if (service == nullptr || service->unavailable_reason() || service->store().keys().empty())
    return out;
  auto m = service->empty_mount(id);
  if (!m) return tl::unexpected(m.error());
  out.push_back(std::move(*m));
  mount_roots.push_back(service->mounts_root());
  return out;
}

}  // namespace corral::daemon
