// serve.pools of the daemon config (warm pools, C4; docs/config.md
// "pools", docs/adr/0015-warm-pools.md):
//
//   pools:
//     - name: py
//       min: 4             # kept ready
//       max: 8             # after a burst of claims; default: min
//       idle_limit: 10m    # an unclaimed sandbox is replaced after this
//       sandbox:           # a create body (docs/api.md), over sandbox:
//         image: python
//         limits: {memory: 512Mi, cpus: 1}
#pragma once

#include <vector>

#include "base/result.h"
#include "daemon/pool_settings.h"
#include "spec/yaml_reader.h"

namespace corral {

// Reads the list of `entry` (serve.pools) into `out`. Unknown keys and
// malformed values are refused with their line; the sandbox spec itself is
// checked when the pool is added (PoolService::add), at the daemon's start.
Status apply_pool_config(const YamlReader& reader, const YamlEntry& entry,
                         std::vector<daemon::PoolSettings>& out);

}  // namespace corral
