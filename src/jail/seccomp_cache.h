// The compiled seccomp program, cached on the host. Compiling the policy
// with libseccomp costs about a millisecond per `corral run`; the program
// only changes when the policy table, libseccomp or the architecture does,
// so it is kept in <run_dir>/seccomp-<key>.bpf, where <key> hashes exactly
// those. A missing, short or unreadable cache file is never trusted as
// "no filter": corral compiles again (fail closed).
#pragma once

#include <linux/filter.h>

#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "jail/seccomp_policy.h"

namespace corral {

// Hash of everything the compiled program depends on: libseccomp's
// version, the architecture, the program's shape and every field of every
// rule of the table.
std::string seccomp_policy_key();
std::string seccomp_policy_key(std::span<const SeccompRule> rules);

Result<std::vector<sock_filter>> load_seccomp_program(const std::string& cache_dir);

}  // namespace corral
