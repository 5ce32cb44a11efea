// ConfinedRoot: ordinary file operations inside a sandbox root, and every
// way out of it we know (F6). Each test works in its own temp dir: the
// "sandbox root" and, beside it, a canary directory standing for the host
// with a secret file that must stay unread (atime), unmodified (content)
// and alone (no file created next to it). No real host file is touched.
#include "fs/confined_root.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fs/copy_stream.h"
#include "support/skip.h"

namespace corral {
namespace {

namespace stdfs = std::filesystem;

constexpr std::string_view kSecret = "host secret: must never be read";
constexpr std::string_view kInside = "inside the sandbox";

void write_host_file(const std::string& path, std::string_view content) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(std::fwrite(content.data(), 1, content.size(), f), content.size());
  std::fclose(f);
}

std::string read_host_file(const std::string& path) {
  std::string out;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return "<unreadable>";
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

std::string read_fd(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  return out;
}

void write_fd(int fd, std::string_view content) {
  ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
}

class ConfinedRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/corral-fs-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    root_ = base_ + "/root";
    canary_dir_ = base_ + "/canary-dir";
    canary_ = canary_dir_ + "/secret";
    ASSERT_EQ(::mkdir(root_.c_str(), 0755), 0);
    ASSERT_EQ(::mkdir(canary_dir_.c_str(), 0755), 0);
    write_host_file(canary_, kSecret);
    // An old atime: under relatime (or strictatime) any read updates it.
    timespec times[2] = {{1000000, 0}, {UTIME_OMIT, UTIME_OMIT}};
    ASSERT_EQ(::utimensat(AT_FDCWD, canary_.c_str(), times, 0), 0);
    struct stat st {};
    ASSERT_EQ(::stat(canary_.c_str(), &st), 0);
    canary_ino_ = st.st_ino;
    canary_dev_ = st.st_dev;
    canary_atime_ = st.st_atim.tv_sec;
    auto r = ConfinedRoot::open(root_);
    ASSERT_TRUE(r.has_value()) << r.error().to_string();
    fs_.emplace(std::move(*r));
  }

  void TearDown() override {
    fs_.reset();
    std::error_code ec;
    stdfs::remove_all(base_, ec);  // does not follow symlinks
  }

  // The canary is as SetUp left it: content, atime, and alone in its dir.
  void expect_canary_untouched() {
    EXPECT_EQ(read_host_file_no_atime(), kSecret);
    struct stat st {};
    ASSERT_EQ(::stat(canary_.c_str(), &st), 0);
    EXPECT_EQ(st.st_atim.tv_sec, canary_atime_) << "the canary was read";
    std::vector<std::string> names;
    for (const auto& e : stdfs::directory_iterator(canary_dir_)) {
      names.push_back(e.path().filename());
    }
    EXPECT_EQ(names, std::vector<std::string>{"secret"}) << "a file appeared outside the root";
  }

  // Reads the canary with O_NOATIME (we own it) so the check does not
  // disturb the atime it also checks.
  std::string read_host_file_no_atime() {
    int fd = ::open(canary_.c_str(), O_RDONLY | O_NOATIME | O_CLOEXEC);
    if (fd < 0) return "<unreadable>";
    std::string s = read_fd(fd);
    ::close(fd);
    return s;
  }

  // An fd from the file API must never be the canary.
  void expect_not_canary(int fd) {
    struct stat st {};
    ASSERT_EQ(::fstat(fd, &st), 0);
    EXPECT_FALSE(st.st_ino == canary_ino_ && st.st_dev == canary_dev_)
        << "the file API opened the host canary";
  }

  std::string in_root(const std::string& rel) { return root_ + "/" + rel; }

  std::string base_, root_, canary_dir_, canary_;
  ino_t canary_ino_ = 0;
  dev_t canary_dev_ = 0;
  time_t canary_atime_ = 0;
  std::optional<ConfinedRoot> fs_;
};

template <typename T>
ErrorCode code_of(const Result<T>& r) {
  EXPECT_FALSE(r.has_value()) << "expected an error";
  return r.has_value() ? ErrorCode::kInternal : r.error().code;
}

// --- ordinary use ---

TEST_F(ConfinedRootTest, NormalOperationsWork) {
  ASSERT_TRUE(fs_->mkdir("/work").has_value());
  ASSERT_TRUE(fs_->mkdir("a/b/c", 0700, true).has_value());
  ASSERT_TRUE(fs_->mkdir("a/b/c", 0700, true).has_value()) << "parents: existing is fine";
  EXPECT_EQ(code_of(fs_->mkdir("/work")), ErrorCode::kAlreadyExists);
  EXPECT_EQ(code_of(fs_->mkdir("/missing/x")), ErrorCode::kNotFound);

  {
    auto fd = fs_->open_write("/work/f.txt");
    ASSERT_TRUE(fd.has_value()) << fd.error().to_string();
    write_fd(fd->get(), "hello");
  }
  auto info = fs_->stat("work/f.txt");
  ASSERT_TRUE(info.has_value()) << info.error().to_string();
  EXPECT_EQ(info->type, FileType::kRegular);
  EXPECT_EQ(info->size, 5u);
  EXPECT_EQ(info->mode, 0644u);
  EXPECT_GT(info->mtime_ns, 0);
  EXPECT_EQ(fs_->stat("/")->type, FileType::kDirectory);
  EXPECT_EQ(fs_->stat("a/b/c")->mode, 0700u);
  {
    auto fd = fs_->open_read("//work/./f.txt");
    ASSERT_TRUE(fd.has_value()) << fd.error().to_string();
    EXPECT_EQ(read_fd(fd->get()), "hello");
  }
  {
    // Truncate by default, keep with truncate=false, refuse with exclusive.
    auto fd = fs_->open_write("/work/f.txt", {.mode = 0600, .truncate = false});
    ASSERT_TRUE(fd.has_value());
    EXPECT_EQ(fs_->stat("/work/f.txt")->size, 5u);
    EXPECT_EQ(code_of(fs_->open_write("/work/f.txt", {.exclusive = true})),
              ErrorCode::kAlreadyExists);
    ASSERT_TRUE(fs_->open_write("/work/f.txt").has_value());
    EXPECT_EQ(fs_->stat("/work/f.txt")->size, 0u);
  }
  EXPECT_EQ(code_of(fs_->open_read("/work")), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of(fs_->open_read("/work/none")), ErrorCode::kNotFound);

  auto listing = fs_->list("/");
  ASSERT_TRUE(listing.has_value()) << listing.error().to_string();
  ASSERT_EQ(listing->entries.size(), 2u);
  EXPECT_EQ(listing->entries[0].name, "a");
  EXPECT_EQ(listing->entries[1].name, "work");
  EXPECT_EQ(listing->entries[1].type, FileType::kDirectory);
  EXPECT_FALSE(listing->truncated);

  ASSERT_TRUE(fs_->open_write("/work/g.txt").has_value());
  EXPECT_EQ(code_of(fs_->rename("/work/f.txt", "/work/g.txt")), ErrorCode::kAlreadyExists);
  ASSERT_TRUE(fs_->rename("/work/f.txt", "/work/g.txt", false).has_value());
  ASSERT_TRUE(fs_->rename("/work/g.txt", "a/b/c/h.txt").has_value());
  EXPECT_EQ(fs_->stat("a/b/c/h.txt")->type, FileType::kRegular);

  EXPECT_EQ(code_of(fs_->remove("/a")), ErrorCode::kInvalidArgument) << "not empty";
  ASSERT_TRUE(fs_->remove("/a", true).has_value());
  ASSERT_TRUE(fs_->remove("/work").has_value());
  EXPECT_EQ(fs_->list("/")->entries.size(), 0u);
  EXPECT_EQ(code_of(fs_->remove("/")), ErrorCode::kPermissionDenied);
  EXPECT_EQ(code_of(fs_->rename("/", "/x")), ErrorCode::kPermissionDenied);
}

TEST_F(ConfinedRootTest, ListIsCapped) {
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(fs_->open_write("f" + std::to_string(i)).has_value());
  }
  auto capped = fs_->list("/", 4);
  ASSERT_TRUE(capped.has_value());
  EXPECT_EQ(capped->entries.size(), 4u);
  EXPECT_TRUE(capped->truncated);
  auto all = fs_->list("/", 10);
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(all->entries.size(), 10u);
  EXPECT_FALSE(all->truncated);
}

// --- the path as text ---

TEST(SandboxPath, SplitsAndRefuses) {
  EXPECT_EQ(split_sandbox_path("//a/./b/").value(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(split_sandbox_path("/").value().empty());
  EXPECT_TRUE(split_sandbox_path(".").value().empty());
  EXPECT_EQ(code_of(split_sandbox_path("")), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of(split_sandbox_path(std::string("a\0b", 3))), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of(split_sandbox_path(std::string(256, 'n'))), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(split_sandbox_path(std::string(255, 'n')).has_value());
  std::string long_path;
  while (long_path.size() <= kMaxSandboxPathBytes) long_path += "/abcdefgh";
  EXPECT_EQ(code_of(split_sandbox_path(long_path)), ErrorCode::kInvalidArgument);

  auto up = split_sandbox_path("../etc");
  ASSERT_FALSE(up.has_value());
  EXPECT_EQ(up.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(up.error().message.find("path \"../etc\" leaves the sandbox"), std::string::npos)
      << up.error().message;
  EXPECT_EQ(code_of(split_sandbox_path("/../../etc/passwd")), ErrorCode::kPermissionDenied);
  auto inner = split_sandbox_path("a/../b");
  ASSERT_FALSE(inner.has_value());
  EXPECT_EQ(inner.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(inner.error().message.find("\"..\""), std::string::npos);
}

TEST_F(ConfinedRootTest, DotDotIsRefused) {
  std::string climb = "/../../../../../../.." + canary_;
  for (const std::string& p : {std::string("../x"), std::string("/../../etc/passwd"),
                               std::string("../canary-dir/secret"), climb}) {
    EXPECT_EQ(code_of(fs_->open_read(p)), ErrorCode::kPermissionDenied) << p;
    EXPECT_EQ(code_of(fs_->open_write(p)), ErrorCode::kPermissionDenied) << p;
    EXPECT_EQ(code_of(fs_->stat(p)), ErrorCode::kPermissionDenied) << p;
    EXPECT_EQ(code_of(fs_->list(p)), ErrorCode::kPermissionDenied) << p;
    EXPECT_EQ(code_of(fs_->remove(p)), ErrorCode::kPermissionDenied) << p;
    EXPECT_EQ(code_of(fs_->mkdir(p, 0755, true)), ErrorCode::kPermissionDenied) << p;
  }
  expect_canary_untouched();
}

TEST_F(ConfinedRootTest, AbsolutePathsMeanTheSandboxRoot) {
  // The canary's host path, used as a sandbox path, names a file in the root.
  EXPECT_EQ(code_of(fs_->open_read(canary_)), ErrorCode::kNotFound);
  EXPECT_EQ(code_of(fs_->stat(canary_)), ErrorCode::kNotFound);
  EXPECT_EQ(code_of(fs_->open_write(canary_)), ErrorCode::kNotFound);
  ASSERT_TRUE(fs_->mkdir(canary_dir_, 0755, true).has_value());
  {
    auto fd = fs_->open_write(canary_);
    ASSERT_TRUE(fd.has_value()) << fd.error().to_string();
    write_fd(fd->get(), kInside);
  }
  EXPECT_EQ(read_host_file(root_ + canary_), kInside);
  expect_canary_untouched();
}

// --- symlinks ---

TEST_F(ConfinedRootTest, AbsoluteSymlinkResolvesInsideTheRoot) {
  ASSERT_EQ(::symlink(canary_dir_.c_str(), in_root("abs").c_str()), 0);
  ASSERT_EQ(::symlink(canary_.c_str(), in_root("abs-file").c_str()), 0);
  // As a directory in the middle: resolved as <root>/<canary dir>, absent.
  EXPECT_EQ(code_of(fs_->open_read("abs/secret")), ErrorCode::kNotFound);
  EXPECT_EQ(code_of(fs_->stat("abs/secret")), ErrorCode::kNotFound);
  EXPECT_EQ(code_of(fs_->open_write("abs/new")), ErrorCode::kNotFound);
  EXPECT_EQ(code_of(fs_->list("abs")), ErrorCode::kPermissionDenied) << "last component";
  EXPECT_EQ(code_of(fs_->mkdir("abs/new")), ErrorCode::kNotFound);
  // As the last component: described by stat, refused for read and write.
  auto info = fs_->stat("abs-file");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->type, FileType::kSymlink);
  EXPECT_EQ(info->link_target, canary_);
  auto r = fs_->open_read("abs-file");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(r.error().message.find("symbolic link"), std::string::npos) << r.error().message;
  EXPECT_EQ(code_of(fs_->open_write("abs-file")), ErrorCode::kPermissionDenied);
  EXPECT_EQ(code_of(fs_->open_write("abs-file", {.truncate = false})),
            ErrorCode::kPermissionDenied);
  // A dangling symlink is not created through either.
  ASSERT_EQ(::symlink((canary_dir_ + "/created").c_str(), in_root("dangling").c_str()), 0);
  EXPECT_EQ(code_of(fs_->open_write("dangling")), ErrorCode::kPermissionDenied);
  expect_canary_untouched();
}

TEST_F(ConfinedRootTest, RelativeSymlinkClimbingOutIsClampedToTheRoot) {
  ASSERT_EQ(::symlink("../canary-dir", in_root("up").c_str()), 0);
  ASSERT_EQ(::mkdir(in_root("deep").c_str(), 0755), 0);
  ASSERT_EQ(::symlink("../../../../../../../../canary-dir", in_root("deep/up").c_str()), 0);
  ASSERT_EQ(::symlink("../canary-dir/secret", in_root("up-file").c_str()), 0);
  EXPECT_EQ(code_of(fs_->open_read("up/secret")), ErrorCode::kNotFound);
  EXPECT_EQ(code_of(fs_->open_read("deep/up/secret")), ErrorCode::kNotFound);
  EXPECT_EQ(code_of(fs_->open_write("up/new")), ErrorCode::kNotFound);
  EXPECT_EQ(code_of(fs_->open_read("up-file")), ErrorCode::kPermissionDenied);
  EXPECT_EQ(code_of(fs_->open_write("up-file")), ErrorCode::kPermissionDenied);
  // ".." in a target stops at the root: "up" now means <root>/canary-dir.
  ASSERT_EQ(::mkdir(in_root("canary-dir").c_str(), 0755), 0);
  write_host_file(in_root("canary-dir/secret"), kInside);
  for (const char* p : {"up/secret", "deep/up/secret"}) {
    auto fd = fs_->open_read(p);
    ASSERT_TRUE(fd.has_value()) << fd.error().to_string();
    expect_not_canary(fd->get());
    EXPECT_EQ(read_fd(fd->get()), kInside);
  }
  expect_canary_untouched();
}

TEST_F(ConfinedRootTest, RenameAcrossSymlinkedDirNeverLeaves) {
  ASSERT_EQ(::symlink(canary_dir_.c_str(), in_root("out").c_str()), 0);
  ASSERT_EQ(::symlink("../canary-dir", in_root("out-rel").c_str()), 0);
  write_host_file(in_root("file"), kInside);
  EXPECT_EQ(code_of(fs_->rename("file", "out/file")), ErrorCode::kNotFound);
  EXPECT_EQ(code_of(fs_->rename("file", "out-rel/file")), ErrorCode::kNotFound);
  EXPECT_EQ(code_of(fs_->rename("file", "out/secret", false)), ErrorCode::kNotFound);
  EXPECT_EQ(code_of(fs_->rename("out/secret", "stolen")), ErrorCode::kNotFound);
  EXPECT_EQ(code_of(fs_->rename("out-rel/secret", "stolen")), ErrorCode::kNotFound);
  EXPECT_EQ(code_of(fs_->rename("../canary-dir/secret", "stolen")), ErrorCode::kPermissionDenied);
  EXPECT_EQ(read_host_file(in_root("file")), kInside);
  // Renaming the link itself moves the link, not what it points to.
  ASSERT_TRUE(fs_->rename("out", "moved-link").has_value());
  EXPECT_EQ(fs_->stat("moved-link")->type, FileType::kSymlink);
  expect_canary_untouched();
}

TEST_F(ConfinedRootTest, RecursiveRemoveNeverFollowsSymlinks) {
  ASSERT_TRUE(fs_->mkdir("tree/sub/subsub", 0755, true).has_value());
  write_host_file(in_root("tree/sub/file"), kInside);
  ASSERT_EQ(::symlink(canary_dir_.c_str(), in_root("tree/abs").c_str()), 0);
  ASSERT_EQ(::symlink("../../canary-dir", in_root("tree/sub/rel").c_str()), 0);
  ASSERT_EQ(::symlink(canary_.c_str(), in_root("tree/sub/subsub/file-link").c_str()), 0);
  ASSERT_TRUE(fs_->remove("tree", true).has_value());
  EXPECT_FALSE(stdfs::exists(in_root("tree")));
  expect_canary_untouched();
}

// --- hard links ---

TEST_F(ConfinedRootTest, HardlinkToAHostFileIsRefused) {
  ASSERT_EQ(::link(canary_.c_str(), in_root("hl").c_str()), 0);
  auto r = fs_->open_read("hl");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(r.error().message.find("hard links"), std::string::npos) << r.error().message;
  // Truncation is the default for writes: it must not happen before the check.
  EXPECT_EQ(code_of(fs_->open_write("hl")), ErrorCode::kPermissionDenied);
  EXPECT_EQ(code_of(fs_->open_write("hl", {.truncate = false})), ErrorCode::kPermissionDenied);
  EXPECT_EQ(fs_->stat("hl")->nlink, 2u);
  // Removing the in-root name is allowed and leaves the host file alone.
  ASSERT_TRUE(fs_->remove("hl").has_value());
  expect_canary_untouched();
}

// --- a symlink swapped in during the calls ---

TEST_F(ConfinedRootTest, SymlinkSwapRaceNeverReachesTheHost) {
  ASSERT_EQ(::mkdir(in_root("d").c_str(), 0755), 0);
  const std::string inside = std::string(kInside) + " (the real d/secret)";
  write_host_file(in_root("d/secret"), inside);
  ASSERT_EQ(::symlink(canary_dir_.c_str(), in_root("x-abs").c_str()), 0);
  ASSERT_EQ(::symlink("../canary-dir", in_root("x-rel").c_str()), 0);

  std::atomic<bool> stop{false};
  std::atomic<long> swaps{0};
  std::thread swapper([&] {
    const int root = fs_->root_fd();
    while (!stop.load()) {
      // "d" is, in turn, the real directory and a symlink to the outside.
      for (const char* link : {"x-abs", "x-abs", "x-rel", "x-rel"}) {
        if (::renameat2(root, "d", root, link, RENAME_EXCHANGE) == 0) ++swaps;
      }
    }
  });

  // Under load the swapper may not have run yet: start racing only once it
  // has (bounded), so the test always exercises a moving target.
  for (int spin = 0; spin < 5000 && swaps.load() == 0; ++spin) ::usleep(1000);
  EXPECT_GT(swaps.load(), 0) << "the swapper thread never ran";

  int opened = 0;
  int failed = 0;
  // At least 2000 calls, and more (bounded) until some succeeded: on a
  // loaded host the swapper can win every one of the first 2000.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int i = 0; i < 2000 || (opened == 0 && std::chrono::steady_clock::now() < until); ++i) {
    switch (i % 4) {
      case 0: {
        auto fd = fs_->open_write("d/secret", {.truncate = false});
        if (fd) {
          ++opened;
          expect_not_canary(fd->get());
        } else {
          ++failed;
        }
        break;
      }
      case 1: {
        auto fd = fs_->open_read("d/secret");
        if (fd) {
          ++opened;
          expect_not_canary(fd->get());
          EXPECT_EQ(read_fd(fd->get()), inside);
        } else {
          ++failed;
        }
        break;
      }
      case 2: {
        auto info = fs_->stat("d/secret");
        if (info) {
          ++opened;
          EXPECT_EQ(info->size, inside.size());
        } else {
          ++failed;
        }
        break;
      }
      case 3: {
        auto fd = fs_->open_write("d/new-" + std::to_string(i % 16));
        if (fd) {
          ++opened;
          expect_not_canary(fd->get());
        } else {
          ++failed;
        }
        break;
      }
    }
  }
  stop = true;
  swapper.join();
  std::printf("race: %d calls succeeded, %d failed, %ld swaps\n", opened, failed, swaps.load());
  EXPECT_GT(swaps.load(), 0);
  EXPECT_GT(opened, 0);
  expect_canary_untouched();
}

// --- mounts: private mount namespace in a forked child ---

// Runs fn in a forked child inside a private mount namespace; returns its
// exit status (77: the namespace could not be made).
template <typename Fn>
int in_private_mount_ns(Fn fn) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::unshare(CLONE_NEWNS) != 0) ::_exit(77);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(77);
    ::_exit(fn());
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define SKIP_UNLESS_NS(rc)                                                            \
  do {                                                                                \
    if ((rc) == 77) CORRAL_SKIP_OR_FAIL("cannot make a private mount namespace (needs root)"); \
  } while (0)

TEST_F(ConfinedRootTest, NoSpaceIsResourceExhausted) {
  const std::string small = base_ + "/small";
  ASSERT_EQ(::mkdir(small.c_str(), 0755), 0);
  int rc = in_private_mount_ns([&]() -> int {
    if (::mount("tmpfs", small.c_str(), "tmpfs", 0, "size=1m") != 0) return 77;
    auto fs = ConfinedRoot::open(small);
    if (!fs) return 10;
    auto out = fs->open_write("big");
    if (!out) return 11;
    int zero = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
    if (zero < 0) return 12;
    CopyStats stats;
    auto copied = copy_stream(zero, out->get(), 8u << 20, &stats);
    if (copied.has_value()) return 13;
    if (copied.error().code != ErrorCode::kResourceExhausted) return 14;
    if (copied.error().message.find("the sandbox's disk limit is full") == std::string::npos) {
      return 15;
    }
    if (stats.buffer_bytes > kCopyBufferBytes) return 16;
    return 0;
  });
  SKIP_UNLESS_NS(rc);
  EXPECT_EQ(rc, 0) << "see the return codes in the test body";
}

TEST_F(ConfinedRootTest, MountPointsAreNotCrossed) {
  ASSERT_EQ(::mkdir(in_root("mnt").c_str(), 0755), 0);
  const std::string mnt = in_root("mnt");
  int rc = in_private_mount_ns([&]() -> int {
    if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=1m") != 0) return 77;
    int keep = ::open((mnt + "/keep").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (keep < 0) return 10;
    ::close(keep);
    auto fs = ConfinedRoot::open(root_);
    if (!fs) return 11;
    auto w = fs->open_write("mnt/x");
    if (w || w.error().code != ErrorCode::kPermissionDenied) return 12;
    auto r = fs->open_read("mnt/keep");
    if (r || r.error().code != ErrorCode::kPermissionDenied) return 13;
    auto l = fs->list("mnt");
    if (l || l.error().code != ErrorCode::kPermissionDenied) return 14;
    auto rm = fs->remove("/", true);  // refused: the root itself
    if (rm) return 15;
    auto rm2 = fs->remove("mnt", true);
    if (rm2 || rm2.error().code != ErrorCode::kPermissionDenied) return 16;
    if (::access((mnt + "/keep").c_str(), F_OK) != 0) return 17;
    return 0;
  });
  SKIP_UNLESS_NS(rc);
  EXPECT_EQ(rc, 0) << "see the return codes in the test body";
}

// --- copy_stream ---

// Writes `total` bytes (a repeating pattern) into fd, then closes it.
std::thread feed(int fd, std::uint64_t total) {
  return std::thread([fd, total] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);  // EPIPE, not a signal
    std::vector<char> buf(256 * 1024);
    for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<char>(i % 251);
    std::uint64_t sent = 0;
    while (sent < total) {
      std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), total - sent));
      ssize_t w = ::write(fd, buf.data(), n);
      if (w <= 0) break;
      sent += static_cast<std::uint64_t>(w);
    }
    ::close(fd);
  });
}

constexpr std::uint64_t kMiB = 1 << 20;

TEST_F(ConfinedRootTest, CopyStreamThroughAPipeIsBounded) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  std::thread writer = feed(p[1], 64 * kMiB);
  auto out = fs_->open_write("upload");
  ASSERT_TRUE(out.has_value());
  CopyStats stats;
  auto copied = copy_stream(p[0], out->get(), 128 * kMiB, &stats);
  writer.join();
  ::close(p[0]);
  ASSERT_TRUE(copied.has_value()) << copied.error().to_string();
  EXPECT_EQ(*copied, 64 * kMiB);
  EXPECT_EQ(stats.bytes, 64 * kMiB);
  EXPECT_LE(stats.buffer_bytes, kCopyBufferBytes);
  EXPECT_EQ(stats.method, "splice");
  EXPECT_EQ(fs_->stat("upload")->size, 64 * kMiB);
}

TEST_F(ConfinedRootTest, CopyStreamStopsAtMaxBytes) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  std::thread writer = feed(p[1], 64 * kMiB);
  auto out = fs_->open_write("upload");
  ASSERT_TRUE(out.has_value());
  auto copied = copy_stream(p[0], out->get(), 10 * kMiB);
  ::close(p[0]);  // the writer gets EPIPE and stops
  writer.join();
  ASSERT_FALSE(copied.has_value());
  EXPECT_EQ(copied.error().code, ErrorCode::kResourceExhausted);
  EXPECT_LE(fs_->stat("upload")->size, 10 * kMiB);
}

TEST_F(ConfinedRootTest, CopyStreamFromASocketUsesOneBuffer) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  std::thread writer = feed(sv[1], 64 * kMiB);
  auto out = fs_->open_write("upload");
  ASSERT_TRUE(out.has_value());
  CopyStats stats;
  auto copied = copy_stream(sv[0], out->get(), 64 * kMiB, &stats);  // exactly the limit
  writer.join();
  ::close(sv[0]);
  ASSERT_TRUE(copied.has_value()) << copied.error().to_string();
  EXPECT_EQ(*copied, 64 * kMiB);
  EXPECT_EQ(stats.method, "read/write");
  EXPECT_EQ(stats.buffer_bytes, kCopyBufferBytes);
  // The pattern arrived intact (spot check at a few offsets).
  auto in = fs_->open_read("upload");
  ASSERT_TRUE(in.has_value());
  for (std::uint64_t off : {std::uint64_t{0}, 5 * kMiB + 7, 64 * kMiB - 1}) {
    char c = 0;
    ASSERT_EQ(::pread(in->get(), &c, 1, static_cast<off_t>(off)), 1);
    EXPECT_EQ(c, static_cast<char>((off % (256 * 1024)) % 251)) << off;
  }
}

TEST_F(ConfinedRootTest, CopyStreamBetweenFiles) {
  {
    auto out = fs_->open_write("src");
    ASSERT_TRUE(out.has_value());
    std::string data(3 * kMiB + 11, 'z');
    write_fd(out->get(), data);
  }
  auto in = fs_->open_read("src");
  auto out = fs_->open_write("dst");
  ASSERT_TRUE(in.has_value() && out.has_value());
  CopyStats stats;
  auto copied = copy_stream(in->get(), out->get(), 16 * kMiB, &stats);
  ASSERT_TRUE(copied.has_value()) << copied.error().to_string();
  EXPECT_EQ(*copied, 3 * kMiB + 11);
  EXPECT_EQ(stats.buffer_bytes, 0u) << stats.method;
  EXPECT_EQ(fs_->stat("dst")->size, 3 * kMiB + 11);
}

}  // namespace
}  // namespace corral
