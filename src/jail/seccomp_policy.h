// The seccomp policy as data (ARCHITECTURE.md "Isolation"): default allow,
// and a deny list of the kernel attack surface that sandboxes agree on,
// each entry with the reason. compile_seccomp_filter() turns it into a
// classic BPF program in the launcher, so the post-fork child only has to
// install it (jail/seccomp_install.h; no allocation after fork).
//
// docs/seccomp.md is the user-facing copy of the table; a unit test checks
// that every syscall named here appears there.
#pragma once

#include <linux/filter.h>

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace corral {

enum class SeccompAction {
  kAllow,        // a documented decision NOT to filter; compiles to nothing
  kErrno,        // the call fails with -1 and errno_value, the kernel is never entered
  kKillProcess,  // SIGSYS the whole process
};

// How a rule looks at one argument of the call. Arguments the kernel reads
// as 32-bit (int, unsigned int) should use arg_mask = 0xffffffff: the
// kernel ignores the upper half of the register, so the rule must too,
// or garbage in the upper half would slip a value past it.
enum class SeccompArgOp {
  kNone,             // every call of the syscall
  kEqual,            // (arg & arg_mask) == arg_values[0]
  kMaskedAnyBitSet,  // (arg & arg_mask) != 0; arg_values unused
  kNotInSet,         // (arg & arg_mask) is none of arg_values; arg_mask must be 2^k-1
};

struct SeccompRule {
  std::string_view syscall;  // name as libseccomp knows it
  SeccompAction action = SeccompAction::kErrno;
  int errno_value = 1;  // EPERM
  SeccompArgOp arg_op = SeccompArgOp::kNone;
  int arg_index = -1;
  std::uint64_t arg_mask = ~0ULL;
  std::vector<std::uint64_t> arg_values;  // one for kEqual, the allowed set for kNotInSet
  // A syscall that may not exist on this architecture or may be unknown to
  // this libseccomp (e.g. iopl on arm64): skipped instead of failing the
  // compile. A required rule whose syscall cannot be resolved fails closed.
  bool optional = false;
  // Number to use when libseccomp does not know the name. Syscalls added
  // since Linux 5.1 (number 424 on) share one number on x86_64 and arm64;
  // used only there. -1: none.
  int fallback_nr = -1;
  std::string_view why;  // one line: what an attacker would do with it
};

struct SeccompOptions {
  bool allow_chown_family = true;  // kept for future per-spec tightening
};

// The table (stable order, for docs and tests).
const std::vector<SeccompRule>& seccomp_policy();

// The syscall number of `rule` on this architecture (resolving the name
// through libseccomp, then fallback_nr), or -1 when it does not exist here.
int seccomp_rule_syscall_nr(const SeccompRule& rule);

// Builds the BPF program: architecture check (non-native arch -> kill the
// process), x32 syscall numbers (nr | 0x40000000) -> kill the process,
// then the rules. Fails closed if any rule names a syscall unknown on this
// architecture, unless the rule is marked optional.
Result<std::vector<sock_filter>> compile_seccomp_filter(const SeccompOptions& options);

// The same for any table (tests use it to check the compiler itself).
Result<std::vector<sock_filter>> compile_seccomp_rules(std::span<const SeccompRule> rules);

}  // namespace corral
