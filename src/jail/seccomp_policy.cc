// The seccomp compiler: the table (jail/seccomp_table.cc) to a classic BPF
// program through libseccomp, for the native architecture or another one.
#include "jail/seccomp_policy.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "base/unique_fd.h"

namespace corral {

namespace {

struct FilterDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};
using FilterCtx = std::unique_ptr<void, FilterDeleter>;

std::string arch_name(std::uint32_t token) {
  switch (token) {
    case SCMP_ARCH_X86_64:
      return "x86_64";
    case SCMP_ARCH_AARCH64:
      return "aarch64";
    case SCMP_ARCH_X86:
      return "x86";
    case SCMP_ARCH_ARM:
      return "arm";
    default:
      break;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "arch 0x%x", token);
  return buf;
}

std::string libseccomp_version() {
  const scmp_version* v = seccomp_version();
  if (v == nullptr) return "libseccomp ?";
  return "libseccomp " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->micro);
}

std::string rule_label(const SeccompRule& rule) {
  std::string label(rule.syscall);
  if (rule.arg_op != SeccompArgOp::kNone) {
    label += "(arg" + std::to_string(rule.arg_index) + ")";
  }
  return label;
}

// Appends (mask, value) pairs whose SCMP_CMP_MASKED_EQ tests together
// match exactly the numbers in [lo, hi]: the range is cut into aligned
// power-of-two blocks, like a CIDR cover of an address range.
void cover_range(std::uint64_t lo, std::uint64_t hi, std::uint64_t domain_mask,
                 std::vector<std::pair<std::uint64_t, std::uint64_t>>* out) {
  for (;;) {
    int k = 0;
    while (k < 63) {
      const std::uint64_t next = 1ULL << (k + 1);
      if ((lo & (next - 1)) != 0) break;  // lo not aligned to a block that big
      if (hi - lo < next - 1) break;      // a block that big overshoots hi
      ++k;
    }
    const std::uint64_t span = (1ULL << k) - 1;
    out->emplace_back(domain_mask & ~span, lo);
    if (hi - lo == span) return;
    lo += span + 1;
  }
}

using Cmp = std::vector<scmp_arg_cmp>;  // the tests of one libseccomp rule, ANDed
using Cmps = std::vector<Cmp>;          // several libseccomp rules, ORed

tl::unexpected<Error> policy_bug(const SeccompRule& rule, std::string_view what) {
  return make_error(ErrorCode::kInternal,
                    "seccomp policy: rule " + rule_label(rule) + ": " + std::string(what));
}

scmp_arg_cmp masked_eq(unsigned arg, std::uint64_t mask, std::uint64_t value) {
  return scmp_arg_cmp{arg, SCMP_CMP_MASKED_EQ, mask, value};
}

// Tests matching exactly the values v with (v & mask) outside `set`.
// libseccomp allows one test per argument per rule, so "not 1, not 2, not
// 10" cannot be one rule; instead the complement of the set is covered
// with masked-equal blocks (plus one >= test above the largest value when
// all 64 bits count). mask must be 2^k - 1.
Cmps not_in_set(unsigned arg, std::uint64_t mask, std::vector<std::uint64_t> set) {
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  Cmps out;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> blocks;
  std::uint64_t next = 0;  // lowest value not yet covered or in the set
  for (std::uint64_t v : set) {
    if (v > next) cover_range(next, v - 1, mask, &blocks);
    next = v + 1;
  }
  if (set.back() != mask) {
    if (mask == ~0ULL) {
      out.push_back({scmp_arg_cmp{arg, SCMP_CMP_GE, set.back() + 1, 0}});
    } else {
      cover_range(set.back() + 1, mask, mask, &blocks);
    }
  }
  for (const auto& [m, v] : blocks) out.push_back({masked_eq(arg, m, v)});
  return out;
}

Cmps in_set(unsigned arg, std::uint64_t mask, const std::vector<std::uint64_t>& set) {
  Cmps out;
  for (std::uint64_t v : set) out.push_back({masked_eq(arg, mask, v)});
  return out;
}

Status check_arg_rule(const SeccompRule& rule) {
  if (rule.arg_index < 0 || rule.arg_index > 5) return policy_bug(rule, "arg_index must be 0..5");
  const std::uint64_t mask = rule.arg_mask;
  switch (rule.arg_op) {
    case SeccompArgOp::kNone:
      break;
    case SeccompArgOp::kEqual:
      if (rule.arg_values.size() != 1) return policy_bug(rule, "kEqual needs exactly one value");
      if ((rule.arg_values[0] & ~mask) != 0)
        return policy_bug(rule, "value has bits outside arg_mask");
      break;
    case SeccompArgOp::kMaskedAnyBitSet:
      if (mask == 0) return policy_bug(rule, "kMaskedAnyBitSet needs a non-zero mask");
      break;
    case SeccompArgOp::kNotInSet:
      if ((mask & (mask + 1)) != 0) return policy_bug(rule, "kNotInSet needs arg_mask = 2^k - 1");
      if (rule.arg_values.empty()) return policy_bug(rule, "kNotInSet needs at least one value");
      for (std::uint64_t v : rule.arg_values) {
        if ((v & ~mask) != 0) return policy_bug(rule, "allowed value has bits outside arg_mask");
      }
      break;
  }
  return ok();
}

// The calls one argument rule refuses.
Cmps refused_calls(const SeccompRule& rule) {
  const auto arg = static_cast<unsigned int>(rule.arg_index);
  Cmps out;
  switch (rule.arg_op) {
    case SeccompArgOp::kNone:
      out.emplace_back();
      break;
    case SeccompArgOp::kEqual:
      out = in_set(arg, rule.arg_mask, rule.arg_values);
      break;
    case SeccompArgOp::kMaskedAnyBitSet:
      // libseccomp has no "any bit set" test: one rule per bit.
      for (int bit = 0; bit < 64; ++bit) {
        const std::uint64_t b = 1ULL << bit;
        if ((rule.arg_mask & b) != 0) out.push_back({masked_eq(arg, b, b)});
      }
      break;
    case SeccompArgOp::kNotInSet:
      out = not_in_set(arg, rule.arg_mask, rule.arg_values);
      break;
  }
  return out;
}

// The calls of a syscall that none of its argument rules refuses: what
// its whole-call allow rule still lets through. The rules look at one
// argument, under one mask, with one kind of test.
Result<Cmps> remaining_calls(const std::vector<const SeccompRule*>& arg_rules) {
  const SeccompRule& first = *arg_rules.front();
  for (const SeccompRule* r : arg_rules) {
    if (r->arg_index != first.arg_index || r->arg_mask != first.arg_mask ||
        r->arg_op != first.arg_op) {
      return policy_bug(*r, "argument rules of one syscall must share argument, mask and kind");
    }
  }
  const auto arg = static_cast<unsigned int>(first.arg_index);
  switch (first.arg_op) {
    case SeccompArgOp::kEqual: {
      if ((first.arg_mask & (first.arg_mask + 1)) != 0)
        return policy_bug(first, "kEqual rules need arg_mask = 2^k - 1");
      std::vector<std::uint64_t> refused;
      for (const SeccompRule* r : arg_rules) refused.push_back(r->arg_values[0]);
      return not_in_set(arg, first.arg_mask, refused);
    }
    case SeccompArgOp::kMaskedAnyBitSet: {
      std::uint64_t bits = 0;
      for (const SeccompRule* r : arg_rules) bits |= r->arg_mask;
      return Cmps{{masked_eq(arg, bits, 0)}};
    }
    case SeccompArgOp::kNotInSet:
      if (arg_rules.size() != 1) return policy_bug(first, "one kNotInSet rule per syscall");
      return in_set(arg, first.arg_mask, first.arg_values);
    case SeccompArgOp::kNone:
      break;
  }
  return policy_bug(first, "not an argument rule");
}

// The rows of one syscall.
struct SyscallRows {
  const SeccompRule* whole = nullptr;
  std::vector<const SeccompRule*> by_arg;
};

Result<std::vector<std::pair<std::string_view, SyscallRows>>> group_rows(
    std::span<const SeccompRule> rules) {
  std::vector<std::pair<std::string_view, SyscallRows>> out;
  std::map<std::string_view, std::size_t> index;
  for (const SeccompRule& rule : rules) {
    auto [it, fresh] = index.try_emplace(rule.syscall, out.size());
    if (fresh) out.emplace_back(rule.syscall, SyscallRows{});
    SyscallRows& rows = out[it->second].second;
    if (rule.arg_op == SeccompArgOp::kNone) {
      if (rows.whole != nullptr) return policy_bug(rule, "a second whole-call rule");
      rows.whole = &rule;
    } else {
      if (rule.action == SeccompAction::kAllow)
        return policy_bug(rule, "an argument rule refuses; allow is the whole call's");
      rows.by_arg.push_back(&rule);
    }
    if (rule.action == SeccompAction::kErrno && (rule.errno_value <= 0 || rule.errno_value > 4095))
      return policy_bug(rule, "bad errno value");
    if (Status s = check_arg_rule(rule); rule.arg_op != SeccompArgOp::kNone && !s)
      return tl::unexpected(std::move(s).error());
  }
  for (const auto& [name, rows] : out) {
    if (rows.by_arg.empty()) continue;
    const SeccompRule& first = *rows.by_arg.front();
    if (rows.whole == nullptr || rows.whole->action != SeccompAction::kAllow)
      return policy_bug(
          first, "argument rules need a whole-call allow rule for the calls they let through");
    for (const SeccompRule* r : rows.by_arg) {
      if (r->arches != rows.whole->arches || r->optional != rows.whole->optional ||
          r->fallback_nr != rows.whole->fallback_nr)
        return policy_bug(*r, "arches/optional/fallback differ from the whole-call rule");
    }
  }
  return out;
}

std::uint32_t action_of(const SeccompRule& rule) {
  switch (rule.action) {
    case SeccompAction::kAllow:
      return SCMP_ACT_ALLOW;
    case SeccompAction::kErrno:
      return SCMP_ACT_ERRNO(static_cast<std::uint32_t>(rule.errno_value));
    case SeccompAction::kKillProcess:
      return SCMP_ACT_KILL_PROCESS;
  }
  return SCMP_ACT_KILL_PROCESS;
}

Result<std::vector<sock_filter>> export_program(void* ctx) {
  UniqueFd mem(memfd_create("corral-seccomp-bpf", MFD_CLOEXEC));
  if (!mem) return errno_error("memfd_create(corral-seccomp-bpf)");
  int rc = seccomp_export_bpf(ctx, mem.get());
  if (rc < 0) return errno_error("seccomp_export_bpf", -rc);
  struct stat st {};
  if (fstat(mem.get(), &st) != 0) return errno_error("fstat(seccomp memfd)");
  const auto bytes = static_cast<std::size_t>(st.st_size);
  if (bytes == 0 || bytes % sizeof(sock_filter) != 0 ||
      bytes / sizeof(sock_filter) > BPF_MAXINSNS) {
    return make_error(ErrorCode::kInternal, "seccomp_export_bpf wrote " + std::to_string(bytes) +
                                                " bytes, not 1.." + std::to_string(BPF_MAXINSNS) +
                                                " instructions");
  }
  std::vector<sock_filter> program(bytes / sizeof(sock_filter));
  auto* dst = reinterpret_cast<char*>(program.data());
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n = pread(mem.get(), dst + done, bytes - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("pread(seccomp memfd)");
    if (n == 0) return make_error(ErrorCode::kInternal, "seccomp memfd shorter than its size");
    done += static_cast<std::size_t>(n);
  }
  return program;
}

}  // namespace

SeccompArch seccomp_native_arch() {
#if defined(__x86_64__)
  return kSeccompX86_64;
#elif defined(__aarch64__)
  return kSeccompAarch64;
#else
  return static_cast<SeccompArch>(0);
#endif
}

std::uint32_t seccomp_arch_token(SeccompArch arch) {
  return arch == kSeccompAarch64 ? SCMP_ARCH_AARCH64 : SCMP_ARCH_X86_64;
}

std::uint32_t seccomp_audit_arch(SeccompArch arch) {
  return arch == kSeccompAarch64 ? AUDIT_ARCH_AARCH64 : AUDIT_ARCH_X86_64;
}

const char* seccomp_arch_label(SeccompArch arch) {
  return arch == kSeccompAarch64 ? "aarch64" : "x86_64";
}

int seccomp_rule_syscall_nr(const SeccompRule& rule, SeccompArch arch) {
  if ((rule.arches & arch) == 0) return -1;
  const std::string name(rule.syscall);
  const int nr = seccomp_syscall_resolve_name_arch(seccomp_arch_token(arch), name.c_str());
  if (nr >= 0) return nr;
  // A negative number other than __NR_SCMP_ERROR is a libseccomp pseudo
  // syscall: known, but absent on this architecture.
  if (nr != __NR_SCMP_ERROR) return -1;
  if (rule.fallback_nr >= 0 && arch == seccomp_native_arch()) return rule.fallback_nr;
  return -1;
}

int seccomp_rule_syscall_nr(const SeccompRule& rule) {
  return seccomp_rule_syscall_nr(rule, seccomp_native_arch());
}

Result<std::vector<sock_filter>> compile_seccomp_filter(const SeccompOptions& options) {
  (void)options;  // no option changes the table yet
  return compile_seccomp_rules(seccomp_policy());
}

Result<std::vector<sock_filter>> compile_seccomp_rules(std::span<const SeccompRule> rules) {
  return compile_seccomp_rules(rules, seccomp_native_arch());
}

Result<std::vector<sock_filter>> compile_seccomp_rules(std::span<const SeccompRule> rules,
                                                       SeccompArch arch) {
  if (arch != kSeccompX86_64 && arch != kSeccompAarch64) {
    return make_error(ErrorCode::kUnavailable,
                      "seccomp policy: corral's table is written for x86_64 and aarch64 only");
  }
  auto grouped = group_rows(rules);
  if (!grouped) return tl::unexpected(std::move(grouped).error());

  // Default deny: a syscall no rule names answers ENOSYS.
  FilterCtx ctx(seccomp_init(SCMP_ACT_ERRNO(kSeccompDefaultErrno)));
  if (!ctx) return make_error(ErrorCode::kInternal, "seccomp_init(SCMP_ACT_ERRNO) failed");
  const bool native = arch == seccomp_native_arch();
  const std::uint32_t token = seccomp_arch_token(arch);
  int rc = 0;
  if (!native) {
    // Rules are still given in native numbers; libseccomp translates them
    // by name.
    rc = seccomp_arch_add(ctx.get(), token);
    if (rc < 0) return errno_error("seccomp_arch_add(" + arch_name(token) + ")", -rc);
    rc = seccomp_arch_remove(ctx.get(), SCMP_ARCH_NATIVE);
    if (rc < 0) return errno_error("seccomp_arch_remove(native)", -rc);
  }
  // A syscall made through another ABI (int 0x80 on x86_64) would be
  // judged against other numbers: kill instead. libseccomp also sends x32
  // numbers (nr | 0x40000000) on x86_64 to this action (the unit tests
  // prove it on the live kernel).
  rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (rc < 0) return errno_error("seccomp_attr_set(ACT_BADARCH, KILL_PROCESS)", -rc);
  // Binary tree over syscall numbers: every call pays ~log2(n) jumps
  // rather than one per rule.
  rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2);
  if (rc < 0) return errno_error("seccomp_attr_set(CTL_OPTIMIZE, 2)", -rc);

  auto add = [&](const SeccompRule& rule, int nr, std::uint32_t action, const Cmp& cmps) -> Status {
    const int r =
        seccomp_rule_add_array(ctx.get(), action, nr, static_cast<unsigned int>(cmps.size()),
                               cmps.empty() ? nullptr : cmps.data());
    if (r < 0) {
      return make_error(ErrorCode::kInternal, "seccomp_rule_add(" + rule_label(rule) + ", nr " +
                                                  std::to_string(nr) + ", " + arch_name(token) +
                                                  "): " + std::string(errno_name(-r)));
    }
    return ok();
  };

  for (const auto& [name, rows] : *grouped) {
    const SeccompRule& base = rows.whole != nullptr ? *rows.whole : *rows.by_arg.front();
    if ((base.arches & arch) == 0) continue;
    const int arch_nr = seccomp_rule_syscall_nr(base, arch);
    if (arch_nr < 0) {
      if (base.optional) continue;
      return make_error(ErrorCode::kUnavailable,
                        "seccomp policy: syscall '" + std::string(name) + "' is unknown to " +
                            libseccomp_version() + " on " + arch_name(token),
                        "the sandbox would run under a policy other than the documented one, "
                        "so corral refuses; use a libseccomp that knows the syscall, or mark "
                        "the rule optional (with its number) if it is newer");
    }
    // The number libseccomp expects: the native one, translated by name.
    int nr = arch_nr;
    if (!native) {
      nr = seccomp_syscall_resolve_name(std::string(name).c_str());
      if (nr == __NR_SCMP_ERROR) continue;
    }
    if (rows.by_arg.empty()) {
      // An errno equal to the default is the default: libseccomp refuses
      // such a rule, and it would compile to nothing anyway.
      if (base.action == SeccompAction::kErrno && base.errno_value == kSeccompDefaultErrno)
        continue;
      if (Status s = add(base, nr, action_of(base), {}); !s) return tl::unexpected(s.error());
      continue;
    }
    for (const SeccompRule* r : rows.by_arg) {
      for (const Cmp& cmps : refused_calls(*r)) {
        if (Status s = add(*r, nr, action_of(*r), cmps); !s) return tl::unexpected(s.error());
      }
    }
    auto rest = remaining_calls(rows.by_arg);
    if (!rest) return tl::unexpected(std::move(rest).error());
    for (const Cmp& cmps : *rest) {
      if (Status s = add(base, nr, SCMP_ACT_ALLOW, cmps); !s) return tl::unexpected(s.error());
    }
  }
  return export_program(ctx.get());
}

}  // namespace corral
