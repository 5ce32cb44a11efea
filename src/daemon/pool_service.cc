// Warm pools: settings, the match of a create to a pool, the claim, and the
// refill thread (pool_service.h; docs/adr/0015-warm-pools.md).
#include "daemon/pool_service.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "api/api_model.h"
#include "base/json_text.h"
#include "base/random.h"
#include "daemon/claim_identity.h"
#include "spec/volume_ref.h"

namespace corral::daemon {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kFirstBackoff = std::chrono::seconds(1);
constexpr auto kMaxBackoff = std::chrono::seconds(60);
// A claim counts toward growing the pool (up to max) this long.
constexpr auto kDemandWindow = std::chrono::seconds(60);
// The refill's make of a replacement (several ms of CPU: clone, cgroups,
// layer) waits this long after a claim while the pool has a ready sandbox
// left, so that the claimer's first command does not compete with it on a
// small host (issue 16: claim -> first output). Not extended by later
// claims: a burst still refills back to back.
constexpr auto kClaimGrace = std::chrono::milliseconds(15);
// How often the refill thread looks for pooled sandboxes that ended
// without a claim (their idle limit, a DELETE by id).
constexpr auto kSweepEvery = std::chrono::seconds(1);
constexpr std::uint32_t kMaxPoolSize = 256;
constexpr std::int64_t kMinIdleMs = 10'000;

std::string random_tag() {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(random_u64()));
  return buf;
}

// A pool's row in the state store (StateStore::put_pool).
std::string settings_json(const PoolSettings& s) {
  nlohmann::json sandbox = nlohmann::json::parse(s.sandbox_json, nullptr, false);
  if (!sandbox.is_object()) sandbox = nlohmann::json::object();
  return json_text(nlohmann::json{{"name", s.name},
                                  {"min", s.min},
                                  {"max", s.max},
                                  {"idle_limit_ms", s.idle_limit_ms},
                                  {"sandbox", std::move(sandbox)}});
}

std::optional<PoolSettings> settings_of(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string() ||
      !j.value("min", nlohmann::json()).is_number_unsigned() ||
      !j.value("max", nlohmann::json()).is_number_unsigned() ||
      !j.value("idle_limit_ms", nlohmann::json()).is_number_integer() ||
      !j.value("sandbox", nlohmann::json()).is_object())
    return std::nullopt;
  PoolSettings s;
  s.name = j["name"].get<std::string>();
  s.min = j["min"].get<std::uint32_t>();
  s.max = j["max"].get<std::uint32_t>();
  s.idle_limit_ms = j["idle_limit_ms"].get<std::int64_t>();
  s.sandbox_json = json_text(j["sandbox"]);
  return s;
}

}  // namespace

ApiResult<api::CreateSandboxRequest> parse_create_over_pool(PoolService* pools,
                                                            const SandboxSpec& defaults,
                                                            const std::string& body) {
  std::optional<std::string> pool;
  std::string rest = body.empty() ? "{}" : body;
  // "pool" is read here: the create codec reads the rest over the pool's
  // spec (or over the daemon's defaults without one).
  auto j = nlohmann::json::parse(rest, nullptr, false);
  if (j.is_object() && j.contains("pool")) {
    if (!j["pool"].is_string())
      return tl::unexpected(api::make_api_error(api::ApiErrorCode::kWrongType,
                                                "pool must be a string", "pool"));
    pool = j["pool"].get<std::string>();
    j.erase("pool");
    rest = json_text(j);
  }
  std::optional<SandboxSpec> base;
  if (pool) {
    if (pools != nullptr) base = pools->base_spec(*pool);
    if (!base)
      return tl::unexpected(api::make_api_error(
          api::ApiErrorCode::kNotFound, "no pool named " + *pool, "pool",
          "list pools with GET /v1/pools, or leave \"pool\" out for a cold create"));
  }
  auto request = api::parse_create_sandbox_over(rest, base ? *base : defaults);
  if (!request) return tl::unexpected(api::to_api_error(request.error()));
  request->pool = pool;
  return std::move(*request);
}

PoolService::PoolService(SandboxService& sandboxes, MetricsRegistry& metrics)
    : sandboxes_(sandboxes),
      metrics_(metrics),
      claim_seconds_(metrics.histogram(
          "corral_pool_claim_seconds", "Time to claim a pooled sandbox and bind its identity",
          {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25})) {}

PoolService::~PoolService() { stop(); }

std::string PoolService::match_key(const SandboxSpec& spec) {
  SandboxSpec s = spec;
  s.argv.clear();
  s.env.clear();
  s.workdir.clear();
  s.limits.max_lifetime = std::chrono::milliseconds(0);
  s.limits.timeout = std::chrono::milliseconds(0);
  s.expected_duration_ms = 0;
  s.metadata.clear();  // data only: the claim's spec carries it
  // Bound at claim too (claim_identity.h, claim_binding.h): host name,
  // secrets (but TLS interception, whose CA bundle is a mount of its
  // own), network, mounts and volumes.
  s.hostname.clear();
  if (secrets_bindable_at_claim(s)) s.secrets.clear();
  s.network = NetworkSpec{};
  s.mounts.clear();
  s.volumes.clear();
  return api::spec_to_json(s);
}

ApiResult<PoolStatus> PoolService::add(const PoolSettings& in, bool from_config) {
  return insert(in, from_config, !from_config);
}

ApiResult<PoolStatus> PoolService::insert(const PoolSettings& in, bool from_config,
                                          bool store_it) {
  if (!is_valid_volume_name(in.name))
    return api_fail(api::ApiErrorCode::kInvalidValue,
                    "pool name \"" + in.name + "\" is not [a-z0-9][a-z0-9._-]{0,62}", "name");
  PoolSettings settings = in;
  if (settings.max == 0) settings.max = settings.min;
  if (settings.min > settings.max || settings.max > kMaxPoolSize)
    return api_fail(api::ApiErrorCode::kInvalidValue,
                    "pool " + in.name + ": min and max must satisfy 0 <= min <= max <= " +
                        std::to_string(kMaxPoolSize),
                    "max");
  if (settings.idle_limit_ms < kMinIdleMs)
    return api_fail(api::ApiErrorCode::kInvalidValue,
                    "pool " + in.name + ": idle_limit must be at least 10s", "idle_limit",
                    "pooled sandboxes are replaced after their idle limit; a few seconds would "
                    "keep the refill busy for nothing");
  auto request = api::parse_create_sandbox_over(settings.sandbox_json, sandboxes_.defaults());
  if (!request) {
    api::ApiError err = api::to_api_error(request.error());
    err.field = err.field.empty() ? "sandbox" : "sandbox." + err.field;
    return tl::unexpected(std::move(err));
  }
  const SandboxSpec& spec = request->spec;
  // Identity is the claim's: a pool spec with any of it would hand every
  // claim the same grants (ADR 0015).
  const char* identity = !spec.secrets.empty()        ? "secrets"
                         : spec.network.mode != "none" ? "network"
                         : !spec.mounts.empty()        ? "mounts"
                         : !spec.volumes.empty()       ? "volumes"
                                                       : nullptr;
  if (identity != nullptr)
    return api_fail(api::ApiErrorCode::kInvalidValue,
                    "pool " + in.name + ": a pool's sandbox spec may not have " + identity,
                    std::string("sandbox.") + identity,
                    std::string(identity) == "secrets"
                        ? "pooled sandboxes are made before their caller is known; a create "
                          "claiming one brings its own secrets (docs/adr/0015-warm-pools.md)"
                        : "pooled sandboxes are made before their caller is known; creates that "
                          "need " + std::string(identity) +
                              " are made cold (docs/adr/0015-warm-pools.md)");
  std::lock_guard lock(mu_);
  if (pools_.count(in.name) != 0)
    return api_fail(api::ApiErrorCode::kConflict, "a pool named " + in.name + " exists", "name",
                    "DELETE /v1/pools/" + in.name + " first");
  // Stored before it exists: a pool the API answered 201 for is rebuilt
  // after a restart.
  if (store_it) {
    if (auto st = sandboxes_.store().put_pool(
            {in.name, settings_json(settings), StateStore::now_ms()});
        !st) {
      if (st.error().code == ErrorCode::kAlreadyExists)
        return api_fail(api::ApiErrorCode::kConflict, "a pool named " + in.name + " is stored",
                        "name", "DELETE /v1/pools/" + in.name + " first");
      return api_fail(st.error());
    }
  }
  Pool& pool = pools_[in.name];
  pool.settings = settings;
  pool.spec = spec;
  pool.key = match_key(spec);
  pool.generation = next_generation_++;
  pool.from_config = from_config;
  pool_count_.store(pools_.size(), std::memory_order_relaxed);
  update_gauges(pool);
  cv_.notify_all();
  return status_of(pool, Clock::now());
}

ApiResult<PoolStatus> PoolService::remove(const std::string& name) {
  std::deque<std::string> ready;
  PoolStatus status;
  {
    std::lock_guard lock(mu_);
    auto it = pools_.find(name);
    if (it == pools_.end())
      return api_fail(api::ApiErrorCode::kNotFound, "no pool named " + name, "",
                      "list pools with GET /v1/pools");
    // For good: the next daemon does not rebuild it.
    if (!it->second.from_config) {
      if (auto gone = sandboxes_.store().delete_pool(name); !gone) return api_fail(gone.error());
    }
    ready.swap(it->second.ready);
    update_gauges(it->second);
    status = status_of(it->second, Clock::now());
    pools_.erase(it);
    pool_count_.store(pools_.size(), std::memory_order_relaxed);
  }
  metrics_.gauge("corral_pool_ready", "Pooled sandboxes ready to claim", {{"pool", name}}).set(0);
  for (const std::string& id : ready) (void)sandboxes_.destroy(id, "pool " + name + " deleted");
  return status;
}

std::vector<PoolStatus> PoolService::list() {
  std::lock_guard lock(mu_);
  std::vector<PoolStatus> out;
  const auto now = Clock::now();
  for (auto& [name, pool] : pools_) out.push_back(status_of(pool, now));
  return out;
}

ApiResult<PoolStatus> PoolService::get(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = pools_.find(name);
  if (it == pools_.end())
    return api_fail(api::ApiErrorCode::kNotFound, "no pool named " + name, "",
                    "list pools with GET /v1/pools");
  return status_of(it->second, Clock::now());
}

std::optional<SandboxSpec> PoolService::base_spec(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = pools_.find(name);
  if (it == pools_.end()) return std::nullopt;
  return it->second.spec;
}

std::uint32_t PoolService::target_of(Pool& pool, Clock::time_point now) {
  while (!pool.recent_claims.empty() && now - pool.recent_claims.front() > kDemandWindow)
    pool.recent_claims.pop_front();
  const std::uint64_t wanted = pool.settings.min + pool.recent_claims.size();
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(wanted, pool.settings.max));
}

PoolStatus PoolService::status_of(Pool& pool, Clock::time_point now) {
  PoolStatus s;
  s.settings = pool.settings;
  s.spec_json = api::spec_to_json(pool.spec);
  s.ready = static_cast<std::uint32_t>(pool.ready.size());
  s.building = pool.building;
  s.target = target_of(pool, now);
  s.hits = pool.hits;
  s.misses = pool.misses;
  s.refill_failures = pool.refill_failures;
  if (pool.next_try > now)
    s.backoff_ms = std::chrono::duration_cast<std::chrono::milliseconds>(pool.next_try - now).count();
  s.last_error = pool.last_error;
  s.from_config = pool.from_config;
  return s;
}

void PoolService::update_gauges(const Pool& pool) {
  const MetricLabels labels{{"pool", pool.settings.name}};
  metrics_.gauge("corral_pool_ready", "Pooled sandboxes ready to claim", labels)
      .set(static_cast<double>(pool.ready.size()));
  metrics_.gauge("corral_pool_building", "Pooled sandboxes being made", labels)
      .set(static_cast<double>(pool.building));
}

void PoolService::miss(const std::string& pool, const std::string& reason) {
  metrics_
      .counter("corral_pool_misses_total", "Creates that named or matched a pool and went cold",
               {{"pool", pool}, {"reason", reason}})
      .inc();
}

std::optional<ApiResult<SandboxService::Created>> PoolService::claim(
    const api::CreateSandboxRequest& request, const std::optional<std::string>& key,
    const std::function<bool()>& key_is_fresh, const std::string& ns) {
  const auto t0 = Clock::now();
  std::string name;
  SandboxSpec pool_spec;
  // Without pools a create pays nothing more than this (issue 16).
  if (!request.pool && pool_count_.load(std::memory_order_relaxed) == 0) return std::nullopt;
  const std::string want = match_key(request.spec);
  {
    std::lock_guard lock(mu_);
    if (request.pool) {
      auto it = pools_.find(*request.pool);
      if (it == pools_.end())
        return ApiResult<SandboxService::Created>(api_fail(
            api::ApiErrorCode::kNotFound, "no pool named " + *request.pool, "pool",
            "list pools with GET /v1/pools, or leave \"pool\" out for a cold create"));
      name = it->first;
    } else {
      for (auto& [n, pool] : pools_) {
        if (pool.key == want) {
          name = n;
          break;
        }
      }
      if (name.empty()) return std::nullopt;  // no pool is about this create
    }
  }
  // A key an earlier create used: the cold path answers the retry.
  if (!key_is_fresh()) return std::nullopt;
  // A spec that is not the pool's (what cannot be bound at claim): cold.
  std::string reason;
  {
    std::lock_guard lock(mu_);
    auto it = pools_.find(name);
    if (it == pools_.end()) return std::nullopt;  // deleted meanwhile
    Pool& pool = it->second;
    pool.recent_claims.push_back(t0);
    if (want != pool.key) reason = "spec";
    pool_spec = pool.spec;
  }
  // Network, mounts, volumes that cannot be bound (or are wrong): checked
  // before a sandbox is taken, so that such a request never costs one.
  if (reason.empty()) reason = sandboxes_.claim_unbindable(request.spec, ns);
  while (reason.empty()) {
    std::string id;
    {
      std::lock_guard lock(mu_);
      auto it = pools_.find(name);
      if (it == pools_.end() || it->second.ready.empty()) {
        reason = "empty";
        break;
      }
      // Popped under the lock: one claim per sandbox, ever.
      id = std::move(it->second.ready.front());
      it->second.ready.pop_front();
      if (!it->second.ready.empty() && it->second.hold_until <= t0)
        it->second.hold_until = t0 + kClaimGrace;
      update_gauges(it->second);
    }
    cv_.notify_all();  // the refill replaces it
    auto claimed = sandboxes_.claim_pooled(id, request, pool_spec, name, key, ns);
    if (!claimed) {
      const api::ApiError& why = claimed.error();
      // The request's own mistake (a secret it may not have): answered as
      // a cold create answers it.
      if (why.is(api::ApiErrorCode::kInvalidValue) || why.is(api::ApiErrorCode::kUnavailable)) {
        {
          std::lock_guard lock(mu_);
          if (auto it = pools_.find(name); it != pools_.end()) ++it->second.misses;
        }
        miss(name, "refused");
        return ApiResult<SandboxService::Created>(std::move(claimed));
      }
      // A binding that failed (the sandbox is destroyed): a cold create,
      // rather than one pooled sandbox after another.
      if (why.is(api::ApiErrorCode::kSetupFailed)) {
        reason = "bind";
        break;
      }
      continue;  // gone or expiring: the next one
    }
    {
      std::lock_guard lock(mu_);
      if (auto it = pools_.find(name); it != pools_.end()) ++it->second.hits;
    }
    metrics_.counter("corral_pool_hits_total", "Creates served from a warm pool", {{"pool", name}})
        .inc();
    sandboxes_.count_pool_claim(true);
    claim_seconds_.observe(std::chrono::duration<double>(Clock::now() - t0).count());
    return ApiResult<SandboxService::Created>(std::move(*claimed));
  }
  {
    std::lock_guard lock(mu_);
    if (auto it = pools_.find(name); it != pools_.end()) ++it->second.misses;
  }
  miss(name, reason);
  sandboxes_.count_pool_claim(false);
  return std::nullopt;
}

std::string PoolService::restore() {
  auto rows = sandboxes_.store().list_pools();
  if (!rows) return "; the stored pools could not be read: " + rows.error().message;
  std::size_t restored = 0;
  std::string notes;
  for (const PoolRecord& row : *rows) {
    auto settings = settings_of(row.settings_json);
    std::string why;
    if (!settings || settings->name != row.name) {
      why = "its stored settings are not a pool's";
    } else {
      bool in_config = false;
      {
        std::lock_guard lock(mu_);
        in_config = pools_.count(row.name) != 0;
      }
      if (in_config) {
        why = "serve.pools has a pool of that name";
      } else if (auto added = insert(*settings, false, false); !added) {
        why = added.error().message;
      }
    }
    if (why.empty()) {
      ++restored;
      continue;
    }
    // Dropped for good, with its settings in the log to make it again.
    (void)sandboxes_.store().delete_pool(row.name);
    notes += "; stored pool " + row.name + " dropped (" + why + "): " + row.settings_json;
  }
  return ", " + std::to_string(restored) + " of them stored through /v1/pools" + notes;
}

std::string PoolService::start() {
  const std::string stored = restore();
  // A previous daemon's pooled sandboxes: rebuilt, not re-adopted (ADR 0015).
  std::size_t rebuilt = 0;
  if (auto records = sandboxes_.store().list(); records) {
    for (const SandboxRecord& r : *records) {
      if (!r.idempotency_key || r.idempotency_key->rfind(kPoolKeyPrefix, 0) != 0) continue;
      if (!sandboxes_.registered(r.id)) continue;
      (void)sandboxes_.destroy(r.id, "pool: rebuilt after a daemon restart");
      ++rebuilt;
    }
  }
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
  }
  if (!refill_.joinable()) refill_ = std::thread([this] { refill_loop(); });
  std::lock_guard lock(mu_);
  return std::to_string(pools_.size()) + " pools" + stored + ", " + std::to_string(rebuilt) +
         " pooled sandboxes of the previous daemon destroyed for a rebuild";
}

void PoolService::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (refill_.joinable()) refill_.join();
}

void PoolService::refill_loop() {
  auto last_sweep = Clock::now();
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    if (Clock::now() - last_sweep >= kSweepEvery) {
      forget_gone();
      last_sweep = Clock::now();
    }
    if (refill_once()) continue;
    std::unique_lock lock(mu_);
    if (stopping_) return;
    auto wake = Clock::now() + kSweepEvery;
    for (auto& [name, pool] : pools_) {
      if (pool.ready.size() + pool.building < target_of(pool, Clock::now()))
        wake = std::min(wake, std::max({pool.next_try, pool.hold_until, Clock::now()}));
    }
    cv_.wait_until(lock, wake);
  }
}

// Pooled sandboxes that ended without a claim (the reaper at their idle
// limit, a DELETE by id): off the ready list, so the refill replaces them.
void PoolService::forget_gone() {
  std::vector<std::string> ids;
  {
    std::lock_guard lock(mu_);
    for (auto& [name, pool] : pools_) ids.insert(ids.end(), pool.ready.begin(), pool.ready.end());
  }
  std::vector<std::string> gone;
  for (const std::string& id : ids) {
    if (!sandboxes_.registered(id)) gone.push_back(id);
  }
  if (gone.empty()) return;
  std::lock_guard lock(mu_);
  for (auto& [name, pool] : pools_) {
    auto& r = pool.ready;
    r.erase(std::remove_if(r.begin(), r.end(),
                           [&](const std::string& id) {
                             return std::find(gone.begin(), gone.end(), id) != gone.end();
                           }),
            r.end());
    update_gauges(pool);
  }
}

bool PoolService::refill_once() {
  std::string name;
  std::uint64_t generation = 0;
  api::CreateSandboxRequest request;
  {
    std::lock_guard lock(mu_);
    const auto now = Clock::now();
    std::int64_t worst = 0;
    for (auto& [n, pool] : pools_) {
      if (pool.next_try > now || pool.hold_until > now) continue;
      const std::int64_t deficit = static_cast<std::int64_t>(target_of(pool, now)) -
                                   static_cast<std::int64_t>(pool.ready.size() + pool.building);
      if (deficit > worst) {
        worst = deficit;
        name = n;
      }
    }
    if (name.empty()) return false;
    Pool& pool = pools_[name];
    ++pool.building;
    update_gauges(pool);
    generation = pool.generation;
    request.spec = pool.spec;
    // Unclaimed, it lives its idle limit; a claim sets its own lifetime.
    request.spec.limits.max_lifetime = std::chrono::milliseconds(pool.settings.idle_limit_ms);
  }
  const std::string key = std::string(kPoolKeyPrefix) + name + ":" + random_tag();
  auto made = sandboxes_.create_pooled(request, key);
  bool orphan = false;
  {
    std::lock_guard lock(mu_);
    auto it = pools_.find(name);
    const bool same = it != pools_.end() && it->second.generation == generation;
    if (same) {
      Pool& pool = it->second;
      --pool.building;
      if (made) {
        pool.ready.push_back(made->info.id);
        pool.failures_in_a_row = 0;
        pool.next_try = {};
      } else {
        ++pool.refill_failures;
        pool.last_error = made.error().message;
        const int n = std::min(pool.failures_in_a_row++, 6);
        pool.next_try = Clock::now() + std::min<std::chrono::milliseconds>(
                                           kFirstBackoff * (1 << n), kMaxBackoff);
      }
      update_gauges(pool);
    }
    orphan = made && !same;  // its pool was deleted while it was made
  }
  if (!made)
    metrics_
        .counter("corral_pool_refill_failures_total", "Pooled sandboxes that could not be made",
                 {{"pool", name}})
        .inc();
  if (orphan) (void)sandboxes_.destroy(made->info.id, "pool " + name + " deleted");
  return true;
}

}  // namespace corral::daemon
