// The seccomp policy on the live kernel (the table and its compiled
// programs are checked in seccomp_table_test.cc): forked children install
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
      {"setns_bad_fd_newnet", "setns", {bad_fd, CLONE_NEWNET}, EPERM},
      {"setns_bad_fd_newns", "setns", {bad_fd, CLONE_NEWNS}, EPERM},
      {"setns_bad_fd_newuser_high_bits",
       "setns",
       {bad_fd, kHigh | CLONE_NEWUSER | CLONE_NEWNET},
       EPERM},
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
      {"setns_newuser_bad_fd", "setns", {bad_fd, CLONE_NEWUSER}, 0},  // EBADF from the kernel
      {"personality_query", "personality", {0xffffffff}, 0},
      {"personality_query_64bit", "personality", {kMinus1}, 0},
      {"personality_linux", "personality", {PER_LINUX}, 0},
      {"personality_linux32", "personality", {PER_LINUX32}, 0},
      {"personality_uname26", "personality", {UNAME26}, 0},
      {"personality_linux32_uname26", "personality", {0x20008}, 0},
      {"landlock_create_ruleset_invalid_flags", "landlock_create_ruleset", {0, 0, 0xffff}, 0},
      {"landlock_add_rule_bad_fd", "landlock_add_rule", {bad_fd, 0, 0, 0xffff}, 0},
      {"landlock_restrict_self_bad_fd", "landlock_restrict_self", {bad_fd, 0xffff}, 0},
      {"seccomp_unknown_op", "seccomp", {0xffff, 0, 0}, 0},
      {"mseal_invalid_flags", "mseal", {0, 0, 0xffff}, 0},
      {"close_range_invalid_flags", "close_range", {3, 2, 0xffff}, 0},
      {"setresuid_unchanged", "setresuid", {kMinus1, kMinus1, kMinus1}, 0},
      {"prlimit64_no_such_pid", "prlimit64", {0x7fffffff, 0, 0, 0}, 0},
      {"execveat_bad_fd", "execveat", {bad_fd, bad_ptr, 0, 0, 0}, 0},

      // --- refused as if the kernel lacked them (ENOSYS)
      {"lsm_get_self_attr_invalid_flags", "lsm_get_self_attr", {0, 0, 0, 0xffff}, ENOSYS},
      {"lsm_set_self_attr_invalid_flags", "lsm_set_self_attr", {0, 0, 0, 0xffff}, ENOSYS},
      {"lsm_list_modules_invalid_flags", "lsm_list_modules", {0, 0, 0xffff}, ENOSYS},
      {"mbind_bad_mode", "mbind", {0, 0, 0xffff, 0, 0, 0}, ENOSYS},
      {"set_mempolicy_bad_mode", "set_mempolicy", {0xffff, 0, 0}, ENOSYS},
      {"get_mempolicy_invalid_flags", "get_mempolicy", {0, 0, 0, 0, 0xffff}, ENOSYS},
      {"migrate_pages_no_such_pid", "migrate_pages", {kMinus1, 0, 0, 0}, ENOSYS},
      {"move_pages_invalid_flags", "move_pages", {0, 0, 0, 0, 0, 0xffff}, ENOSYS},
      {"set_mempolicy_home_node_invalid_flags",
       "set_mempolicy_home_node",
       {0, 0, 0, 0xffff},
       ENOSYS},
      {"modify_ldt_write_bad_size", "modify_ldt", {1, bad_ptr, 0}, ENOSYS},  // kernel: EINVAL
      {"fanotify_mark_invalid_flags", "fanotify_mark", {bad_fd, 0xffffffff, 0, bad_fd, 0}, ENOSYS},
      {"process_mrelease_invalid_flags", "process_mrelease", {bad_fd, 0xffff}, ENOSYS},
      {"remap_file_pages_with_prot", "remap_file_pages", {0, 0, 1, 0, 0}, ENOSYS},
      {"statmount_invalid_flags", "statmount", {0, 0, 0, 0xffff}, ENOSYS},
      {"listmount_invalid_flags", "listmount", {0, 0, 0, 0xffff}, ENOSYS},
      // --- newly refused with EPERM
      {"process_madvise_invalid_flags", "process_madvise", {bad_fd, 0, 0, 0, 0xffff}, EPERM},
      {"sethostname_too_long", "sethostname", {bad_ptr, 100000}, EPERM},  // kernel (root): EINVAL
      {"setdomainname_too_long", "setdomainname", {bad_ptr, 100000}, EPERM},
  };
  return list;
}

// Refused rows no probe can tell from the kernel's own answer: the kernel
// answers ENOSYS itself where these are compiled out or removed.
const std::set<std::string_view> kUnprobeable = {
    "memfd_secret",                        // ENOSYS unless the host boots with secretmem.enable
    "sysfs",                               // CONFIG_SYSFS_SYSCALL
    "ustat",                               // gone from many configs; answers ENOSYS
    "_sysctl",                             // removed in Linux 5.5
    "get_thread_area", "set_thread_area",  // x86-64: only with 32-bit emulation
};

// Every refused row, and every allowed syscall with argument rows, has a
// probe for its answer. (Plain allowed calls are covered by the workloads
// of tests/integration/workloads_test.cc.)
TEST(SeccompProbeTable, EveryRefusedRuleIsProbed) {
  for (const SeccompRule& rule : seccomp_policy()) {
    if (kUnprobeable.count(rule.syscall)) continue;
    if (rule.action == SeccompAction::kAllow) {
      bool has_arg_rows = false;
      for (const SeccompRule& r : seccomp_policy()) {
        if (r.syscall == rule.syscall && r.arg_op != SeccompArgOp::kNone) has_arg_rows = true;
      }
      if (!has_arg_rows) continue;
    }
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

TEST_F(SeccompKernel, I386SyscallNeverReachesTheKernelThroughTheFilter) {
  // The threat: a 64-bit process entering through int $0x80 reaches the i386 table, where
  // the numbers mean other syscalls. With i386 emulation the filter must kill the process
  // with SIGSYS. Without it (ia32_emulation=0, a kernel built without it: hosts differ,
  // CI's among them) the CPU faults on the entry itself, and the filtered process must end
  // exactly as the unfiltered one does (SIGSEGV, or a sanitizer's exit after catching it).
  // Either way no i386 syscall may return inside the filter.
  const Outcome kernel = in_child(false, on_second_thread<i386_getpid>);
  const Outcome filtered = in_child(true, on_second_thread<i386_getpid>);
  RecordProperty("unfiltered", describe(kernel));
  EXPECT_FALSE(filtered.reported) << describe(filtered);
  if (kernel.reported) {
    ASSERT_TRUE(WIFSIGNALED(filtered.wait_status)) << describe(filtered);
    EXPECT_EQ(WTERMSIG(filtered.wait_status), SIGSYS) << describe(filtered);
  } else {
    EXPECT_EQ(filtered.wait_status, kernel.wait_status)
        << "no i386 emulation here (" << describe(kernel) << "); filtered: " << describe(filtered);
  }
}
#endif

TEST(SeccompInstall, RefusesAnEmptyProgramBeforeAnySyscall) {
  Status empty = install_seccomp_filter({});
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().sys_errno, EINVAL);
}

}  // namespace
}  // namespace corral
