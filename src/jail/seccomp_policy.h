// The seccomp policy as data (ARCHITECTURE.md "Isolation"): default DENY,
// an allowlist of the calls ordinary programs make, and an explicit list
// of the calls refused on purpose, each entry with the reason
// (jail/seccomp_table.cc). compile_seccomp_filter() turns it into a
// classic BPF program in the launcher, so the post-fork child only has to
// install it (jail/seccomp_install.h; no allocation after fork).
//
// A syscall no rule names answers ENOSYS, as a kernel without it would,
// so programs fall back; the calls refused on purpose answer EPERM (or
// the errno of their row). docs/seccomp.md is the user-facing copy of
// the table; a unit test checks that they name the same syscalls.
#pragma once

#include <errno.h>
#include <linux/filter.h>

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace corral {

enum class SeccompAction {
  kAllow,        // the call reaches the kernel
  kErrno,        // the call fails with -1 and errno_value, the kernel is never entered
  kKillProcess,  // SIGSYS the whole process
};

// What a syscall no rule names gets: ENOSYS, what a kernel built without
// it answers, so libc and runtimes take their fallback path.
inline constexpr int kSeccompDefaultErrno = ENOSYS;

// The architectures the table is written for (bit set).
enum SeccompArch : unsigned {
  kSeccompX86_64 = 1u << 0,
  kSeccompAarch64 = 1u << 1,
  kSeccompAllArches = kSeccompX86_64 | kSeccompAarch64,
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

// One row. A syscall has either one rule for the whole call, or one
// whole-call kAllow rule plus argument rules that refuse the calls they
// match (all on the same argument and mask, of one kind): the allow is
// then "every other call of it".
struct SeccompRule {
  std::string_view syscall;  // name as libseccomp knows it
  SeccompAction action = SeccompAction::kErrno;
  int errno_value = EPERM;
  SeccompArgOp arg_op = SeccompArgOp::kNone;
  int arg_index = -1;
  std::uint64_t arg_mask = ~0ULL;
  std::vector<std::uint64_t> arg_values;  // one for kEqual, the allowed set for kNotInSet
  // Where the syscall exists (x86-64 keeps the old open/stat/fork family
  // that aarch64 only has as *at/clone forms). Elsewhere the row is
  // skipped, and the call gets the default answer.
  unsigned arches = kSeccompAllArches;
  // The name may be unknown to the installed libseccomp (the syscall is
  // newer than it): then fallback_nr is used, or the row is skipped if
  // there is none. A required row that cannot be resolved fails the
  // compile rather than silently changing the policy.
  bool optional = false;
  // Number to use when libseccomp does not know the name. Syscalls added
  // since Linux 5.1 (number 424 on) share one number on x86_64 and arm64;
  // a row of one architecture may carry that architecture's number.
  // -1: none.
  int fallback_nr = -1;
  std::string_view why;  // one line: what it is for, or what an attacker would do with it
};

struct SeccompOptions {
  bool allow_chown_family = true;  // kept for future per-spec tightening
};

// The table (stable order, for docs and tests).
const std::vector<SeccompRule>& seccomp_policy();

// The architecture corral runs on (kSeccompX86_64 or kSeccompAarch64; 0
// elsewhere, where no policy is built).
SeccompArch seccomp_native_arch();

// libseccomp's token (SCMP_ARCH_*) and the kernel's AUDIT_ARCH_* value of
// one of ours.
std::uint32_t seccomp_arch_token(SeccompArch arch);
std::uint32_t seccomp_audit_arch(SeccompArch arch);
const char* seccomp_arch_label(SeccompArch arch);

// The syscall number of `rule` on `arch` (by name through libseccomp, then
// fallback_nr), or -1 when the row does not apply there. fallback_nr only
// counts for the native architecture: libseccomp translates rules for
// another one by name, which an unknown syscall lacks.
int seccomp_rule_syscall_nr(const SeccompRule& rule, SeccompArch arch);
int seccomp_rule_syscall_nr(const SeccompRule& rule);  // native

// Builds the BPF program for this architecture: architecture check (any
// other arch -> kill the process), x32 syscall numbers (nr | 0x40000000)
// -> kill the process, then the rules, then ENOSYS for everything else.
// Fails closed if a required rule names a syscall libseccomp cannot resolve.
Result<std::vector<sock_filter>> compile_seccomp_filter(const SeccompOptions& options);

// The same for any table and architecture (tests build the aarch64 program
// on x86-64 hosts and check the compiler itself with small tables).
Result<std::vector<sock_filter>> compile_seccomp_rules(std::span<const SeccompRule> rules);
Result<std::vector<sock_filter>> compile_seccomp_rules(std::span<const SeccompRule> rules,
                                                       SeccompArch arch);

}  // namespace corral
