// `corral audit verify` on a rotated set (docs/audit.md): it names the file
// and line of a gap or an edit, tells retention from a deleted file, and
// still checks a single file.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "jail/fs_util.h"
#include "store/audit_log.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

class AuditCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/corral-audit-cli-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    log_ = dir_ + "/audit.log";
  }
  void TearDown() override { (void)remove_tree(dir_); }

  void write(int n, std::uint32_t keep_files) {
    auto log = AuditLog::open(log_);
    ASSERT_TRUE(log) << log.error().to_string();
    log->set_sync_each_append(false);
    log->set_rotation(AuditRotation{64 * 1024, keep_files, {}});
    for (int i = 0; i < n; ++i)
      ASSERT_TRUE(log->append({{"type", "network.dns"}, {"name", std::string(400, 'n')}}));
  }
  std::vector<AuditFile> files() {
    auto f = list_audit_files(log_);
    EXPECT_TRUE(f);
    return f ? *f : std::vector<AuditFile>{};
  }
  std::string dir_, log_;
};

TEST_F(AuditCli, VerifiesARotatedSetAndNamesTheFileOfAGap) {
  write(1000, 0);
  auto fs = files();
  ASSERT_GE(fs.size(), 5u);
  auto ok = run_corral({"audit", "verify", "--log", log_});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("in " + std::to_string(fs.size()) + " files, chain intact"),
            std::string::npos)
      << ok.out;
  // A middle file deleted by hand.
  ASSERT_EQ(unlink(fs[2].path.c_str()), 0);
  auto bad = run_corral({"audit", "verify", "--log", log_});
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  EXPECT_NE(bad.err.find(fs[3].path + ": line 1: missing line"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find(fs[1].path.substr(fs[1].path.rfind('/') + 1)), std::string::npos)
      << bad.err;
}

TEST_F(AuditCli, RetentionIsNotAGapButADeletedOldestFileIs) {
  write(1000, 2);
  auto ok = run_corral({"audit", "verify", "--log", log_});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("were deleted by retention"), std::string::npos) << ok.out;
  auto fs = files();
  ASSERT_EQ(fs.size(), 3u);
  ASSERT_EQ(unlink(fs[0].path.c_str()), 0);
  auto bad = run_corral({"audit", "verify", "--log", log_});
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  EXPECT_NE(bad.err.find(fs[1].path + ": line 1: missing line"), std::string::npos) << bad.err;
}

TEST_F(AuditCli, AnEditInARotatedFileIsNamedByFileAndLine) {
  write(600, 0);
  auto fs = files();
  ASSERT_GE(fs.size(), 2u);
  std::ifstream in(fs[0].path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  in.close();
  lines[9].replace(lines[9].find("nnnn"), 4, "nnnm");
  std::ofstream out(fs[0].path, std::ios::trunc);
  for (const auto& l : lines) out << l << "\n";
  out.close();
  auto bad = run_corral({"audit", "verify", "--log", log_});
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  EXPECT_NE(bad.err.find(fs[0].path + ": line 10: edited"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace corral::testing
