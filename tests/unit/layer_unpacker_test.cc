// Reading a failure snapshot back for a replay (src/snapshot/layer_unpacker.h;
// T2, D4): what the archiver wrote comes back entry by entry; a hostile
// archive's names ("..", absolute, ".", outside rootfs/), hard links and
// special files are skipped, never given out; the bounds stop the unpack.
#include "snapshot/layer_unpacker.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "base/fs.h"
#include "base/unique_fd.h"
#include "snapshot/layer_archiver.h"

namespace corral::snapshot {
namespace {

struct Member {
  Member(std::string n, mode_t t, std::string c = {}, std::string l = {}, bool h = false)
      : name(std::move(n)), type(t), content(std::move(c)), link(std::move(l)), hardlink(h) {}
  std::string name;
  mode_t type = AE_IFREG;
  std::string content;
  std::string link;       // symlink target or hard link source
  bool hardlink = false;
};

// A tar + zstd of `members`, written by libarchive (not by our archiver:
// these are the archives an attacker with write access to the store makes).
UniqueFd write_archive(const std::vector<Member>& members) {
  UniqueFd out(open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  archive* a = archive_write_new();
  archive_write_add_filter_zstd(a);
  archive_write_set_format_pax_restricted(a);
  archive_write_open_fd(a, out.get());
  for (const Member& m : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, m.name.c_str());
    archive_entry_set_filetype(e, m.type);
    archive_entry_set_perm(e, m.type == AE_IFDIR ? 0755 : 0640);
    if (m.hardlink) archive_entry_set_hardlink(e, m.link.c_str());
    if (m.type == AE_IFLNK) archive_entry_set_symlink(e, m.link.c_str());
    archive_entry_set_size(e, m.type == AE_IFREG && !m.hardlink ? m.content.size() : 0);
    archive_write_header(a, e);
    if (m.type == AE_IFREG && !m.hardlink) archive_write_data(a, m.content.data(), m.content.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  lseek(out.get(), 0, SEEK_SET);
  return out;
}

struct Seen {
  std::map<std::string, std::string> files;  // path -> content
  std::map<std::string, unsigned> modes;
  std::vector<std::string> dirs, links;
};

Result<UnpackReport> unpack(int fd, Seen& seen, UnpackLimits limits = {}) {
  return unpack_layer(fd, limits, [&](const UnpackedEntry& e, const ContentReader& read) -> Status {
    switch (e.kind) {
      case UnpackedEntry::Kind::kDirectory:
        seen.dirs.push_back(e.path);
        return ok();
      case UnpackedEntry::Kind::kSymlink:
        seen.links.push_back(e.path + " -> " + e.link_target);
        return ok();
      case UnpackedEntry::Kind::kFile:
        break;
    }
    std::string content;
    CORRAL_TRY(read([&](std::span<const char> chunk) -> Status {
      content.append(chunk.data(), chunk.size());
      return ok();
    }));
    seen.files[e.path] = content;
    seen.modes[e.path] = e.mode;
    return ok();
  });
}

TEST(LayerUnpacker, ReadsBackWhatTheArchiverWrote) {
  char tmpl[] = "/tmp/corral-unpacker-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ASSERT_EQ(mkdir((dir + "/workspace").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((dir + "/workspace/deep").c_str(), 0700), 0);
  const std::string big(300000, 'x');
  {
    UniqueFd f(open((dir + "/workspace/deep/big.bin").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    ASSERT_TRUE(write_all(f.get(), big));
  }
  ASSERT_EQ(symlink("deep/big.bin", (dir + "/workspace/link").c_str()), 0);
  UniqueFd root(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ArchiveRequest req;
  req.sources.push_back({root.get(), "rootfs/", {}});
  req.manifest_fields = R"("task":"t-1")";
  UniqueFd out(open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  ASSERT_TRUE(archive_layer(req, out.get()).has_value());
  lseek(out.get(), 0, SEEK_SET);
  Seen seen;
  auto report = unpack(out.get(), seen);
  ASSERT_TRUE(report.has_value()) << report.error().to_string();
  EXPECT_EQ(seen.files["workspace/deep/big.bin"], big);
  EXPECT_EQ(seen.modes["workspace/deep/big.bin"], 0600u);
  EXPECT_NE(std::find(seen.dirs.begin(), seen.dirs.end(), "workspace/deep"), seen.dirs.end());
  EXPECT_EQ(seen.links, std::vector<std::string>{"workspace/link -> deep/big.bin"});
  EXPECT_EQ(report->skipped, 0u) << "the manifest is not counted as skipped";
  EXPECT_EQ(report->content_bytes, big.size());
  (void)remove_tree(dir);
}

TEST(LayerUnpacker, AHostileArchivesNamesAreNeverGivenOut) {
  UniqueFd fd = write_archive({
      {"rootfs/workspace/ok.txt", AE_IFREG, "fine"},
      {"rootfs/../etc/escape", AE_IFREG, "no"},
      {"rootfs/workspace/../../escape", AE_IFREG, "no"},
      {"/rootfs/abs", AE_IFREG, "no"},
      {"/etc/passwd", AE_IFREG, "no"},
      {"rootfs/./dot", AE_IFREG, "no"},
      {"rootfs//double", AE_IFREG, "no"},
      {"elsewhere/x", AE_IFREG, "no"},
      {"rootfs/", AE_IFDIR, ""},
      {"rootfs/fifo", AE_IFIFO, ""},
      {"rootfs/dev", AE_IFCHR, ""},
      {"rootfs/hard", AE_IFREG, "", "rootfs/workspace/ok.txt", true},
      {"rootfs/" + std::string(5000, 'a'), AE_IFREG, "no"},
      {"rootfs/workspace/ok2.txt", AE_IFREG, "fine too"},
  });
  Seen seen;
  auto report = unpack(fd.get(), seen);
  ASSERT_TRUE(report.has_value()) << report.error().to_string();
  EXPECT_EQ(seen.files.size(), 2u);
  EXPECT_EQ(seen.files["workspace/ok.txt"], "fine");
  EXPECT_EQ(seen.files["workspace/ok2.txt"], "fine too");
  EXPECT_TRUE(seen.dirs.empty());
  EXPECT_EQ(report->skipped, 12u);
}

TEST(LayerUnpacker, MemberNamesBecomeSandboxPathsOnlyWhenSafe) {
  EXPECT_EQ(sandbox_path_of_member("rootfs/workspace/a"), "workspace/a");
  EXPECT_EQ(sandbox_path_of_member("rootfs/tmp/"), "tmp");
  for (const char* bad : {"rootfs/", "rootfs", "workspace/a", "rootfs/../a", "rootfs/a/..",
                          "rootfs/a/./b", "rootfs//a", "/rootfs/a", "rootfs/.", ""})
    EXPECT_EQ(sandbox_path_of_member(bad), "") << bad;
}

TEST(LayerUnpacker, BoundsStopTheUnpack) {
  std::vector<Member> many;
  for (int i = 0; i < 20; ++i) many.emplace_back("rootfs/f" + std::to_string(i), AE_IFREG, "0123456789");
  {
    UniqueFd fd = write_archive(many);
    Seen seen;
    UnpackLimits limits;
    limits.max_entries = 10;
    auto r = unpack(fd.get(), seen, limits);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
  }
  {
    UniqueFd fd = write_archive(many);
    Seen seen;
    UnpackLimits limits;
    limits.max_total_bytes = 55;
    auto r = unpack(fd.get(), seen, limits);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
    EXPECT_LE(seen.files.size(), 6u);
  }
  // Not an archive at all.
  UniqueFd junk(open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  ASSERT_TRUE(write_all(junk.get(), std::string(4096, 'j')));
  lseek(junk.get(), 0, SEEK_SET);
  Seen seen;
  EXPECT_FALSE(unpack(junk.get(), seen));
}

}  // namespace
}  // namespace corral::snapshot
