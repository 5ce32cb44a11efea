// F4/F6: host paths that cross the boundary through --mount. Sources are
// confined to the allowed mount roots: "..", symlinks and hard links that
// could lead outside are refused before anything runs (exit 125). What the
// sandbox writes into a :rw mount is owned on the host by its own
// unprivileged uid range, never by host root (root inside could otherwise
// leave a setuid-root file on the host).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "security/probe_session.h"

namespace corral::testing {
namespace {

class MountsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!is_root()) CORRAL_SKIP_OR_FAIL("security tests run as root");
    root_ = make_temp_dir("mountroot");
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  // corral run --mount-root <root_> --mount <src>:/x ... -- probe ls /x
  ProbeRun mount_and_list(const std::string& src, const std::string& suffix = "") {
    std::vector<std::string> opts = ProbeDir::get().options();
    opts.insert(opts.end(), {"--mount-root", root_, "--mount", src + ":/x" + suffix});
    std::vector<std::string> cmd{kProbe, "ls", "/x", "+", "read", "/x"};
    ProbeRun run;
    run.outcome = run_sandbox(opts, cmd, {}, std::chrono::seconds(60));
    run.lines = parse_lines(run.outcome.out);
    return run;
  }
  std::string root_;
};

TEST_F(MountsTest, SourceOutsideTheRootRefused) {
  ProbeRun run = mount_and_list("/etc");
  EXPECT_EQ(run.outcome.exit_code, 125) << run.describe();
  EXPECT_TRUE(run.lines.empty()) << "the sandbox ran: " << run.describe();
}

TEST_F(MountsTest, DotDotRefused) {
  mkdir((root_ + "/sub").c_str(), 0755);
  ProbeRun run = mount_and_list(root_ + "/sub/../../../etc");
  EXPECT_EQ(run.outcome.exit_code, 125) << run.describe();
  EXPECT_TRUE(run.lines.empty()) << run.describe();
}

TEST_F(MountsTest, SymlinkLeadingOutsideRefused) {
  ASSERT_EQ(symlink("/etc", (root_ + "/etclink").c_str()), 0);
  mkdir((root_ + "/d").c_str(), 0755);
  ASSERT_EQ(symlink("/root", (root_ + "/d/rootlink").c_str()), 0);
  for (const std::string& src :
       {root_ + "/etclink", root_ + "/etclink/passwd", root_ + "/d/rootlink"}) {
    ProbeRun run = mount_and_list(src);
    EXPECT_EQ(run.outcome.exit_code, 125) << src << "\n" << run.describe();
    EXPECT_TRUE(run.lines.empty()) << src << "\n" << run.describe();
  }
}

// A hard link has no "outside" to see: corral refuses hard-linked files.
// The link is made in our own temp dir (same file system as /etc on the
// usual test hosts) and removed with it.
TEST_F(MountsTest, HardLinkedFileRefused) {
  std::string hard = root_ + "/pw";
  if (link("/etc/passwd", hard.c_str()) != 0) {
    GTEST_SKIP() << "cannot hard-link /etc/passwd into " << root_ << " (other file system)";
  }
  ProbeRun run = mount_and_list(hard);
  EXPECT_EQ(run.outcome.exit_code, 125) << run.describe();
  EXPECT_TRUE(run.lines.empty()) << run.describe();
}

// F4: a :rw mount is writable, and nothing the sandbox creates there is
// owned by host root: a file owned by host uid 0 that the sandbox may chmod
// is a setuid-root binary on the host (nosuid only protects the sandbox's
// view). Checked for a root-owned and a user-owned source directory, as
// the default user and as --root.
TEST_F(MountsTest, RwMountWritesNeverOwnedByHostRoot) {
  for (uid_t owner : {0u, 12345u}) {
    std::string dir = root_ + "/rw" + std::to_string(owner);
    mkdir(dir.c_str(), 0777);
    chmod(dir.c_str(), 0777);
    ASSERT_EQ(chown(dir.c_str(), owner, owner), 0);
    for (const Identity& id : identities()) {
      std::string name = std::string("made-by-") + id.name;
      std::vector<std::string> opts = ProbeDir::get().options();
      opts.insert(opts.end(), {"--mount-root", root_, "--mount", dir + ":/m:rw"});
      opts.insert(opts.end(), id.opts.begin(), id.opts.end());
      RunOutcome out = run_sandbox(opts, {kProbe, "mkfile", "/m/" + name, "16"});
      ASSERT_EQ(out.exit_code, 0) << out.out << out.err;
      struct stat st;
      ASSERT_EQ(stat((dir + "/" + name).c_str(), &st), 0) << id.name << ": " << out.out;
      EXPECT_NE(st.st_uid, 0u) << id.name << " in a dir owned by " << owner
                               << " created a file owned by host root";
      EXPECT_NE(st.st_gid, 0u) << id.name << " in a dir owned by " << owner
                               << " created a file of host group 0";
    }
  }
}

}  // namespace
}  // namespace corral::testing
