// The seccomp table and its compiled programs, for x86_64 and aarch64:
// the table's invariants, the docs, and every syscall number libseccomp
// knows run through the compiled program (tests/unit/seccomp_bpf.h
// interprets it) against what the table says. The live kernel is in
// seccomp_policy_test.cc.
#include <errno.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <termios.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "jail/seccomp_policy.h"
#include "seccomp_bpf.h"

namespace corral {
namespace {

using namespace seccomp_test;
using Args = std::array<std::uint64_t, 6>;
using U64s = std::initializer_list<std::uint64_t>;

constexpr std::uint64_t kHigh = 1ULL << 32;  // garbage in the upper half of a register
constexpr std::uint64_t kMinus1 = ~0ULL;

std::vector<const SeccompRule*> rules_for(std::string_view name) {
  std::vector<const SeccompRule*> out;
  for (const SeccompRule& r : seccomp_policy()) {
    if (r.syscall == name) out.push_back(&r);
  }
  return out;
}

const SeccompRule* whole_rule(std::string_view name) {
  for (const SeccompRule* r : rules_for(name)) {
    if (r->arg_op == SeccompArgOp::kNone) return r;
  }
  return nullptr;
}

int nr_on(SeccompArch arch, const char* name) {
  return seccomp_syscall_resolve_name_arch(seccomp_arch_token(arch), name);
}

// ------------------------------------------------------------- the oracle

std::uint32_t answer_of(const SeccompRule& r) {
  switch (r.action) {
    case SeccompAction::kAllow:
      return kAllow;
    case SeccompAction::kErrno:
      return ret_errno(r.errno_value);
    case SeccompAction::kKillProcess:
      return kKill;
  }
  return 0;
}

bool arg_rule_matches(const SeccompRule& r, const Args& args) {
  const std::uint64_t v = args[static_cast<std::size_t>(r.arg_index)] & r.arg_mask;
  switch (r.arg_op) {
    case SeccompArgOp::kNone:
      return true;
    case SeccompArgOp::kEqual:
      return v == r.arg_values[0];
    case SeccompArgOp::kMaskedAnyBitSet:
      return v != 0;
    case SeccompArgOp::kNotInSet:
      return std::find(r.arg_values.begin(), r.arg_values.end(), v) == r.arg_values.end();
  }
  return false;
}

// What the table says `name` called with `args` gets on `arch`, read
// straight from the rows: the reference for the compiled program.
std::uint32_t table_answer(std::string_view name, const Args& args, SeccompArch arch) {
  const SeccompRule* whole = nullptr;
  for (const SeccompRule* r : rules_for(name)) {
    if ((r->arches & arch) == 0) continue;
    if (r->arg_op == SeccompArgOp::kNone) {
      whole = r;
    } else if (arg_rule_matches(*r, args)) {
      return answer_of(*r);
    }
  }
  return whole != nullptr ? answer_of(*whole) : kDefault;
}

// Argument lists that probe every edge of the argument rules of `name`:
// each listed value, its neighbours, with junk in the upper half, every
// single bit, and the extremes.
std::vector<Args> sample_args(std::string_view name) {
  std::vector<Args> out = {Args{}};
  for (const SeccompRule* r : rules_for(name)) {
    if (r->arg_op == SeccompArgOp::kNone) continue;
    std::set<std::uint64_t> values = {0, 1, kMinus1, 0xffffffff, 0x7fffffff, 0x80000000, kHigh};
    for (std::uint64_t v : r->arg_values) {
      for (std::uint64_t x : U64s{v, v - 1, v + 1, v | kHigh, v | 0xdeadbeef00000000ULL})
        values.insert(x);
    }
    for (int bit = 0; bit < 64; ++bit) {
      values.insert(1ULL << bit);
      values.insert(~(1ULL << bit));
      values.insert((1ULL << bit) | SIGCHLD);
    }
    for (std::uint64_t v : values) {
      Args a{};
      a[static_cast<std::size_t>(r->arg_index)] = v;
      out.push_back(a);
    }
  }
  return out;
}

// ----------------------------------------------------------------- table

TEST(SeccompPolicyTable, EveryRuleHasASyscallAndAOneLineWhy) {
  for (const SeccompRule& rule : seccomp_policy()) {
    EXPECT_FALSE(rule.syscall.empty());
    EXPECT_GE(rule.why.size(), 10u) << rule.syscall << ": why is missing or too short";
    EXPECT_EQ(rule.why.find('\n'), std::string_view::npos) << rule.syscall;
    EXPECT_NE(rule.arches & kSeccompAllArches, 0u) << rule.syscall;
    if (rule.arg_op == SeccompArgOp::kNone) {
      EXPECT_EQ(rule.arg_index, -1) << rule.syscall;
      EXPECT_TRUE(rule.arg_values.empty()) << rule.syscall;
    } else {
      EXPECT_GE(rule.arg_index, 0) << rule.syscall;
      EXPECT_LE(rule.arg_index, 5) << rule.syscall;
      EXPECT_NE(rule.action, SeccompAction::kAllow) << rule.syscall << ": argument rules refuse";
    }
    if (rule.action == SeccompAction::kErrno) {
      EXPECT_GT(rule.errno_value, 0) << rule.syscall;
    }
  }
}

TEST(SeccompPolicyTable, EachSyscallHasOneWholeCallRowAndArgumentRowsOnlyUnderAnAllow) {
  std::map<std::string_view, int> whole;
  std::map<std::string_view, int> by_arg;
  for (const SeccompRule& rule : seccomp_policy()) {
    ++(rule.arg_op == SeccompArgOp::kNone ? whole : by_arg)[rule.syscall];
  }
  for (const auto& [name, n] : whole) EXPECT_EQ(n, 1) << name << " has " << n << " whole-call rows";
  for (const auto& [name, n] : by_arg) {
    ASSERT_EQ(whole.count(name), 1u) << name << " has argument rows but no whole-call row";
    EXPECT_EQ(whole_rule(name)->action, SeccompAction::kAllow)
        << name << ": argument rows refine an allow; a refused call needs none";
  }
}

// The calls Docker's default profile refuses to a container without extra
// capabilities, plus corral's own stricter choices: none of them may ever
// be allowed, whatever its arguments. A table edit that opens one fails here.
const std::vector<const char*> kNeverAllowed = {
    // namespaces, mounts, roots
    "unshare", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr", "sethostname", "setdomainname", "clone3",
    // kernel subsystems
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "fanotify_init",
    // other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp", "pidfd_getfd",
    // host administration, clock, hardware
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
    "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog", "vhangup", "settimeofday",
    "clock_settime", "iopl", "ioperm", "open_by_handle_at", "lookup_dcookie", "nfsservctl",
    "uselib",
    // NUMA, LDT and other calls Docker's profile leaves out
    "modify_ldt", "mbind", "set_mempolicy", "get_mempolicy", "migrate_pages", "move_pages",
    "set_mempolicy_home_node", "get_thread_area", "set_thread_area", "sysfs", "ustat", "_sysctl",
    "afs_syscall", "create_module", "get_kernel_syms", "query_module", "tuxcall", "security",
    "vserver", "putpmsg", "getpmsg", "epoll_ctl_old", "epoll_wait_old"};

TEST(SeccompPolicyTable, CallsOutsideTheCommonContainerProfileAreNeverAllowed) {
  for (SeccompArch arch : kArches) {
    const std::vector<sock_filter>& prog = program_for(arch);
    ASSERT_FALSE(prog.empty());
    for (const char* name : kNeverAllowed) {
      const int nr = nr_on(arch, name);
      if (nr < 0) continue;  // not on this architecture
      for (const Args& a : sample_args(name)) {
        EXPECT_NE(verdict_of(prog, seccomp_audit_arch(arch), nr, a), kAllow)
            << seccomp_arch_label(arch) << " " << name;
      }
    }
  }
}

TEST(SeccompPolicyTable, NamedCallsHaveTheirDocumentedAnswer) {
  // Refused on purpose: EPERM.
  for (const char* name : {"unshare",
                           "mount",
                           "umount2",
                           "pivot_root",
                           "chroot",
                           "move_mount",
                           "open_tree",
                           "open_tree_attr",
                           "fsopen",
                           "fsconfig",
                           "fsmount",
                           "fspick",
                           "mount_setattr",
                           "keyctl",
                           "add_key",
                           "request_key",
                           "bpf",
                           "perf_event_open",
                           "userfaultfd",
                           "io_uring_setup",
                           "io_uring_enter",
                           "io_uring_register",
                           "ptrace",
                           "process_vm_readv",
                           "process_vm_writev",
                           "process_madvise",
                           "kcmp",
                           "pidfd_getfd",
                           "kexec_load",
                           "kexec_file_load",
                           "init_module",
                           "finit_module",
                           "delete_module",
                           "reboot",
                           "swapon",
                           "swapoff",
                           "acct",
                           "settimeofday",
                           "clock_settime",
                           "clock_adjtime",
                           "adjtimex",
                           "syslog",
                           "quotactl",
                           "quotactl_fd",
                           "lookup_dcookie",
                           "iopl",
                           "ioperm",
                           "uselib",
                           "vhangup",
                           "open_by_handle_at",
                           "name_to_handle_at",
                           "fanotify_init",
                           "nfsservctl",
                           "sethostname",
                           "setdomainname"}) {
    const SeccompRule* rule = whole_rule(name);
    ASSERT_NE(rule, nullptr) << name << " is missing from the policy";
    EXPECT_EQ(rule->action, SeccompAction::kErrno) << name;
    EXPECT_EQ(rule->errno_value, EPERM) << name;
  }
  // As if the kernel lacked them: ENOSYS.
  for (const char* name : {"clone3", "modify_ldt", "mbind", "set_mempolicy", "get_mempolicy",
                           "migrate_pages", "move_pages", "set_mempolicy_home_node",
                           "lsm_get_self_attr", "lsm_set_self_attr", "lsm_list_modules"}) {
    const SeccompRule* rule = whole_rule(name);
    ASSERT_NE(rule, nullptr) << name;
    EXPECT_EQ(rule->action, SeccompAction::kErrno) << name;
    EXPECT_EQ(rule->errno_value, ENOSYS) << name;
  }
  // Allowed, with argument rows refusing part of the calls.
  for (const char* name : {"clone", "personality", "ioctl", "socket", "socketpair", "setns"}) {
    ASSERT_NE(whole_rule(name), nullptr) << name;
    EXPECT_EQ(whole_rule(name)->action, SeccompAction::kAllow) << name;
    EXPECT_GE(rules_for(name).size(), 2u) << name << " lost its argument rows";
  }
  for (const char* name : {"socket", "socketpair"}) {
    for (const SeccompRule* r : rules_for(name)) {
      if (r->arg_op == SeccompArgOp::kNone) continue;
      EXPECT_EQ(r->errno_value, EAFNOSUPPORT) << name;
      EXPECT_EQ(r->arg_op, SeccompArgOp::kNotInSet) << name;
    }
  }
  // Only restrict their caller: allowed.
  for (const char* name :
       {"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self", "seccomp"}) {
    ASSERT_NE(whole_rule(name), nullptr) << name;
    EXPECT_EQ(whole_rule(name)->action, SeccompAction::kAllow) << name;
  }
  // The ioctl rules look at the low 32 bits of the request, as the kernel does.
  int ioctl_rules = 0;
  for (const SeccompRule* rule : rules_for("ioctl")) {
    if (rule->arg_op == SeccompArgOp::kNone) continue;
    ++ioctl_rules;
    EXPECT_EQ(rule->arg_index, 1);
    EXPECT_EQ(rule->arg_mask, 0xffffffffULL);
  }
  EXPECT_EQ(ioctl_rules, 2);
}

// Each row resolves on every architecture it claims, and the
// architecture-specific rows name calls that really are missing elsewhere.
TEST(SeccompPolicyTable, RowsResolveExactlyOnTheirArchitectures) {
  for (const SeccompRule& rule : seccomp_policy()) {
    const std::string name(rule.syscall);
    for (SeccompArch arch : kArches) {
      const int nr = nr_on(arch, name.c_str());
      if ((rule.arches & arch) != 0) {
        if (rule.optional) {
          EXPECT_TRUE(nr >= 0 || (nr == __NR_SCMP_ERROR && rule.fallback_nr >= 0))
              << name << " on " << seccomp_arch_label(arch);
        } else {
          EXPECT_GE(nr, 0) << name << " is required on " << seccomp_arch_label(arch)
                           << " but unknown there";
        }
      } else {
        EXPECT_LT(nr, 0) << name << " exists on " << seccomp_arch_label(arch)
                         << " but the table skips it there";
      }
    }
    if (rule.fallback_nr >= 0) {
      // When libseccomp knows the name, its number must be the fallback.
      for (SeccompArch arch : kArches) {
        const int nr = nr_on(arch, name.c_str());
        if (nr >= 0) {
          EXPECT_EQ(nr, rule.fallback_nr) << name;
        }
      }
    }
  }
}

std::filesystem::path source_dir() {
  if (const char* dir = std::getenv("CORRAL_SOURCE_DIR"); dir != nullptr && dir[0] == '/') {
    return dir;
  }
#ifdef CORRAL_TEST_SOURCE_DIR
  return CORRAL_TEST_SOURCE_DIR;
#else
  // tests/unit/seccomp_table_test.cc -> the repository root.
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
#endif
}

// Every table row shows up in the first column of a docs/seccomp.md table
// row, and every syscall named there is in the table.
TEST(SeccompPolicyTable, DocsListEverySyscallOfTheTable) {
  const std::filesystem::path doc = source_dir() / "docs" / "seccomp.md";
  std::ifstream in(doc);
  ASSERT_TRUE(in) << "cannot read " << doc;
  std::set<std::string> table_names;
  for (const SeccompRule& rule : seccomp_policy()) table_names.insert(std::string(rule.syscall));
  std::set<std::string> doc_names;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| `", 0) != 0) continue;
    const std::string cell = line.substr(1, line.find('|', 1) - 1);
    for (std::size_t at = cell.find('`'); at != std::string::npos;) {
      const std::size_t end = cell.find('`', at + 1);
      ASSERT_NE(end, std::string::npos) << line;
      const std::string name = cell.substr(at + 1, end - at - 1);
      doc_names.insert(name);
      EXPECT_TRUE(table_names.count(name)) << doc << " lists " << name << ", which the table lacks";
      at = cell.find('`', end + 1);
    }
  }
  for (const std::string& name : table_names) {
    EXPECT_TRUE(doc_names.count(name)) << name << " is in the table but in no row of " << doc;
  }
}

// ------------------------------------------------------- compiled programs

class SeccompProgram : public ::testing::TestWithParam<SeccompArch> {
 protected:
  void SetUp() override { ASSERT_FALSE(program_for(GetParam()).empty()); }
  std::uint32_t verdict(int nr, Args args = {}) {
    return verdict_of(program_for(GetParam()), seccomp_audit_arch(GetParam()), nr, args);
  }
  int nr(const char* name) {
    const int n = nr_on(GetParam(), name);
    EXPECT_GE(n, 0) << name;
    return n;
  }
};

TEST_P(SeccompProgram, ChecksTheArchitectureFirstAndFitsTheKernelLimit) {
  const std::vector<sock_filter>& prog = program_for(GetParam());
  EXPECT_LE(prog.size(), static_cast<std::size_t>(BPF_MAXINSNS));
  EXPECT_EQ(prog[0].code, BPF_LD | BPF_W | BPF_ABS);
  EXPECT_EQ(prog[0].k, offsetof(seccomp_data, arch));
  RecordProperty("instructions", static_cast<int>(prog.size()));
}

TEST_P(SeccompProgram, IsDeterministic) {
  auto again = compile_seccomp_rules(seccomp_policy(), GetParam());
  ASSERT_TRUE(again) << again.error().to_string();
  const std::vector<sock_filter>& prog = program_for(GetParam());
  ASSERT_EQ(again->size(), prog.size());
  EXPECT_EQ(std::memcmp(again->data(), prog.data(), prog.size() * sizeof(sock_filter)), 0);
}

// The class test: every syscall number, named or not, gets exactly what the
// table says (with the argument rows probed at their edges), and anything
// the table does not name gets the default ENOSYS.
TEST_P(SeccompProgram, EverySyscallNumberGetsTheTablesAnswer) {
  const SeccompArch arch = GetParam();
  const bool native = arch == seccomp_native_arch();
  std::map<int, const SeccompRule*> by_fallback;  // numbers libseccomp cannot name
  for (const SeccompRule& r : seccomp_policy()) {
    if (r.fallback_nr >= 0 && nr_on(arch, std::string(r.syscall).c_str()) == __NR_SCMP_ERROR)
      by_fallback[r.fallback_nr] = &r;
  }
  int allowed = 0, refused = 0, named = 0;
  std::vector<int> numbers;
  for (int n = 0; n < 1100; ++n) numbers.push_back(n);
  for (int n : {2047, 4095, 65535, 0x3fffffff}) numbers.push_back(n);  // (bit 30: x32, below)
  for (int n : numbers) {
    char* raw = seccomp_syscall_resolve_num_arch(seccomp_arch_token(arch), n);
    std::string name = raw != nullptr ? raw : "";
    free(raw);
    if (name.empty()) {
      auto it = by_fallback.find(n);
      if (it != by_fallback.end() && native) {
        name = std::string(it->second->syscall);
      }
    }
    if (name.empty()) {
      EXPECT_EQ(verdict(n), kDefault) << "unnamed syscall number " << n;
      continue;
    }
    ++named;
    for (const Args& a : sample_args(name)) {
      const std::uint32_t want = table_answer(name, a, arch);
      ASSERT_EQ(verdict(n, a), want) << seccomp_arch_label(arch) << " " << name << " (" << n
                                     << ") args " << std::hex << a[0] << " " << a[1];
    }
    (table_answer(name, Args{}, arch) == kAllow ? allowed : refused) += 1;
  }
  RecordProperty("allowed", allowed);
  RecordProperty("refused", refused);
  EXPECT_GT(named, 300) << "libseccomp names too few syscalls: the test would prove little";
  EXPECT_GT(allowed, 150);
  EXPECT_GT(refused, 40);
}

TEST_P(SeccompProgram, TheCallsTheIssueNamesAndUnassignedNumbersAreRefused) {
  for (const char* name : {"mbind", "set_mempolicy", "migrate_pages", "move_pages"}) {
    EXPECT_EQ(verdict(nr(name)), ret_errno(ENOSYS)) << name;
  }
  EXPECT_EQ(verdict(nr("process_madvise")), ret_errno(EPERM));
  if (GetParam() == kSeccompX86_64) {
    EXPECT_EQ(verdict(nr("modify_ldt")), ret_errno(ENOSYS));
  }
  for (int unassigned : {1000, 999, 4000}) EXPECT_EQ(verdict(unassigned), kDefault) << unassigned;
  // ...while what every program needs passes.
  for (const char* name : {"read", "write", "openat", "mmap", "futex", "execve", "exit_group",
                           "rt_sigreturn", "wait4", "getrandom"}) {
    EXPECT_EQ(verdict(nr(name)), kAllow) << name;
  }
}

TEST_P(SeccompProgram, ForeignArchitecturesAndX32AreKilled) {
  const int getpid_nr = nr("getpid");
  for (std::uint32_t other : std::initializer_list<std::uint32_t>{
           AUDIT_ARCH_I386, AUDIT_ARCH_ARM, AUDIT_ARCH_X86_64, AUDIT_ARCH_AARCH64, 0u}) {
    if (other == seccomp_audit_arch(GetParam())) continue;
    EXPECT_EQ(verdict_of(program_for(GetParam()), other, getpid_nr), kKill) << std::hex << other;
  }
  if (GetParam() == kSeccompX86_64) {
    for (int n : {getpid_nr, 0, 512, 547, 1000}) {
      EXPECT_EQ(verdict(0x40000000 | n), kKill) << "x32 nr " << n;
    }
  }
}

TEST_P(SeccompProgram, SocketFamiliesOutsideUnixInetInet6AnswerEafnosupport) {
  for (std::uint64_t family = 0; family < 4096; ++family) {
    const bool allowed = family == AF_UNIX || family == AF_INET || family == AF_INET6;
    for (std::uint64_t high : U64s{std::uint64_t{0}, kHigh, 0xffffffff00000000ULL}) {
      const std::uint32_t want = allowed ? kAllow : ret_errno(EAFNOSUPPORT);
      ASSERT_EQ(verdict(nr("socket"), {family | high, SOCK_STREAM}), want) << family << " " << high;
      ASSERT_EQ(verdict(nr("socketpair"), {family | high, SOCK_STREAM}), want) << family;
    }
  }
  for (std::uint64_t family : U64s{0x7fffffffULL, 0x80000000ULL, 0xfffffffeULL, 0xffffffffULL,
                                   0x10000ULL | AF_INET, 0x100ULL | AF_UNIX, kMinus1}) {
    EXPECT_EQ(verdict(nr("socket"), {family}), ret_errno(EAFNOSUPPORT)) << std::hex << family;
  }
}

// setns joins a user namespace only (the zygote's children join the
// sandbox's command namespace after the filter is in, ADR 0006); every other
// type, and 0 (any type), is refused, in whatever high bits it comes.
TEST_P(SeccompProgram, SetnsJoinsOnlyAUserNamespace) {
  const int n = nr("setns");
  for (std::uint64_t high : U64s{std::uint64_t{0}, kHigh, 0xffffffff00000000ULL}) {
    EXPECT_EQ(verdict(n, {3, CLONE_NEWUSER | high}), kAllow) << std::hex << high;
    for (std::uint64_t type : U64s{0, CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                                   CLONE_NEWPID, CLONE_NEWNET, 0x80 /* CLONE_NEWTIME */,
                                   CLONE_NEWUSER | CLONE_NEWNET, CLONE_NEWUSER | 1, 0xffffffff}) {
      EXPECT_EQ(verdict(n, {3, type | high}), ret_errno(EPERM)) << std::hex << type;
    }
  }
}

TEST_P(SeccompProgram, PersonalityAllowsOnlyUnameFlavoursAndTheQuery) {
  const int p = nr("personality");
  const std::set<std::uint64_t> allowed = {0, PER_LINUX32, UNAME26, 0x20008, 0xffffffff};
  for (std::uint64_t v = 0; v < 0x90000; ++v) {
    const std::uint32_t want = allowed.count(v) ? kAllow : ret_errno(EPERM);
    ASSERT_EQ(verdict(p, {v}), want) << std::hex << v;
  }
  for (int bit = 0; bit < 64; ++bit) {
    const std::uint64_t v = 1ULL << bit;
    const bool ok = bit >= 32 || allowed.count(v);  // the kernel reads 32 bits
    EXPECT_EQ(verdict(p, {v}), ok ? kAllow : ret_errno(EPERM)) << bit;
    EXPECT_EQ(verdict(p, {0xffffffffULL ^ v}), bit < 32 ? ret_errno(EPERM) : kAllow) << bit;
  }
  EXPECT_EQ(verdict(p, {kMinus1}), kAllow);  // (unsigned)-1: the query
  EXPECT_EQ(verdict(p, {kHigh | ADDR_NO_RANDOMIZE}), ret_errno(EPERM));
  EXPECT_EQ(verdict(p, {READ_IMPLIES_EXEC}), ret_errno(EPERM));
  EXPECT_EQ(verdict(p, {PER_SVR4}), ret_errno(EPERM));
}

TEST_P(SeccompProgram, CloneIsRefusedExactlyWhenANamespaceFlagIsSet) {
  const int c = nr("clone");
  const std::uint64_t ns = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC |
                           CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET;
  for (int bit = 0; bit < 64; ++bit) {
    const std::uint64_t flag = 1ULL << bit;
    const std::uint32_t want = (flag & ns) != 0 ? ret_errno(EPERM) : kAllow;
    EXPECT_EQ(verdict(c, {flag | SIGCHLD}), want) << std::hex << flag;
    EXPECT_EQ(verdict(c, {flag | SIGCHLD | kHigh}), want) << std::hex << flag;
  }
  EXPECT_EQ(verdict(c, {ns | SIGCHLD}), ret_errno(EPERM));
  // What glibc's fork() and pthread_create() fall back to, and the zygote's spawn.
  EXPECT_EQ(verdict(c, {CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD}), kAllow);
  EXPECT_EQ(verdict(c, {CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
                        CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID}),
            kAllow);
  EXPECT_EQ(verdict(c, {CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD}), kAllow);
  EXPECT_EQ(verdict(nr("clone3"), {0, 0}), ret_errno(ENOSYS));
}

TEST_P(SeccompProgram, IoctlRefusesTiocstiAndTioclinuxWhateverTheUpperHalf) {
  const int io = nr("ioctl");
  for (std::uint64_t high : U64s{std::uint64_t{0}, kHigh, 0xdeadbeef00000000ULL}) {
    EXPECT_EQ(verdict(io, {0, TIOCSTI | high}), ret_errno(EPERM)) << std::hex << high;
    EXPECT_EQ(verdict(io, {0, TIOCLINUX | high}), ret_errno(EPERM)) << std::hex << high;
    for (std::uint64_t request :
         U64s{std::uint64_t{TCGETS}, std::uint64_t{TIOCSTI + 1}, std::uint64_t{TIOCSTI - 1},
              std::uint64_t{FIONREAD}, std::uint64_t{TIOCGWINSZ}, 0ULL, 0xffffffffULL,
              0xc0185879ULL /* an _IOWR */}) {
      EXPECT_EQ(verdict(io, {0, request | high}), kAllow) << std::hex << request;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Arches, SeccompProgram, ::testing::ValuesIn(kArches),
                         [](const ::testing::TestParamInfo<SeccompArch>& info) {
                           return std::string(seccomp_arch_label(info.param));
                         });

// ---------------------------------------------------------------- compiler

std::uint32_t run(const std::vector<sock_filter>& prog, const char* name, Args args = {}) {
  const SeccompArch arch = seccomp_native_arch();
  return verdict_of(prog, seccomp_audit_arch(arch), nr_on(arch, name), args);
}

TEST(SeccompCompiler, RequiredUnknownSyscallFailsClosedWithItsName) {
  const std::vector<SeccompRule> rules = {{.syscall = "corral_no_such_syscall", .why = "test"}};
  auto compiled = compile_seccomp_rules(rules);
  ASSERT_FALSE(compiled);
  EXPECT_EQ(compiled.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(compiled.error().message.find("corral_no_such_syscall"), std::string::npos)
      << compiled.error().message;
  EXPECT_FALSE(compiled.error().hint.empty());
}

TEST(SeccompCompiler, ARowClaimingAnArchitectureWithoutTheCallFailsClosed) {
  const std::vector<SeccompRule> rules = {
      {.syscall = "open", .action = SeccompAction::kAllow, .why = "test: x86-64 only"}};
  EXPECT_TRUE(compile_seccomp_rules(rules, kSeccompX86_64));
  auto arm = compile_seccomp_rules(rules, kSeccompAarch64);
  ASSERT_FALSE(arm);
  EXPECT_NE(arm.error().message.find("open"), std::string::npos);
}

TEST(SeccompCompiler, OptionalUnknownSyscallIsSkippedAndTheRestDefaultsToEnosys) {
  const std::vector<SeccompRule> rules = {
      {.syscall = "corral_no_such_syscall", .optional = true, .why = "test"},
      {.syscall = "getppid", .why = "test"},
      {.syscall = "getuid", .action = SeccompAction::kAllow, .why = "test"}};
  auto compiled = compile_seccomp_rules(rules);
  ASSERT_TRUE(compiled) << compiled.error().to_string();
  EXPECT_EQ(run(*compiled, "getppid"), ret_errno(EPERM));
  EXPECT_EQ(run(*compiled, "getuid"), kAllow);
  EXPECT_EQ(run(*compiled, "getpid"), ret_errno(ENOSYS));
}

TEST(SeccompCompiler, AnErrnoEqualToTheDefaultIsAccepted) {
  const std::vector<SeccompRule> rules = {
      {.syscall = "getppid", .errno_value = ENOSYS, .why = "test: same as the default"}};
  auto compiled = compile_seccomp_rules(rules);
  ASSERT_TRUE(compiled) << compiled.error().to_string();
  EXPECT_EQ(run(*compiled, "getppid"), ret_errno(ENOSYS));
}

TEST(SeccompCompiler, FallbackNumberIsUsedWhenTheNameIsUnknown) {
  const std::vector<SeccompRule> rules = {{.syscall = "corral_no_such_syscall",
                                           .errno_value = EXDEV,
                                           .fallback_nr = 467,
                                           .why = "test"}};
  auto compiled = compile_seccomp_rules(rules);
  ASSERT_TRUE(compiled) << compiled.error().to_string();
  const std::uint32_t audit = seccomp_audit_arch(seccomp_native_arch());
  EXPECT_EQ(verdict_of(*compiled, audit, 467), ret_errno(EXDEV));
  EXPECT_EQ(verdict_of(*compiled, audit, 466), ret_errno(ENOSYS));
}

TEST(SeccompCompiler, MalformedRulesAreOurBug) {
  using Op = SeccompArgOp;
  const SeccompRule allow_getppid{
      .syscall = "getppid", .action = SeccompAction::kAllow, .why = "base"};
  const std::vector<std::vector<SeccompRule>> bad = {
      {allow_getppid,
       {.syscall = "getppid", .arg_op = Op::kEqual, .arg_index = 0, .why = "no value"}},
      {allow_getppid,
       {.syscall = "getppid",
        .arg_op = Op::kEqual,
        .arg_index = 6,
        .arg_values = {1},
        .why = "no such argument"}},
      {allow_getppid,
       {.syscall = "getppid",
        .arg_op = Op::kNotInSet,
        .arg_index = 0,
        .arg_mask = 0xff00,
        .arg_values = {1},
        .why = "mask is not 2^k-1"}},
      {allow_getppid,
       {.syscall = "getppid", .arg_op = Op::kNotInSet, .arg_index = 0, .why = "empty set"}},
      {allow_getppid,
       {.syscall = "getppid",
        .arg_op = Op::kMaskedAnyBitSet,
        .arg_index = 0,
        .arg_mask = 0,
        .why = "no bits"}},
      {{.syscall = "getppid", .errno_value = 0, .why = "errno 0 would look like success"}},
      {{.syscall = "getppid",
        .arg_op = Op::kEqual,
        .arg_index = 0,
        .arg_mask = 0xff,
        .arg_values = {1},
        .why = "argument rule without a whole-call allow"}},
      {{.syscall = "getppid", .why = "a refused call"},
       {.syscall = "getppid",
        .arg_op = Op::kEqual,
        .arg_index = 0,
        .arg_mask = 0xff,
        .arg_values = {1},
        .why = "argument rule under a refusal"}},
      {allow_getppid, allow_getppid},
      {allow_getppid,
       {.syscall = "getppid",
        .arg_op = Op::kEqual,
        .arg_index = 0,
        .arg_mask = 0xff,
        .arg_values = {1},
        .why = "two arguments"},
       {.syscall = "getppid",
        .arg_op = Op::kEqual,
        .arg_index = 1,
        .arg_mask = 0xff,
        .arg_values = {1},
        .why = "two arguments"}},
      {allow_getppid,
       {.syscall = "getppid",
        .action = SeccompAction::kAllow,
        .arg_op = Op::kEqual,
        .arg_index = 0,
        .arg_mask = 0xff,
        .arg_values = {1},
        .why = "an allowing argument rule"}},
  };
  for (const auto& rules : bad) {
    auto compiled = compile_seccomp_rules(rules);
    ASSERT_FALSE(compiled) << rules.back().why;
    EXPECT_EQ(compiled.error().code, ErrorCode::kInternal) << rules.back().why;
  }
}

TEST(SeccompCompiler, NotInSetOverAll64BitsCoversTheComplementExactly) {
  const std::vector<std::uint64_t> allowed = {5, 7, 8, 1000, 0x10000};
  const std::vector<SeccompRule> rules = {
      {.syscall = "getppid", .action = SeccompAction::kAllow, .why = "test"},
      {.syscall = "getppid",
       .errno_value = EXDEV,
       .arg_op = SeccompArgOp::kNotInSet,
       .arg_index = 2,
       .arg_values = allowed,
       .why = "test"}};
  auto compiled = compile_seccomp_rules(rules);
  ASSERT_TRUE(compiled) << compiled.error().to_string();
  auto want = [&](std::uint64_t v) {
    return std::find(allowed.begin(), allowed.end(), v) != allowed.end() ? kAllow
                                                                         : ret_errno(EXDEV);
  };
  for (std::uint64_t v = 0; v < 0x12000; ++v) {
    ASSERT_EQ(run(*compiled, "getppid", {0, 0, v}), want(v)) << v;
  }
  for (int bit = 0; bit < 64; ++bit) {
    for (std::uint64_t low : allowed) {
      const std::uint64_t v = low | (1ULL << bit);
      EXPECT_EQ(run(*compiled, "getppid", {0, 0, v}), want(v)) << std::hex << v;
    }
  }
  EXPECT_EQ(run(*compiled, "getppid", {0, 0, kMinus1}), ret_errno(EXDEV));
  EXPECT_EQ(run(*compiled, "getppid", {kMinus1, 9, 7, 1, 2, 3}), kAllow);  // others ignored
}

TEST(SeccompCompiler, EqualRowsOverLow32BitsLetEveryOtherValueThrough) {
  const std::vector<SeccompRule> rules = {
      {.syscall = "getppid", .action = SeccompAction::kAllow, .why = "test"},
      {.syscall = "getppid",
       .errno_value = EXDEV,
       .arg_op = SeccompArgOp::kEqual,
       .arg_index = 1,
       .arg_mask = 0xffffffff,
       .arg_values = {0x5412},
       .why = "test"},
      {.syscall = "getppid",
       .errno_value = EROFS,
       .arg_op = SeccompArgOp::kEqual,
       .arg_index = 1,
       .arg_mask = 0xffffffff,
       .arg_values = {0x80000000},
       .why = "test"}};
  auto compiled = compile_seccomp_rules(rules);
  ASSERT_TRUE(compiled) << compiled.error().to_string();
  for (std::uint64_t high : U64s{0ULL, kHigh, 0xffffffff00000000ULL}) {
    EXPECT_EQ(run(*compiled, "getppid", {0, 0x5412 | high}), ret_errno(EXDEV));
    EXPECT_EQ(run(*compiled, "getppid", {0, 0x80000000 | high}), ret_errno(EROFS));
    for (std::uint64_t v :
         U64s{0ULL, 0x5411ULL, 0x5413ULL, 0x7fffffffULL, 0x80000001ULL, 0xffffffffULL, 1ULL}) {
      EXPECT_EQ(run(*compiled, "getppid", {0, v | high}), kAllow) << std::hex << v;
    }
  }
  for (std::uint64_t v = 0x5000; v < 0x6000; ++v) {
    ASSERT_EQ(run(*compiled, "getppid", {0, v}), v == 0x5412 ? ret_errno(EXDEV) : kAllow) << v;
  }
}

}  // namespace
}  // namespace corral
