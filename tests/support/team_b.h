// A second namespace for the tests of namespace isolation (volumes, task
// inputs from a volume; REQUIREMENTS.md D2): the API key of "team-b" and a
// daemon config that binds it, with room for a few small volumes.
#pragma once

#include <string>

#include "base/sha256.h"

namespace corral::testing {

// A key of namespace "team-b" (its digest is in team_b_config()).
inline constexpr char kTeamBKey[] = "crl_teamb_0123456789abcdef0123456789abcdef";

inline std::string team_b_config() {
  return "serve:\n  api_keys:\n    namespaces:\n      - name: team-b\n        sha256: [" +
         sha256_hex(kTeamBKey) + "]\n  volumes:\n    max_quota: 64Mi\n    max_total: 1Gi\n";
}

}  // namespace corral::testing
