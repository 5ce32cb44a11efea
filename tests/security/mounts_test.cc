// F4/F6: host paths that cross the boundary through --mount. Sources are
// confined to the allowed mount roots: "..", symlinks and hard links that
// could lead outside are refused before anything runs (exit 125). What the
// sandbox writes into a :rw mount is owned on the host by its own
// unprivileged uid range, never by host root (root inside could otherwise
// leave a setuid-root file on the host).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

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
    std::filesystem::remove_all(root_ + "-outside", ec);  // HardLinkedFileRefused
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
  static void write_host_file(const std::string& path, const std::string& text, mode_t mode) {
    FILE* f = fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr) << path << ": " << strerror(errno);
    fputs(text.c_str(), f);
    fclose(f);
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
    ASSERT_EQ(chown(path.c_str(), 0, 0), 0);
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

// A hard link has no "outside" to see: corral refuses a hard-linked file as
// a mount source, whatever it links to. The file stands for a host file
// outside the mount root: root-owned, 0600, made by the test in a sibling
// of the root (the same file system by construction, so link() always
// works and the test always runs), and removed with it.
TEST_F(MountsTest, HardLinkedFileRefused) {
  const std::string outside = root_ + "-outside";
  ASSERT_EQ(mkdir(outside.c_str(), 0700), 0) << strerror(errno);
  const std::string secret = outside + "/secret";
  write_host_file(secret, "host secret: never mounted\n", 0600);
  const std::string hard = root_ + "/pw";
  ASSERT_EQ(link(secret.c_str(), hard.c_str()), 0) << strerror(errno);
  ProbeRun run = mount_and_list(hard);
  EXPECT_EQ(run.outcome.exit_code, 125) << run.describe();
  EXPECT_TRUE(run.lines.empty()) << run.describe();
  EXPECT_NE(run.outcome.err.find("hard-linked"), std::string::npos) << run.describe();
}

// The other direction, from inside: a hard link made in a :rw mount to a
// root-owned file of another mount of the same host file system would give
// the host a second name for it, in a directory the sandbox writes to. Both
// mounts come from the test's own dirs; the link must fail and the host
// file keep its one name.
TEST_F(MountsTest, HardLinkFromInsideAcrossMountsRefused) {
  const std::string ro = root_ + "/ro";
  const std::string rw = root_ + "/rw";
  ASSERT_EQ(mkdir(ro.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(rw.c_str(), 0777), 0);
  ASSERT_EQ(chmod(rw.c_str(), 0777), 0);
  const std::string secret = ro + "/secret";
  write_host_file(secret, "root-owned\n", 0644);
  for (const Identity& id : identities()) {
    std::vector<std::string> opts = ProbeDir::get().options();
    opts.insert(opts.end(), {"--mount-root", root_, "--mount", ro + ":/s", "--mount",
                             rw + ":/m:rw"});
    opts.insert(opts.end(), id.opts.begin(), id.opts.end());
    ProbeRun run;
    run.outcome = run_sandbox(opts, {kProbe, "link", "/s/secret", "/m/secret-link", "+", "link",
                                     "/etc/hostname", "/m/etc-link"});
    run.lines = parse_lines(run.outcome.out);
    ASSERT_EQ(run.outcome.exit_code, 0) << id.name << "\n" << run.describe();
    std::vector<json> links = run.all("link");
    ASSERT_EQ(links.size(), 2u) << id.name << "\n" << run.describe();
    for (const json& l : links) {
      EXPECT_FALSE(l.value("ok", true)) << id.name << ": " << l.dump();
    }
    struct stat st;
    ASSERT_EQ(stat(secret.c_str(), &st), 0);
    EXPECT_EQ(st.st_nlink, 1u) << id.name << " gave the host file a second name";
    EXPECT_NE(access((rw + "/secret-link").c_str(), F_OK), 0) << id.name;
    EXPECT_NE(access((rw + "/etc-link").c_str(), F_OK), 0) << id.name;
  }
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
