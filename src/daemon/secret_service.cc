#include "daemon/secret_service.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <utility>

#include "jail/fs_util.h"

namespace corral::daemon {

using nlohmann::json;
namespace sec = corral::secrets;

namespace {

std::string index_field(std::size_t i, const char* field) {
  return "secrets[" + std::to_string(i) + "]." + field;
}

// The API's plain fields as the secrets layer's request; a word it does
// not know is the request's error.
Result<sec::SecretRequest> to_request(const SecretSpec& s, std::size_t i) {
  sec::SecretRequest r;
  r.name = s.name;
  r.key = s.key.empty() ? s.name : s.key;
  if (!s.mode.empty()) {
    auto mode = sec::parse_secret_mode(s.mode);
    if (!mode)
      return make_error(ErrorCode::kInvalidArgument,
                        index_field(i, "mode") + ": " + mode.error().message, mode.error().hint);
    r.mode = *mode;
  }
  if (!s.tier.empty()) {
    auto tier = sec::parse_secret_tier(s.tier);
    if (!tier)
      return make_error(ErrorCode::kInvalidArgument,
                        index_field(i, "tier") + ": " + tier.error().message, tier.error().hint);
    r.tier = *tier;
  }
  r.env_var = s.env_var;
  r.path = s.path;
  for (const auto& h : s.hosts) r.hosts.push_back({h.host, h.port, h.intercept});
  if (s.ttl_ms > 0) r.ttl = std::chrono::seconds((s.ttl_ms + 999) / 1000);
  return r;
}

bool intercepts_any(const sec::ResolvedSecrets& resolved) {
  for (const auto& s : resolved.secrets)
    for (const auto& h : s.hosts)
      if (s.mode == sec::SecretMode::kBroker && h.intercept) return true;
  return false;
}

}  // namespace

SecretService::SecretService(sec::SecretStoreConfig config, std::string data_dir,
                             MetricsRegistry& metrics)
    : config_(std::move(config)), data_dir_(std::move(data_dir)), metrics_(metrics) {}

SecretService::~SecretService() {
  watch_.reset();
  set_audit({});  // the broker may outlive this service (see AuditState)
}

Status SecretService::start() {
  auto store = sec::SecretStore::load(config_);
  if (!store) return tl::unexpected(store.error().wrap("loading the secret store (serve.secrets)"));
  store_ = std::move(*store);
  auto formats = sec::RedactionSet::build({});
  if (!formats) return tl::unexpected(formats.error().wrap("building the redactor"));
  formats_only_ = std::move(*formats);
  std::vector<sec::NamedValue> every;
  for (const auto& key : store_.keys()) every.push_back({key, store_.find(key)->view()});
  auto all = sec::RedactionSet::build(every);
  if (!all) return tl::unexpected(all.error().wrap("building the redactor for the secret store"));
  all_ = std::move(*all);
  auto audit_redactor = sec::AuditRedactor::build(all_, every);
  if (!audit_redactor) return tl::unexpected(audit_redactor.error());
  audit_redactor_ = std::move(*audit_redactor);
  // Captures no `this`: see AuditState.
  broker_ = std::make_shared<sec::SecretBroker>(
      [state = audit_state_, metrics = &metrics_](const sec::BrokerEvent& ev) {
        json j{{"type", "secret." + ev.kind},
               {"sandbox", ev.sandbox},
               {"secret", ev.secret},
               {"mode", "broker"}};
        if (!ev.host.empty()) j["host"] = ev.host;
        if (!ev.via.empty()) j["via"] = ev.via;
        if (!ev.reason.empty()) j["reason"] = ev.reason;
        if (!ev.token_hash.empty()) j["token_hash"] = ev.token_hash;
        j["outcome"] = ev.kind == "refused" ? "refused" : "ok";
        // A token sent where its secret may not go, or by another
        // sandbox: what a prompt-injected agent would try.
        if (ev.kind == "refused" &&
            (ev.reason == sec::kReasonHost || ev.reason == sec::kReasonOtherSandbox))
          j["exfiltration_attempt"] = true;
        if (ev.kind == "refused")
          metrics
              ->counter("corral_secret_refusals_total", "Secret uses refused (token, host, tier)",
                        {{"reason", ev.reason}})
              .inc();
        if (ev.kind == "swapped" || ev.kind == "read")
          metrics
              ->counter("corral_secret_reads_total", "Secret values used or read",
                        {{"mode", ev.kind == "read" ? "runtime" : "broker"}})
              .inc();
        std::lock_guard lock(state->mu);
        if (state->sink) state->sink(std::move(j));
      });
  if (auto st = mkdir_p(mounts_root(), 0700); !st)
    return tl::unexpected(st.error().wrap("creating " + mounts_root()));
  if (auto st = limits_.open(); !st)
    return tl::unexpected(st.error().wrap("creating " + limits_.dir()));
  auto watch = sec::SecretReadWatch::start([this](const sec::SecretRead& r) {
    metrics_.counter("corral_secret_reads_total", "Secret values used or read", {{"mode", "file"}})
        .inc();
    audit(json{{"type", "secret.read"},
               {"sandbox", r.sandbox},
               {"secret", secret_of_file(r.sandbox, r.file)},
               {"path", std::string(sec::kSecretsDir) + "/" + r.file},
               {"mode", "file"},
               {"pid", r.pid},
               {"outcome", "ok"}});
  });
  if (watch)
    watch_ = std::move(*watch);
  else
    watch_error_ = watch.error().message;
  return ok();
}

void SecretService::set_audit(AuditSink sink) {
  std::lock_guard lock(audit_state_->mu);
  audit_state_->sink = std::move(sink);
}

void SecretService::audit(json event) const {
  std::lock_guard lock(audit_state_->mu);
  if (audit_state_->sink) audit_state_->sink(std::move(event));
}

std::string SecretService::secret_of_file(const std::string& id, const std::string& file) const {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  if (it != sandboxes_.end() && it->second.resolved) {
    for (const auto& s : it->second.resolved->secrets)
      if (s.mode == sec::SecretMode::kFile && s.path.substr(s.path.rfind('/') + 1) == file)
        return s.name;
  }
  return file;
}

std::optional<std::string> SecretService::unavailable_reason() const {
  if (watch_) return std::nullopt;
  return "secret files cannot be audited: " + watch_error_;
}

Result<std::shared_ptr<sec::ResolvedSecrets>> SecretService::prepare(
    const SandboxSpec& spec) const {
  auto resolved = std::make_shared<sec::ResolvedSecrets>();
  if (spec.secrets.empty()) return resolved;
  std::vector<sec::SecretRequest> requests;
  for (std::size_t i = 0; i < spec.secrets.size(); ++i) {
    auto r = to_request(spec.secrets[i], i);
    if (!r) return tl::unexpected(r.error());
    requests.push_back(std::move(*r));
  }
  sec::ResolveContext ctx;
  ctx.lifetime = std::chrono::duration_cast<std::chrono::seconds>(spec.limits.max_lifetime);
  if (ctx.lifetime.count() <= 0) ctx.lifetime = std::chrono::seconds(1);
  if (spec.expected_duration_ms > 0)
    ctx.expected_duration = std::chrono::seconds((spec.expected_duration_ms + 999) / 1000);
  auto out = sec::resolve_secret_requests(requests, store_, ctx);
  if (!out) return tl::unexpected(out.error());
  *resolved = std::move(*out);
  if (intercepts_any(*resolved) && !trust_ready_)
    return make_error(ErrorCode::kUnavailable,
                      "this daemon has no CA for TLS interception, so hosts marked intercept "
                      "cannot be served",
                      "see the daemon's start-up log; or use the gateway for this service");
  for (const auto& s : resolved->secrets) {
    if (s.mode == sec::SecretMode::kFile && !watch_)
      return make_error(ErrorCode::kUnavailable,
                        "secret \"" + s.name + "\" is a file, but " + *unavailable_reason(),
                        "use mode env or broker, or run the daemon on a kernel with fanotify");
  }
  return resolved;
}

Status SecretService::set_trust(const std::string& ca_pem) {
  // The host's bundle, then corral's CA: what tools inside trust by
  // default, so TLS to an intercepted host verifies.
  std::string bundle;
  if (std::FILE* f = std::fopen("/etc/ssl/certs/ca-certificates.crt", "rb")) {
    char buf[65536];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bundle.append(buf, n);
    std::fclose(f);
  }
  if (!bundle.empty() && bundle.back() != '\n') bundle.push_back('\n');
  bundle += ca_pem;
  CORRAL_TRY(mkdir_p(trust_root(), 0755));
  ::chmod(trust_root().c_str(), 0755);
  const std::string path = trust_root() + "/ca-bundle.pem";
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return errno_error("writing " + tmp);
  bool written = std::fwrite(bundle.data(), 1, bundle.size(), f) == bundle.size();
  written &= std::fclose(f) == 0;
  if (!written || ::chmod(tmp.c_str(), 0644) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0)
    return errno_error("writing " + path);
  trust_ready_ = true;
  return ok();
}

Result<std::vector<MountSpec>> SecretService::mounts(const std::string& id,
                                                     const sec::ResolvedSecrets& resolved) {
  std::vector<MountSpec> out;
  if (intercepts_any(resolved)) {
    if (!trust_ready_)
      return make_error(ErrorCode::kUnavailable,
                        "TLS interception has no CA: intercepted hosts cannot be served",
                        "see the daemon's start-up log");
    MountSpec bundle;
    bundle.source = trust_root() + "/ca-bundle.pem";
    bundle.target = kSandboxBundle;
    out.push_back(std::move(bundle));
  }
  bool files = false;
  for (const auto& s : resolved.secrets) files |= s.mode == sec::SecretMode::kFile;
  if (!files) return out;
  auto spec = empty_mount(id);
  if (!spec) return tl::unexpected(spec.error());
  out.push_back(std::move(*spec));
  return out;
}

Result<MountSpec> SecretService::empty_mount(const std::string& id) {
  auto m = sec::SecretMount::create(mount_dir(id));
  if (!m) return tl::unexpected(m.error());
  MountSpec spec;
  spec.source = m->dir();
  spec.target = std::string(sec::kSecretsDir);
  spec.writable = false;
  std::lock_guard lock(mu_);
  pending_mounts_[id] = std::move(*m);
  return spec;
}

Status SecretService::inject(const std::string& id,
                             std::shared_ptr<sec::ResolvedSecrets> resolved) {
  Injected in;
  in.resolved = resolved;
  {
    std::lock_guard lock(mu_);
    if (auto it = pending_mounts_.find(id); it != pending_mounts_.end()) {
      in.mount = std::move(it->second);
      pending_mounts_.erase(it);
    }
  }
  // Registered first: a failure below leaves it for remove() to clean.
  auto finish = [&](Status st) {
    std::lock_guard lock(mu_);
    sandboxes_[id] = std::move(in);
    return st;
  };
  for (const auto& s : resolved->secrets) {
    switch (s.mode) {
      case sec::SecretMode::kEnv:
        in.env.emplace_back(s.env_var, s.value);
        break;
      case sec::SecretMode::kFile: {
        if (!in.mount) return finish(make_error(ErrorCode::kInternal, "no secret mount for " + id));
        std::string file = s.path.substr(s.path.rfind('/') + 1);
        if (auto st = in.mount->write(file, s.value.view(), 0, 0); !st)
          return finish(tl::unexpected(st.error().wrap("secret \"" + s.name + "\"")));
        break;
      }
      case sec::SecretMode::kBroker: {
        auto token = broker_->issue(id, s);
        if (!token) return finish(tl::unexpected(token.error().wrap("secret \"" + s.name + "\"")));
        in.env.emplace_back(s.env_var, sec::SecretValue(*token));
        sec::wipe(*token);
        break;
      }
    }
    json ev{{"type", "secret.inject"},
            {"sandbox", id},
            {"secret", s.name},
            {"mode", std::string(sec::secret_mode_name(s.mode))},
            {"tier", std::string(sec::secret_tier_name(s.tier))},
            {"outcome", "ok"}};
    if (s.mode == sec::SecretMode::kEnv) ev["env"] = s.env_var;
    if (s.mode == sec::SecretMode::kBroker) {
      ev["env"] = s.env_var;
      ev["ttl_s"] = s.ttl.count();
    }
    if (s.mode == sec::SecretMode::kFile) ev["path"] = s.path;
    audit(std::move(ev));
  }
  if (in.mount && watch_) {
    if (auto st = watch_->watch(id, in.mount->dir()); !st) return finish(st);
  }
  return finish(build_redaction(in));
}

Status SecretService::build_redaction(Injected& in) const {
  std::vector<sec::NamedValue> values;
  for (const auto& s : in.resolved->secrets) values.push_back({s.name, s.value.view()});
  // Tokens too: one is no value, but it is a credential of the sandbox.
  for (const auto& s : in.resolved->secrets) {
    if (s.mode != sec::SecretMode::kBroker) continue;
    for (const auto& [var, v] : in.env)
      if (var == s.env_var) values.push_back({s.name, v.view()});
  }
  auto set = sec::RedactionSet::build(std::move(values));
  if (!set) return tl::unexpected(set.error().wrap("building the sandbox's redactor"));
  in.redaction = std::move(*set);
  return ok();
}

std::shared_ptr<const sec::RedactionSet> SecretService::redaction(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end() || !it->second.redaction) return formats_only_;
  return it->second.redaction;
}

Result<std::vector<dev_t>> SecretService::secret_devices(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end() || !it->second.mount) return std::vector<dev_t>{};
  struct stat st {};
  if (::stat(it->second.mount->dir().c_str(), &st) != 0)
    return errno_error("stat(" + it->second.mount->dir() + ")");
  return std::vector<dev_t>{st.st_dev};
}

Status SecretService::reattach(const std::string& id, const SandboxSpec& spec) {
  if (spec.secrets.empty()) return ok();
  auto resolved = prepare(spec);
  if (!resolved) return tl::unexpected(resolved.error());
  Injected in;
  in.resolved = *resolved;
  bool files = false;
  for (const auto& s : (*resolved)->secrets) files |= s.mode == sec::SecretMode::kFile;
  if (files) {
    auto m = sec::SecretMount::adopt(mount_dir(id));
    if (!m) return tl::unexpected(m.error());
    in.mount = std::move(*m);
  }
  for (const auto& s : (*resolved)->secrets) {
    if (s.mode == sec::SecretMode::kEnv) in.env.emplace_back(s.env_var, s.value);
    if (s.mode == sec::SecretMode::kBroker) {
      auto token = broker_->issue(id, s);
      if (!token) return tl::unexpected(token.error().wrap("secret \"" + s.name + "\""));
      in.env.emplace_back(s.env_var, sec::SecretValue(*token));
      sec::wipe(*token);
    }
  }
  if (in.mount && watch_) CORRAL_TRY(watch_->watch(id, in.mount->dir()));
  CORRAL_TRY(build_redaction(in));
  {
    std::lock_guard lock(mu_);
    sandboxes_[id] = std::move(in);
  }
  // The new tokens get the deadline or the revocation the old ones had.
  return apply_stored_limit(id);
}

std::vector<std::string> SecretService::env(const std::string& id) const {
  std::vector<std::string> out;
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return out;
  if (it->second.resolved && intercepts_any(*it->second.resolved)) {
    for (const char* var : {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"})
      out.push_back(std::string(var) + "=" + kSandboxBundle);
  }
  for (const auto& [name, value] : it->second.env) {
    std::string kv;
    kv.reserve(name.size() + 1 + value.size());
    kv.append(name).append("=").append(value.view());
    out.push_back(std::move(kv));
  }
  return out;
}

std::vector<SecretService::SecretPresence> SecretService::presence(const std::string& id) const {
  std::vector<SecretPresence> out;
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end() || !it->second.resolved) return out;
  const Injected& in = it->second;
  for (const auto& s : in.resolved->secrets) {
    SecretPresence p{s.name, s.mode, s.path, s.mode == sec::SecretMode::kFile};
    if (s.mode != sec::SecretMode::kFile) {
      for (const auto& [var, value] : in.env) {
        if (var != s.env_var) continue;
        p.held = s.mode == sec::SecretMode::kEnv
                     ? value.size() > 0
                     : broker_ != nullptr && broker_->issued_to(value.view(), id, s.name);
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<std::string> SecretService::remove(const std::string& id) {
  std::optional<Injected> in;
  {
    std::lock_guard lock(mu_);
    if (auto it = sandboxes_.find(id); it != sandboxes_.end()) {
      in = std::move(it->second);
      sandboxes_.erase(it);
    }
    pending_mounts_.erase(id);
  }
  if (broker_) {
    std::size_t revoked = broker_->revoke_sandbox(id);
    (void)revoked;  // each revocation is its own audit record
  }
  if (watch_) watch_->unwatch(id);
  std::vector<std::string> residue;
  {
    std::lock_guard lock(limits_mu_);
    if (auto st = limits_.erase(id); !st) residue.push_back(st.error().message);
  }
  if (auto st = sec::wipe_secret_mount(mount_dir(id)); !st) residue.push_back(st.error().message);
  if (in && in->resolved && !in->resolved->secrets.empty())
    audit(json{{"type", "secret.wipe"},
               {"sandbox", id},
               {"secrets", in->resolved->secrets.size()},
               {"outcome", residue.empty() ? "ok" : "residue"}});
  return residue;
}

}  // namespace corral::daemon
