// The failure snapshot's archiver (src/snapshot/layer_archiver.h, D4) on a
// directory tree built here: contents, modes, mtimes and links round-trip
// through libarchive's reader; symlinks are archived, never followed;
// devices, fifos and sockets are listed, not archived; excluded paths
// (run/secrets) leave no trace; secrets in contents, names and link targets
// are redacted; each bound of a hostile tree ends in `partial`, not a crash.
#include "snapshot/layer_archiver.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <map>
#include <string>

#include "base/fs.h"
#include "base/unique_fd.h"
#include "support/tar_reader.h"

namespace corral::snapshot {
namespace {

constexpr std::string_view kSecret = "canary-5f3a9c1e7d2b4086";

class LayerArchiverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/corral-archiver-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    root_.reset(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(root_.valid());
  }
  void TearDown() override { (void)remove_tree(dir_); }

  void put(const std::string& rel, std::string_view content, mode_t mode = 0644) {
    int fd = openat(root_.get(), rel.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    ASSERT_GE(fd, 0) << rel;
    ASSERT_TRUE(write_all(fd, content));
    fchmod(fd, mode);
    close(fd);
  }
  void mkdir(const std::string& rel) { ASSERT_EQ(mkdirat(root_.get(), rel.c_str(), 0755), 0) << rel; }

  // Archives the tree with `limits` and the secret set; returns the members
  // by name.
  std::map<std::string, test::TarMember> archive(ArchiveLimits limits = {},
                                                 ArchiveReport* report_out = nullptr,
                                                 std::string* raw = nullptr) {
    ArchiveRequest req;
    req.sources.push_back({root_.get(), "rootfs/", {"run/secrets"}});
    auto set = secrets::RedactionSet::build({{"API_TOKEN", kSecret}});
    EXPECT_TRUE(set.has_value());
    req.redaction = *set;
    req.limits = limits;
    req.manifest_fields = R"("task":"t-1","env_secret_names":["API_TOKEN"])";
    UniqueFd out(open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    EXPECT_TRUE(out.valid());
    auto report = archive_layer(req, out.get());
    EXPECT_TRUE(report.has_value()) << (report ? "" : report.error().to_string());
    if (report && report_out) *report_out = *report;
    std::string bytes;
    lseek(out.get(), 0, SEEK_SET);
    char buf[65536];
    ssize_t n;
    while ((n = read(out.get(), buf, sizeof buf)) > 0) bytes.append(buf, n);
    if (raw) *raw = bytes;
    std::string error;
    auto members = test::read_tar(bytes, &error);
    EXPECT_TRUE(error.empty()) << error;
    std::map<std::string, test::TarMember> by_name;
    for (auto& m : members) by_name[m.name] = m;
    return by_name;
  }

  std::string dir_;
  UniqueFd root_;
};

TEST_F(LayerArchiverTest, ContentsModesAndMtimesRoundTrip) {
  mkdir("workspace");
  mkdir("workspace/sub");
  std::string binary;
  for (int i = 0; i < 300000; ++i) binary.push_back(static_cast<char>(i * 7));
  put("workspace/a.txt", "hello\n", 0640);
  put("workspace/sub/big.bin", binary, 0755);
  put("workspace/empty", "");
  struct timespec times[2] = {{1700000000, 0}, {1700000000, 0}};
  utimensat(root_.get(), "workspace/a.txt", times, AT_SYMLINK_NOFOLLOW);
  ArchiveReport report;
  auto m = archive({}, &report);
  ASSERT_TRUE(m.count("rootfs/workspace/a.txt"));
  EXPECT_EQ(m["rootfs/workspace/a.txt"].content, "hello\n");
  EXPECT_EQ(m["rootfs/workspace/a.txt"].mode, 0640u);
  EXPECT_EQ(m["rootfs/workspace/a.txt"].mtime, 1700000000);
  EXPECT_EQ(m["rootfs/workspace/sub/big.bin"].content, binary);
  EXPECT_EQ(m["rootfs/workspace/sub/big.bin"].mode, 0755u);
  EXPECT_EQ(m["rootfs/workspace/empty"].content, "");
  EXPECT_EQ(m["rootfs/workspace/sub/"].type, 'd');
  EXPECT_FALSE(report.partial);
  EXPECT_EQ(report.files, 3u);
  ASSERT_TRUE(m.count("corral-snapshot.json"));
  EXPECT_NE(m["corral-snapshot.json"].content.find(R"("task":"t-1")"), std::string::npos);
  EXPECT_NE(m["corral-snapshot.json"].content.find(R"("env_secret_names":["API_TOKEN"])"),
            std::string::npos);
}

TEST_F(LayerArchiverTest, SymlinksAreArchivedNeverFollowed) {
  mkdir("d");
  ASSERT_EQ(symlinkat("/etc/shadow", root_.get(), "d/shadow"), 0);
  ASSERT_EQ(symlinkat("/", root_.get(), "d/hostroot"), 0);
  ASSERT_EQ(symlinkat("loop2", root_.get(), "d/loop1"), 0);
  ASSERT_EQ(symlinkat("loop1", root_.get(), "d/loop2"), 0);
  ASSERT_EQ(symlinkat(dir_.c_str(), root_.get(), "d/self"), 0);
  auto m = archive();
  EXPECT_EQ(m["rootfs/d/shadow"].type, 'l');
  EXPECT_EQ(m["rootfs/d/shadow"].link, "/etc/shadow");
  EXPECT_EQ(m["rootfs/d/shadow"].content, "");
  EXPECT_EQ(m["rootfs/d/hostroot"].type, 'l');
  EXPECT_EQ(m["rootfs/d/loop1"].link, "loop2");
  for (const auto& [name, member] : m) {
    EXPECT_EQ(name.find("rootfs/d/hostroot/"), std::string::npos) << "followed: " << name;
    EXPECT_EQ(name.find("rootfs/d/self/"), std::string::npos) << "followed: " << name;
  }
}

TEST_F(LayerArchiverTest, SpecialFilesAreListedNotArchived) {
  mkdir("dev");
  ASSERT_EQ(mknodat(root_.get(), "dev/null", S_IFCHR | 0666, makedev(1, 3)), 0);
  ASSERT_EQ(mknodat(root_.get(), "dev/whiteout", S_IFCHR | 0000, makedev(0, 0)), 0);
  ASSERT_EQ(mkfifoat(root_.get(), "dev/fifo", 0644), 0);  // opening it would block a reader
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string path = dir_ + "/dev/sock";
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  close(s);
  ArchiveReport report;
  auto m = archive({}, &report);
  for (const char* name : {"null", "whiteout", "fifo", "sock"})
    EXPECT_EQ(m.count(std::string("rootfs/dev/") + name), 0u) << name;
  std::map<std::string, std::string> why;
  for (const auto& s : report.skipped) why[s.path] = s.why;
  EXPECT_EQ(why["rootfs/dev/null"], "device");
  EXPECT_EQ(why["rootfs/dev/whiteout"], "whiteout");
  EXPECT_EQ(why["rootfs/dev/fifo"], "fifo");
  EXPECT_EQ(why["rootfs/dev/sock"], "socket");
  EXPECT_NE(m["corral-snapshot.json"].content.find("\"why\":\"fifo\""), std::string::npos);
}

TEST_F(LayerArchiverTest, ExcludedSecretsDirLeavesNoTrace) {
  mkdir("run");
  mkdir("run/secrets");
  put("run/secrets/db_password", "hunter2-hunter2-hunter2");
  put("run/other", "kept");
  std::string raw;
  auto m = archive({}, nullptr, &raw);
  EXPECT_EQ(m["rootfs/run/other"].content, "kept");
  std::string tar = test::decompress(raw);
  ASSERT_FALSE(tar.empty());
  EXPECT_EQ(tar.find("hunter2"), std::string::npos);
  EXPECT_EQ(tar.find("run/secrets"), std::string::npos);
}

TEST_F(LayerArchiverTest, SecretsAreRedactedInContentNamesAndLinks) {
  std::string big(70000, 'x');
  big.replace(65536 - 5, kSecret.size(), kSecret);  // across a 64 KiB boundary
  put("plain", "token=" + std::string(kSecret) + "\n");
  put("big", big);
  put(std::string("named-") + std::string(kSecret), "n");
  ASSERT_EQ(symlinkat(("/x/" + std::string(kSecret)).c_str(), root_.get(), "link"), 0);
  ArchiveReport report;
  std::string raw;
  auto m = archive({}, &report, &raw);
  EXPECT_EQ(m["rootfs/plain"].content, "token=[REDACTED:API_TOKEN]\n");
  EXPECT_EQ(m["rootfs/named-[REDACTED:API_TOKEN]"].content, "n");
  EXPECT_EQ(m["rootfs/link"].link, "/x/[REDACTED:API_TOKEN]");
  EXPECT_NE(m["rootfs/big"].content.find("[REDACTED:API_TOKEN]"), std::string::npos);
  EXPECT_EQ(m["rootfs/big"].content.size(), big.size() - kSecret.size() + 20);
  EXPECT_GE(report.redactions, 2u);
  std::string tar = test::decompress(raw);
  ASSERT_FALSE(tar.empty());
  EXPECT_EQ(tar.find(kSecret), std::string::npos);
}

TEST_F(LayerArchiverTest, TooManyFilesIsPartial) {
  for (int i = 0; i < 50; ++i) put("f" + std::to_string(i), "x");
  ArchiveLimits limits;
  limits.max_files = 10;
  ArchiveReport report;
  auto m = archive(limits, &report);
  EXPECT_TRUE(report.partial);
  EXPECT_EQ(report.files, 10u);
  ASSERT_FALSE(report.partial_reasons.empty());
  EXPECT_NE(report.partial_reasons[0].find("max_files"), std::string::npos);
  EXPECT_NE(m["corral-snapshot.json"].content.find("\"partial\":true"), std::string::npos);
}

TEST_F(LayerArchiverTest, DeepNestingIsPartial) {
  std::string rel;
  for (int i = 0; i < 40; ++i) {
    rel += (rel.empty() ? "" : "/") + std::string("d");
    mkdir(rel);
  }
  ArchiveLimits limits;
  limits.max_depth = 8;
  ArchiveReport report;
  auto m = archive(limits, &report);
  EXPECT_TRUE(report.partial);
  EXPECT_LE(report.dirs, 9u);
  EXPECT_NE(report.partial_reasons[0].find("max_depth"), std::string::npos);
}

TEST_F(LayerArchiverTest, LongPathsAreSkippedAsPartial) {
  std::string rel;
  for (int i = 0; i < 20; ++i) {
    rel += (rel.empty() ? "" : "/") + std::string(200, 'a' + i);
    mkdir(rel);
  }
  ArchiveLimits limits;
  limits.max_path = 1024;
  ArchiveReport report;
  auto m = archive(limits, &report);
  EXPECT_TRUE(report.partial);
  for (const auto& [name, member] : m) EXPECT_LE(name.size(), 1025u);
}

TEST_F(LayerArchiverTest, ByteBudgetCutsFilesAsPartial) {
  put("one", std::string(100000, 'a'));
  put("two", std::string(100000, 'b'));
  ArchiveLimits limits;
  limits.max_total_bytes = 150000;
  ArchiveReport report;
  auto m = archive(limits, &report);
  EXPECT_TRUE(report.partial);
  EXPECT_EQ(report.content_bytes, 150000u);
  EXPECT_EQ(m["rootfs/one"].content.size() + m["rootfs/two"].content.size(), 150000u);
}

TEST_F(LayerArchiverTest, HardLinksAreArchivedAsCopiesWithinTheBudget) {
  put("orig", std::string(1000, 'h'));
  for (int i = 0; i < 20; ++i)
    ASSERT_EQ(linkat(root_.get(), "orig", root_.get(), ("l" + std::to_string(i)).c_str(), 0), 0);
  ArchiveLimits limits;
  limits.max_total_bytes = 5000;
  ArchiveReport report;
  auto m = archive(limits, &report);
  EXPECT_TRUE(report.partial);
  EXPECT_LE(report.content_bytes, 5000u);
}

// A file larger than what is held in memory (4 MiB) goes through the
// scratch file: the same bytes come out, a secret across the spill point
// included.
TEST_F(LayerArchiverTest, LargeFilesGoThroughTheScratchFile) {
  std::string big(6 << 20, 'z');
  big.replace((4 << 20) - 7, kSecret.size(), kSecret);
  put("big", big);
  auto m = archive();
  std::string expected = big;
  expected.replace((4 << 20) - 7, kSecret.size(), "[REDACTED:API_TOKEN]");
  EXPECT_EQ(m["rootfs/big"].content.size(), expected.size());
  EXPECT_TRUE(m["rootfs/big"].content == expected);
}

TEST_F(LayerArchiverTest, UnwritableScratchIsAnError) {
  ArchiveRequest req;
  put("f", std::string(5 << 20, 'x'));  // over what is held in memory
  req.sources.push_back({root_.get(), "rootfs/", {}});
  req.scratch_dir = "/nonexistent-corral-scratch";
  UniqueFd out(open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  auto report = archive_layer(req, out.get());
  ASSERT_FALSE(report.has_value());
  EXPECT_NE(report.error().message.find("nonexistent-corral-scratch"), std::string::npos);
}

}  // namespace
}  // namespace corral::snapshot
