// SecretService: the daemon's side of secrets (issue 5, S1-S7; user guide
// docs/secrets.md). It owns the store (loaded once at start), the broker
// (tokens, swapped by the egress proxy and the gateway), the watch that
// audits reads of secret files, and each live sandbox's injected secrets:
//
//   prepare()  a create's `secrets`, checked against the store and the
//              rules before anything is reserved (400 names the entry);
//   mount()    file-mode secrets: the sandbox's tmpfs, made before the
//              factory runs so init can bind it at /run/secrets;
//   inject()   once the sandbox exists (its users are known): files
//              written (0400, its user), reads watched, tokens issued;
//   env()      the variables every process of the sandbox gets (env-mode
//              values, broker tokens); never stored, never audited;
//   remove()   at destroy: tokens revoked, the watch stopped, the files
//              overwritten and unmounted; what is left is residue.
//   limit_token_lifetime(), revoke_tokens()
//              a task's bounds on its sandbox's broker tokens (issue 15,
//              S4): a deadline, and revocation before the sandbox ends;
//              both kept across a daemon restart (token_limits.h).
//
// Nothing here writes a value anywhere but into a sandbox: audit records
// carry names, modes and token hashes.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "daemon/metrics.h"
#include "daemon/token_limits.h"
#include "secrets/audit_redactor.h"
#include "secrets/broker.h"
#include "secrets/redactor.h"
#include "secrets/secret_mount.h"
#include "secrets/secret_read_watch.h"
#include "secrets/secret_spec.h"
#include "secrets/secret_store.h"
#include "spec/sandbox_spec.h"

namespace corral::daemon {

class SecretService {
 public:
  using AuditSink = std::function<void(nlohmann::json)>;

  // `data_dir`: sandboxes' secret mounts go under <data_dir>/secrets.
  SecretService(secrets::SecretStoreConfig config, std::string data_dir, MetricsRegistry& metrics);
  ~SecretService();

  // Loads the store and starts the read watch. A store that cannot be read
  // is the operator's to fix: the daemon does not start. A kernel without
  // fanotify leaves file-mode secrets refused (unavailable_reason()).
  Status start();
  void set_audit(AuditSink sink);

  // The token swapper for the egress proxy and the gateway.
  std::shared_ptr<secrets::SecretBroker> broker() const { return broker_; }
  const secrets::SecretStore& store() const { return store_; }

  // The secrets a spec asks for, resolved. kInvalidArgument says what to
  // fix (never a value); kUnavailable when this daemon cannot give them.
  Result<std::shared_ptr<secrets::ResolvedSecrets>> prepare(const SandboxSpec& spec) const;

  // The mounts to add to the factory's spec: for file-mode secrets the
  // sandbox's (new, empty) tmpfs at /run/secrets; for broker secrets with
  // intercepted hosts the trust bundle (the system's CAs and corral's) over
  // the system bundle. Empty when it needs neither.
  Result<std::vector<MountSpec>> mounts(const std::string& id,
                                        const secrets::ResolvedSecrets& resolved);
  // File-mode secrets' empty tmpfs alone, for a warm pool's sandbox: a
  // claim's inject() fills it (docs/adr/0015-warm-pools.md).
  Result<MountSpec> empty_mount(const std::string& id);
  // The directories those mounts come from (mount roots for the factory).
  std::string mounts_root() const { return data_dir_ + "/secrets"; }
  std::string trust_root() const { return data_dir_ + "/trust"; }

  // TLS interception's CA (net/cert_authority.h): its certificate is added
  // to the system bundle as <data_dir>/trust/ca-bundle.pem. Without it,
  // intercepted hosts are refused at create.
  Status set_trust(const std::string& ca_pem);

  // Writes the files, watches their reads and issues broker tokens.
  // Audited per secret. The files are host root's, like the mount's
  // directory: the bind mount is idmapped (jail/idmap_userns.h), so inside
  // they belong to the sandbox's user, and 0400 makes them its alone.
  Status inject(const std::string& id, std::shared_ptr<secrets::ResolvedSecrets> resolved);

  // After a daemon restart: the stored spec's secrets resolved again, the
  // existing tmpfs adopted (its files are still there) and watched, new
  // broker tokens issued (the old daemon's died with it). An error: the
  // sandbox cannot get its secrets back and is destroyed.
  Status reattach(const std::string& id, const SandboxSpec& spec);

  // "NAME=value" for each env-mode secret and broker token of the sandbox.
  // The caller wipes the strings once they are sent.
  std::vector<std::string> env(const std::string& id) const;

  // What leaves the sandbox is redacted with this (S3): its secrets' values
  // and encoded forms, its tokens, and the known key formats. A sandbox
  // without secrets gets the key formats alone.
  std::shared_ptr<const secrets::RedactionSet> redaction(const std::string& id) const;
  // The device (st_dev) of the sandbox's secret tmpfs, if it has file
  // secrets: the file API refuses everything on it. An error when the
  // mount exists but cannot be looked at (the caller then serves nothing).
  Result<std::vector<dev_t>> secret_devices(const std::string& id) const;
  // Every value of the store, and the key formats: for the daemon's own
  // output and the audit log.
  std::shared_ptr<const secrets::RedactionSet> daemon_redaction() const { return all_; }
  // The audit log's: the store's redactor, blind to letter case, and every
  // broker token by its shape (secrets/audit_redactor.h).
  std::shared_ptr<const secrets::AuditRedactor> audit_redactor() const { return audit_redactor_; }

  // Where the bundle is inside a sandbox; SSL_CERT_FILE, REQUESTS_CA_BUNDLE
  // and NODE_EXTRA_CA_CERTS name it.
  static constexpr const char* kSandboxBundle = "/etc/ssl/certs/ca-certificates.crt";

  // Revokes, unwatches and wipes; returns what could not be removed. Also
  // for a sandbox the daemon never adopted (reconcile, a failed create):
  // its mount is found by its id. Nothing to do is no error.
  std::vector<std::string> remove(const std::string& id);

  // Caps the expiry of sandbox `id`'s broker tokens at `deadline` (a
  // task: its start + 1.5 x its timeout). Never lengthens a token's life:
  // a secret's own shorter `ttl`, or an earlier deadline, stays. Tokens
  // past it are expired at once. Kept across a daemon restart. Returns how
  // many tokens were shortened; 0 for a sandbox without broker secrets.
  Result<std::size_t> limit_token_lifetime(const std::string& id,
                                           std::chrono::system_clock::time_point deadline);
  // Revokes every broker token of sandbox `id` now, while the sandbox may
  // live on (a task ended with keep_sandbox); they stay revoked after a
  // daemon restart. Idempotent: returns how many were active (0 the second
  // time). Env and file secrets are in the sandbox already: untouched.
  Result<std::size_t> revoke_tokens(const std::string& id);

  // What the self-check (daemon/self_check.h, T3) looks at, per secret of
  // sandbox `id`, in the spec's order: never a value. `held`: env mode, a
  // non-empty value is set for its variable; broker mode, its variable
  // holds a token the broker issued to this sandbox for this secret, active
  // or ended by its TTL (SecretBroker::issued_to); file
  // mode, always true (the file itself is checked through the sandbox's
  // root). Empty when the sandbox was not injected.
  struct SecretPresence {
    std::string name;
    secrets::SecretMode mode = secrets::SecretMode::kFile;
    std::string path;  // file mode: "/run/secrets/<file>"
    bool held = false;
  };
  std::vector<SecretPresence> presence(const std::string& id) const;

  // Why file-mode secrets cannot be served, if they cannot.
  std::optional<std::string> unavailable_reason() const;

 private:
  struct Injected {
    std::shared_ptr<secrets::ResolvedSecrets> resolved;
    std::optional<secrets::SecretMount> mount;
    std::vector<std::pair<std::string, secrets::SecretValue>> env;  // name, value or token
    std::shared_ptr<const secrets::RedactionSet> redaction;
  };
  // Whether sandbox `id` was injected with a broker secret.
  bool has_broker_secrets(const std::string& id) const;
  // Applies what limit_token_lifetime / revoke_tokens stored (reattach).
  Status apply_stored_limit(const std::string& id);
  // The sandbox's set: values of `resolved` and the tokens in `in.env`.
  Status build_redaction(Injected& in) const;
  void audit(nlohmann::json event) const;
  // The name of the secret behind file `file` of sandbox `id`.
  std::string secret_of_file(const std::string& id, const std::string& file) const;
  std::string mount_dir(const std::string& id) const { return mounts_root() + "/" + id; }

  secrets::SecretStoreConfig config_;
  std::string data_dir_;
  MetricsRegistry& metrics_;
  secrets::SecretStore store_;
  std::shared_ptr<secrets::SecretBroker> broker_;
  std::unique_ptr<secrets::SecretReadWatch> watch_;
  std::shared_ptr<const secrets::RedactionSet> formats_only_;  // no secrets: key formats
  std::shared_ptr<const secrets::RedactionSet> all_;           // the whole store
  std::shared_ptr<const secrets::AuditRedactor> audit_redactor_;
  std::string watch_error_;
  bool trust_ready_ = false;
  TokenLimits limits_{data_dir_ + "/token-limits"};
  std::mutex limits_mu_;  // one read-modify-write of a limit at a time; a leaf

  // The audit sink, shared with the broker's callback: the proxy may call
  // the broker after this service is gone (the network engine ends later),
  // and then finds the sink cleared.
  struct AuditState {
    std::mutex mu;
    AuditSink sink;
  };
  std::shared_ptr<AuditState> audit_state_ = std::make_shared<AuditState>();

  mutable std::mutex mu_;  // guards what follows
  std::map<std::string, Injected> sandboxes_;
  std::map<std::string, std::optional<secrets::SecretMount>>
      pending_mounts_;  // mount() .. inject()
};

}  // namespace corral::daemon
