// Installing the compiled seccomp program (jail/seccomp_policy.h) in the
// calling thread: the last isolation step before exec. Post-fork safe.
#pragma once

#include <linux/filter.h>

#include <span>

#include "base/result.h"

namespace corral {

// prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) and nothing else: no
// allocation, no logging. The caller must have set PR_SET_NO_NEW_PRIVS
// first (or hold CAP_SYS_ADMIN), else the kernel answers EACCES. The
// filter applies to the calling thread and everything it execs or forks.
// Returns 0, or -1 with errno set (EINVAL also for an empty or oversized
// program); post-fork code reports {Stage::kSeccomp, errno} from this.
int install_seccomp_filter_raw(std::span<const sock_filter> program) noexcept;

// The same, with the error as a value. Allocates only on failure (to
// build the message), so post-fork code should use the _raw form.
Status install_seccomp_filter(std::span<const sock_filter> program);

}  // namespace corral
