#include "jail/capabilities.h"

#include "sys/syscalls.h"

#include <sys/prctl.h>
#include <unistd.h>

namespace corral {

std::uint64_t root_capability_mask() {
  std::uint64_t mask = 0;
  for (const auto& c : kRootCapabilities) mask |= 1ULL << c.value;
  return mask;
}

int drop_bounding_set(std::uint64_t keep) {
  // Clearing ambient first: PR_CAP_AMBIENT_CLEAR_ALL cannot fail for lack
  // of privilege.
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) return -1;
  for (int cap = 0; cap <= 63; ++cap) {
    if (keep & (1ULL << cap)) continue;
    if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0) break;  // past the last known cap
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) return -1;
  }
  return 0;
}

int set_capabilities(std::uint64_t keep) { return sys::capset_mask(keep); }

}  // namespace corral
