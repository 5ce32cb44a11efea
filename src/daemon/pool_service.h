// PoolService: warm pools (REQUIREMENTS.md C4, docs/adr/0015-warm-pools.md).
// Each pool keeps sandboxes of one identity-free spec made ahead (by
// SandboxService::create_pooled: the same create, capacity reservation
// and audit as any other), hidden until a create claims one. A create that
// names a pool, or whose spec equals one's (identity left out), takes a
// sandbox (SandboxService::claim_pooled binds the caller's env, workdir,
// timeout and max_lifetime); a miss goes on as a cold create.
//
// One refill thread makes sandboxes, one at a time, for the pool furthest
// below its target, and backs a pool off (1 s doubling to 60 s) while its
// creates fail (over capacity, setup failures). Its mutex is a leaf: no
// SandboxService call is made under it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daemon/metrics.h"
#include "daemon/pool_settings.h"
#include "daemon/sandbox_service.h"

namespace corral::daemon {

// The idempotency-key prefix that marks a pooled sandbox's store row until
// it is claimed; clients may not use it.
inline constexpr std::string_view kPoolKeyPrefix = "corral-pool:";

struct PoolStatus {
  PoolSettings settings;
  std::string spec_json;  // the pooled sandboxes' spec (canonical)
  std::uint32_t ready = 0;
  std::uint32_t building = 0;
  std::uint32_t target = 0;  // what the refill aims for now (min..max)
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t refill_failures = 0;
  std::int64_t backoff_ms = 0;  // until the next refill attempt; 0: none
  std::string last_error;       // the last failed refill's message
  bool from_config = false;
};

class PoolService;

// A create body (POST /v1/sandboxes, a task's "sandbox"), its "pool" read
// here: the rest is read over that pool's spec, or over `defaults` without
// one. 404 (field "pool") for a pool `pools` does not have.
ApiResult<api::CreateSandboxRequest> parse_create_over_pool(PoolService* pools,
                                                            const SandboxSpec& defaults,
                                                            const std::string& body);

class PoolService {
 public:
  PoolService(SandboxService& sandboxes, MetricsRegistry& metrics);
  ~PoolService();  // stops the refill thread; pooled sandboxes stay (start() rebuilds)
  PoolService(const PoolService&) = delete;
  PoolService& operator=(const PoolService&) = delete;

  // A new pool: 400 for settings that cannot make a pool (with the field),
  // 409 for a name in use. A pool not from the config is stored (the
  // state store's pools table) and rebuilt by the next daemon's start().
  ApiResult<PoolStatus> add(const PoolSettings& settings, bool from_config = false);
  // Ends a pool (and its stored row, for good): its ready sandboxes are
  // destroyed; claimed ones live on.
  ApiResult<PoolStatus> remove(const std::string& name);
  std::vector<PoolStatus> list();
  ApiResult<PoolStatus> get(const std::string& name);
  // The spec a create naming `name` is read over; nullopt: no such pool.
  std::optional<SandboxSpec> base_spec(const std::string& name);

  // Adds the pools stored by POST /v1/pools (a config pool of the same
  // name wins), destroys what a previous daemon left pooled (its rows
  // still carry the pool key), then starts the refill thread. Returns a
  // summary.
  std::string start();
  void stop();

  // SandboxService's claimer: nullopt when the create goes on cold (a
  // miss, or a create no pool is about).
  // `key_is_fresh` (SandboxService::Claimer) is asked only once a pool is
  // about the create: without pools a create costs one map lookup here.
  std::optional<ApiResult<SandboxService::Created>> claim(
      const api::CreateSandboxRequest& request, const std::optional<std::string>& key,
      const std::function<bool()>& key_is_fresh, const std::string& ns = "default");

  // The spec with the claim-time fields left out: what a match compares.
  static std::string match_key(const SandboxSpec& spec);

 private:
  struct Pool {
    PoolSettings settings;
    SandboxSpec spec;       // read over the daemon's defaults
    std::string key;        // match_key(spec)
    std::uint64_t generation = 0;
    bool from_config = false;
    std::deque<std::string> ready;  // ids, oldest first
    std::uint32_t building = 0;
    std::deque<std::chrono::steady_clock::time_point> recent_claims;
    int failures_in_a_row = 0;
    std::chrono::steady_clock::time_point next_try{};
    // After a claim that left the pool a ready sandbox, the refill waits
    // this long: the claimer's first command gets the CPUs first.
    std::chrono::steady_clock::time_point hold_until{};
    std::uint64_t hits = 0, misses = 0, refill_failures = 0;
    std::string last_error;
  };
  // add() without the row (`store_it` false: rebuilt from it).
  ApiResult<PoolStatus> insert(const PoolSettings& settings, bool from_config, bool store_it);
  // The stored pools added again; the summary's part about them.
  std::string restore();
  std::uint32_t target_of(Pool& pool, std::chrono::steady_clock::time_point now);
  PoolStatus status_of(Pool& pool, std::chrono::steady_clock::time_point now);
  void update_gauges(const Pool& pool);
  void refill_loop();
  // One refill step; false when nothing was due.
  bool refill_once();
  void forget_gone();
  void miss(const std::string& pool, const std::string& reason);

  SandboxService& sandboxes_;
  MetricsRegistry& metrics_;
  Histogram& claim_seconds_;

  std::mutex mu_;  // guards what follows; a leaf (no SandboxService call under it)
  std::condition_variable cv_;
  std::map<std::string, Pool, std::less<>> pools_;
  std::atomic<std::size_t> pool_count_{0};  // pools_.size(), read without mu_ by claim()
  std::uint64_t next_generation_ = 1;
  bool stopping_ = false;
  std::thread refill_;
};

}  // namespace corral::daemon
