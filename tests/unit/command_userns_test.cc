// filter_lets_children_join_userns() decides whether a zygote may carry
// the seccomp filter (ADR 0006). It asks the kernel in a forked child, so
// it is checked here against small hand-written programs, including while
// SIGCHLD is ignored (as in the daemon's factory, which runs the planner).
#include "jail/command_userns.h"

#include "base/unique_fd.h"

#include <gtest/gtest.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace corral {
namespace {

std::vector<sock_filter> allow_all() { return {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)}; }

// setns answers `errno_value`, whatever its arguments; the rest is allowed.
std::vector<sock_filter> refuse_setns(int errno_value) {
  return {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setns, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | static_cast<unsigned>(errno_value)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
}

// setns is allowed for CLONE_NEWUSER only (the shape ADR 0006 asks of the
// policy); every other nstype answers EPERM.
std::vector<sock_filter> allow_setns_userns_only() {
  return {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setns, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[1])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, CLONE_NEWUSER, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
}

TEST(CommandUserns, FilterThatLetsSetnsThroughIsInherited) {
  EXPECT_TRUE(filter_lets_children_join_userns(allow_all()));
  EXPECT_TRUE(filter_lets_children_join_userns(allow_setns_userns_only()));
}

TEST(CommandUserns, FilterThatRefusesSetnsIsInstalledPerChild) {
  EXPECT_FALSE(filter_lets_children_join_userns(refuse_setns(EPERM)));
  EXPECT_FALSE(filter_lets_children_join_userns(refuse_setns(ENOSYS)));
  // An errno the kernel itself could give is still the filter's answer.
  // (A filter answering EBADF would be taken for a pass: the children's
  // setns would then fail and no process would start, which fails closed.)
  EXPECT_FALSE(filter_lets_children_join_userns(refuse_setns(EINVAL)));
}

TEST(CommandUserns, AnswerHoldsWhileSigchldIsIgnored) {
  struct sigaction old {};
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGCHLD, &ign, &old), 0);
  const bool refused = filter_lets_children_join_userns(refuse_setns(EACCES));
  const bool allowed = filter_lets_children_join_userns(allow_all());
  sigaction(SIGCHLD, &old, nullptr);
  EXPECT_FALSE(refused);
  EXPECT_TRUE(allowed);
}

}  // namespace
}  // namespace corral

namespace corral {
namespace {

// make_command_userns() as the host's root (it needs CAP_SETUID over the
// ids it maps): the namespace is owned by kZygoteId and maps the commands'
// ids; its CLONE_VM helper changed only its own credentials, not the
// caller's, and is reaped.
TEST(CommandUserns, NamespaceIsOwnedByTheZygoteIdAndTheCallerKeepsItsIds) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (the unit tests run as root in CI)";  // any host
  uid_t ruid, euid, suid;
  ASSERT_EQ(getresuid(&ruid, &euid, &suid), 0);
  const char* step = "";
  UniqueFd ns(make_command_userns(&step));
  ASSERT_TRUE(ns)  << step << ": " << std::strerror(errno);
  uid_t owner = 12345;
  ASSERT_EQ(ioctl(ns.get(), NS_GET_OWNER_UID, &owner), 0) << std::strerror(errno);
  EXPECT_EQ(owner, kZygoteId);
  uid_t r2, e2, s2;
  ASSERT_EQ(getresuid(&r2, &e2, &s2), 0);
  EXPECT_EQ(r2, ruid);
  EXPECT_EQ(e2, euid);
  EXPECT_EQ(s2, suid);
  EXPECT_EQ(getgroups(0, nullptr) >= 0, true);
  // No child left behind, not even a zombie.
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
  // A child that joins it sees the identity map of the commands' ids.
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    if (setns(ns.get(), CLONE_NEWUSER) != 0) _exit(1);
    int fd = open("/proc/self/uid_map", O_RDONLY);
    char buf[128] = {};
    const ssize_t n = read(fd, buf, sizeof buf - 1);
    (void)!write(p[1], buf, n > 0 ? static_cast<size_t>(n) : 0);
    _exit(0);
  }
  close(p[1]);
  char buf[128] = {};
  const ssize_t n = read(p[0], buf, sizeof buf - 1);
  close(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_GT(n, 0);
  unsigned inside = 1, outside = 1, count = 0;
  ASSERT_EQ(sscanf(buf, "%u %u %u", &inside, &outside, &count), 3) << buf;
  EXPECT_EQ(inside, 0u);
  EXPECT_EQ(outside, 0u);
  EXPECT_EQ(count, kCommandIds);
}

}  // namespace
}  // namespace corral
