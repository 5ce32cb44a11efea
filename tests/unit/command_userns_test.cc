// filter_lets_children_join_userns() decides whether a zygote may carry
// the seccomp filter (ADR 0006). It asks the kernel in a forked child, so
// it is checked here against small hand-written programs, including while
// SIGCHLD is ignored (as in the daemon's factory, which runs the planner).
#include "jail/command_userns.h"

#include <gtest/gtest.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <sys/syscall.h>

#include <cerrno>
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
