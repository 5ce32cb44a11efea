// The seccomp policy: the table's invariants, the compiled program (run
// through a small classic-BPF interpreter here, so argument logic is
// checked over many values), and the live kernel: forked children install
// the filter and probe syscalls with INVALID arguments, so a probe is
// harmless even if the filter were broken (the tests run as real root).
// Each probe also runs without the filter: "blocked by seccomp" must differ
// from what the kernel itself answers, or the probe proves nothing.
#include "jail/seccomp_policy.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "jail/seccomp_install.h"
#include "support/skip.h"

namespace corral {
namespace {

constexpr std::uint64_t kHigh = 1ULL << 32;  // garbage in the upper half of a register
constexpr std::uint64_t kMinus1 = ~0ULL;
constexpr std::uint64_t kX32Bit = 0x40000000;

const SeccompRule* find_rule(std::string_view syscall) {
  for (const SeccompRule& rule : seccomp_policy()) {
    if (rule.syscall == syscall) return &rule;
  }
  return nullptr;
}

const std::vector<sock_filter>& program() {
  static const std::vector<sock_filter> prog = [] {
    auto compiled = compile_seccomp_filter(SeccompOptions{});
    if (!compiled) {
      ADD_FAILURE() << "compile_seccomp_filter: " << compiled.error().to_string();
      return std::vector<sock_filter>{};
    }
    return *std::move(compiled);
  }();
  return prog;
}

// ---------------------------------------------------------------- table

TEST(SeccompPolicyTable, EveryRuleHasASyscallAndAOneLineWhy) {
  for (const SeccompRule& rule : seccomp_policy()) {
    EXPECT_FALSE(rule.syscall.empty());
    EXPECT_GE(rule.why.size(), 10u) << rule.syscall << ": why is missing or too short";
    EXPECT_EQ(rule.why.find('\n'), std::string_view::npos) << rule.syscall;
    if (rule.arg_op == SeccompArgOp::kNone) {
      EXPECT_EQ(rule.arg_index, -1) << rule.syscall;
      EXPECT_TRUE(rule.arg_values.empty()) << rule.syscall;
    } else {
      EXPECT_GE(rule.arg_index, 0) << rule.syscall;
      EXPECT_LE(rule.arg_index, 5) << rule.syscall;
    }
    if (rule.action == SeccompAction::kErrno) {
      EXPECT_GT(rule.errno_value, 0) << rule.syscall;
    }
  }
}

TEST(SeccompPolicyTable, NoDuplicateSyscallArgumentEntries) {
  using Key = std::tuple<std::string_view, int, int, std::uint64_t, std::vector<std::uint64_t>>;
  std::set<Key> seen;
  std::map<std::string_view, int> whole_call;  // rules without an argument test
  std::map<std::string_view, int> count;
  for (const SeccompRule& rule : seccomp_policy()) {
    Key key{rule.syscall, static_cast<int>(rule.arg_op), rule.arg_index, rule.arg_mask,
            rule.arg_values};
    EXPECT_TRUE(seen.insert(key).second) << "duplicate rule for " << rule.syscall;
    ++count[rule.syscall];
    if (rule.arg_op == SeccompArgOp::kNone) ++whole_call[rule.syscall];
  }
  // A rule for the whole call makes any other rule for it dead (or a conflict).
  for (const auto& [name, n] : whole_call) {
    EXPECT_EQ(count[name], 1) << name << " has a whole-call rule and other rules";
  }
}

TEST(SeccompPolicyTable, NamedFamiliesArePresentWithTheirAction) {
  const std::vector<std::string_view> eperm = {
      // namespaces and mounts
      "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
      "open_tree_attr", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "clone",
      // kernel subsystems
      "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
      "io_uring_enter", "io_uring_register",
      // other processes
      "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
      // host administration
      "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
      "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
      "syslog", "quotactl", "quotactl_fd", "lookup_dcookie", "iopl", "ioperm", "uselib", "vhangup",
      "open_by_handle_at", "name_to_handle_at", "fanotify_init", "nfsservctl", "personality",
      "ioctl"};
  for (std::string_view name : eperm) {
    const SeccompRule* rule = find_rule(name);
    ASSERT_NE(rule, nullptr) << name << " is missing from the policy";
    EXPECT_EQ(rule->action, SeccompAction::kErrno) << name;
    EXPECT_EQ(rule->errno_value, EPERM) << name;
  }
  ASSERT_NE(find_rule("clone3"), nullptr);
  EXPECT_EQ(find_rule("clone3")->errno_value, ENOSYS);
  for (std::string_view name : {"socket", "socketpair"}) {
    ASSERT_NE(find_rule(name), nullptr) << name;
    EXPECT_EQ(find_rule(name)->errno_value, EAFNOSUPPORT) << name;
    EXPECT_EQ(find_rule(name)->arg_op, SeccompArgOp::kNotInSet) << name;
  }
  // Only restrict their caller: documented as allowed, never filtered.
  for (std::string_view name :
       {"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
        "lsm_get_self_attr", "lsm_set_self_attr", "lsm_list_modules", "seccomp", "mbind",
        "set_mempolicy", "migrate_pages", "move_pages"}) {
    ASSERT_NE(find_rule(name), nullptr) << name;
    EXPECT_EQ(find_rule(name)->action, SeccompAction::kAllow) << name;
  }
  // The ioctl rules look at the low 32 bits of the request, as the kernel does.
  int ioctl_rules = 0;
  for (const SeccompRule& rule : seccomp_policy()) {
    if (rule.syscall != "ioctl") continue;
    ++ioctl_rules;
    EXPECT_EQ(rule.arg_index, 1);
    EXPECT_EQ(rule.arg_mask, 0xffffffffULL);
  }
  EXPECT_EQ(ioctl_rules, 2);
}

TEST(SeccompPolicyTable, RequiredSyscallsResolveOnThisArchitecture) {
  for (const SeccompRule& rule : seccomp_policy()) {
    if (rule.optional) continue;
    EXPECT_GE(seccomp_rule_syscall_nr(rule), 0) << rule.syscall << " is required but unknown here";
  }
#if defined(__x86_64__)
  // open_tree_attr is newer than libseccomp 2.5.4: the fallback number
  // keeps it filtered on the kernels that have it.
  EXPECT_EQ(seccomp_rule_syscall_nr(*find_rule("open_tree_attr")), 467);
  EXPECT_EQ(seccomp_rule_syscall_nr(*find_rule("iopl")), SYS_iopl);
#endif
}

std::filesystem::path source_dir() {
  if (const char* dir = std::getenv("CORRAL_SOURCE_DIR"); dir != nullptr && dir[0] == '/') {
    return dir;
  }
  // Compiled in (tests/CMakeLists.txt). Not __FILE__: ccache's base_dir makes
  // it relative to the build dir, and ctest runs the tests from build/tests.
  return CORRAL_TEST_SOURCE_DIR;
}

TEST(SeccompPolicyTable, DocsListEverySyscallOfTheTable) {
  const std::filesystem::path doc = source_dir() / "docs" / "seccomp.md";
  std::ifstream in(doc);
  ASSERT_TRUE(in) << "cannot read " << doc;
  std::stringstream text;
  text << in.rdbuf();
  const std::string md = text.str();
  std::set<std::string> table_names;
  for (const SeccompRule& rule : seccomp_policy()) {
    table_names.insert(std::string(rule.syscall));
    const std::string quoted = "`" + std::string(rule.syscall) + "`";
    EXPECT_NE(md.find(quoted), std::string::npos)
        << rule.syscall << " is in the policy table but not in " << doc;
  }
  // And the other way: every row of the doc's tables names a policy syscall.
  std::istringstream lines(md);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("| `", 0) != 0) continue;
    const std::size_t end = line.find('`', 3);
    ASSERT_NE(end, std::string::npos) << line;
    const std::string name = line.substr(3, end - 3);
    EXPECT_TRUE(table_names.count(name)) << doc << " lists " << name << ", which the policy lacks";
  }
}

// -------------------------------------------------------- compiled program

TEST(SeccompCompile, YieldsANonEmptyProgramThatChecksTheArchitectureFirst) {
  const std::vector<sock_filter>& prog = program();
  ASSERT_FALSE(prog.empty());
  EXPECT_LE(prog.size(), static_cast<std::size_t>(BPF_MAXINSNS));
  // ld [arch]: nothing is judged before the architecture is known.
  EXPECT_EQ(prog[0].code, BPF_LD | BPF_W | BPF_ABS);
  EXPECT_EQ(prog[0].k, offsetof(seccomp_data, arch));
}

TEST(SeccompCompile, IsDeterministic) {
  auto again = compile_seccomp_filter(SeccompOptions{});
  ASSERT_TRUE(again) << again.error().to_string();
  ASSERT_EQ(again->size(), program().size());
  EXPECT_EQ(std::memcmp(again->data(), program().data(), program().size() * sizeof(sock_filter)),
            0);
}

// A classic-BPF interpreter for seccomp programs: enough to run what
// libseccomp emits, and strict about everything else.
struct Verdict {
  bool ok = false;  // the program ran to a return
  std::uint32_t ret = 0;
};

Verdict run_bpf(const std::vector<sock_filter>& prog, const seccomp_data& data) {
  std::uint32_t a = 0;
  std::uint32_t x = 0;
  std::uint32_t mem[BPF_MEMWORDS] = {};
  const auto* bytes = reinterpret_cast<const unsigned char*>(&data);
  for (std::size_t pc = 0; pc < prog.size(); ++pc) {
    const sock_filter& in = prog[pc];
    const std::uint32_t src = BPF_SRC(in.code) == BPF_X ? x : in.k;
    switch (BPF_CLASS(in.code)) {
      case BPF_LD:
        if (in.code == (BPF_LD | BPF_W | BPF_ABS)) {
          if (in.k % 4 != 0 || in.k + 4 > sizeof data) return {};
          std::memcpy(&a, bytes + in.k, 4);
        } else if (in.code == (BPF_LD | BPF_IMM)) {
          a = in.k;
        } else if (in.code == (BPF_LD | BPF_MEM) && in.k < BPF_MEMWORDS) {
          a = mem[in.k];
        } else {
          return {};
        }
        break;
      case BPF_LDX:
        if (in.code == (BPF_LDX | BPF_IMM)) {
          x = in.k;
        } else if (in.code == (BPF_LDX | BPF_MEM) && in.k < BPF_MEMWORDS) {
          x = mem[in.k];
        } else {
          return {};
        }
        break;
      case BPF_ST:
        if (in.k >= BPF_MEMWORDS) return {};
        mem[in.k] = a;
        break;
      case BPF_STX:
        if (in.k >= BPF_MEMWORDS) return {};
        mem[in.k] = x;
        break;
      case BPF_ALU:
        switch (BPF_OP(in.code)) {
          case BPF_ADD:
            a += src;
            break;
          case BPF_SUB:
            a -= src;
            break;
          case BPF_AND:
            a &= src;
            break;
          case BPF_OR:
            a |= src;
            break;
          case BPF_XOR:
            a ^= src;
            break;
          case BPF_LSH:
            a = src < 32 ? a << src : 0;
            break;
          case BPF_RSH:
            a = src < 32 ? a >> src : 0;
            break;
          case BPF_NEG:
            a = 0u - a;
            break;
          default:
            return {};
        }
        break;
      case BPF_JMP: {
        if (BPF_OP(in.code) == BPF_JA) {
          pc += in.k;
          break;
        }
        bool taken = false;
        switch (BPF_OP(in.code)) {
          case BPF_JEQ:
            taken = a == src;
            break;
          case BPF_JGT:
            taken = a > src;
            break;
          case BPF_JGE:
            taken = a >= src;
            break;
          case BPF_JSET:
            taken = (a & src) != 0;
            break;
          default:
            return {};
        }
        pc += taken ? in.jt : in.jf;
        break;
      }
      case BPF_RET:
        if (BPF_RVAL(in.code) == BPF_K) return {true, in.k};
        if (BPF_RVAL(in.code) == BPF_A) return {true, a};
        return {};
      case BPF_MISC:
        if (BPF_MISCOP(in.code) == BPF_TAX) {
          x = a;
        } else {
          a = x;
        }
        break;
      default:
        return {};
    }
  }
  return {};  // fell off the end: the kernel rejects such programs
}

constexpr std::uint32_t kNativeArch =
#if defined(__x86_64__)
    AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
    AUDIT_ARCH_AARCH64;
#else
    0;
#endif

std::uint32_t verdict_of(const std::vector<sock_filter>& prog, int nr,
                         std::array<std::uint64_t, 6> args = {}, std::uint32_t arch = kNativeArch) {
  seccomp_data data{};
  data.nr = nr;
  data.arch = arch;
  for (int i = 0; i < 6; ++i) data.args[i] = args[static_cast<std::size_t>(i)];
  Verdict v = run_bpf(prog, data);
  EXPECT_TRUE(v.ok) << "the interpreter could not run the program for nr " << nr;
  return v.ret;
}

std::uint32_t verdict(int nr, std::array<std::uint64_t, 6> args = {},
                      std::uint32_t arch = kNativeArch) {
  return verdict_of(program(), nr, args, arch);
}

constexpr std::uint32_t kAllow = SECCOMP_RET_ALLOW;
constexpr std::uint32_t kKill = SECCOMP_RET_KILL_PROCESS;
constexpr std::uint32_t ret_errno(int e) {
  return SECCOMP_RET_ERRNO | static_cast<std::uint32_t>(e);
}

class SeccompProgramLogic : public ::testing::Test {
 protected:
  void SetUp() override {
    // A plain skip: about the CPU architecture the tests were built for (one
    // corral does not support), not a feature a host could lack.
    if (kNativeArch == 0) GTEST_SKIP() << "no audit arch constant for this architecture";
    ASSERT_FALSE(program().empty());
  }
};

TEST_F(SeccompProgramLogic, EveryRuleOfTheTableHasItsAction) {
  for (const SeccompRule& rule : seccomp_policy()) {
    const int nr = seccomp_rule_syscall_nr(rule);
    if (nr < 0) continue;
    if (rule.action == SeccompAction::kAllow) {
      EXPECT_EQ(verdict(nr), kAllow) << rule.syscall;
    } else if (rule.arg_op == SeccompArgOp::kNone) {
      EXPECT_EQ(verdict(nr), ret_errno(rule.errno_value)) << rule.syscall;
    }
  }
  EXPECT_EQ(verdict(SYS_getpid), kAllow);
  EXPECT_EQ(verdict(SYS_read, {0, 0, 0}), kAllow);
}

TEST_F(SeccompProgramLogic, ForeignArchitectureAndX32AreKilled) {
  EXPECT_EQ(verdict(SYS_getpid, {}, AUDIT_ARCH_I386), kKill);
  EXPECT_EQ(verdict(SYS_getpid, {}, 0), kKill);
#if defined(__x86_64__)
  for (int nr : {static_cast<int>(SYS_getpid), static_cast<int>(SYS_read), 512, 547}) {
    EXPECT_EQ(verdict(static_cast<int>(kX32Bit) | nr), kKill) << "x32 nr " << nr;
  }
#endif
}

TEST_F(SeccompProgramLogic, SocketFamiliesOutsideUnixInetInet6AnswerEafnosupport) {
  for (std::uint64_t family = 0; family < 4096; ++family) {
    const bool allowed = family == AF_UNIX || family == AF_INET || family == AF_INET6;
    for (std::uint64_t high : std::array<std::uint64_t, 3>{0, kHigh, 0xffffffff00000000ULL}) {
      const std::uint32_t want = allowed ? kAllow : ret_errno(EAFNOSUPPORT);
      ASSERT_EQ(verdict(SYS_socket, {family | high, SOCK_STREAM}), want) << family << " " << high;
      ASSERT_EQ(verdict(SYS_socketpair, {family | high, SOCK_STREAM}), want) << family;
    }
  }
  for (std::uint64_t family :
       std::array<std::uint64_t, 7>{0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff,
                                    0x10000 | AF_INET, 0x100 | AF_UNIX, kMinus1}) {
    EXPECT_EQ(verdict(SYS_socket, {family}), ret_errno(EAFNOSUPPORT)) << std::hex << family;
  }
}

TEST_F(SeccompProgramLogic, PersonalityAllowsOnlyUnameFlavoursAndTheQuery) {
  const std::set<std::uint64_t> allowed = {0, PER_LINUX32, UNAME26, 0x20008, 0xffffffff};
  for (std::uint64_t v = 0; v < 0x90000; ++v) {
    const std::uint32_t want = allowed.count(v) ? kAllow : ret_errno(EPERM);
    ASSERT_EQ(verdict(SYS_personality, {v}), want) << std::hex << v;
  }
  for (int bit = 0; bit < 64; ++bit) {
    const std::uint64_t v = 1ULL << bit;
    const bool ok = bit >= 32 || allowed.count(v);  // the kernel reads 32 bits
    EXPECT_EQ(verdict(SYS_personality, {v}), ok ? kAllow : ret_errno(EPERM)) << bit;
    // All 32 low bits but one is no allowed value; a high bit next to
    // 0xffffffff is still the query.
    EXPECT_EQ(verdict(SYS_personality, {0xffffffffULL ^ v}), bit < 32 ? ret_errno(EPERM) : kAllow)
        << bit;
  }
  EXPECT_EQ(verdict(SYS_personality, {kMinus1}), kAllow);  // (unsigned)-1: the query
  EXPECT_EQ(verdict(SYS_personality, {kHigh | ADDR_NO_RANDOMIZE}), ret_errno(EPERM));
  EXPECT_EQ(verdict(SYS_personality, {READ_IMPLIES_EXEC}), ret_errno(EPERM));
  EXPECT_EQ(verdict(SYS_personality, {PER_SVR4}), ret_errno(EPERM));
}

TEST_F(SeccompProgramLogic, CloneIsRefusedExactlyWhenANamespaceFlagIsSet) {
  const std::uint64_t ns = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC |
                           CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET;
  for (int bit = 0; bit < 64; ++bit) {
    const std::uint64_t flag = 1ULL << bit;
    const std::uint32_t want = (flag & ns) != 0 ? ret_errno(EPERM) : kAllow;
    EXPECT_EQ(verdict(SYS_clone, {flag | SIGCHLD}), want) << std::hex << flag;
    EXPECT_EQ(verdict(SYS_clone, {flag | SIGCHLD | kHigh}), want) << std::hex << flag;
  }
  EXPECT_EQ(verdict(SYS_clone, {ns | SIGCHLD}), ret_errno(EPERM));
  // What glibc's fork() and pthread_create() fall back to.
  EXPECT_EQ(verdict(SYS_clone, {CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD}), kAllow);
  EXPECT_EQ(verdict(SYS_clone,
                    {CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
                     CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID}),
            kAllow);
  EXPECT_EQ(verdict(SYS_clone3, {0, 0}), ret_errno(ENOSYS));
}

TEST_F(SeccompProgramLogic, IoctlRefusesTiocstiAndTioclinuxWhateverTheUpperHalf) {
  for (std::uint64_t high : std::array<std::uint64_t, 3>{0, kHigh, 0xdeadbeef00000000ULL}) {
    EXPECT_EQ(verdict(SYS_ioctl, {0, TIOCSTI | high}), ret_errno(EPERM)) << std::hex << high;
    EXPECT_EQ(verdict(SYS_ioctl, {0, TIOCLINUX | high}), ret_errno(EPERM)) << std::hex << high;
    EXPECT_EQ(verdict(SYS_ioctl, {0, TCGETS | high}), kAllow);
    EXPECT_EQ(verdict(SYS_ioctl, {0, (TIOCSTI + 1) | high}), kAllow);
    EXPECT_EQ(verdict(SYS_ioctl, {0, FIONREAD | high}), kAllow);
  }
}

// ------------------------------------------------------------- compiler

TEST(SeccompCompiler, RequiredUnknownSyscallFailsClosedWithItsName) {
  const std::vector<SeccompRule> rules = {{.syscall = "corral_no_such_syscall", .why = "test"}};
  auto compiled = compile_seccomp_rules(rules);
  ASSERT_FALSE(compiled);
  EXPECT_EQ(compiled.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(compiled.error().message.find("corral_no_such_syscall"), std::string::npos)
      << compiled.error().message;
  EXPECT_FALSE(compiled.error().hint.empty());
}

TEST(SeccompCompiler, OptionalUnknownSyscallIsSkipped) {
  const std::vector<SeccompRule> rules = {
      {.syscall = "corral_no_such_syscall", .optional = true, .why = "test"},
      {.syscall = "getppid", .why = "test"}};
  auto compiled = compile_seccomp_rules(rules);
  ASSERT_TRUE(compiled) << compiled.error().to_string();
  if (kNativeArch == 0) return;
  EXPECT_EQ(verdict_of(*compiled, SYS_getppid), ret_errno(EPERM));
  EXPECT_EQ(verdict_of(*compiled, SYS_getpid), kAllow);
}

#if defined(__x86_64__) || defined(__aarch64__)
TEST(SeccompCompiler, FallbackNumberIsUsedWhenTheNameIsUnknown) {
  const std::vector<SeccompRule> rules = {{.syscall = "corral_no_such_syscall",
                                           .errno_value = EXDEV,
                                           .fallback_nr = 467,
                                           .why = "test"}};
  auto compiled = compile_seccomp_rules(rules);
  ASSERT_TRUE(compiled) << compiled.error().to_string();
  EXPECT_EQ(verdict_of(*compiled, 467), ret_errno(EXDEV));
  EXPECT_EQ(verdict_of(*compiled, 466), kAllow);
}
#endif

TEST(SeccompCompiler, MalformedArgumentRulesAreOurBug) {
  const std::vector<std::vector<SeccompRule>> bad = {
      {{.syscall = "getppid", .arg_op = SeccompArgOp::kEqual, .arg_index = 0, .why = "no value"}},
      {{.syscall = "getppid",
        .arg_op = SeccompArgOp::kEqual,
        .arg_index = 6,
        .arg_values = {1},
        .why = "no such argument"}},
      {{.syscall = "getppid",
        .arg_op = SeccompArgOp::kNotInSet,
        .arg_index = 0,
        .arg_mask = 0xff00,
        .arg_values = {1},
        .why = "mask is not 2^k-1"}},
      {{.syscall = "getppid",
        .arg_op = SeccompArgOp::kNotInSet,
        .arg_index = 0,
        .why = "empty set"}},
      {{.syscall = "getppid",
        .arg_op = SeccompArgOp::kMaskedAnyBitSet,
        .arg_index = 0,
        .arg_mask = 0,
        .why = "no bits"}},
      {{.syscall = "getppid", .errno_value = 0, .why = "errno 0 would look like success"}},
  };
  for (const auto& rules : bad) {
    auto compiled = compile_seccomp_rules(rules);
    ASSERT_FALSE(compiled) << rules[0].why;
    EXPECT_EQ(compiled.error().code, ErrorCode::kInternal) << rules[0].why;
  }
}

TEST(SeccompCompiler, NotInSetOverAll64BitsCoversTheComplementExactly) {
  // A plain skip: the architecture, not the host (as in SeccompProgramLogic).
  if (kNativeArch == 0) GTEST_SKIP() << "no audit arch constant for this architecture";
  const std::vector<std::uint64_t> allowed = {5, 7, 8, 1000, 0x10000};
  const std::vector<SeccompRule> rules = {{.syscall = "getppid",
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
    ASSERT_EQ(verdict_of(*compiled, SYS_getppid, {0, 0, v}), want(v)) << v;
  }
  for (int bit = 0; bit < 64; ++bit) {
    for (std::uint64_t low : allowed) {
      const std::uint64_t v = low | (1ULL << bit);
      EXPECT_EQ(verdict_of(*compiled, SYS_getppid, {0, 0, v}), want(v)) << std::hex << v;
    }
  }
  EXPECT_EQ(verdict_of(*compiled, SYS_getppid, {0, 0, kMinus1}), ret_errno(EXDEV));
  // Other arguments do not matter.
  EXPECT_EQ(verdict_of(*compiled, SYS_getppid, {kMinus1, 9, 7, 1, 2, 3}), kAllow);
}

// ------------------------------------------------------------ live kernel

struct Outcome {
  bool reported = false;  // the child got as far as writing its answer
  long ret = 0;
  int err = 0;
  int wait_status = 0;
};

std::string describe(const Outcome& o) {
  std::string s;
  if (WIFSIGNALED(o.wait_status)) {
    s = std::string("killed by ") + sigabbrev_np(WTERMSIG(o.wait_status));
  } else if (!o.reported) {
    s = "exit " + std::to_string(WEXITSTATUS(o.wait_status)) + " before answering";
  } else if (o.ret == -1) {
    s = "-1 " + std::string(errno_name(o.err));
  } else {
    s = "returned " + std::to_string(o.ret);
  }
  return s;
}

constexpr int kExitNoNewPrivs = 101;
constexpr int kExitInstall = 102;

// Runs `body` in a forked child (its own session, no core dumps), with the
// filter installed when `filtered`. body returns like a syscall: -1 and
// errno on failure.
template <typename Body>
Outcome in_child(bool filtered, Body body) {
  const std::vector<sock_filter>& prog = program();
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2: " << std::strerror(errno);
    return {};
  }
  const pid_t pid = fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return {};
  }
  if (pid == 0) {
    close(fds[0]);
    setsid();                            // no controlling terminal: vhangup/TIOCSTI touch nothing
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);  // a SIGSYS kill leaves no core file
    if (filtered) {
      if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(kExitNoNewPrivs);
      if (install_seccomp_filter_raw(prog) != 0) _exit(kExitInstall);
    }
    errno = 0;
    const long ret = body();
    const long answer[2] = {ret, ret == -1 ? errno : 0};
    (void)!write(fds[1], answer, sizeof answer);
    _exit(0);
  }
  close(fds[1]);
  Outcome out;
  long answer[2] = {0, 0};
  ssize_t n;
  do {
    n = read(fds[0], answer, sizeof answer);
  } while (n < 0 && errno == EINTR);
  close(fds[0]);
  if (n == static_cast<ssize_t>(sizeof answer)) {
    out.reported = true;
    out.ret = answer[0];
    out.err = static_cast<int>(answer[1]);
  }
  while (waitpid(pid, &out.wait_status, 0) < 0 && errno == EINTR) {
  }
  return out;
}

class SeccompKernel : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(program().empty());
    const Outcome o = in_child(true, [] { return 0L; });
    if (WIFEXITED(o.wait_status) && WEXITSTATUS(o.wait_status) == kExitInstall) {
      CORRAL_SKIP_OR_FAIL("the kernel refused the seccomp filter (no CONFIG_SECCOMP_FILTER?)");
    }
    ASSERT_TRUE(o.reported) << "a filtered child could not even return: " << describe(o);
  }
};

struct Probe {
  const char* label;         // test name suffix
  std::string_view syscall;  // a syscall of the policy table
  std::array<std::uint64_t, 6> args;
  int denied_errno;  // what the filter answers; 0: allowed, must reach the kernel
};

// Every argument list is invalid (bad fd, NULL or unmapped pointer, unknown
// flag, bad magic) so the kernel refuses it before acting, filter or not.
const std::vector<Probe>& probes() {
  const std::uint64_t bad_fd = kMinus1;  // -1
  const std::uint64_t bad_ptr = 1;       // unmapped, not NULL: some calls treat NULL as "none"
  static const std::vector<Probe> list = {
      // namespaces and mounts
      {"unshare_invalid_flag", "unshare", {0x1}, EPERM},  // 0x1 is in CSIGNAL: EINVAL
      {"clone_newuser", "clone", {CLONE_NEWUSER | CLONE_THREAD}, EPERM},  // THREAD w/o SIGHAND
      {"clone_newns", "clone", {CLONE_NEWNS | CLONE_THREAD}, EPERM},
      {"clone_newpid", "clone", {CLONE_NEWPID | CLONE_THREAD}, EPERM},
      {"clone_newnet", "clone", {CLONE_NEWNET | CLONE_THREAD}, EPERM},
      {"clone_newipc", "clone", {CLONE_NEWIPC | CLONE_THREAD}, EPERM},
      {"clone_newuts", "clone", {CLONE_NEWUTS | CLONE_THREAD}, EPERM},
      {"clone_newcgroup", "clone", {CLONE_NEWCGROUP | CLONE_THREAD}, EPERM},
      {"clone_newuser_high_bits", "clone", {kHigh | CLONE_NEWUSER | CLONE_THREAD}, EPERM},
      {"clone3_null", "clone3", {0, 0}, ENOSYS},
      {"setns_bad_fd", "setns", {bad_fd, 0}, EPERM},
      {"mount_null_target", "mount", {0, 0, 0, 0, 0}, EPERM},
      {"umount2_invalid_flag", "umount2", {0, 0x80000000}, EPERM},
      {"pivot_root_null", "pivot_root", {0, 0}, EPERM},
      {"chroot_null", "chroot", {0}, EPERM},
      {"move_mount_invalid_flags", "move_mount", {bad_fd, 0, bad_fd, 0, 0xffffffff}, EPERM},
      {"open_tree_invalid_flags", "open_tree", {bad_fd, 0, 0xffffffff}, EPERM},
      {"open_tree_attr_invalid_flags", "open_tree_attr", {bad_fd, 0, 0xffffffff, 0, 0}, EPERM},
      {"fsopen_invalid_flags", "fsopen", {0, 0xffffffff}, EPERM},
      {"fsconfig_bad_fd", "fsconfig", {bad_fd, 0xffffffff, 0, 0, 0}, EPERM},
      {"fsmount_invalid_flags", "fsmount", {bad_fd, 0xffffffff, 0}, EPERM},
      {"fspick_invalid_flags", "fspick", {bad_fd, 0, 0xffffffff}, EPERM},
      {"mount_setattr_invalid_flags", "mount_setattr", {bad_fd, 0, 0xffffffff, 0, 0}, EPERM},
      // kernel subsystems
      {"keyctl_unknown_op", "keyctl", {0x7fffffff}, EPERM},
      {"add_key_null", "add_key", {0, 0, 0, 0, 0}, EPERM},
      {"request_key_null", "request_key", {0, 0, 0, 0}, EPERM},
      {"bpf_unknown_cmd", "bpf", {0x7fffffff, 0, 0}, EPERM},
      {"perf_event_open_invalid_flags", "perf_event_open", {0, 0, bad_fd, bad_fd, kMinus1}, EPERM},
      {"userfaultfd_invalid_flags", "userfaultfd", {0xffffffff}, EPERM},
      {"io_uring_setup_null", "io_uring_setup", {0, 0}, EPERM},
      {"io_uring_enter_bad_fd", "io_uring_enter", {bad_fd, 0, 0, 0xffffffff, 0, 0}, EPERM},
      {"io_uring_register_bad_fd", "io_uring_register", {bad_fd, 0xffff, 0, 0}, EPERM},
      // other processes
      {"ptrace_no_such_pid", "ptrace", {0x7fff, kMinus1, 0, 0}, EPERM},
      {"process_vm_readv_invalid_flags", "process_vm_readv", {0, 0, 0, 0, 0, 1}, EPERM},
      {"process_vm_writev_invalid_flags", "process_vm_writev", {0, 0, 0, 0, 0, 1}, EPERM},
      {"kcmp_no_such_pid", "kcmp", {kMinus1, kMinus1, 0xffff, 0, 0}, EPERM},
      {"pidfd_getfd_invalid_flags", "pidfd_getfd", {bad_fd, 0, 1}, EPERM},
      // host administration
      {"kexec_load_invalid_flags", "kexec_load", {0, 0, 0, 0x8000}, EPERM},
      {"kexec_file_load_invalid_flags",
       "kexec_file_load",
       {bad_fd, bad_fd, 0, 0, 0xffffffff},
       EPERM},
      {"init_module_empty", "init_module", {0, 0, 0}, EPERM},
      {"finit_module_invalid_flags", "finit_module", {bad_fd, 0, 0xffffffff}, EPERM},
      {"delete_module_null", "delete_module", {0, 0}, EPERM},
      {"reboot_bad_magic", "reboot", {0, 0, 0, 0}, EPERM},
      {"swapon_invalid_flags", "swapon", {0, 0x80000000}, EPERM},
      {"swapoff_null", "swapoff", {0}, EPERM},
      {"acct_bad_pointer", "acct", {bad_ptr}, EPERM},  // acct(NULL) would switch accounting off
      {"quotactl_bad_type", "quotactl", {0xff, 0, 0, 0}, EPERM},
      {"quotactl_fd_bad_fd", "quotactl_fd", {bad_fd, 0xff, 0, 0}, EPERM},
      {"syslog_unknown_action", "syslog", {100, 0, 0}, EPERM},
      {"vhangup_without_tty", "vhangup", {}, EPERM},  // the child has no controlling tty
      {"settimeofday_bad_pointer", "settimeofday", {bad_ptr, 0}, EPERM},
      {"clock_settime_bad_clock", "clock_settime", {100, 0}, EPERM},
      {"clock_adjtime_bad_clock", "clock_adjtime", {100, 0}, EPERM},
      {"adjtimex_null", "adjtimex", {0}, EPERM},
      // hardware and obsolete
      {"iopl_bad_level", "iopl", {100}, EPERM},
      {"ioperm_empty_range", "ioperm", {0, 0, 0}, EPERM},
      {"uselib_null", "uselib", {0}, EPERM},
      {"lookup_dcookie_null", "lookup_dcookie", {0, 0, 0}, EPERM},
      {"nfsservctl", "nfsservctl", {0, 0, 0}, EPERM},
      // file handles
      {"open_by_handle_at_bad_fd", "open_by_handle_at", {bad_fd, 0, 0}, EPERM},
      {"name_to_handle_at_invalid_flags",
       "name_to_handle_at",
       {bad_fd, 0, 0, 0, 0xffffffff},
       EPERM},
      {"fanotify_init_invalid_flags", "fanotify_init", {0xffffffff, 0}, EPERM},
      // personality: the child's own personality, gone when it exits
      {"personality_addr_no_randomize", "personality", {ADDR_NO_RANDOMIZE}, EPERM},
      {"personality_read_implies_exec", "personality", {READ_IMPLIES_EXEC}, EPERM},
      {"personality_svr4", "personality", {PER_SVR4}, EPERM},
      {"personality_high_bits", "personality", {kHigh | ADDR_NO_RANDOMIZE}, EPERM},
      // ioctl: bad fd, so even TIOCSTI could not reach a terminal
      {"ioctl_tiocsti", "ioctl", {bad_fd, TIOCSTI, 0}, EPERM},
      {"ioctl_tioclinux", "ioctl", {bad_fd, TIOCLINUX, 0}, EPERM},
      {"ioctl_tiocsti_high_bits", "ioctl", {bad_fd, kHigh | TIOCSTI, 0}, EPERM},
      // sockets: type 15 is invalid, so the kernel would answer EINVAL
      {"socket_netlink", "socket", {AF_NETLINK, 15, 0}, EAFNOSUPPORT},
      {"socket_packet", "socket", {AF_PACKET, 15, 0}, EAFNOSUPPORT},
      {"socket_vsock", "socket", {AF_VSOCK, 15, 0}, EAFNOSUPPORT},
      {"socket_bluetooth", "socket", {AF_BLUETOOTH, 15, 0}, EAFNOSUPPORT},
      {"socket_alg", "socket", {AF_ALG, 15, 0}, EAFNOSUPPORT},
      {"socket_key", "socket", {AF_KEY, 15, 0}, EAFNOSUPPORT},
      {"socket_unspec", "socket", {AF_UNSPEC, 15, 0}, EAFNOSUPPORT},
      {"socket_netlink_high_bits", "socket", {kHigh | AF_NETLINK, 15, 0}, EAFNOSUPPORT},
      {"socketpair_netlink", "socketpair", {AF_NETLINK, 15, 0, 0}, EAFNOSUPPORT},

      // --- allowed: must reach the kernel and get its own answer
      {"clone_thread_without_sighand", "clone", {CLONE_THREAD}, 0},
      {"socket_inet_bad_type", "socket", {AF_INET, 15, 0}, 0},
      {"socket_inet6_bad_type", "socket", {AF_INET6, 15, 0}, 0},
      {"socket_unix_bad_type", "socket", {AF_UNIX, 15, 0}, 0},
      {"socket_inet_high_bits", "socket", {kHigh | AF_INET, 15, 0}, 0},
      {"socketpair_unix_bad_type", "socketpair", {AF_UNIX, 15, 0, 0}, 0},
      {"ioctl_tcgets_bad_fd", "ioctl", {bad_fd, TCGETS, 0}, 0},
      {"personality_query", "personality", {0xffffffff}, 0},
      {"personality_query_64bit", "personality", {kMinus1}, 0},
      {"personality_linux", "personality", {PER_LINUX}, 0},
      {"personality_linux32", "personality", {PER_LINUX32}, 0},
      {"personality_uname26", "personality", {UNAME26}, 0},
      {"personality_linux32_uname26", "personality", {0x20008}, 0},
      {"landlock_create_ruleset_invalid_flags", "landlock_create_ruleset", {0, 0, 0xffff}, 0},
      {"landlock_add_rule_bad_fd", "landlock_add_rule", {bad_fd, 0, 0, 0xffff}, 0},
      {"landlock_restrict_self_bad_fd", "landlock_restrict_self", {bad_fd, 0xffff}, 0},
      {"lsm_get_self_attr_invalid_flags", "lsm_get_self_attr", {0, 0, 0, 0xffff}, 0},
      {"lsm_set_self_attr_invalid_flags", "lsm_set_self_attr", {0, 0, 0, 0xffff}, 0},
      {"lsm_list_modules_invalid_flags", "lsm_list_modules", {0, 0, 0xffff}, 0},
      {"seccomp_unknown_op", "seccomp", {0xffff, 0, 0}, 0},
      {"mbind_bad_mode", "mbind", {0, 0, 0xffff, 0, 0, 0}, 0},
      {"set_mempolicy_bad_mode", "set_mempolicy", {0xffff, 0, 0}, 0},
      {"migrate_pages_no_such_pid", "migrate_pages", {kMinus1, 0, 0, 0}, 0},
      {"move_pages_invalid_flags", "move_pages", {0, 0, 0, 0, 0, 0xffff}, 0},
  };
  return list;
}

TEST(SeccompProbeTable, EveryRuleIsProbed) {
  for (const SeccompRule& rule : seccomp_policy()) {
    bool covered = false;
    for (const Probe& p : probes()) {
      if (p.syscall != rule.syscall) continue;
      const bool denied = rule.action != SeccompAction::kAllow;
      if (denied ? p.denied_errno == rule.errno_value : p.denied_errno == 0) covered = true;
    }
    EXPECT_TRUE(covered) << rule.syscall << " has no probe for its action";
  }
  for (const Probe& p : probes()) {
    EXPECT_NE(find_rule(p.syscall), nullptr) << p.label << " probes a syscall outside the table";
  }
}

// gtest prints a failing parameter with this instead of its bytes.
void PrintTo(const Probe& p, std::ostream* os) { *os << p.label; }

class SeccompProbe : public SeccompKernel, public ::testing::WithParamInterface<Probe> {};

TEST_P(SeccompProbe, FilterAnswersThePolicyAndTheKernelAnswersTheRest) {
  const Probe& p = GetParam();
  const SeccompRule* rule = find_rule(p.syscall);
  ASSERT_NE(rule, nullptr) << p.syscall << " is not in the policy table";
  const int nr = seccomp_rule_syscall_nr(*rule);
  // A plain skip: a syscall this architecture never had (e.g. modify_ldt off
  // x86) cannot be probed on any host of it.
  if (nr < 0) GTEST_SKIP() << p.syscall << " does not exist on this architecture";
  const auto& a = p.args;
  auto call = [nr, &a] { return syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]); };
  const Outcome kernel = in_child(false, call);
  const Outcome filtered = in_child(true, call);
  RecordProperty("unfiltered", describe(kernel));  // in --gtest_output=xml, for the record
  RecordProperty("filtered", describe(filtered));
  ASSERT_TRUE(kernel.reported) << "unfiltered probe: " << describe(kernel);
  ASSERT_TRUE(filtered.reported) << "filtered probe: " << describe(filtered);
  if (p.denied_errno != 0) {
    EXPECT_EQ(filtered.ret, -1) << describe(filtered);
    EXPECT_EQ(filtered.err, p.denied_errno)
        << "filtered: " << describe(filtered) << ", unfiltered: " << describe(kernel);
    if (kernel.ret == -1 && kernel.err == p.denied_errno) {
      CORRAL_SKIP_OR_FAIL(std::string("the kernel itself answers ") +
                          std::string(errno_name(p.denied_errno)) + " to " + p.label +
                          " here (not root? feature disabled?), so the probe cannot tell "
                          "the filter's answer apart");
    }
  } else {
    // Same answer with and without the filter: the call reached the kernel.
    EXPECT_EQ(filtered.ret, kernel.ret)
        << "filtered: " << describe(filtered) << ", unfiltered: " << describe(kernel);
    EXPECT_EQ(filtered.err, kernel.err)
        << "filtered: " << describe(filtered) << ", unfiltered: " << describe(kernel);
  }
}

INSTANTIATE_TEST_SUITE_P(seccomp, SeccompProbe, ::testing::ValuesIn(probes()),
                         [](const ::testing::TestParamInfo<Probe>& info) {
                           return std::string(info.param.label);
                         });

// Makes the call on a second thread while the first waits for it: with
// KILL_PROCESS the whole process dies with SIGSYS; a mere KILL_THREAD would
// let the first thread report.
template <long (*Call)()>
long on_second_thread() {
  pthread_t thread;
  auto fn = [](void*) -> void* { return reinterpret_cast<void*>(Call()); };
  const int rc = pthread_create(&thread, nullptr, fn, nullptr);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  void* result = nullptr;
  pthread_join(thread, &result);
  return reinterpret_cast<long>(result);
}

long answer_42() { return 42; }

TEST_F(SeccompKernel, ForkAndThreadsStillWork) {
  // fork(): glibc's clone(SIGCHLD | CLONE_CHILD_*) has no namespace flag.
  const Outcome forked = in_child(true, [] {
    const pid_t child = fork();
    if (child < 0) return -1L;
    if (child == 0) _exit(7);
    int status = 0;
    if (waitpid(child, &status, 0) != child) return -1L;
    return WIFEXITED(status) ? static_cast<long>(WEXITSTATUS(status)) : -2L;
  });
  EXPECT_TRUE(forked.reported && forked.ret == 7) << describe(forked);
  // pthread_create(): glibc tries clone3, gets ENOSYS, falls back to clone.
  const Outcome threaded = in_child(true, on_second_thread<answer_42>);
  EXPECT_TRUE(threaded.reported && threaded.ret == 42) << describe(threaded);
}

TEST_F(SeccompKernel, RealInetAndUnixSocketsStillWork) {
  for (int family : {AF_INET, AF_INET6, AF_UNIX}) {
    const Outcome o = in_child(true, [family] {
      const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) return -1L;
      close(fd);
      return 0L;
    });
    const Outcome k = in_child(false, [family] {
      const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) return -1L;
      close(fd);
      return 0L;
    });
    EXPECT_EQ(o.ret, k.ret) << "family " << family << ": " << describe(o) << " vs " << describe(k);
    EXPECT_EQ(o.err, k.err) << "family " << family;
  }
}

#if defined(__x86_64__)
long x32_getpid() { return syscall(static_cast<long>(kX32Bit | SYS_getpid)); }

long i386_getpid() {
  long ret = 20;  // getpid in the i386 table, through int $0x80
  asm volatile("int $0x80" : "+a"(ret) : : "memory", "r8", "r9", "r10", "r11");
  return ret;
}

TEST_F(SeccompKernel, X32SyscallKillsTheWholeProcessWithSigsys) {
  // getpid through the x32 ABI: harmless whatever happens.
  const Outcome kernel = in_child(false, on_second_thread<x32_getpid>);
  const Outcome filtered = in_child(true, on_second_thread<x32_getpid>);
  ASSERT_TRUE(kernel.reported) << describe(kernel);  // ENOSYS, or the pid with x32 enabled
  RecordProperty("unfiltered", describe(kernel));
  EXPECT_FALSE(filtered.reported) << describe(filtered);
  ASSERT_TRUE(WIFSIGNALED(filtered.wait_status)) << describe(filtered);
  EXPECT_EQ(WTERMSIG(filtered.wait_status), SIGSYS);
}

TEST_F(SeccompKernel, I386SyscallKillsTheWholeProcessWithSigsys) {
  const Outcome kernel = in_child(false, on_second_thread<i386_getpid>);
  if (!kernel.reported) {
    CORRAL_SKIP_OR_FAIL("this kernel has no i386 emulation (" + describe(kernel) +
                        "), so the architecture check cannot be observed");
  }
  const Outcome filtered = in_child(true, on_second_thread<i386_getpid>);
  EXPECT_FALSE(filtered.reported) << describe(filtered);
  ASSERT_TRUE(WIFSIGNALED(filtered.wait_status)) << describe(filtered);
  EXPECT_EQ(WTERMSIG(filtered.wait_status), SIGSYS);
}
#endif

TEST(SeccompInstall, RefusesAnEmptyProgramBeforeAnySyscall) {
  Status empty = install_seccomp_filter({});
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().sys_errno, EINVAL);
}

}  // namespace
}  // namespace corral
