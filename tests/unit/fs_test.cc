// base/fs.h: write_all on a full non-blocking pipe, mkdir_p, and tree
// removal that never follows a symlink out of the tree. (Removal across a
// mount point is ImageStoreTest.RemoveNeverCrossesAMountPoint's, which needs a
// private mount namespace.)
#include "base/fs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace corral {
namespace {

namespace stdfs = std::filesystem;

class FsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/corral-fs-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { stdfs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(FsTest, WriteAllWaitsOnAFullNonBlockingPipe) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  ASSERT_EQ(::fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
  const std::string data(1 << 20, 'q');  // far more than the pipe holds
  std::string got;
  std::thread reader([&] {
    char buf[65536];
    ssize_t n;
    while ((n = ::read(p[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
  });
  EXPECT_TRUE(write_all(p[1], data));
  ::close(p[1]);
  reader.join();
  ::close(p[0]);
  EXPECT_EQ(got.size(), data.size());
}

TEST_F(FsTest, WriteAllNamesTheFileOnFailure) {
  int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // not open for writing
  ASSERT_GE(fd, 0);
  auto st = write_all(fd, "x", "/dev/null");
  ::close(fd);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().message.rfind("write(/dev/null)", 0), 0u) << st.error().message;
  EXPECT_EQ(st.error().sys_errno, EBADF);
}

TEST_F(FsTest, MkdirPMakesParentsAndRefusesAFile) {
  const std::string deep = dir_ + "/a/b/c";
  ASSERT_TRUE(mkdir_p(deep, 0755).has_value());
  EXPECT_TRUE(stdfs::is_directory(deep));
  EXPECT_TRUE(mkdir_p(deep + "/", 0755).has_value()) << "an existing directory is fine";
  std::ofstream(dir_ + "/file") << "x";
  auto st = mkdir_p(dir_ + "/file", 0755);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(st.error().message, dir_ + "/file exists and is not a directory");
}

TEST_F(FsTest, RemoveTreeRemovesSymlinksButNotWhatTheyPointTo) {
  const std::string outside = dir_ + "/outside";
  ASSERT_TRUE(mkdir_p(outside + "/sub", 0755).has_value());
  std::ofstream(outside + "/keep") << "keep";
  const std::string tree = dir_ + "/tree";
  ASSERT_TRUE(mkdir_p(tree + "/x/y", 0755).has_value());
  std::ofstream(tree + "/x/y/file") << "gone";
  stdfs::create_directory_symlink(outside, tree + "/x/to-dir");
  stdfs::create_symlink(outside + "/keep", tree + "/to-file");
  ::chmod((tree + "/x/y").c_str(), 0500);  // a mode does not stop root's removal

  ASSERT_TRUE(remove_tree(tree).has_value());
  EXPECT_FALSE(stdfs::exists(stdfs::symlink_status(tree)));
  EXPECT_TRUE(stdfs::exists(outside + "/keep"));
  EXPECT_TRUE(stdfs::is_directory(outside + "/sub"));
}

TEST_F(FsTest, RemoveTreeOfAbsentPathsAndSingleFiles) {
  EXPECT_TRUE(remove_tree(dir_ + "/absent").has_value());
  EXPECT_TRUE(remove_tree(dir_ + "/absent-parent/absent").has_value());
  std::ofstream(dir_ + "/file") << "x";
  EXPECT_TRUE(remove_tree(dir_ + "/file").has_value());
  EXPECT_FALSE(stdfs::exists(dir_ + "/file"));
  stdfs::create_symlink(dir_, dir_ + "/loop");
  EXPECT_TRUE(remove_tree(dir_ + "/loop/").has_value()) << "a trailing slash names the link";
  EXPECT_FALSE(stdfs::exists(stdfs::symlink_status(dir_ + "/loop")));
  EXPECT_TRUE(stdfs::is_directory(dir_));
}

}  // namespace
}  // namespace corral
