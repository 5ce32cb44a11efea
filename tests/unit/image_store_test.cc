// ImageStore without mmdebstrap or a network: names, list/get/rm on a
// temporary store, the in-use lock, stale partial trees, and the refusals of
// import (docker-archive, garbage, unsafe members). Uses tar (and mount for
// one test) from the host.
#include "image/image_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>
#include "support/skip.h"

namespace corral {
namespace {

std::string make_temp_dir() {
  std::string tmpl = "/tmp/corral-image-unit-XXXXXX";
  char* d = mkdtemp(tmpl.data());
  EXPECT_NE(d, nullptr);
  return d != nullptr ? d : "/nonexistent";
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

bool exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  std::string cmd = "ls -A '" + dir + "' 2>/dev/null";
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char line[4096];
  while (fgets(line, sizeof line, f) != nullptr) {
    std::string s(line);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    out.push_back(s);
  }
  pclose(f);
  return out;
}

int sh(const std::string& script) {
  int st = std::system(script.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// A pid that is certainly not running: a child that has exited and been
// reaped.
pid_t dead_pid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

class ImageStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = make_temp_dir();
    images_ = root_ + "/images";
    ASSERT_EQ(mkdir(images_.c_str(), 0755), 0);
  }
  void TearDown() override {
    if (!HasFailure()) sh("rm -rf '" + root_ + "'");
  }

  // An image as build/import would leave it.
  void fake_image(const std::string& name, std::uint64_t size = 4096,
                  const std::string& source = "test") {
    std::string dir = images_ + "/" + name;
    ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
    ASSERT_EQ(mkdir((dir + "/rootfs").c_str(), 0755), 0);
    ASSERT_EQ(mkdir((dir + "/rootfs/etc").c_str(), 0755), 0);
    write_file(dir + "/rootfs/etc/hostname", "x\n");
    write_file(dir + "/image.json", "{\"name\":\"" + name + "\",\"source\":\"" + source +
                                        "\",\"created\":\"2025-01-01T00:00:00Z\","
                                        "\"size_bytes\":" +
                                        std::to_string(size) +
                                        ",\"env\":[\"A=1\"],\"workdir\":\"/w\"}\n");
    write_file(dir + "/.lock", "");
  }

  std::string root_;
  std::string images_;
};

TEST(ImageNames, AcceptsSimpleNames) {
  for (const char* n : {"a", "deb", "bookworm-slim", "py3.11", "x_y", "0"}) {
    EXPECT_TRUE(ImageStore::validate_name(n)) << n;
  }
  EXPECT_TRUE(ImageStore::validate_name(std::string(63, 'a')));
}

TEST(ImageNames, RefusesEverythingElse) {
  for (const char* n : {"", ".", "..", ".partial-x-1", "-x", "_x", "Deb", "a/b", "../x", "a b",
                        "a:b", "é", "a\nb"}) {
    auto s = ImageStore::validate_name(n);
    ASSERT_FALSE(s) << n;
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
    EXPECT_FALSE(s.error().hint.empty());
  }
  EXPECT_FALSE(ImageStore::validate_name(std::string(64, 'a')));
}

TEST(ImagePackages, ChecksDebianPackageNames) {
  for (const char* p : {"python3", "g++", "libstdc++6", "ca-certificates", "python3.11"}) {
    EXPECT_TRUE(ImageStore::validate_package(p)) << p;
  }
  for (const char* p :
       {"", "-x", "--include=evil", "Python", "a b", "a,b", "a;rm", "a/b", "pkg:amd64", "$(id)"}) {
    EXPECT_FALSE(ImageStore::validate_package(p)) << p;
  }
}

TEST_F(ImageStoreTest, ListOfMissingStoreIsEmpty) {
  ImageStore store(root_ + "/does-not-exist");
  auto list = store.list();
  ASSERT_TRUE(list) << list.error().to_string();
  EXPECT_TRUE(list->empty());
  EXPECT_FALSE(exists(root_ + "/does-not-exist"));
}

TEST_F(ImageStoreTest, ListIsSortedAndSkipsForeignEntries) {
  fake_image("zeta", 100);
  fake_image("alpha", 200);
  fake_image("mid", 300);
  write_file(images_ + "/README", "not an image");
  ASSERT_EQ(mkdir((images_ + "/.hidden").c_str(), 0755), 0);
  ImageStore store(images_);
  auto list = store.list();
  ASSERT_TRUE(list) << list.error().to_string();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].name, "alpha");
  EXPECT_EQ((*list)[1].name, "mid");
  EXPECT_EQ((*list)[2].name, "zeta");
  EXPECT_EQ((*list)[0].size_bytes, 200u);
  EXPECT_EQ((*list)[0].rootfs, images_ + "/alpha/rootfs");
  EXPECT_EQ((*list)[0].env, std::vector<std::string>{"A=1"});
  EXPECT_EQ((*list)[0].workdir, "/w");
}

TEST_F(ImageStoreTest, GetUnknownImageIsNotFound) {
  ImageStore store(images_);
  auto info = store.get("nope");
  ASSERT_FALSE(info);
  EXPECT_EQ(info.error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(store.get("../etc"));
}

TEST_F(ImageStoreTest, RemoveDeletesTreeWithoutFollowingSymlinks) {
  fake_image("victim");
  // Outside the store: must survive.
  std::string outside = root_ + "/outside";
  ASSERT_EQ(mkdir(outside.c_str(), 0755), 0);
  write_file(outside + "/keep", "keep");
  std::string rootfs = images_ + "/victim/rootfs";
  ASSERT_EQ(symlink(outside.c_str(), (rootfs + "/link-dir").c_str()), 0);
  ASSERT_EQ(symlink((outside + "/keep").c_str(), (rootfs + "/link-file").c_str()), 0);
  ASSERT_EQ(mkdir((rootfs + "/a").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((rootfs + "/a/b").c_str(), 0000), 0);  // unreadable to others; root removes
  write_file(rootfs + "/a/file", "data");
  ASSERT_EQ(mkfifo((rootfs + "/a/fifo").c_str(), 0644), 0);
  ASSERT_EQ(link((rootfs + "/a/file").c_str(), (rootfs + "/hardlink").c_str()), 0);

  ImageStore store(images_);
  Status s = store.remove("victim");
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_FALSE(exists(images_ + "/victim"));
  EXPECT_TRUE(exists(outside + "/keep"));
  EXPECT_TRUE(entries(images_).empty());
}

TEST_F(ImageStoreTest, RemoveUnknownImageIsNotFound) {
  ImageStore store(images_);
  Status s = store.remove("nope");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(store.remove("../images"));
}

TEST_F(ImageStoreTest, RemoveIsRefusedWhileASandboxHoldsTheImage) {
  fake_image("busy");
  ImageStore store(images_);
  {
    auto lock = store.lock_shared("busy");
    ASSERT_TRUE(lock) << lock.error().to_string();
    // A second sandbox can share it.
    auto lock2 = store.lock_shared("busy");
    ASSERT_TRUE(lock2) << lock2.error().to_string();
    Status s = store.remove("busy");
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().code, ErrorCode::kUnavailable);
    EXPECT_NE(s.error().message.find("image busy is in use by a running sandbox"),
              std::string::npos)
        << s.error().message;
    EXPECT_TRUE(exists(images_ + "/busy/rootfs/etc/hostname"));
  }
  Status s = store.remove("busy");
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_FALSE(exists(images_ + "/busy"));
}

TEST_F(ImageStoreTest, LockSharedOfUnknownImageIsNotFound) {
  ImageStore store(images_);
  auto lock = store.lock_shared("nope");
  ASSERT_FALSE(lock);
  EXPECT_EQ(lock.error().code, ErrorCode::kNotFound);
}

TEST_F(ImageStoreTest, LockSharedFailsWhileTheImageIsBeingRemoved) {
  fake_image("going");
  int fd = open((images_ + "/going/.lock").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);  // what remove() holds
  ImageStore store(images_);
  auto lock = store.lock_shared("going");
  close(fd);
  ASSERT_FALSE(lock);
  EXPECT_EQ(lock.error().code, ErrorCode::kUnavailable);
}

TEST_F(ImageStoreTest, StalePartialTreesAreRemovedOnList) {
  fake_image("real");
  pid_t gone = dead_pid();
  std::string stale = images_ + "/.partial-real-" + std::to_string(gone);
  ASSERT_EQ(mkdir(stale.c_str(), 0755), 0);
  ASSERT_EQ(mkdir((stale + "/rootfs").c_str(), 0755), 0);
  write_file(stale + "/rootfs/half", "x");
  write_file(stale + "/.building", "");
  std::string stale_rm = images_ + "/.removing-old-" + std::to_string(gone);
  ASSERT_EQ(mkdir(stale_rm.c_str(), 0755), 0);
  write_file(stale_rm + "/image.json", "{}");
  // Ours (this process is alive): kept.
  std::string live = images_ + "/.partial-other-" + std::to_string(getpid());
  ASSERT_EQ(mkdir(live.c_str(), 0755), 0);

  ImageStore store(images_);
  auto list = store.list();
  ASSERT_TRUE(list) << list.error().to_string();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].name, "real");
  EXPECT_FALSE(exists(stale));
  EXPECT_FALSE(exists(stale_rm));
  EXPECT_TRUE(exists(live));
}

TEST_F(ImageStoreTest, PartialTreeStillWrittenByAToolIsKept) {
  // Owner gone, but a tool it started (holding .building) still runs.
  std::string partial = images_ + "/.partial-x-" + std::to_string(dead_pid());
  ASSERT_EQ(mkdir(partial.c_str(), 0755), 0);
  write_file(partial + "/.building", "");
  int fd = open((partial + "/.building").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);
  ImageStore store(images_);
  ASSERT_TRUE(store.remove_stale());
  EXPECT_TRUE(exists(partial));
  close(fd);
  ASSERT_TRUE(store.remove_stale());
  EXPECT_FALSE(exists(partial));
}

TEST_F(ImageStoreTest, RemoveNeverCrossesAMountPoint) {
  fake_image("mounted");
  std::string mnt = images_ + "/mounted/rootfs/mnt";
  ASSERT_EQ(mkdir(mnt.c_str(), 0755), 0);
  if (mount("corral-test", mnt.c_str(), "tmpfs", 0, "size=1m") != 0) {
    CORRAL_SKIP_OR_FAIL("cannot mount tmpfs here (" + std::string(strerror(errno)) + "); not root?");
  }
  write_file(mnt + "/precious", "x");
  ImageStore store(images_);
  Status s = store.remove("mounted");
  EXPECT_FALSE(s);
  if (!s) {
    EXPECT_NE(s.error().message.find("mount point"), std::string::npos) << s.error().message;
  }
  // The renamed tree still holds the mount; nothing inside it was touched.
  std::string moved = images_ + "/.removing-mounted-" + std::to_string(getpid()) + "/rootfs/mnt";
  EXPECT_TRUE(exists(moved + "/precious"));
  ASSERT_EQ(umount2(moved.c_str(), MNT_DETACH), 0);
}

TEST_F(ImageStoreTest, BuildRefusesBadPackagesAndExistingNames) {
  fake_image("exists");
  ImageStore store(images_);
  Status s = store.build("exists", {}, nullptr);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kAlreadyExists);
  EXPECT_NE(s.error().hint.find("corral image rm exists"), std::string::npos);
  s = store.build("new", {"ok", "--evil"}, nullptr);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  s = store.build("Bad Name", {}, nullptr);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(entries(images_), std::vector<std::string>{"exists"});
}

TEST_F(ImageStoreTest, ImportRefusesDockerArchiveWithSkopeoHint) {
  std::string src = root_ + "/docker";
  ASSERT_EQ(mkdir(src.c_str(), 0755), 0);
  write_file(src + "/manifest.json", "[{\"Config\":\"c.json\",\"Layers\":[\"l/layer.tar\"]}]");
  write_file(src + "/repositories", "{}");
  std::string tarball = root_ + "/docker.tar";
  ASSERT_EQ(sh("tar -C '" + src + "' -cf '" + tarball + "' manifest.json repositories"), 0);
  ImageStore store(images_);
  Status s = store.import_oci("img", tarball, nullptr);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(s.error().message.find("docker-archive"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().hint.find("skopeo copy docker-archive:" + tarball + " oci-archive:"),
            std::string::npos)
      << s.error().hint;
  EXPECT_TRUE(entries(images_).empty());
}

TEST_F(ImageStoreTest, ImportRefusesGarbage) {
  std::string garbage = root_ + "/garbage.tar";
  std::string junk(10000, '\0');
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<char>((i * 7919) % 251);
  write_file(garbage, junk);
  ImageStore store(images_);
  Status s = store.import_oci("img", garbage, nullptr);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(s.error().message.find("not a readable tar archive"), std::string::npos)
      << s.error().message;
  EXPECT_TRUE(entries(images_).empty());
  s = store.import_oci("img", root_ + "/missing.tar", nullptr);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kNotFound);
}

TEST_F(ImageStoreTest, ImportRefusesMembersLeavingTheArchive) {
  std::string src = root_ + "/evil";
  ASSERT_EQ(mkdir(src.c_str(), 0755), 0);
  write_file(src + "/oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}");
  write_file(src + "/index.json", "{\"schemaVersion\":2,\"manifests\":[]}");
  write_file(src + "/x", "escape");
  for (const char* evil : {"../x", "/tmp/corral-abs-x"}) {
    std::string tarball = root_ + "/evil.tar";
    ASSERT_EQ(sh("tar -C '" + src + "' -cPf '" + tarball + "' --transform='s,^x$," + evil +
                 ",' oci-layout index.json x"),
              0);
    ImageStore store(images_);
    Status s = store.import_oci("img", tarball, nullptr);
    ASSERT_FALSE(s) << evil;
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(s.error().message.find("refusing"), std::string::npos) << s.error().message;
    EXPECT_TRUE(entries(images_).empty());
    EXPECT_FALSE(exists(root_ + "/x"));
  }
}

TEST_F(ImageStoreTest, ImportRefusesSymlinksInTheLayout) {
  std::string src = root_ + "/links";
  ASSERT_EQ(mkdir(src.c_str(), 0755), 0);
  ASSERT_EQ(mkdir((src + "/blobs").c_str(), 0755), 0);
  write_file(src + "/oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}");
  write_file(src + "/index.json", "{\"schemaVersion\":2,\"manifests\":[]}");
  ASSERT_EQ(symlink("/etc/shadow", (src + "/blobs/sha256").c_str()), 0);
  std::string tarball = root_ + "/links.tar";
  ASSERT_EQ(sh("tar -C '" + src + "' -cf '" + tarball + "' ."), 0);
  ImageStore store(images_);
  Status s = store.import_oci("img", tarball, nullptr);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("neither a file nor a directory"), std::string::npos)
      << s.error().message;
  EXPECT_TRUE(entries(images_).empty());
}

TEST_F(ImageStoreTest, ImportsAnUmociMadeLayoutWithItsConfig) {
  if (sh("command -v umoci >/dev/null && command -v skopeo >/dev/null") != 0) {
    CORRAL_SKIP_OR_FAIL("umoci/skopeo missing (scripts/install-deps installs them)");
  }
  std::string work = root_ + "/work";
  ASSERT_EQ(mkdir(work.c_str(), 0755), 0);
  ASSERT_EQ(sh("set -e; cd '" + work +
               "'; umoci init --layout l; umoci new --image l:v1;"
               " umoci unpack --image l:v1 b >/dev/null; mkdir -p b/rootfs/etc;"
               " echo hello > b/rootfs/etc/greeting; umoci repack --image l:v1 b;"
               " umoci config --image l:v1 --config.env K=V --config.workingdir /srv;"
               " tar -C l -cf tagged.tar .;"
               // The same image without a tag, as `skopeo copy X oci-archive:Y` leaves it.
               " skopeo copy -q oci:l:v1 oci-archive:untagged.tar >/dev/null"),
            0);
  ImageStore store(images_);
  for (const char* file : {"tagged.tar", "untagged.tar"}) {
    std::string name = std::string(file).substr(0, std::string(file).find('.'));
    std::vector<std::string> progress;
    Status s = store.import_oci(name, work + "/" + file,
                                [&](std::string_view l) { progress.emplace_back(l); });
    ASSERT_TRUE(s) << file << ": " << s.error().to_string();
    EXPECT_FALSE(progress.empty());
    auto info = store.get(name);
    ASSERT_TRUE(info) << info.error().to_string();
    EXPECT_EQ(info->env, std::vector<std::string>{"K=V"}) << file;
    EXPECT_EQ(info->workdir, "/srv") << file;
    EXPECT_GT(info->size_bytes, 0u);
    EXPECT_NE(info->source.find(file), std::string::npos) << info->source;
    EXPECT_TRUE(exists(info->rootfs + "/etc/greeting"));
  }
  EXPECT_EQ(entries(images_), (std::vector<std::string>{"tagged", "untagged"}));
}

TEST_F(ImageStoreTest, ImportOfALayoutWithoutTagsExplainsWhy) {
  std::string src = root_ + "/notag";
  ASSERT_EQ(mkdir(src.c_str(), 0755), 0);
  write_file(src + "/oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}");
  write_file(src + "/index.json", "{\"schemaVersion\":2,\"manifests\":[]}");
  std::string tarball = root_ + "/notag.tar";
  ASSERT_EQ(sh("tar -C '" + src + "' -cf '" + tarball + "' ."), 0);
  ImageStore store(images_);
  Status s = store.import_oci("img", tarball, nullptr);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("no tagged image"), std::string::npos) << s.error().message;
  EXPECT_TRUE(entries(images_).empty());
}

}  // namespace
}  // namespace corral
