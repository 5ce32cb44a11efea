// POST /v1/sandboxes: a create, in the order that keeps it cheap to refuse.
// What the request alone decides (mounts, network policy, secrets, image)
// is checked before anything is reserved; then, under the idempotency
// key's lock, a retry is answered, capacity reserved (CapacityLedger), the
// store row written and the entry registered with its reservation; then
// the sandbox is built (factory, network, secrets) and waited for. A
// failure after the row exists is stored, audited and torn down
// (Creation::fail), which gives the reservation back.
#include <fcntl.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "daemon/api_context.h"
#include "daemon/claim_identity.h"
#include "daemon/sandbox_service.h"
#include "daemon/sandbox_service_internal.h"
#include "daemon/self_check.h"
#include "image/image_store.h"
#include "jail/host_base.h"
#include "jail/sandbox_planner.h"
#include "jail/stage.h"
#include "volume/volume_store.h"

namespace corral::daemon {

using namespace service_internal;
using nlohmann::json;

// One create: the request's state, shared by its steps.
class SandboxService::Creation {
 public:
  Creation(SandboxService& service, const api::CreateSandboxRequest& request,
           std::optional<std::string> idempotency_key, std::string ns, bool pooled = false)
      : s_(service),
        pooled_(pooled),
        spec_(request.spec),
        key_(std::move(idempotency_key)),
        placement_id_(request.placement_id),
        ns_(std::move(ns)),
        options_(long_lived_options(service.limits_)) {}

  // The create has ended, however: a destroy that waits for it may go on.
  ~Creation() {
    if (!e_) return;
    {
      std::lock_guard lock(e_->mu);
      e_->building = false;
    }
    e_->torn_down.notify_all();
  }
  Creation(const Creation&) = delete;
  Creation& operator=(const Creation&) = delete;

  ApiResult<Created> run();

 private:
  // Before anything is reserved: the request's own mistakes.
  ApiResult<void> check_mounts();
  ApiResult<void> open_volumes();
  ApiResult<void> resolve_network();
  ApiResult<void> resolve_secrets();
  ApiResult<void> resolve_image();
  // Under the idempotency key's lock.
  ApiResult<std::optional<Created>> answer_retry();
  ApiResult<std::optional<Created>> write_record();
  void register_entry();
  // After the entry is registered: a failure from here on is the sandbox's.
  ApiResult<Created> build();
  // T3: the running sandbox checked before it is answered; a failure
  // destroys it (fail()) and answers 503 self_check_failed.
  std::optional<ApiResult<Created>> self_check();
  Status stage_volumes(SandboxSpec& factory_spec);
  void unstage_volumes();
  // Dry-run (X2, sandbox_dry_run.cc): the writable mounts' sources before
  // the factory makes them overlays; the baseline once it is ready.
  Status prepare_dry_run(const SandboxSpec& factory_spec);
  Status start_dry_run();
  ApiResult<Created> fail(api::ApiErrorCode code, std::string message, std::string hint,
                          std::string field);
  ApiResult<Created> created();
  static RunOptions long_lived_options(const ServiceLimits& limits) {
    RunOptions options;
    options.long_lived = true;
    options.cwd = std::string("/");  // not `= "/"`: g++ 12 warns falsely (-Wrestrict) on it here
    options.mount_roots = limits.mount_roots;
    return options;
  }

  SandboxService& s_;
  const bool pooled_;  // for a warm pool: hidden until claimed (ADR 0015)
  const Clock::time_point t0_ = Clock::now();
  SandboxSpec spec_;
  const std::optional<std::string> key_;
  const std::optional<std::string> placement_id_;  // the placement the stored row fills
  const std::string ns_;
  // The volumes' sub-paths, opened and checked before anything is reserved,
  // and their binds for the factory (docs/volumes.md).
  std::vector<UniqueFd> volume_fds_;
  std::vector<std::string> volume_binds_;
  bool volumes_acquired_ = false;
  std::optional<net::NetworkPolicy> policy_;
  std::shared_ptr<secrets::ResolvedSecrets> resolved_secrets_;
  std::shared_ptr<DryRunSandbox> dry_run_;  // set for a dry run
  RunOptions options_;
  std::string id_;
  std::string spec_json_;
  std::string local_image_;  // the image store's name of spec_.image ("": host base)
  std::optional<std::string> retry_of_;  // the unacknowledged create whose key this one took
  std::int64_t expires_ = 0;
  // Held from admission until register_entry() hands it to the registry;
  // given back when the create ends before that.
  CapacityLedger::Reservation share_;
  std::shared_ptr<SandboxEntry> e_;
};

ApiResult<SandboxService::Created> SandboxService::create(
    const api::CreateSandboxRequest& request, std::optional<std::string> idempotency_key,
    const std::string& ns) {
  // A dry run is never claimed from a pool: pooled sandboxes were made
  // without overlays, so it is always a cold create (X2).
  if (claimer_ && !request.spec.dry_run) {
    // A claim with a key takes the key's lock and claims only when no
    // earlier create used the key; else the cold path answers the retry.
    // The claimer asks only once a pool is about this create: a create no
    // pool is about pays no store lookup for it.
    std::optional<SandboxRegistry::KeyLock> lock;
    auto fresh_key = [&]() -> bool {
      if (!idempotency_key) return true;
      lock.emplace(registry_, *idempotency_key);
      auto earlier = store_.find_by_idempotency_key(*idempotency_key);
      return earlier && !*earlier;
    };
    if (auto claimed = claimer_(request, idempotency_key, fresh_key, ns))
      return std::move(*claimed);
  }
  return Creation(*this, request, std::move(idempotency_key), ns).run();
}

ApiResult<SandboxService::Created> SandboxService::create_pooled(
    const api::CreateSandboxRequest& request, const std::string& pool_key) {
  return Creation(*this, request, pool_key, "default", true).run();
}

ApiResult<SandboxService::Created> SandboxService::Creation::run() {
  spec_.argv.clear();
  if (auto st = check_mounts(); !st) return tl::unexpected(st.error());
  if (auto st = open_volumes(); !st) return tl::unexpected(st.error());
  if (auto st = resolve_network(); !st) return tl::unexpected(st.error());
  if (auto st = resolve_secrets(); !st) return tl::unexpected(st.error());
  if (auto st = resolve_image(); !st) return tl::unexpected(st.error());

  // One create per idempotency key at a time: a retry racing the original
  // waits for it and then finds its sandbox.
  std::optional<SandboxRegistry::KeyLock> idem_lock;
  if (key_) idem_lock.emplace(s_.registry_, *key_);

  id_ = new_sandbox_id();
  spec_json_ = api::spec_to_json(spec_);
  // A retry is answered before capacity is counted: it asks for nothing new.
  auto earlier = answer_retry();
  if (!earlier) return tl::unexpected(earlier.error());
  if (*earlier) return std::move(**earlier);
  // Capacity (C2): refuse now rather than accept and kill later, and take
  // the share in the same step, so that concurrent creates cannot all pass
  // the check before one of them is counted.
  auto share = s_.registry_.capacity().reserve(spec_.limits);
  if (!share) return tl::unexpected(share.error());
  share_ = std::move(*share);
  auto existing = write_record();
  if (!existing) return tl::unexpected(existing.error());
  if (*existing) return std::move(**existing);
  register_entry();
  return build();
}

ApiResult<void> SandboxService::Creation::check_mounts() {
  if (!spec_.mounts.empty() && s_.limits_.mount_roots.empty())
    return api_fail(api::ApiErrorCode::kInvalidValue,
                    "this daemon allows no host mounts (serve.mount_roots is empty)", "mounts",
                    "list the host directories sandboxes may mount under serve.mount_roots");
  for (const auto& m : spec_.mounts) {
    if (m.source.empty() || m.source[0] != '/')
      return api_fail(api::ApiErrorCode::kInvalidValue,
                      "mount source \"" + m.source + "\" must be an absolute host path", "mounts");
  }
  return {};
}

// Each volume's sub-path, resolved now, before anything is reserved: a
// volume of another namespace is 403, a missing one 404, a sub-path that
// is missing or goes through a symlink 400 (volume_api_error).
ApiResult<void> SandboxService::Creation::open_volumes() {
  if (spec_.volumes.empty()) return {};
  if (s_.volumes_ == nullptr)
    return api_fail(api::ApiErrorCode::kUnavailable, "this daemon serves no volumes", "volumes",
                    "see the daemon's start-up log");
  for (std::size_t i = 0; i < spec_.volumes.size(); ++i) {
    const VolumeMountSpec& v = spec_.volumes[i];
    const std::string field = "volumes[" + std::to_string(i) + "]";
    auto fd = s_.volumes_->open_subpath(ns_, v.volume, v.subpath);
    if (!fd) {
      const bool about_subpath = fd.error().code == ErrorCode::kInvalidArgument;
      return tl::unexpected(
          volume_api_error(fd.error(), field + (about_subpath ? ".subpath" : ".volume")));
    }
    volume_fds_.push_back(std::move(*fd));
  }
  return {};
}

// The checked directories, bound by their fds under the daemon's own
// binds directory, which the factory is given as a mount root: a path the
// sandbox could change never lies between the check and the mount.
Status SandboxService::Creation::stage_volumes(SandboxSpec& factory_spec) {
  if (spec_.volumes.empty()) return ok();
  for (const VolumeMountSpec& v : spec_.volumes) CORRAL_TRY(s_.volumes_->acquire(ns_, v.volume, id_));
  volumes_acquired_ = true;
  for (std::size_t i = 0; i < spec_.volumes.size(); ++i) {
    auto bind = s_.volumes_->stage_bind(volume_fds_[i].get(), id_ + "-" + std::to_string(i));
    if (!bind) return tl::unexpected(bind.error());
    volume_binds_.push_back(*bind);
    factory_spec.mounts.push_back(
        MountSpec{*bind, spec_.volumes[i].target, spec_.volumes[i].writable});
  }
  options_.mount_roots.push_back(s_.volumes_->binds_root());
  return ok();
}

void SandboxService::Creation::unstage_volumes() {
  for (const std::string& bind : volume_binds_) s_.volumes_->unstage_bind(bind);
  volume_binds_.clear();
  volume_fds_.clear();
  if (volumes_acquired_) {
    for (const VolumeMountSpec& v : spec_.volumes) s_.volumes_->creation_done(v.volume, id_);
    volumes_acquired_ = false;
  }
}

// The network policy, also before anything is reserved: a wrong rule or
// template is the request's fault, an engine that is not running the
// daemon's.
ApiResult<void> SandboxService::Creation::resolve_network() {
  if (s_.network_ != nullptr) {
    auto p = s_.network_->resolve(spec_.network);
    if (!p)
      return api_fail(api::ApiErrorCode::kInvalidValue, p.error().message, "network",
                      p.error().hint);
    if (p->has_network()) {
      if (auto why = s_.network_->unavailable())
        return api_fail(api::ApiErrorCode::kNetworkUnavailable,
                        "this daemon cannot give sandboxes a network: " + *why, "network",
                        "see the daemon's start-up log; `corral doctor` checks nftables");
      policy_ = std::move(*p);
      policy_->dry_run = spec_.dry_run;  // X2: DNS and proxy answer it themselves
    }
  } else if (spec_.network.mode != "none") {
    return api_fail(api::ApiErrorCode::kNetworkUnavailable,
                    "this daemon serves sandboxes without network only", "network",
                    "create it with network mode \"none\"");
  }
  return {};
}

// The secrets, checked against the store: a missing key or a broken rule
// is the request's fault (issue 5; never a value in the message).
ApiResult<void> SandboxService::Creation::resolve_secrets() {
  auto r = resolve_spec_secrets(s_.secrets_, spec_);  // a claim answers the same (claim_secrets.cc)
  if (!r) return tl::unexpected(r.error());
  resolved_secrets_ = std::move(*r);
  return {};
}

// The image, before anything is reserved.
ApiResult<void> SandboxService::Creation::resolve_image() {
  if (spec_.image.empty()) return {};
  auto info = s_.image_for(spec_.image);
  if (!info) return tl::unexpected(info.error());
  local_image_ = info->name;
  options_.base.rootfs = info->rootfs;
  options_.base.env = info->env;
  options_.base.passwd_source = info->rootfs + "/etc";
  if (!info->workdir.empty() && spec_.workdir == SandboxSpec{}.workdir)
    spec_.workdir = info->workdir;
  return {};
}

// The earlier create with the same idempotency key, if there is one.
ApiResult<std::optional<SandboxService::Created>> SandboxService::Creation::answer_retry() {
  if (!key_) return std::nullopt;
  auto earlier = s_.store_.find_by_idempotency_key(*key_);
  if (!earlier) return api_fail(earlier.error());
  if (!*earlier) return std::nullopt;
  if (json::parse((*earlier)->spec_json, nullptr, false) != json::parse(spec_json_, nullptr, false))
    return api_fail(api::ApiErrorCode::kIdempotencyMismatch,
                    "Idempotency-Key \"" + *key_ + "\" was used before with a different request",
                    "", "use a new key for a different sandbox");
  // Its create was never acknowledged (it failed, or the daemon died and
  // reconcile destroyed it): this retry makes a new one (docs/api.md).
  auto released = s_.store_.idempotency_key_released(**earlier);
  if (!released) return api_fail(released.error());
  if (*released) return std::nullopt;
  auto info = s_.info_of(**earlier, s_.entry((*earlier)->id));
  if (!info) return tl::unexpected(info.error());
  return Created{*info, false};
}

// The store row (state creating); an existing row named by the key (a
// create of another daemon process on the same file) answers instead.
ApiResult<std::optional<SandboxService::Created>> SandboxService::Creation::write_record() {
  expires_ = now_ms() + spec_.limits.max_lifetime.count();
  auto created = s_.store_.create_sandbox(id_, spec_json_, key_, expires_, placement_id_);
  if (!created) {
    if (created.error().code == ErrorCode::kAlreadyExists)
      return api_fail(api::ApiErrorCode::kIdempotencyMismatch,
                      "Idempotency-Key \"" + *key_ + "\" was used before with a different request",
                      "", "use a new key for a different sandbox");
    return api_fail(created.error());
  }
  if (created->created) {
    retry_of_ = created->key_taken_from;
    return std::nullopt;
  }
  auto existing = s_.store_.get(created->sandbox.id);
  if (!existing) return api_fail(existing.error());
  auto info = s_.info_of(*existing, s_.entry(existing->id));
  if (!info) return tl::unexpected(info.error());
  return Created{*info, false};
}

void SandboxService::Creation::register_entry() {
  e_ = std::make_shared<SandboxEntry>();
  e_->id = id_;
  e_->spec = spec_;
  e_->expires_at_ms = expires_;
  e_->ns = ns_;
  s_.diagnostics_book_.open(id_, ns_);
  e_->building = true;  // until ~Creation, or fail()'s own teardown
  e_->pooled = pooled_;
  s_.registry_.add(e_, std::move(share_));
  // Bookkeeping that can trail the work goes through the journal; the
  // journal is flushed before the create is acknowledged.
  json record{{"type", "sandbox.create"},
              {"sandbox", id_},
              {"spec", json::parse(spec_json_)},
              {"idempotency_key", key_ ? json(*key_) : json()}};
  if (retry_of_) record["retry_of"] = *retry_of_;
  s_.audit_later(std::move(record));
  s_.metrics_.counter("corral_sandbox_creations_total", "Sandbox create requests accepted").inc();
}

// The sandbox's failure: stored and audited, torn down, answered.
ApiResult<SandboxService::Created> SandboxService::Creation::fail(api::ApiErrorCode code,
                                                                  std::string message,
                                                                  std::string hint,
                                                                  std::string field) {
  {
    std::lock_guard lock(e_->mu);
    (void)s_.transition(e_.get(), id_, SandboxState::kFailed, message);
    // This teardown is the one: a destroy waiting for the create then
    // waits for it to end.
    e_->building = false;
    e_->tearing_down = true;
  }
  e_->torn_down.notify_all();
  s_.teardown(e_, id_, "setup failed", true);
  s_.metrics_.counter("corral_sandbox_create_failures_total", "Sandbox creates that failed").inc();
  return api_fail(code, message, field, hint);
}

// The factory makes it; its network, secrets and runtime record follow,
// before its first process can run; then init and the zygote are waited for.
ApiResult<SandboxService::Created> SandboxService::Creation::build() {
  {
    std::lock_guard lock(e_->mu);
    s_.transition_later(e_.get(), id_, SandboxState::kInitializing, "id, cgroup and layer next");
  }
  options_.sandbox_id = id_;
  // A pooled sandbox's init holds an address slot for a claim's network
  // (ADR 0015); it has none itself.
  options_.network.reserve_slot =
      pooled_ && s_.network_ != nullptr && !s_.network_->unavailable();
  // File-mode secrets: the sandbox's own tmpfs, bound at /run/secrets by
  // init like any mount (the stored spec does not list it).
  SandboxSpec factory_spec = spec_;
  factory_spec.image = local_image_;  // the store's name of a digest or reference
  if (resolved_secrets_) {
    auto m = s_.secrets_->mounts(id_, *resolved_secrets_);
    if (!m)
      return fail(api::ApiErrorCode::kSetupFailed, "secrets: " + m.error().message, m.error().hint,
                  "");
    for (auto& mount : *m) factory_spec.mounts.push_back(std::move(mount));
    options_.mount_roots.push_back(s_.secrets_->mounts_root());
    options_.mount_roots.push_back(s_.secrets_->trust_root());
  } else if (pooled_) {
    // A warm pool's: the empty tmpfs a claim's file secrets fill (ADR 0015).
    auto m = pooled_secret_mounts(s_.secrets_, id_, options_.mount_roots);
    if (!m)
      return fail(api::ApiErrorCode::kSetupFailed, "secrets: " + m.error().message, m.error().hint,
                  "");
    for (auto& mount : *m) factory_spec.mounts.push_back(std::move(mount));
  }
  if (auto st = stage_volumes(factory_spec); !st) {
    unstage_volumes();
    // A sub-path removed since it was checked: the request's, not ours.
    const bool gone = st.error().sys_errno == ENOENT;
    return fail(gone ? api::ApiErrorCode::kInvalidValue : api::ApiErrorCode::kSetupFailed,
                "volumes: " + st.error().message +
                    (gone ? " (the sub-path was removed while the sandbox was being created)" : ""),
                st.error().hint, "volumes");
  }
  if (spec_.dry_run) {
    if (auto st = prepare_dry_run(factory_spec); !st) {
      unstage_volumes();
      return fail(api::ApiErrorCode::kSetupFailed, "dry-run: " + st.error().message,
                  st.error().hint, "");
    }
  }
  SetupFailure failure;
  auto made =
      s_.factory_.create(factory_spec, options_, expires_, &failure, s_.limits_.setup_timeout);
  // The sandbox holds its own mounts of the volumes now (or never will).
  unstage_volumes();
  if (!made && made.error().code == ErrorCode::kUnavailable)
    return fail(api::ApiErrorCode::kUnavailable, made.error().message, made.error().hint, "");
  if (!made && made.error().code == ErrorCode::kTimeout)  // the factory stage's timeout
    return fail(api::ApiErrorCode::kSetupFailed, made.error().message, made.error().hint, "");
  if (!made) {
    bool user_error = failure.stage == Stage::kPlan || failure.stage == Stage::kMountSources ||
                      failure.stage == Stage::kBaseLayer;
    return fail(user_error ? api::ApiErrorCode::kInvalidValue : api::ApiErrorCode::kSetupFailed,
                made.error().message.empty() ? failure.message : made.error().message,
                made.error().hint, "");
  }
  const std::vector<std::string> env = made->env;
  if (made->net_slot >= 0) e_->net_slot = static_cast<std::uint32_t>(made->net_slot);
  if (made->reserved_net_slot >= 0)
    e_->reserved_net_slot = static_cast<std::uint32_t>(made->reserved_net_slot);
  auto live = LiveSandbox::adopt(std::move(*made), s_.cgroups_);
  if (!live) return fail(api::ApiErrorCode::kSetupFailed, live.error().message, "", "");
  {
    // Under mu: a GET or list (info_of) may look at the entry meanwhile.
    std::lock_guard lock(e_->mu);
    e_->live = std::move(*live);
    e_->env = env;
  }
  // Its proxy and DNS listen on the host end before its first process runs.
  if (e_->net_slot) {
    if (!policy_ || s_.network_ == nullptr)
      return fail(api::ApiErrorCode::kSetupFailed, "the sandbox got a network it did not ask for",
                  "", "");
    if (auto st = s_.network_->attach(id_, *e_->net_slot, *policy_); !st)
      return fail(api::ApiErrorCode::kSetupFailed, "network: " + st.error().message,
                  st.error().hint, "");
  } else if (policy_) {
    return fail(api::ApiErrorCode::kSetupFailed, "the sandbox got no network slot", "", "");
  }
  // Files written for its user, reads watched, tokens issued: before its
  // first process can run.
  if (resolved_secrets_) {
    if (auto st = s_.secrets_->inject(id_, resolved_secrets_); !st)
      return fail(api::ApiErrorCode::kSetupFailed, "secrets: " + st.error().message,
                  st.error().hint, "");
  }
  const auto& ident = e_->live->identity();
  s_.journal_.post([&store = s_.store_, id = id_, ident,
                    rt = json_text(runtime_json(ident, env, e_->net_slot, nullptr, ns_))] {
    (void)store.set_resources(id, ident.host_uid_base, ident.cgroup);
    (void)store.set_runtime(id, rt);
  });

  SetupFailure ready_failure;
  if (auto st = e_->live->wait_ready(s_.limits_.setup_timeout, &ready_failure); !st) {
    std::string msg = ready_failure.message.empty() ? st.error().message : ready_failure.message;
    return fail(api::ApiErrorCode::kSetupFailed, msg, ready_failure.hint, "");
  }
  if (auto failed = self_check()) return std::move(*failed);
  if (dry_run_) {
    if (auto st = start_dry_run(); !st)
      return fail(api::ApiErrorCode::kSetupFailed, "dry-run: " + st.error().message,
                  st.error().hint, "");
  }
  {
    std::lock_guard lock(e_->mu);
    s_.transition_later(e_.get(), id_, SandboxState::kReady, "PID 1 and zygote up");
  }
  return created();
}

std::optional<ApiResult<SandboxService::Created>> SandboxService::Creation::self_check() {
  if (!s_.limits_.self_check) return std::nullopt;
  SelfCheckReport report = run_self_check(s_, *e_, SelfCheckStage::kCreate);
  record_self_check(s_, id_, report, SelfCheckStage::kCreate);
  {
    std::lock_guard lock(e_->mu);
    e_->self_check = report;
  }
  if (report.ok) return std::nullopt;
  auto answer = fail(api::ApiErrorCode::kSelfCheckFailed,
                     "sandbox " + id_ + " failed its self-check (" + report.failed +
                         "): " + report.detail + "; it was destroyed",
                     "see docs/operations.md, \"Self-check failures\"; a new create may pass",
                     "");
  if (!answer) answer.error().check = report.failed;
  return answer;
}

// Acknowledged: everything about it is written first.
ApiResult<SandboxService::Created> SandboxService::Creation::created() {
  s_.journal_.flush();
  s_.watch(e_);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
  s_.metrics_
      .histogram("corral_sandbox_create_seconds", "Time to create a sandbox",
                 {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10})
      .observe(seconds);
  auto record = s_.store_.get(id_);
  if (!record) return api_fail(record.error());
  auto info = s_.info_of(*record, e_);
  if (!info) return tl::unexpected(info.error());
  return Created{*info, true};
}

}  // namespace corral::daemon

namespace corral::daemon {

// Opened before the factory call: a volume's staged bind is gone after it.
Status SandboxService::Creation::prepare_dry_run(const SandboxSpec& factory_spec) {
  auto state = std::make_shared<DryRunSandbox>();
  std::size_t overlay = 0;  // the planner numbers the writable mounts' overlays in this order
  for (const MountSpec& m : factory_spec.mounts) {
    if (!m.writable) continue;
    UniqueFd fd(::open(m.source.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) return errno_error("open(" + m.source + ")");
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return errno_error("fstat(" + m.source + ")");
    if (!S_ISDIR(st.st_mode)) continue;  // the planner refuses it, with the reason
    state->mounts.push_back(
        DryMountArea{m.target, fd.get(), "dry/" + std::to_string(overlay++) + "/upper"});
    state->sources.push_back(std::move(fd));
  }
  std::string lower = options_.base.rootfs;
  if (lower.empty()) {
    auto host = ensure_host_base();
    if (!host) return tl::unexpected(host.error());
    lower = host->rootfs;
    state->base_in_use = std::move(host->in_use);
  }
  state->root_lower.reset(::open(lower.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!state->root_lower) return errno_error("open(" + lower + ")");
  dry_run_ = std::move(state);
  return ok();
}

// After the self-check (whose probes are not the caller's): what the layer
// holds now is the baseline, and from now on the record takes its events.
Status SandboxService::Creation::start_dry_run() {
  UniqueFd upper(::openat(e_->live->layer_root_fd(), "upper",
                          O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!upper) return errno_error("openat(layer/upper)");
  dry_run_->baseline = snapshot_upper(upper.get());
  s_.dry_run_book_.add(id_, dry_run_);
  return ok();
}

}  // namespace corral::daemon
