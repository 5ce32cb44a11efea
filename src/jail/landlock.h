// Landlock (defense in depth beneath the mount namespace): the sandbox may
// read and execute everywhere it can see, but write only below the paths
// the plan lists; with ABI 6+ it also cannot signal processes or reach
// abstract unix sockets outside its own domain. The ABI is negotiated at
// run time: this kernel speaks 7, Debian 12's headers know 2.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"

namespace corral {

// 0 when Landlock is unavailable (not built, or disabled at boot).
int landlock_abi();

struct LandlockRule {
  const char* path;  // inside the sandbox, after pivot_root
  bool writable;     // false: read + execute only
};

// What the sandbox may do, computed before fork.
struct LandlockPlan {
  int abi = 0;
  std::uint64_t handled_fs = 0;  // every fs right this ABI knows
  std::uint64_t read_rights = 0;
  std::uint64_t write_rights = 0;
  std::uint64_t scoped = 0;      // ABI 6: signal + abstract unix socket scoping
  std::vector<LandlockRule> rules;
};

// Fills the rights masks for `abi`. Paths are added by the caller.
LandlockPlan make_landlock_plan(int abi);

// Post-fork safe: builds the ruleset and restricts the calling thread.
// Paths that do not exist are skipped. Returns 0 or -1 with errno.
int apply_landlock(const LandlockPlan& plan);

// The two halves of apply_landlock, for the zygote: it builds the ruleset
// while it may still open every path, then restricts itself, founding the
// sandbox's one domain that all its children inherit (ADR 0006). The rules
// hold the inodes they were built on. Both post-fork safe.
int build_landlock_ruleset(const LandlockPlan& plan);  // an O_CLOEXEC fd, or -1
int restrict_to_landlock_ruleset(int ruleset);          // 0, or -1 with errno

}  // namespace corral
