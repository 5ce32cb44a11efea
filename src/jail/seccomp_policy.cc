#include "jail/seccomp_policy.h"

#include <errno.h>
#include <linux/filter.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "base/unique_fd.h"

namespace corral {

namespace {

// Every namespace flag clone(2) accepts. CLONE_NEWTIME is absent on
// purpose: for clone(2) that bit (0x80) is part of the exit-signal byte,
// and the kernel only honours it in clone3/unshare, both denied outright.
constexpr std::uint64_t kCloneNewFlags = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS |
                                         CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET;

// The kernel reads these arguments as int / unsigned int.
constexpr std::uint64_t kLow32 = 0xffffffffULL;

// personality(2) values a sandbox may set. Only the "uname flavour" bits:
//  - PER_LINUX (0): the default, and how a program resets itself;
//  - PER_LINUX32 (8): uname reports i686 (linux32, setarch, 32-bit builds);
//  - UNAME26 (0x20000): uname reports 2.6.x, for old build scripts;
//  - PER_LINUX32 | UNAME26: both of the above together;
//  - 0xffffffff: query the current value without changing it.
// Everything else is refused, notably the flags that weaken exploit
// mitigations for the programs the sandbox runs next (ADDR_NO_RANDOMIZE
// turns ASLR off, READ_IMPLIES_EXEC makes readable memory executable,
// MMAP_PAGE_ZERO maps page 0) and the foreign personalities (SVr4, ...)
// that carry those flags.
const std::vector<std::uint64_t> kPersonalityAllowed = {
    PER_LINUX, PER_LINUX32, UNAME26, std::uint64_t{PER_LINUX32} | std::uint64_t{UNAME26},
    0xffffffffULL};

// Socket families a sandbox may create. The rest answer EAFNOSUPPORT, the
// errno of a kernel built without that family, so programs fall back.
const std::vector<std::uint64_t> kSocketFamiliesAllowed = {AF_UNIX, AF_INET, AF_INET6};

std::vector<SeccompRule> build_policy() {
  using A = SeccompAction;
  using Op = SeccompArgOp;
  return {
      // --- namespaces and mounts: corral built the sandbox's view; nothing inside may remake it
      {.syscall = "unshare",
       .why = "new namespaces hand the sandbox CAP_SYS_ADMIN over fresh kernel objects, the "
              "entry point of most namespace exploits; corral already made every one needed"},
      {.syscall = "clone",
       .arg_op = Op::kMaskedAnyBitSet,
       .arg_index = 0,
       .arg_mask = kCloneNewFlags,
       .why = "clone with a CLONE_NEW* flag is unshare by another name; plain fork and threads "
              "stay allowed"},
      {.syscall = "clone3",
       .errno_value = ENOSYS,
       .why = "its flags sit in memory seccomp cannot read, so namespace flags cannot be "
              "refused; ENOSYS makes libc fall back to clone(2), which is checked"},
      {.syscall = "setns",
       .why = "joining another namespace through a passed or leaked fd steps out of the "
              "sandbox's view"},
      {.syscall = "mount",
       .why = "remounting could lift a read-only bind or uncover a masked /proc path"},
      {.syscall = "umount2", .why = "unmounting uncovers what corral's masks and binds hide"},
      {.syscall = "pivot_root",
       .why = "only a container runtime needs to swap roots; it exercises mount internals"},
      {.syscall = "chroot",
       .why = "nested roots are a classic escape primitive and confuse path-based checks"},
      {.syscall = "move_mount", .why = "new mount API: attaches a mount like mount(2) does"},
      {.syscall = "open_tree",
       .why = "new mount API: clones a mount tree into an fd that can be reattached or changed"},
      {.syscall = "open_tree_attr",
       .optional = true,
       .fallback_nr = 467,
       .why = "open_tree plus mount_setattr in one call (Linux 6.15); same surface as both"},
      {.syscall = "fsopen",
       .why = "new mount API: creates a filesystem context, the parser behind CVE-2022-0185"},
      {.syscall = "fsconfig",
       .why = "new mount API: feeds mount options to a filesystem context's parser"},
      {.syscall = "fsmount", .why = "new mount API: turns a configured context into a mount"},
      {.syscall = "fspick",
       .why = "new mount API: reopens an existing superblock for reconfiguration"},
      {.syscall = "mount_setattr",
       .why = "changes mount flags (read-only, nosuid, idmap) of a mount tree"},

      // --- kernel subsystems with a long exploit history and no use in a sandbox
      {.syscall = "keyctl",
       .why = "kernel keyrings are not fully namespaced and have a long bug history"},
      {.syscall = "add_key", .why = "creates kernel keys; see keyctl"},
      {.syscall = "request_key",
       .why = "asks the kernel (and its upcall helpers on the host) for a key; see keyctl"},
      {.syscall = "bpf",
       .why = "loads programs into the kernel verifier and JIT, a frequent escalation path"},
      {.syscall = "perf_event_open",
       .why = "performance counters leak kernel addresses, open side channels, and are a "
              "common exploit target"},
      {.syscall = "userfaultfd",
       .why = "pauses the kernel inside a user copy, the standard way to win kernel races"},
      {.syscall = "io_uring_setup",
       .why = "io_uring runs I/O that seccomp never sees and has had many escalation bugs"},
      {.syscall = "io_uring_enter", .why = "submits io_uring work; see io_uring_setup"},
      {.syscall = "io_uring_register", .why = "configures an io_uring; see io_uring_setup"},

      // --- reaching into other processes
      {.syscall = "ptrace",
       .why = "a tracer rewrites another task's memory and syscalls (before Linux 4.8 that "
              "also undid the tracee's seccomp checks)"},
      {.syscall = "process_vm_readv", .why = "reads another process's memory (ptrace-like)"},
      {.syscall = "process_vm_writev", .why = "writes another process's memory (ptrace-like)"},
      {.syscall = "kcmp",
       .why = "compares kernel objects of two processes, leaking kernel pointer order"},
      {.syscall = "pidfd_getfd", .why = "copies a file descriptor out of another process"},

      // --- host administration: the kernel, modules, power, swap, accounting
      {.syscall = "kexec_load", .why = "replaces the running kernel"},
      {.syscall = "kexec_file_load", .why = "replaces the running kernel"},
      {.syscall = "init_module", .why = "loads code into the kernel"},
      {.syscall = "finit_module", .why = "loads code into the kernel"},
      {.syscall = "delete_module", .why = "unloads kernel modules the host relies on"},
      {.syscall = "reboot",
       .why = "reboots or halts (in a pid namespace: kills the sandbox's init)"},
      {.syscall = "swapon", .why = "adds host swap"},
      {.syscall = "swapoff", .why = "removes host swap"},
      {.syscall = "acct",
       .why = "process accounting writes a record of every exit to a file of the caller's "
              "choosing"},
      {.syscall = "quotactl", .why = "disk quota administration of host filesystems"},
      {.syscall = "quotactl_fd", .why = "disk quota administration, by fd"},
      {.syscall = "syslog",
       .why = "reads (kernel addresses, host events) or clears the kernel log"},
      {.syscall = "vhangup", .why = "hangs up the controlling terminal, which may be the host's"},

      // --- the clock is shared with the host (a time namespace only covers monotonic clocks)
      {.syscall = "settimeofday", .why = "sets the host's wall clock"},
      {.syscall = "clock_settime", .why = "sets the host's wall clock"},
      {.syscall = "clock_adjtime", .why = "adjusts the host's clock (and reads NTP state)"},
      {.syscall = "adjtimex", .why = "adjusts the host's clock (and reads NTP state)"},

      // --- hardware and obsolete interfaces
      {.syscall = "iopl",
       .optional = true,
       .why = "x86 only: raw I/O port access for the whole process"},
      {.syscall = "ioperm",
       .optional = true,
       .why = "x86 only: raw I/O port access for a port range"},
      {.syscall = "uselib",
       .optional = true,
       .why = "obsolete a.out library loader; dead code the sandbox should not reach"},
      {.syscall = "lookup_dcookie",
       .optional = true,
       .why = "obsolete profiling hook that turns a kernel cookie into a path"},
      {.syscall = "nfsservctl",
       .optional = true,
       .why = "removed NFS server control; nothing legitimate calls it"},

      // --- file handles: they ignore the mount namespace
      {.syscall = "open_by_handle_at",
       .why = "opens any file of a filesystem by handle, ignoring the sandbox's mounts (the "
              "2014 'shocker' container escape)"},
      {.syscall = "name_to_handle_at",
       .why = "mints the handles open_by_handle_at uses, and reveals inode identities"},
      {.syscall = "fanotify_init",
       .why = "filesystem-wide event and permission hooks, meant for host virus scanners"},

      // --- argument filters
      {.syscall = "personality",
       .arg_op = Op::kNotInSet,
       .arg_index = 0,
       .arg_mask = kLow32,
       .arg_values = kPersonalityAllowed,
       .why = "flags like ADDR_NO_RANDOMIZE and READ_IMPLIES_EXEC switch off exploit "
              "mitigations; only the uname flavours and the query pass"},
      {.syscall = "ioctl",
       .arg_op = Op::kEqual,
       .arg_index = 1,
       .arg_mask = kLow32,
       .arg_values = {TIOCSTI},
       .why = "TIOCSTI pushes keystrokes into a terminal's input, typing commands into a "
              "shared host tty"},
      {.syscall = "ioctl",
       .arg_op = Op::kEqual,
       .arg_index = 1,
       .arg_mask = kLow32,
       .arg_values = {TIOCLINUX},
       .why = "TIOCLINUX selection paste injects text into a virtual console, like TIOCSTI"},
      {.syscall = "socket",
       .errno_value = EAFNOSUPPORT,
       .arg_op = Op::kNotInSet,
       .arg_index = 0,
       .arg_mask = kLow32,
       .arg_values = kSocketFamiliesAllowed,
       .why = "families beyond unix/inet/inet6 (netlink, packet, vsock, bluetooth...) are "
              "rarely needed kernel code with a long bug history"},
      {.syscall = "socketpair",
       .errno_value = EAFNOSUPPORT,
       .arg_op = Op::kNotInSet,
       .arg_index = 0,
       .arg_mask = kLow32,
       .arg_values = kSocketFamiliesAllowed,
       .why = "creates sockets of the named family before it fails, so same families as socket"},

      // --- deliberately allowed: listed so nobody adds them by mistake
      {.syscall = "landlock_create_ruleset",
       .action = A::kAllow,
       .optional = true,
       .why = "Landlock only ever restricts its caller; programs may sandbox themselves further"},
      {.syscall = "landlock_add_rule",
       .action = A::kAllow,
       .optional = true,
       .why = "Landlock only ever restricts its caller"},
      {.syscall = "landlock_restrict_self",
       .action = A::kAllow,
       .optional = true,
       .why = "Landlock only ever restricts its caller"},
      {.syscall = "lsm_get_self_attr",
       .action = A::kAllow,
       .optional = true,
       .fallback_nr = 459,
       .why = "reads the caller's own LSM labels"},
      {.syscall = "lsm_set_self_attr",
       .action = A::kAllow,
       .optional = true,
       .fallback_nr = 460,
       .why = "LSM-checked change of the caller's own labels; the LSM decides, not seccomp"},
      {.syscall = "lsm_list_modules",
       .action = A::kAllow,
       .optional = true,
       .fallback_nr = 461,
       .why = "lists the active LSMs; read-only"},
      {.syscall = "seccomp",
       .action = A::kAllow,
       .why = "a program may add filters of its own; a filter can only restrict"},
      {.syscall = "mbind",
       .action = A::kAllow,
       .why = "NUMA placement of the caller's own memory; restricts, grants nothing"},
      {.syscall = "set_mempolicy",
       .action = A::kAllow,
       .why = "NUMA policy of the caller itself; restricts, grants nothing"},
      {.syscall = "migrate_pages",
       .action = A::kAllow,
       .why = "moves pages between NUMA nodes; other processes need ptrace rights, which "
              "only sandbox peers can have"},
      {.syscall = "move_pages",
       .action = A::kAllow,
       .why = "like migrate_pages, per page; same ptrace check"},
  };
}

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

// The libseccomp argument tests of one rule. Each inner vector is one
// libseccomp rule (its tests are ANDed); the rules are ORed.
Result<std::vector<std::vector<scmp_arg_cmp>>> rule_comparisons(const SeccompRule& rule) {
  std::vector<std::vector<scmp_arg_cmp>> out;
  auto bad = [&](std::string_view what) {
    return make_error(ErrorCode::kInternal,
                      "seccomp policy: rule " + rule_label(rule) + ": " + std::string(what));
  };
  if (rule.arg_op == SeccompArgOp::kNone) {
    out.emplace_back();
    return out;
  }
  if (rule.arg_index < 0 || rule.arg_index > 5) return bad("arg_index must be 0..5");
  const auto arg = static_cast<unsigned int>(rule.arg_index);
  const std::uint64_t mask = rule.arg_mask;
  auto masked_eq = [arg](std::uint64_t m, std::uint64_t v) {
    return scmp_arg_cmp{arg, SCMP_CMP_MASKED_EQ, m, v};
  };
  switch (rule.arg_op) {
    case SeccompArgOp::kNone:
      break;
    case SeccompArgOp::kEqual:
      if (rule.arg_values.size() != 1) return bad("kEqual needs exactly one value");
      if ((rule.arg_values[0] & ~mask) != 0) return bad("value has bits outside arg_mask");
      out.push_back({masked_eq(mask, rule.arg_values[0])});
      break;
    case SeccompArgOp::kMaskedAnyBitSet:
      // libseccomp has no "any bit set" test: one rule per bit.
      if (mask == 0) return bad("kMaskedAnyBitSet needs a non-zero mask");
      for (int bit = 0; bit < 64; ++bit) {
        const std::uint64_t b = 1ULL << bit;
        if ((mask & b) != 0) out.push_back({masked_eq(b, b)});
      }
      break;
    case SeccompArgOp::kNotInSet: {
      // libseccomp allows one test per argument per rule, so "not 1, not 2,
      // not 10" cannot be one rule; instead the complement of the set is
      // covered with masked-equal blocks (plus one >= test above the
      // largest value when all 64 bits count).
      if ((mask & (mask + 1)) != 0) return bad("kNotInSet needs arg_mask = 2^k - 1");
      if (rule.arg_values.empty()) return bad("kNotInSet needs at least one allowed value");
      std::vector<std::uint64_t> allowed = rule.arg_values;
      std::sort(allowed.begin(), allowed.end());
      allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());
      if (allowed.back() > mask) return bad("allowed value has bits outside arg_mask");
      std::vector<std::pair<std::uint64_t, std::uint64_t>> blocks;
      std::uint64_t next = 0;  // lowest value not yet covered or allowed
      for (std::uint64_t v : allowed) {
        if (v > next) cover_range(next, v - 1, mask, &blocks);
        next = v + 1;
      }
      for (const auto& [m, v] : blocks) out.push_back({masked_eq(m, v)});
      if (allowed.back() != mask) {
        if (mask == ~0ULL) {
          out.push_back({scmp_arg_cmp{arg, SCMP_CMP_GE, allowed.back() + 1, 0}});
        } else {
          std::vector<std::pair<std::uint64_t, std::uint64_t>> tail;
          cover_range(allowed.back() + 1, mask, mask, &tail);
          for (const auto& [m, v] : tail) out.push_back({masked_eq(m, v)});
        }
      }
      break;
    }
  }
  return out;
}

}  // namespace

const std::vector<SeccompRule>& seccomp_policy() {
  static const std::vector<SeccompRule> policy = build_policy();
  return policy;
}

int seccomp_rule_syscall_nr(const SeccompRule& rule) {
  const std::string name(rule.syscall);
  const int nr = seccomp_syscall_resolve_name(name.c_str());
  if (nr >= 0) return nr;
  // A negative number other than __NR_SCMP_ERROR is a libseccomp pseudo
  // syscall: known, but absent on this architecture.
  if (nr != __NR_SCMP_ERROR) return -1;
#if defined(__x86_64__) || defined(__aarch64__)
  if (rule.fallback_nr >= 0) return rule.fallback_nr;
#endif
  return -1;
}

Result<std::vector<sock_filter>> compile_seccomp_filter(const SeccompOptions& options) {
  (void)options;  // no option changes the table yet
  return compile_seccomp_rules(seccomp_policy());
}

Result<std::vector<sock_filter>> compile_seccomp_rules(std::span<const SeccompRule> rules) {
  FilterCtx ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) {
    return make_error(ErrorCode::kInternal, "seccomp_init(SCMP_ACT_ALLOW) failed");
  }
  // A syscall made through another ABI (int 0x80 on x86_64) would be
  // judged against other numbers: kill instead. libseccomp also sends x32
  // numbers (nr | 0x40000000) on x86_64 to this action (the unit tests
  // prove it on the live kernel).
  int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (rc < 0) return errno_error("seccomp_attr_set(ACT_BADARCH, KILL_PROCESS)", -rc);
  // Binary tree over syscall numbers: every allowed call pays ~log2(n)
  // jumps rather than one per rule.
  rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2);
  if (rc < 0) return errno_error("seccomp_attr_set(CTL_OPTIMIZE, 2)", -rc);

  const std::string arch = arch_name(seccomp_arch_native());
  for (const SeccompRule& rule : rules) {
    if (rule.action == SeccompAction::kAllow) continue;
    const int nr = seccomp_rule_syscall_nr(rule);
    if (nr < 0) {
      if (rule.optional) continue;
      return make_error(ErrorCode::kUnavailable,
                        "seccomp policy: syscall '" + std::string(rule.syscall) +
                            "' is unknown to " + libseccomp_version() + " on " + arch,
                        "the sandbox would run without this rule, so corral refuses; use a "
                        "libseccomp that knows the syscall, or mark the rule optional if it "
                        "does not exist on " +
                            arch);
    }
    std::uint32_t action = 0;
    switch (rule.action) {
      case SeccompAction::kAllow:
        continue;
      case SeccompAction::kErrno:
        if (rule.errno_value <= 0 || rule.errno_value > 4095) {
          return make_error(ErrorCode::kInternal,
                            "seccomp policy: rule " + rule_label(rule) + ": bad errno value");
        }
        action = SCMP_ACT_ERRNO(static_cast<std::uint32_t>(rule.errno_value));
        break;
      case SeccompAction::kKillProcess:
        action = SCMP_ACT_KILL_PROCESS;
        break;
    }
    auto comparisons = rule_comparisons(rule);
    if (!comparisons) return tl::unexpected(std::move(comparisons).error());
    for (const std::vector<scmp_arg_cmp>& cmps : *comparisons) {
      rc = seccomp_rule_add_array(ctx.get(), action, nr, static_cast<unsigned int>(cmps.size()),
                                  cmps.empty() ? nullptr : cmps.data());
      if (rc < 0) {
        return make_error(ErrorCode::kInternal, "seccomp_rule_add(" + rule_label(rule) + ", nr " +
                                                    std::to_string(nr) +
                                                    "): " + std::string(errno_name(-rc)));
      }
    }
  }

  UniqueFd mem(memfd_create("corral-seccomp-bpf", MFD_CLOEXEC));
  if (!mem) return errno_error("memfd_create(corral-seccomp-bpf)");
  rc = seccomp_export_bpf(ctx.get(), mem.get());
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

}  // namespace corral
