// The seccomp deny list, probed from inside (ARCHITECTURE.md "Isolation",
// src/jail/seccomp_policy.h). corral_probe calls each syscall with
// arguments the kernel itself rejects (EINVAL/EBADF/EFAULT/ESRCH), so
// "blocked" (EPERM/ENOSYS) means the filter answered and nothing ran
// either way. Checked for the default user and for --root: capabilities
// must not open any of these.
#include <gtest/gtest.h>

#include <set>

#include "security/probe_session.h"

namespace corral::testing {
namespace {

class SyscallsTest : public ::testing::TestWithParam<Identity> {};

TEST_P(SyscallsTest, DenyListIsBlocked) {
  if (!is_root()) CORRAL_SKIP_OR_FAIL("security tests run as root");
  ProbeRun run = run_probe(GetParam().opts, {"syscalls"});
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  std::vector<json> lines = run.all("syscalls");
  ASSERT_GE(lines.size(), 40u) << run.describe();

  // The families the brief names; each must be blocked (names as printed
  // by the probe).
  const std::set<std::string> required = {
      "mount",
      "umount2",
      "unshare(CLONE_NEWUSER)",
      "setns",
      "pivot_root",
      "chroot",
      "ptrace",
      "keyctl",
      "add_key",
      "bpf",
      "io_uring_setup",
      "userfaultfd",
      "perf_event_open",
      "process_vm_readv",
      "process_vm_writev",
      "kexec_load",
      "init_module",
      "finit_module",
      "open_by_handle_at",
      "clone(CLONE_NEWUSER)",
      "clone3",
      "move_mount",
      "fsopen",
      "fsmount",
      "open_tree",
      "personality(0xffff)",
      "ioctl(TIOCSTI)",
      "ioctl(TIOCSTI|1<<32)",
      "socket(AF_NETLINK)",
      "socket(AF_PACKET)",
  };
  std::set<std::string> seen;
  std::string extras;
  for (const json& l : lines) {
    std::string name = l.value("name", "");
    std::string group = l.value("group", "");
    std::string verdict = l.value("verdict", "");
    seen.insert(name);
    if (group == "deny") {
      // Every entry of the probe's deny group: blocked, never run.
      EXPECT_EQ(verdict, "blocked")
          << GetParam().name << ": " << name << " reached the kernel: " << l.dump();
    } else if (group == "control") {
      // Ordinary calls reach the kernel: the probe can tell the difference.
      EXPECT_EQ(verdict, "reached-kernel")
          << GetParam().name << ": control " << name << " was blocked: " << l.dump();
    } else {
      extras += "  " + name + ": " + verdict + " (" + l.value("errno", json()).dump() + ")\n";
    }
  }
  for (const std::string& name : required) {
    EXPECT_TRUE(seen.count(name)) << "probe did not report " << name;
  }
  // Not required; printed for the policy review.
  std::cout << "[" << GetParam().name << "] commonly denied elsewhere:\n" << extras;
}

// x32 syscall numbers and the i386 entry point (int 0x80) bypass a filter
// that checks only x86_64 numbers. The policy kills or refuses both.
TEST_P(SyscallsTest, ForeignAbisRefused) {
  if (!is_root()) CORRAL_SKIP_OR_FAIL("security tests run as root");
  ProbeRun run = run_probe(GetParam().opts, {"x32"});
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  std::vector<json> lines = run.all("x32");
  ASSERT_EQ(lines.size(), 2u) << run.describe();
  for (const json& l : lines) {
    EXPECT_NE(l.value("outcome", ""), "succeeded") << GetParam().name << ": " << l.dump();
  }
  json x32 = run.find("x32", "abi", "x32 getpid");
  // The architecture check kills (SIGSYS) or the x32 rule answers an error.
  EXPECT_TRUE(x32.value("outcome", "") == "killed" || x32.value("errno", json()) == "EPERM" ||
              x32.value("errno", json()) == "ENOSYS")
      << x32.dump();
}

// TIOCSTI types into the terminal of whoever holds it: the classic way out
// of a sandbox that shares the caller's tty. Blocked by the filter, also
// with garbage in the upper half of the request word.
TEST_P(SyscallsTest, TiocstiDenied) {
  if (!is_root()) CORRAL_SKIP_OR_FAIL("security tests run as root");
  ProbeRun run = run_probe(GetParam().opts, {"tiocsti"});
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  for (const json& l : run.all("tiocsti")) {
    if (l.contains("verdict")) {
      EXPECT_EQ(l["verdict"], "blocked") << GetParam().name << ": " << l.dump();
    }
  }
  json tty = run.find("tiocsti", "target", "/dev/tty open");
  EXPECT_EQ(tty.value("ok", true), false)
      << "the workload has a controlling terminal: " << tty.dump();
}

INSTANTIATE_TEST_SUITE_P(Identities, SyscallsTest, ::testing::ValuesIn(identities()),
                         identity_test_name);

}  // namespace
}  // namespace corral::testing
