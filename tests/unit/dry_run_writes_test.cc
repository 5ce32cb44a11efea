// Dry-run's write report (X2, jail/dry_run_writes.h) on upper/lower trees
// built by hand the way overlayfs leaves them: new and copied-up files,
// whiteouts (character device 0/0) for deletions, opaque directories.
#include "jail/dry_run_writes.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace corral {
namespace {

void write(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

class DryRunWritesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/corral-dryrun-unit-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    upper_ = dir_ + "/upper";
    lower_ = dir_ + "/lower";
    ASSERT_EQ(mkdir(upper_.c_str(), 0755), 0);
    ASSERT_EQ(mkdir(lower_.c_str(), 0755), 0);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  DryRunWrites collect(const WriteBaseline* baseline = nullptr, SecretCheck check = nullptr) {
    int u = open(upper_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int l = open(lower_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DryRunWrites out;
    out.areas.push_back({"/data", "mount"});
    collect_writes(u, l, "/data", baseline, check, out);
    close(u);
    close(l);
    return out;
  }

  bool whiteout(const std::string& rel) {
    return mknod((upper_ + "/" + rel).c_str(), S_IFCHR | 0000, makedev(0, 0)) == 0;
  }

  const WriteChange* find(const DryRunWrites& w, const std::string& path) {
    for (const WriteChange& c : w.changes)
      if (c.path == path) return &c;
    return nullptr;
  }

  std::string dir_, upper_, lower_;
};

TEST_F(DryRunWritesTest, CreatedModifiedAndDeletedWithSizes) {
  write(lower_ + "/kept", "same\n");
  write(lower_ + "/changed", "one\ntwo\n");
  write(lower_ + "/gone", "12345");
  write(upper_ + "/changed", "one\n2\n");
  write(upper_ + "/new", "hello\n");
  ASSERT_TRUE(whiteout("gone"));
  DryRunWrites w = collect();
  EXPECT_EQ(w.created, 1u);
  EXPECT_EQ(w.modified, 1u);
  EXPECT_EQ(w.deleted, 1u);
  EXPECT_EQ(w.bytes_written, 12u);
  ASSERT_NE(find(w, "/data/new"), nullptr);
  EXPECT_EQ(find(w, "/data/new")->kind, WriteChange::Kind::kCreated);
  EXPECT_EQ(find(w, "/data/new")->size, 6u);
  EXPECT_EQ(*find(w, "/data/new")->diff, "--- /dev/null\n+++ b/data/new\n@@ -0,0 +1,1 @@\n+hello\n");
  ASSERT_NE(find(w, "/data/changed"), nullptr);
  EXPECT_EQ(find(w, "/data/changed")->kind, WriteChange::Kind::kModified);
  EXPECT_NE(find(w, "/data/changed")->diff->find("-two\n+2\n"), std::string::npos);
  ASSERT_NE(find(w, "/data/gone"), nullptr);
  EXPECT_EQ(find(w, "/data/gone")->kind, WriteChange::Kind::kDeleted);
  EXPECT_EQ(find(w, "/data/gone")->size, 5u) << "a deletion carries the old size";
  EXPECT_EQ(find(w, "/data/kept"), nullptr) << "untouched lower files are not reported";
  EXPECT_EQ(summarize_writes(w), "would write 2 files (12 B) under /data, would delete /data/gone");
}

TEST_F(DryRunWritesTest, DeletedDirectoryCountsItsTree) {
  ASSERT_EQ(mkdir((lower_ + "/d").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((lower_ + "/d/e").c_str(), 0755), 0);
  write(lower_ + "/d/a", "abc");
  write(lower_ + "/d/e/b", "defg");
  ASSERT_TRUE(whiteout("d"));
  DryRunWrites w = collect();
  ASSERT_NE(find(w, "/data/d"), nullptr);
  EXPECT_EQ(find(w, "/data/d")->type, "dir");
  EXPECT_EQ(find(w, "/data/d")->size, 7u);
}

TEST_F(DryRunWritesTest, OpaqueDirectoryListsWhatItHid) {
  ASSERT_EQ(mkdir((lower_ + "/d").c_str(), 0755), 0);
  write(lower_ + "/d/old", "x");
  ASSERT_EQ(mkdir((upper_ + "/d").c_str(), 0755), 0);
  write(upper_ + "/d/fresh", "y");
  ASSERT_EQ(setxattr((upper_ + "/d").c_str(), "trusted.overlay.opaque", "y", 1, 0), 0);
  DryRunWrites w = collect();
  ASSERT_NE(find(w, "/data/d/old"), nullptr);
  EXPECT_EQ(find(w, "/data/d/old")->kind, WriteChange::Kind::kDeleted);
  ASSERT_NE(find(w, "/data/d/fresh"), nullptr);
  EXPECT_EQ(find(w, "/data/d/fresh")->kind, WriteChange::Kind::kCreated);
}

TEST_F(DryRunWritesTest, NewDirectoryAndItsFilesAreCreated) {
  ASSERT_EQ(mkdir((upper_ + "/n").c_str(), 0755), 0);
  write(upper_ + "/n/f", "z");
  DryRunWrites w = collect();
  ASSERT_NE(find(w, "/data/n"), nullptr);
  EXPECT_EQ(find(w, "/data/n")->type, "dir");
  ASSERT_NE(find(w, "/data/n/f"), nullptr);
  EXPECT_EQ(find(w, "/data/n/f")->kind, WriteChange::Kind::kCreated);
}

TEST_F(DryRunWritesTest, SymlinksAreReportedNeverFollowed) {
  ASSERT_EQ(symlink("/etc/shadow", (upper_ + "/link").c_str()), 0);
  DryRunWrites w = collect();
  ASSERT_NE(find(w, "/data/link"), nullptr);
  EXPECT_EQ(find(w, "/data/link")->type, "symlink");
  EXPECT_FALSE(find(w, "/data/link")->diff.has_value()) << "no content read through a symlink";
}

TEST_F(DryRunWritesTest, BinaryAndLargeFilesGetNoDiff) {
  write(upper_ + "/bin", std::string("a\0b", 3));
  write(upper_ + "/big", std::string(kMaxDiffFileBytes + 1, 'x'));
  DryRunWrites w = collect();
  ASSERT_NE(find(w, "/data/bin"), nullptr);
  EXPECT_FALSE(find(w, "/data/bin")->diff.has_value());
  ASSERT_NE(find(w, "/data/big"), nullptr);
  EXPECT_FALSE(find(w, "/data/big")->diff.has_value());
  EXPECT_EQ(find(w, "/data/big")->size, kMaxDiffFileBytes + 1);
}

TEST_F(DryRunWritesTest, TextHoldingASecretIsRedacted) {
  write(upper_ + "/env", "TOKEN=sk-live-123\n");
  write(upper_ + "/plain", "nothing here\n");
  DryRunWrites w = collect(nullptr, [](std::string_view t) {
    return t.find("sk-live-123") != std::string_view::npos;
  });
  ASSERT_NE(find(w, "/data/env"), nullptr);
  EXPECT_TRUE(find(w, "/data/env")->redacted);
  EXPECT_FALSE(find(w, "/data/env")->diff.has_value());
  ASSERT_NE(find(w, "/data/plain"), nullptr);
  EXPECT_TRUE(find(w, "/data/plain")->diff.has_value());
}

TEST_F(DryRunWritesTest, BaselineFilesAreNotTheCommands) {
  write(upper_ + "/made-by-planner", "p\n");
  int u = open(upper_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  WriteBaseline baseline = snapshot_upper(u);
  close(u);
  write(upper_ + "/made-by-command", "c\n");
  DryRunWrites w = collect(&baseline);
  EXPECT_EQ(find(w, "/data/made-by-planner"), nullptr);
  EXPECT_NE(find(w, "/data/made-by-command"), nullptr);
  // Rewritten after the baseline: the command's change.
  write(upper_ + "/made-by-planner", "changed\n");
  w = collect(&baseline);
  EXPECT_NE(find(w, "/data/made-by-planner"), nullptr);
}

TEST_F(DryRunWritesTest, ReportIsBoundedButCountsEverything) {
  for (std::size_t i = 0; i < kMaxReportedChanges + 5; ++i)
    write(upper_ + "/f" + std::to_string(i), "");
  DryRunWrites w = collect();
  EXPECT_TRUE(w.truncated);
  EXPECT_EQ(w.changes.size(), kMaxReportedChanges);
  EXPECT_EQ(w.created, kMaxReportedChanges + 5);
}

}  // namespace
}  // namespace corral
