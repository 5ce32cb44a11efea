// The embedded default base layer (F1, F4): a small skeleton directory with
// a curated /etc, and the host's system directories bound read-only over it
// at sandbox start. Nothing else of the host is visible: no /home, /root,
// /etc/shadow, /var, /run or project tree.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace corral {

struct HostBase {
  std::string rootfs;                  // the skeleton (overlay lower layer)
  std::vector<std::string> bind_dirs;  // absolute host dirs bound read-only at the same path
  UniqueFd in_use;                     // shared lock: keeps this skeleton from being collected
};

// The /etc entries copied from the host (world-readable files only).
const std::vector<std::string>& host_base_etc_entries();

// Returns the skeleton, building it under <data_dir>/base/ if missing or
// out of date with the host (an apt upgrade changes ld.so.cache). When it
// builds a new one, it removes the old skeletons that no sandbox holds and
// partial builds whose builder died.
Result<HostBase> ensure_host_base();

}  // namespace corral
