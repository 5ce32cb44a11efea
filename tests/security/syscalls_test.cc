// The seccomp deny list, probed from inside (ARCHITECTURE.md "Isolation",
// src/jail/seccomp_policy.h). corral_probe calls each syscall with
// arguments the kernel itself rejects (EINVAL/EBADF/EFAULT/ESRCH), so
// "blocked" (EPERM/ENOSYS) means the filter answered and nothing ran
// either way. Checked for the default user and for --root: capabilities
// must not open any of these.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "base/result.h"
#include "jail/seccomp_policy.h"
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

// The errno docs/seccomp.md (and the table it copies) gives `name`.
std::string documented_errno(const std::string& name) {
  for (const SeccompRule& r : seccomp_policy()) {
    if (r.syscall == name && r.arg_op == SeccompArgOp::kNone) {
      return r.action == SeccompAction::kAllow ? "" : std::string(errno_name(r.errno_value));
    }
  }
  return std::string(errno_name(kSeccompDefaultErrno));  // not in the table: the default
}

// Calls the old deny-list policy let through, refused since it became an
// allowlist: inside the sandbox each answers the errno the table documents,
// and the same probe on the host (no filter; invalid arguments, so nothing
// happens) gets another answer from the kernel, so the filter answered.
TEST_P(SyscallsTest, CallsOffTheAllowlistAnswerTheirDocumentedErrno) {
  if (!is_root()) CORRAL_SKIP_OR_FAIL("security tests run as root");
  std::vector<std::string> names = {"mbind",           "set_mempolicy", "get_mempolicy",
                                    "migrate_pages",   "move_pages",    "set_mempolicy_home_node",
                                    "process_madvise", "fanotify_mark", "remap_file_pages",
                                    "statmount",       "listmount",     "lsm_get_self_attr"};
#if defined(__x86_64__)
  names.push_back("modify_ldt");
#endif
  std::vector<std::string> args;
  std::string host_cmd = probe_bin();
  for (const std::string& n : names) {
    if (!args.empty()) args.push_back("+");
    args.push_back("syscalls");
    args.push_back(n);
    host_cmd += (host_cmd == probe_bin() ? " syscalls " : " + syscalls ") + n;
  }
  ProbeRun run = run_probe(GetParam().opts, args);
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  int status = 0;
  ProbeRun host;
  std::istringstream host_out(host_sh(host_cmd, &status));
  ASSERT_EQ(status, 0) << host_cmd;
  for (std::string line; std::getline(host_out, line);) {
    if (!line.empty() && line[0] == '{') host.lines.push_back(json::parse(line));
  }
  for (const std::string& n : names) {
    const std::string want = documented_errno(n);
    ASSERT_FALSE(want.empty()) << n << " is allowed by the table";
    json inside = run.find("syscalls", "name", n);
    json kernel = host.find("syscalls", "name", n);
    ASSERT_FALSE(inside.is_null()) << "probe did not report " << n << ": " << run.describe();
    ASSERT_FALSE(kernel.is_null()) << "host probe did not report " << n;
    EXPECT_EQ(inside.value("ret", 0), -1) << GetParam().name << " " << inside.dump();
    EXPECT_EQ(inside.value("errno", json()), want) << GetParam().name << " " << inside.dump();
    if (kernel.value("errno", json()) == want) {
      CORRAL_SKIP_OR_FAIL("the kernel itself answers " + want + " to " + n +
                          " here, so the probe cannot tell the filter's answer apart");
    }
  }
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
