// `corral run --mount`: read-only and read-write binds on real sandboxes,
// and the sources corral must refuse before any sandbox exists (`..`,
// symlinks out of the mount root, sources outside it, hard links, targets
// under /proc).
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// <root>/in/f ("orig\n") under a fresh mount root. The directory and file
// are writable by everyone, so a refused write inside the sandbox can only
// be the read-only mount (EROFS), not permissions.
class run_mounts : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = make_temp_dir("run-mounts");
    in_ = root_ + "/in";
    ASSERT_EQ(mkdir(in_.c_str(), 0777), 0);
    ASSERT_EQ(chmod(in_.c_str(), 0777), 0);
    {
      std::ofstream out(in_ + "/f");
      out << "orig\n";
    }
    ASSERT_EQ(chmod((in_ + "/f").c_str(), 0666), 0);
  }
  void TearDown() override {
    if (!root_.empty() && root_.rfind("/tmp/corral-test-", 0) == 0) {
      std::error_code ec;
      std::filesystem::remove_all(root_, ec);
    }
  }

  // Expects a refusal before any sandbox was started.
  void expect_refused_before_start(const RunOutcome& r, const std::string& what) {
    SCOPED_TRACE(what);
    EXPECT_EQ(r.exit_code, 125) << r.err;
    EXPECT_EQ(r.out, "");
    ASSERT_TRUE(r.report.is_object()) << r.err;
    ASSERT_TRUE(r.report["error"].is_object()) << r.report.dump();
    EXPECT_EQ(r.report["error"]["stage"], "mount-sources") << r.report.dump();
    // No sandbox: no id was given out and nothing ran.
    EXPECT_EQ(r.report["sandbox_id"], "") << r.report.dump();
    EXPECT_EQ(r.report["wall_ms"], 0) << r.report.dump();
    expect_sandbox_cleaned_up(r.report, what);
  }

  std::string root_;
  std::string in_;
};

TEST_F(run_mounts, ReadOnlyByDefault) {
  RunOutcome r = run_sandbox(
      {"--mount-root", root_, "--mount", in_ + ":/data"},
      {"sh", "-c", "cat /data/f; echo x > /data/f; echo $?; echo y > /data/new; echo $?"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string content, rc_overwrite, rc_create;
  std::getline(lines, content);
  std::getline(lines, rc_overwrite);
  std::getline(lines, rc_create);
  EXPECT_EQ(content, "orig") << "the mount shows the host file";
  EXPECT_NE(rc_overwrite, "0") << r.out;
  EXPECT_NE(rc_create, "0") << r.out;
  EXPECT_NE(r.err.find("Read-only file system"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(in_ + "/f"), "orig\n") << "host file changed through a read-only mount";
  EXPECT_FALSE(std::filesystem::exists(in_ + "/new"));
  expect_sandbox_cleaned_up(r.report, "read-only mount");
}

TEST_F(run_mounts, ExplicitRoIsReadOnly) {
  RunOutcome r = run_sandbox({"--mount-root", root_, "--mount", in_ + ":/data:ro"},
                             {"sh", "-c", "echo x > /data/f; echo $?"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out, "0\n");
  EXPECT_NE(r.err.find("Read-only file system"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(in_ + "/f"), "orig\n");
}

TEST_F(run_mounts, ReadWriteWritesLandOnHost) {
  RunOutcome r = run_sandbox({"--mount-root", root_, "--mount", in_ + ":/data:rw"},
                             {"sh", "-c", "echo from-sandbox > /data/g && echo changed > /data/f"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(slurp(in_ + "/g"), "from-sandbox\n");
  EXPECT_EQ(slurp(in_ + "/f"), "changed\n");
  expect_sandbox_cleaned_up(r.report, "read-write mount");
}

TEST_F(run_mounts, DotDotSourceRefused) {
  std::string src = in_ + "/../../etc";
  RunOutcome r = run_sandbox({"--mount-root", root_, "--mount", src + ":/data"}, {"true"});
  expect_refused_before_start(r, "'..' in the source");
  EXPECT_NE(r.err.find(".."), std::string::npos) << r.err;
}

TEST_F(run_mounts, SymlinkOutOfMountRootRefused) {
  std::string link = root_ + "/etc-link";
  ASSERT_EQ(symlink("/etc", link.c_str()), 0);
  RunOutcome r = run_sandbox({"--mount-root", root_, "--mount", link + ":/data"}, {"true"});
  expect_refused_before_start(r, "symlink to /etc");
  EXPECT_NE(r.err.find("symlink"), std::string::npos) << r.err;
}

TEST_F(run_mounts, SymlinkInTheMiddleOfTheSourceRefused) {
  std::string link = root_ + "/etc-link";
  ASSERT_EQ(symlink("/etc", link.c_str()), 0);
  RunOutcome r =
      run_sandbox({"--mount-root", root_, "--mount", link + "/passwd:/data/passwd"}, {"true"});
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_EQ(r.out, "");
  ASSERT_TRUE(r.report.is_object()) << r.err;
  EXPECT_EQ(r.report["sandbox_id"], "") << r.report.dump();
}

TEST_F(run_mounts, SourceOutsideMountRootRefused) {
  RunOutcome r = run_sandbox({"--mount-root", root_, "--mount", "/etc:/data"}, {"true"});
  expect_refused_before_start(r, "source outside the mount root");
  EXPECT_NE(r.err.find("outside"), std::string::npos) << r.err;
}

TEST_F(run_mounts, DefaultMountRootIsNotTheWholeHost) {
  // Without --mount-root the allowed root is corral's working directory
  // (the test's), which does not contain /etc.
  RunOutcome r = run_sandbox({"--mount", "/etc:/data"}, {"true"});
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(run_mounts, HardLinkedFileRefused) {
  std::string link = root_ + "/hard";
  ASSERT_EQ(::link((in_ + "/f").c_str(), link.c_str()), 0);
  RunOutcome r = run_sandbox({"--mount-root", root_, "--mount", link + ":/data/f"}, {"true"});
  expect_refused_before_start(r, "hard-linked file");
  EXPECT_NE(r.err.find("hard"), std::string::npos) << r.err;
}

TEST_F(run_mounts, TargetUnderProcRefused) {
  RunOutcome r = run_sandbox({"--mount-root", root_, "--mount", in_ + ":/proc/foo"}, {"true"});
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("/proc"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace corral::testing
