// One warm pool as configured (serve.pools) or posted (POST /v1/pools):
// C4, docs/adr/0015-warm-pools.md, docs/config.md "pools".
#pragma once

#include <cstdint>
#include <string>

namespace corral::daemon {

struct PoolSettings {
  std::string name;             // [a-z0-9][a-z0-9._-]{0,62}
  std::uint32_t min = 1;        // kept ready at all times (capacity permitting)
  std::uint32_t max = 0;        // ready + being made after a burst of claims; 0: min
  std::int64_t idle_limit_ms = 600'000;  // an unclaimed sandbox is replaced after this
  // The sandbox spec as a create body (JSON), read over the daemon's
  // `sandbox:` defaults: limits, image, root, hostname, workdir, env; no
  // secrets, network, mounts or volumes (those are bound by a cold create).
  std::string sandbox_json = "{}";
};

}  // namespace corral::daemon
