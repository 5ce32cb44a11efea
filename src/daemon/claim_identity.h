// The caller's identity bound at a warm pool's claim (C4,
// docs/adr/0015-warm-pools.md): its host name and its secrets, bound into
// the running sandbox as a cold create would have made them (its network,
// mounts and volumes: claim_binding.h). SandboxService::claim_pooled calls
// these while the sandbox is still hidden (pooled), so that nothing can run
// in it before they are done; a failure destroys it (fail closed).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "daemon/api_result.h"
#include "daemon/secret_service.h"
#include "runtime/live_sandbox.h"
#include "secrets/secret_spec.h"
#include "spec/sandbox_spec.h"

namespace corral::daemon {

// --- host name (claim_hostname.cc) ---

// Sets the host name of `live`'s UTS namespace (from a short-lived thread
// of our own that joins it) and rewrites /etc/hostname and /etc/hosts in
// its writable layer through the layer's root fd, never following a
// symlink, with the owner and mode the planner gave them.
Status bind_hostname(const LiveSandbox& live, const std::string& hostname);

// `env` with HOSTNAME=`hostname`, unless the claim's own env sets HOSTNAME
// (it wins at a cold create too).
std::vector<std::string> env_with_hostname(std::vector<std::string> env, const SandboxSpec& claim);

// --- secrets (claim_secrets.cc) ---

// A spec's secrets resolved against the store, with the answers a cold
// create gives (400 names the entry, 503 when the daemon cannot serve
// them; never a value). Null for a spec without secrets.
ApiResult<std::shared_ptr<secrets::ResolvedSecrets>> resolve_spec_secrets(SecretService* service,
                                                                          const SandboxSpec& spec);

// Whether a spec's secrets can be bound to a running pooled sandbox: not
// when one intercepts TLS (its CA bundle is bound over the system's at
// create), the one piece of a secret that needs a mount of its own.
bool secrets_bindable_at_claim(const SandboxSpec& spec);

// For a pooled sandbox being made: the empty tmpfs that a claim with
// file-mode secrets fills (bound read-only at /run/secrets like a cold
// create's). Empty when the daemon serves no file secrets.
Result<std::vector<MountSpec>> pooled_secret_mounts(SecretService* service, const std::string& id,
                                                    std::vector<std::string>& mount_roots);

}  // namespace corral::daemon
