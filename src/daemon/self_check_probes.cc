// SelfCheckProbes (self_check_probes.h): a short list, since only the
// sandboxes being checked right now have entries.
#include "daemon/self_check_probes.h"

#include <algorithm>

namespace corral::daemon {

void SelfCheckProbes::expect(const std::string& sandbox, std::string_view layer,
                             std::string_view name) {
  const auto now = Clock::now();
  std::lock_guard lock(mu_);
  std::erase_if(expected_, [&](const Probe& p) { return p.until < now; });
  expected_.push_back(Probe{sandbox, std::string(layer), std::string(name), now + kWait});
}

bool SelfCheckProbes::take(std::string_view sandbox, std::string_view layer,
                           std::string_view name) {
  const auto now = Clock::now();
  std::lock_guard lock(mu_);
  if (expected_.empty()) return false;
  auto it = std::find_if(expected_.begin(), expected_.end(), [&](const Probe& p) {
    return p.until >= now && p.sandbox == sandbox && p.layer == layer && p.name == name;
  });
  if (it == expected_.end()) return false;
  expected_.erase(it);
  return true;
}

}  // namespace corral::daemon
