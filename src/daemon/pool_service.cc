// Warm pools: settings, the match of a create to a pool, the claim, and the
// refill thread (pool_service.h; docs/adr/0015-warm-pools.md).
#include "daemon/pool_service.h"

#include <algorithm>
#include <cstdio>

#include "api/api_model.h"
#include "base/random.h"
#include "spec/volume_ref.h"

namespace corral::daemon {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kFirstBackoff = std::chrono::seconds(1);
constexpr auto kMaxBackoff = std::chrono::seconds(60);
// A claim counts toward growing the pool (up to max) this long.
constexpr auto kDemandWindow = std::chrono::seconds(60);
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

}  // namespace

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
  // Bound at claim too (claim_binding.h): a pool's spec has none of them.
  s.network = NetworkSpec{};
  s.mounts.clear();
  s.volumes.clear();
  return api::spec_to_json(s);
}

ApiResult<PoolStatus> PoolService::add(const PoolSettings& in, bool from_config) {
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
                    "pooled sandboxes are made before their caller is known; creates that need " +
                        std::string(identity) + " are made cold (docs/adr/0015-warm-pools.md)");
  std::lock_guard lock(mu_);
  if (pools_.count(in.name) != 0)
    return api_fail(api::ApiErrorCode::kConflict, "a pool named " + in.name + " exists", "name",
                    "DELETE /v1/pools/" + in.name + " first");
  Pool& pool = pools_[in.name];
  pool.settings = settings;
  pool.spec = spec;
  pool.key = match_key(spec);
  pool.generation = next_generation_++;
  pool.from_config = from_config;
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
    ready.swap(it->second.ready);
    update_gauges(it->second);
    status = status_of(it->second, Clock::now());
    pools_.erase(it);
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
    const std::string& ns) {
  const auto t0 = Clock::now();
  std::string name;
  SandboxSpec pool_spec;
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
      const std::string want = match_key(request.spec);
      for (auto& [n, pool] : pools_) {
        if (pool.key == want) {
          name = n;
          break;
        }
      }
      if (name.empty()) return std::nullopt;  // no pool is about this create
    }
  }
  // A spec that is not the pool's (what cannot be bound at claim): cold.
  std::string reason;
  {
    std::lock_guard lock(mu_);
    auto it = pools_.find(name);
    if (it == pools_.end()) return std::nullopt;  // deleted meanwhile
    Pool& pool = it->second;
    pool.recent_claims.push_back(t0);
    if (reason.empty() && match_key(request.spec) != pool.key) reason = "spec";
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
      update_gauges(it->second);
    }
    cv_.notify_all();  // the refill replaces it
    auto claimed = sandboxes_.claim_pooled(id, request, pool_spec, name, key, ns);
    if (!claimed && claimed.error().is(api::ApiErrorCode::kSetupFailed)) {
      reason = "bind";  // destroyed; the cold create tries the same binding
      break;
    }
    if (!claimed) continue;  // gone or expiring: the next one
    {
      std::lock_guard lock(mu_);
      if (auto it = pools_.find(name); it != pools_.end()) ++it->second.hits;
    }
    metrics_.counter("corral_pool_hits_total", "Creates served from a warm pool", {{"pool", name}})
        .inc();
    claim_seconds_.observe(std::chrono::duration<double>(Clock::now() - t0).count());
    return ApiResult<SandboxService::Created>(std::move(*claimed));
  }
  {
    std::lock_guard lock(mu_);
    if (auto it = pools_.find(name); it != pools_.end()) ++it->second.misses;
  }
  miss(name, reason);
  return std::nullopt;
}

std::string PoolService::start() {
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
  return std::to_string(pools_.size()) + " pools, " + std::to_string(rebuilt) +
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
        wake = std::min(wake, std::max(pool.next_try, Clock::now()));
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
      if (pool.next_try > now) continue;
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
