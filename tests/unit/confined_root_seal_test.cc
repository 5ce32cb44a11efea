// ConfinedRoot::seal_device (issue 12, item 7): a sealed file system is
// refused by every operation, with the caller's label in front of the
// message; others are served as before.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "fs/confined_root.h"

namespace corral {
namespace {

namespace stdfs = std::filesystem;

struct TempRoot {
  std::string dir;
  TempRoot() {
    char t[] = "/tmp/corral-seal-test-XXXXXX";
    dir = ::mkdtemp(t);
    stdfs::create_directories(dir + "/d/e");
    ::close(::open((dir + "/d/f").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    stdfs::create_directory_symlink("d", dir + "/link");
  }
  ~TempRoot() { stdfs::remove_all(dir); }
  dev_t dev() const {
    struct stat st {};
    ::stat(dir.c_str(), &st);
    return st.st_dev;
  }
};

void expect_sealed(const Status& st, const char* what) {
  ASSERT_FALSE(st.has_value()) << what << " was served";
  EXPECT_EQ(st.error().code, ErrorCode::kPermissionDenied) << what;
  EXPECT_EQ(st.error().message.rfind("sealed_label: ", 0), 0u)
      << what << ": " << st.error().message;
}

template <typename T>
Status status_of(const Result<T>& r) {
  if (r) return ok();
  return tl::unexpected(r.error());
}

TEST(ConfinedRootSeal, EveryOperationRefusesASealedFileSystem) {
  TempRoot t;
  auto root = ConfinedRoot::open(t.dir, true);
  ASSERT_TRUE(root.has_value()) << root.error().message;
  // Not sealed yet: served.
  EXPECT_TRUE(root->stat("/d/f").has_value());
  EXPECT_TRUE(root->list("/d").has_value());
  root->seal_device(t.dev() + 12345, "other_label");  // another device: no effect
  EXPECT_TRUE(root->open_read("/d/f").has_value());

  root->seal_device(t.dev(), "sealed_label");
  expect_sealed(status_of(root->stat("/d/f")), "stat");
  expect_sealed(status_of(root->stat("/link/f")), "stat through a symlink");
  expect_sealed(status_of(root->stat("/d")), "stat of a directory");
  expect_sealed(status_of(root->list("/d/e")), "list");
  expect_sealed(status_of(root->list("/")), "list of the root");
  expect_sealed(status_of(root->open_read("/d/f")), "open_read");
  expect_sealed(status_of(root->open_write("/d/new")), "open_write");
  expect_sealed(root->mkdir("/d/g"), "mkdir");
  expect_sealed(root->mkdir("/d/g/h", 0755, true), "mkdir with parents");
  expect_sealed(root->remove("/d/f"), "remove");
  expect_sealed(root->rename("/d/f", "/d/moved"), "rename");
  EXPECT_TRUE(stdfs::exists(t.dir + "/d/f"));
  EXPECT_FALSE(stdfs::exists(t.dir + "/d/new"));
  EXPECT_FALSE(stdfs::exists(t.dir + "/d/g"));
}

}  // namespace
}  // namespace corral
