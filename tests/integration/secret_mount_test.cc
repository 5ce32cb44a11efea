// SecretMount and SecretReadWatch (issue 5, S1 file mode, S5, S6) on the
// real kernel: a tmpfs of its own, 0400 files owned by the given user, a
// read seen by fanotify through another mount of it, and a wipe that
// leaves nothing (not even the bytes in a file that is still open).
#include "secrets/secret_mount.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "secrets/secret_read_watch.h"
#include "support/skip.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using corral::secrets::SecretMount;
using corral::secrets::SecretRead;
using corral::secrets::SecretReadWatch;

namespace {

std::string random_value() {
  std::random_device rd;
  std::string v = "val-";
  for (int i = 0; i < 24; ++i) v += "abcdefghijklmnopqrstuvwxyz0123456789"[rd() % 36];
  return v;
}

// The test's dir; what the test mounted below it is detached first.
class TempDir : public corral::testing::TempDir {
 public:
  TempDir() : corral::testing::TempDir("corral-secmount") {}
  ~TempDir() {
    (void)::umount2(file("s").c_str(), MNT_DETACH);
    (void)::umount2(file("view").c_str(), MNT_DETACH);
  }
};

}  // namespace

TEST(SecretMount, FilesAreOnTheirOwnTmpfsReadOnlyForTheirOwnerAndWipedToNothing) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/s";
  auto m = SecretMount::create(dir);
  ASSERT_TRUE(m) << m.error().to_string();
  struct statfs sfs {};
  ASSERT_EQ(::statfs(dir.c_str(), &sfs), 0);
  EXPECT_EQ(static_cast<unsigned long>(sfs.f_type), static_cast<unsigned long>(TMPFS_MAGIC));
  const std::string value = random_value();
  ASSERT_TRUE(m->write("db_password", value, 4242, 4243));
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/db_password").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0400u);
  EXPECT_EQ(st.st_uid, 4242u);
  EXPECT_EQ(st.st_gid, 4243u);
  EXPECT_FALSE(m->write("db_password", "again", 1, 1)) << "an existing name is refused";
  EXPECT_FALSE(m->write("../escape", "x", 1, 1));
  EXPECT_FALSE(m->write("..", "x", 1, 1));

  // A reader that keeps the file open across the wipe sees zeros, not the value.
  int held = ::open((dir + "/db_password").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_TRUE(corral::secrets::wipe_secret_mount(dir));
  EXPECT_FALSE(fs::exists(dir));
  std::string seen(value.size(), 'x');
  ASSERT_EQ(::pread(held, seen.data(), seen.size(), 0), static_cast<ssize_t>(value.size()));
  ::close(held);
  EXPECT_EQ(seen, std::string(value.size(), '\0')) << "the bytes were overwritten before unlink";
  EXPECT_TRUE(corral::secrets::wipe_secret_mount(dir)) << "wiping nothing succeeds";
}

TEST(SecretReadWatch, AReadThroughAnotherMountIsReportedWithFileSandboxAndPid) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/s";
  auto m = SecretMount::create(dir);
  ASSERT_TRUE(m) << m.error().to_string();
  ASSERT_TRUE(m->write("api_key", random_value(), 0, 0));
  ASSERT_TRUE(m->write("other", random_value(), 0, 0));

  std::mutex mu;
  std::condition_variable cv;
  std::vector<SecretRead> reads;
  auto watch = SecretReadWatch::start([&](const SecretRead& r) {
    std::lock_guard lock(mu);
    reads.push_back(r);
    cv.notify_all();
  });
  if (!watch) CORRAL_SKIP_OR_FAIL("no fanotify here: " + watch.error().to_string());
  ASSERT_TRUE(watch) << watch.error().to_string();
  ASSERT_TRUE((*watch)->watch("sb-1", dir));

  // Another mount of the same tmpfs, as the sandbox's bind mount is.
  const std::string view = tmp.path() + "/view";
  ASSERT_EQ(::mkdir(view.c_str(), 0700), 0);
  ASSERT_EQ(::mount(dir.c_str(), view.c_str(), nullptr, MS_BIND, nullptr), 0);
  pid_t child = ::fork();
  if (child == 0) {
    int fd = ::open((view + "/api_key").c_str(), O_RDONLY);
    char c;
    _exit(fd >= 0 && ::read(fd, &c, 1) == 1 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return !reads.empty(); }));
    EXPECT_EQ(reads[0].sandbox, "sb-1");
    EXPECT_EQ(reads[0].file, "api_key");
    EXPECT_EQ(reads[0].pid, child);
    EXPECT_GT(reads[0].time_ms, 0);
  }
  // Unwatched: the wipe's own opens are not reads.
  (*watch)->unwatch("sb-1");
  ASSERT_EQ(::umount2(view.c_str(), 0), 0);
  ASSERT_TRUE(corral::secrets::wipe_secret_mount(dir));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::lock_guard lock(mu);
  EXPECT_EQ(reads.size(), 1u) << "only the child's open was a read";
}
