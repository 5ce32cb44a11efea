// The host-base skeleton (F1, F4): built on first use, and old skeletons
// are collected when a new one is built, unless a sandbox still uses them.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

bool exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

TEST(run_host_base, OldSkeletonsAreCollectedUnlessInUse) {
  std::string data = make_temp_dir("data");
  std::string base = data + "/base";
  ASSERT_EQ(mkdir(base.c_str(), 0755), 0);
  std::string unused = base + "/host-v0-unused";
  std::string held = base + "/host-v0-held";
  std::string dead_partial = base + "/host-v0-x.partial-999999999";
  for (const std::string& d : {unused, held, dead_partial}) {
    ASSERT_EQ(mkdir(d.c_str(), 0755), 0);
    ASSERT_EQ(mkdir((d + "/rootfs").c_str(), 0755), 0);
  }
  int lock = open((held + "/in-use.lock").c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(lock, 0);
  ASSERT_EQ(flock(lock, LOCK_SH), 0);  // as a running sandbox holds it

  setenv("CORRAL_DATA_DIR", data.c_str(), 1);
  RunOutcome r = run_sandbox({}, {"cat", "/etc/hostname"});
  unsetenv("CORRAL_DATA_DIR");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sandbox\n");
  EXPECT_FALSE(exists(unused)) << "an unused old skeleton was kept";
  EXPECT_FALSE(exists(dead_partial)) << "a dead builder's partial skeleton was kept";
  EXPECT_TRUE(exists(held)) << "a skeleton in use was removed";
  close(lock);
  host_sh("rm -rf '" + data + "'");
}

}  // namespace
}  // namespace corral::testing
