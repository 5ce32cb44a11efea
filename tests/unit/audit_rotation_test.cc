// Audit log rotation and retention (store/audit_log.h) and the verifier of
// a rotated set (store/audit_verify.h): the chain runs on across files,
// retention deletes whole oldest files after saying so, and a verifier
// tells that apart from a file deleted, cut or edited by someone, naming
// the file and line.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "jail/fs_util.h"
#include "store/audit_log.h"

namespace corral {
namespace {

using nlohmann::json;

class AuditRotationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/corral-audit-rot-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/audit.log";
  }
  void TearDown() override { (void)remove_tree(dir_); }

  // Appends `n` records of about 300 bytes with rotation at 4 KiB.
  void write(int n, AuditRotation rotation = {4096, 0, {}}) {
    auto log = AuditLog::open(path_);
    ASSERT_TRUE(log) << log.error().to_string();
    log->set_rotation(rotation);
    log->set_sync_each_append(false);  // fast; durability is not under test
    for (int i = 0; i < n; ++i) {
      auto s = log->append({{"type", "network.dns"},
                            {"sandbox", "sb"},
                            {"name", std::string(200, 'a' + i % 26)},
                            {"i", next_++}});
      ASSERT_TRUE(s) << s.error().to_string();
    }
  }

  std::vector<AuditFile> files() const {
    auto f = list_audit_files(path_);
    EXPECT_TRUE(f) << f.error().to_string();
    return f ? *f : std::vector<AuditFile>{};
  }

  static std::vector<std::string> lines_of(const std::string& path) {
    std::ifstream in(path);
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
  static void write_lines(const std::string& path, const std::vector<std::string>& ls,
                          bool final_newline = true) {
    std::string content;
    for (size_t i = 0; i < ls.size(); ++i) {
      content += ls[i];
      if (i + 1 < ls.size() || final_newline) content += "\n";
    }
    std::ofstream(path, std::ios::trunc) << content;
  }

  SetVerifyReport verify() const {
    auto r = verify_audit_set(path_);
    EXPECT_TRUE(r) << r.error().to_string();
    return r ? *r : SetVerifyReport{};
  }

  std::string dir_, path_;
  int next_ = 0;
};

std::string base(const std::string& p) { return p.substr(p.rfind('/') + 1); }

TEST_F(AuditRotationTest, RotatesBySizeAndTheChainRunsAcrossFiles) {
  write(100);
  auto fs = files();
  ASSERT_GE(fs.size(), 5u) << "100 records of ~400 bytes in 4 KiB files";
  std::uint64_t expected_seq = 1;
  std::string prev(kAuditGenesisPrev);
  for (std::size_t i = 0; i < fs.size(); ++i) {
    SCOPED_TRACE(fs[i].path);
    struct stat st {};
    ASSERT_EQ(stat(fs[i].path.c_str(), &st), 0);
    EXPECT_LE(st.st_size, 4096) << "a file is never over max_file_size";
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    auto ls = lines_of(fs[i].path);
    ASSERT_FALSE(ls.empty());
    if (!fs[i].active) {
      EXPECT_EQ(fs[i].name_seq, expected_seq) << "named by its first seq";
    }
    for (std::size_t k = 0; k < ls.size(); ++k) {
      json r = json::parse(ls[k]);
      EXPECT_EQ(r["seq"], expected_seq);
      EXPECT_EQ(r["prev"], prev) << "the chain continues from the file before";
      if (i > 0 && k == 0) {
        EXPECT_EQ(r["type"], "audit.rotate");
        EXPECT_EQ(r["previous_file"], base(fs[i - 1].path));
        EXPECT_EQ(r["previous_last_seq"], expected_seq - 1);
      }
      prev = sha256_hex(ls[k]);
      ++expected_seq;
    }
  }
  SetVerifyReport v = verify();
  EXPECT_TRUE(v.ok) << v.bad_file << ":" << v.bad_line << ": " << v.reason;
  EXPECT_EQ(v.files, fs.size());
  EXPECT_EQ(v.first_seq, 1u);
  EXPECT_EQ(v.last_seq, expected_seq - 1);
  EXPECT_EQ(v.last_line_hash, prev);
  // Each rotated file on its own, from its first record.
  AuditChainStart from_first;
  from_first.from_first_record = true;
  auto one = verify_audit_log(fs[2].path, from_first);
  ASSERT_TRUE(one);
  EXPECT_TRUE(one->ok) << one->reason;
  // The single-file check from seq 1 refuses a file that does not start there.
  auto strict = verify_audit_log(fs[2].path);
  ASSERT_TRUE(strict);
  EXPECT_FALSE(strict->ok);
}

TEST_F(AuditRotationTest, ReopenContinuesTheChainAlsoFromAnEmptyActiveFile) {
  write(30);
  write(30);
  EXPECT_TRUE(verify().ok);
  // A crash between the rename and the first record of the new file
  // leaves no (or an empty) active file: the chain goes on from the
  // newest rotated file.
  ASSERT_EQ(unlink(path_.c_str()), 0);
  write(5);
  SetVerifyReport v = verify();
  EXPECT_TRUE(v.ok) << v.bad_file << ":" << v.bad_line << ": " << v.reason;
  EXPECT_GE(v.last_seq, 65u) << "65 records and the rotations' own";
  EXPECT_EQ(v.records, v.last_seq);
}

TEST_F(AuditRotationTest, RetentionDeletesTheOldestWholeFilesAndSaysSo) {
  write(200, AuditRotation{4096, 3, {}});
  auto fs = files();
  ASSERT_EQ(fs.size(), 4u) << "3 rotated files and the active one";
  SetVerifyReport v = verify();
  EXPECT_TRUE(v.ok) << v.bad_file << ":" << v.bad_line << ": " << v.reason;
  EXPECT_GT(v.first_seq, 1u);
  EXPECT_EQ(v.removed_by_retention_through, v.first_seq - 1);
  EXPECT_EQ(v.records, v.last_seq - v.first_seq + 1);
  // The retention record names the last record deleted and its hash.
  json last_retention;
  for (const auto& f : fs)
    for (const auto& l : lines_of(f.path)) {
      json r = json::parse(l);
      if (r["type"] == "audit.retention") last_retention = r;
    }
  ASSERT_TRUE(last_retention.is_object());
  EXPECT_EQ(last_retention["removed_through_seq"], v.first_seq - 1);
  EXPECT_EQ(last_retention["removed_last_hash"], json::parse(lines_of(fs[0].path)[0])["prev"]);
  EXPECT_NE(last_retention.value("reason", "").find("keep_files 3"), std::string::npos);
}

TEST_F(AuditRotationTest, RetentionByAgeDeletesOnlyOldFiles) {
  write(40);
  auto before = files();
  ASSERT_GE(before.size(), 3u);
  // Age the two oldest rotated files by a day.
  for (int i = 0; i < 2; ++i) {
    struct timespec old[2] = {{time(nullptr) - 86400, 0}, {time(nullptr) - 86400, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, before[i].path.c_str(), old, 0), 0);
  }
  write(15, AuditRotation{4096, 0, std::chrono::hours(1)});
  auto after = files();
  EXPECT_EQ(access(before[0].path.c_str(), F_OK), -1);
  EXPECT_EQ(access(before[1].path.c_str(), F_OK), -1);
  EXPECT_EQ(access(before[2].path.c_str(), F_OK), 0) << "a young file is kept";
  SetVerifyReport v = verify();
  EXPECT_TRUE(v.ok) << v.bad_file << ":" << v.bad_line << ": " << v.reason;
  EXPECT_EQ(v.first_seq, before[2].name_seq);
}

TEST_F(AuditRotationTest, DeletedOldestFileWithoutRetentionIsAGap) {
  write(100);
  auto fs = files();
  ASSERT_EQ(unlink(fs[0].path.c_str()), 0);
  SetVerifyReport v = verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.problem, AuditProblem::kMissing);
  EXPECT_EQ(v.bad_file, fs[1].path);
  EXPECT_EQ(v.bad_line, 1u);
  EXPECT_NE(v.reason.find("no audit.retention record"), std::string::npos) << v.reason;
}

TEST_F(AuditRotationTest, DeletedMiddleFileIsAGapBetweenNamedFiles) {
  write(100, AuditRotation{4096, 50, {}});
  auto fs = files();
  ASSERT_GE(fs.size(), 4u);
  ASSERT_EQ(unlink(fs[2].path.c_str()), 0);
  SetVerifyReport v = verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.problem, AuditProblem::kMissing);
  EXPECT_EQ(v.bad_file, fs[3].path);
  EXPECT_EQ(v.bad_line, 1u);
  EXPECT_NE(v.reason.find(base(fs[1].path)), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find(base(fs[3].path)), std::string::npos) << v.reason;
}

TEST_F(AuditRotationTest, MoreDeletedThanRetentionSaidIsAGap) {
  write(200, AuditRotation{4096, 3, {}});
  auto fs = files();
  ASSERT_EQ(fs.size(), 4u);
  ASSERT_EQ(unlink(fs[0].path.c_str()), 0);
  SetVerifyReport v = verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.problem, AuditProblem::kMissing);
  EXPECT_EQ(v.bad_file, fs[1].path);
  EXPECT_NE(v.reason.find("retention deleted records through"), std::string::npos) << v.reason;
}

TEST_F(AuditRotationTest, EditInARotatedFileNamesFileAndLine) {
  write(100);
  auto fs = files();
  auto ls = lines_of(fs[1].path);
  ASSERT_GE(ls.size(), 3u);
  ls[2].replace(ls[2].find("\"sb\""), 4, "\"sx\"");
  write_lines(fs[1].path, ls);
  SetVerifyReport v = verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.problem, AuditProblem::kEdited);
  EXPECT_EQ(v.bad_file, fs[1].path);
  EXPECT_EQ(v.bad_line, 3u);
}

TEST_F(AuditRotationTest, RewrittenLastLineOfAFileIsCaughtByTheNextFile) {
  write(100);
  auto fs = files();
  auto ls = lines_of(fs[1].path);
  // Rewrite the last record with a recomputed hash: only the next file's
  // first "prev" can tell.
  json r = json::parse(ls.back());
  r["sandbox"] = "other";
  r.erase("hash");
  r["hash"] = sha256_hex(audit_canonical(r));
  ls.back() = audit_canonical(r);
  write_lines(fs[1].path, ls);
  SetVerifyReport v = verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.problem, AuditProblem::kEdited);
  EXPECT_EQ(v.bad_file, fs[2].path);
  EXPECT_EQ(v.bad_line, 1u);
}

TEST_F(AuditRotationTest, TruncatedRotatedFileIsFound) {
  write(100);
  auto fs = files();
  // Cut the last record of a rotated file short.
  auto ls = lines_of(fs[1].path);
  ls.back().resize(ls.back().size() / 2);
  write_lines(fs[1].path, ls, /*final_newline=*/false);
  SetVerifyReport v = verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.problem, AuditProblem::kTruncated);
  EXPECT_EQ(v.bad_file, fs[1].path);
  EXPECT_EQ(v.bad_line, ls.size());
  // A rotated file cut by whole lines leaves a gap the next file shows.
  write_lines(fs[1].path, std::vector<std::string>(ls.begin(), ls.end() - 1));
  v = verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.problem, AuditProblem::kMissing);
  EXPECT_EQ(v.bad_file, fs[2].path);
  // Emptied entirely.
  write_lines(fs[1].path, {}, false);
  v = verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.bad_file, fs[1].path);
}

TEST_F(AuditRotationTest, BytesVerifierMatchesTheFileVerifier) {
  write(100);
  for (const auto& f : files()) {
    std::ifstream in(f.path);
    std::stringstream ss;
    ss << in.rdbuf();
    AuditChainStart from_first;
    from_first.from_first_record = true;
    VerifyReport b = verify_audit_bytes(ss.str(), from_first);
    auto fr = verify_audit_log(f.path, from_first);
    ASSERT_TRUE(fr);
    EXPECT_EQ(b.ok, fr->ok);
    EXPECT_EQ(b.records, fr->records);
    EXPECT_EQ(b.last_line_hash, fr->last_line_hash);
  }
  // Never throws, whatever the bytes.
  for (std::string junk : {std::string("\n\n"), std::string("{\"seq\":1}\n"),
                           std::string("\xff\xfe"), std::string("[1,2]\n{}")}) {
    VerifyReport r = verify_audit_bytes(junk);
    EXPECT_FALSE(r.ok);
  }
  EXPECT_TRUE(verify_audit_bytes("").ok);
  // Deep nesting is refused without recursing through it.
  std::string deep =
      "{\"seq\":1,\"x\":" + std::string(200000, '[') + std::string(200000, ']') + "}\n";
  VerifyReport r = verify_audit_bytes(deep);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.problem, AuditProblem::kBadRecord);
  EXPECT_NE(r.reason.find("nested deeper"), std::string::npos) << r.reason;
}

}  // namespace
}  // namespace corral
