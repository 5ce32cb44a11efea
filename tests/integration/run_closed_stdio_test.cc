// corral started with closed stdin/stdout must not hand one of its own
// host fds to the sandbox in their place (the next open() would reuse the
// number). Inside, fds 0-2 are pipes and nothing else is open.
#include <string>

#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

TEST(run_closed_stdio, NoHostFdTakesTheirPlace) {
  std::string out_dir = make_temp_dir("closed-stdio");
  std::string listing = out_dir + "/fds";
  host_sh("chmod 0777 '" + out_dir + "'");  // root-owned: the sandbox user needs write
  int status = -1;
  // stdin closed; stdout redirected to a file by the shell (a regular file
  // is relayed through a pipe); the listing goes to a mounted directory.
  host_sh("cd '" + out_dir + "' && '" + corral_bin() +
              "' run --mount " + out_dir + ":/out:rw -- sh -c "
              "'for f in /proc/self/fd/*; do echo \"$f $(readlink $f)\"; done > /out/fds' "
              "<&- >/dev/null 2>&1",
          &status);
  EXPECT_EQ(status, 0);
  std::string fds = host_sh("cat '" + listing + "'");
  EXPECT_NE(fds.find("/proc/self/fd/0 pipe:"), std::string::npos) << fds;
  EXPECT_NE(fds.find("/proc/self/fd/1 pipe:"), std::string::npos) << fds;
  EXPECT_NE(fds.find("/proc/self/fd/2 pipe:"), std::string::npos) << fds;
  // Besides 0-2, only the shell's own redirection (3 -> /out/fds) and the
  // directory it lists.
  for (const char* forbidden : {"/run/corral", "/var/lib/corral", "socket:", "anon_inode",
                                "/dev/null", "/sys/fs/cgroup"}) {
    EXPECT_EQ(fds.find(forbidden), std::string::npos) << forbidden << " open inside:\n" << fds;
  }
  host_sh("rm -rf '" + out_dir + "'");
}

// Fds the caller left open without O_CLOEXEC (a shell's `3<file`) are
// host fds too: none reaches the sandbox.
TEST(run_closed_stdio, InheritedHostFdsAreNotPassedIn) {
  std::string out_dir = make_temp_dir("inherited-fds");
  host_sh("chmod 0777 '" + out_dir + "'");
  int status = -1;
  host_sh("cd '" + out_dir + "' && '" + corral_bin() + "' run --mount " + out_dir +
              ":/out:rw -- sh -c "
              "'for f in /proc/self/fd/*; do echo \"$f $(readlink $f)\"; done > /out/fds' "
              "3</etc/hostname 7</etc/passwd 9>/dev/null",
          &status);
  EXPECT_EQ(status, 0);
  std::string fds = host_sh("cat '" + out_dir + "/fds'");
  EXPECT_NE(fds.find("/proc/self/fd/0 "), std::string::npos) << fds;
  for (const char* forbidden : {"/etc/hostname", "/etc/passwd", "/proc/self/fd/7 ",
                                "/proc/self/fd/9 "}) {
    EXPECT_EQ(fds.find(forbidden), std::string::npos) << forbidden << " open inside:\n" << fds;
  }
  host_sh("rm -rf '" + out_dir + "'");
}

}  // namespace
}  // namespace corral::testing
