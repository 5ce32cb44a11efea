// Limit counters for diagnostics (REQUIREMENTS.md T1) that CgroupStats does
// not carry: CPU throttling and memory-limit hits, read from a sandbox
// cgroup's directories (Cgroup::paths(): one per v1 hierarchy, one on v2).
// The version is told by the files themselves, so one reader serves both:
//
//   cpu.stat       v1 nr_throttled, throttled_time (ns)
//                  v2 nr_throttled, throttled_usec
//   memory         v1 memory.failcnt (the RAM limit, which equals the
//                  RAM + swap one and is reached first)
//                  v2 memory.events "max"
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace corral {

struct CgroupLimitCounters {
  std::uint64_t cpu_throttled_periods = 0;
  std::uint64_t cpu_throttled_ns = 0;
  std::uint64_t memory_limit_hits = 0;  // usage reached the limit; the kernel reclaimed
};

// A directory without a file is no error (that controller is elsewhere, or
// the kernel lacks the counter): its counters stay 0. A file that cannot be
// read or parsed is an error naming it.
Result<CgroupLimitCounters> read_limit_counters(const std::vector<std::string>& dirs);

}  // namespace corral
