// `corral run --dry-run` (X2, docs/dry-run.md): the command runs and sees
// its own writes, a writable host mount becomes a copy-on-write overlay so
// the host copy is byte-identical after, and the report lists what was
// created, modified and deleted, with sizes and short diffs.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

void write(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

// Names, types, modes, owners, sizes and contents of everything under
// `dir`: what "byte-identical" means here.
std::string tree_hash(const std::string& dir) {
  return host_sh("cd '" + dir +
                 "' && find . -printf '%p %y %m %U:%G %s %l\\n' | sort && "
                 "find . -type f -print0 | sort -z | xargs -0 -r sha256sum");
}

const nlohmann::json* change(const nlohmann::json& report, const std::string& path) {
  for (const auto& c : report["dry_run"]["writes"]["changes"])
    if (c["path"] == path) return &c;
  return nullptr;
}

class run_dry_run : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = make_temp_dir("run-dry-run");
    data_ = root_ + "/data";
    ASSERT_EQ(mkdir(data_.c_str(), 0777), 0);
    ASSERT_EQ(chmod(data_.c_str(), 0777), 0);
    ASSERT_EQ(mkdir((data_ + "/sub").c_str(), 0777), 0);
    write(data_ + "/keep", "line 1\nline 2\n");
    write(data_ + "/victim", "0123456789");
    write(data_ + "/sub/inner", "abc");
    host_sh("chmod -R a+rwX '" + data_ + "'");
  }
  void TearDown() override {
    if (!root_.empty() && root_.rfind("/tmp/corral-test-", 0) == 0) {
      std::error_code ec;
      std::filesystem::remove_all(root_, ec);
    }
  }
  std::string root_, data_;
};

TEST_F(run_dry_run, WritesStayInTheSandboxAndAreReported) {
  const std::string before = tree_hash(data_);
  RunOutcome r = run_sandbox(
      {"--dry-run", "--mount-root", root_, "--mount", data_ + ":/data:rw"},
      {"sh", "-c",
       "printf 'hello\\n' > /workspace/a.txt && head -c 3000 /dev/zero > /workspace/b.bin && "
       "printf 'line 1\\nline two\\n' > /data/keep && rm /data/victim && rm -r /data/sub && "
       "mkdir /data/new && echo x > /data/new/x && "
       // The command sees its own writes.
       "cat /data/keep && test ! -e /data/victim && cat /data/new/x"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "line 1\nline two\nx\n");
  EXPECT_EQ(tree_hash(data_), before) << "the host copy of a writable mount changed in a dry run";
  ASSERT_TRUE(r.report["dry_run"].is_object()) << r.report.dump();
  const nlohmann::json& w = r.report["dry_run"]["writes"];

  const nlohmann::json* a = change(r.report, "/workspace/a.txt");
  ASSERT_NE(a, nullptr) << w.dump();
  EXPECT_EQ((*a)["change"], "created");
  EXPECT_EQ((*a)["size"], 6);
  EXPECT_EQ((*a)["diff"], "--- /dev/null\n+++ b/workspace/a.txt\n@@ -0,0 +1,1 @@\n+hello\n");
  const nlohmann::json* b = change(r.report, "/workspace/b.bin");
  ASSERT_NE(b, nullptr) << w.dump();
  EXPECT_EQ((*b)["size"], 3000);
  EXPECT_TRUE((*b)["diff"].is_null()) << "binary files get no diff";

  const nlohmann::json* keep = change(r.report, "/data/keep");
  ASSERT_NE(keep, nullptr) << w.dump();
  EXPECT_EQ((*keep)["change"], "modified");
  EXPECT_NE((*keep)["diff"].get<std::string>().find("-line 2\n+line two\n"), std::string::npos)
      << (*keep)["diff"];
  const nlohmann::json* victim = change(r.report, "/data/victim");
  ASSERT_NE(victim, nullptr) << w.dump();
  EXPECT_EQ((*victim)["change"], "deleted");
  EXPECT_EQ((*victim)["size"], 10);
  const nlohmann::json* sub = change(r.report, "/data/sub");
  ASSERT_NE(sub, nullptr) << w.dump();
  EXPECT_EQ((*sub)["change"], "deleted");
  EXPECT_EQ((*sub)["type"], "dir");
  const nlohmann::json* fresh = change(r.report, "/data/new/x");
  ASSERT_NE(fresh, nullptr) << w.dump();
  EXPECT_EQ((*fresh)["change"], "created");

  // The files corral itself put in the layer (/etc/passwd, /etc/hosts) are
  // not the command's.
  EXPECT_EQ(change(r.report, "/etc/passwd"), nullptr) << w.dump();
  EXPECT_EQ(w["deleted"], 2);
  expect_sandbox_cleaned_up(r.report, "dry run");
}

TEST_F(run_dry_run, SummaryOnStderr) {
  RunOutcome r = run_sandbox({"--dry-run", "--mount-root", root_, "--mount", data_ + ":/data:rw"},
                             {"sh", "-c", "echo hi > /workspace/x; rm /data/victim"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("corral: dry-run: would write 1 file (3 B) under /workspace, would "
                       "delete /data/victim"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(read_host_file(data_ + "/victim"), "0123456789");
}

TEST_F(run_dry_run, NoWritesSaysSo) {
  RunOutcome r = run_sandbox({"--dry-run"}, {"true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("corral: dry-run: would write nothing"), std::string::npos) << r.err;
  EXPECT_EQ(r.report["dry_run"]["writes"]["changes"].size(), 0u) << r.report.dump();
}

TEST_F(run_dry_run, WithoutDryRunTheMountIsWritten) {
  // The control: the same write reaches the host without --dry-run, so
  // the test above can fail.
  RunOutcome r = run_sandbox({"--mount-root", root_, "--mount", data_ + ":/data:rw"},
                             {"rm", "/data/victim"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(data_ + "/victim"));
  EXPECT_TRUE(r.report["dry_run"].is_null()) << r.report.dump();
}

TEST_F(run_dry_run, AWritableFileMountIsRefused) {
  RunOutcome r = run_sandbox(
      {"--dry-run", "--mount-root", root_, "--mount", data_ + "/keep:/keep:rw"}, {"true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("only a directory can become a copy-on-write overlay"), std::string::npos)
      << r.err;
}

// A dry run's DNS answers an allowed name itself with a synthetic address
// (198.18.0.0/15), whatever the upstream: here an upstream that does not
// exist, so a forwarded query would fail. A denied name is NXDOMAIN.
TEST_F(run_dry_run, DnsIsAnsweredLocally) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("network tests run as root");
  RunOutcome r = run_sandbox(
      {"--dry-run", "--dns", "127.0.0.1:9", "--allow", "example.com"},
      {"/usr/bin/python3", "-c",
       std::string("import socket\n") +
       "print(socket.gethostbyname('example.com'))\n"
       "try:\n  socket.gethostbyname('denied.example.org'); print('resolved')\n"
       "except OSError: print('nxdomain')\n"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("198.18.", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("nxdomain"), std::string::npos) << r.out;
  bool recorded = false;
  for (const auto& q : r.report["dry_run"]["network"]["dns"])
    recorded |= q.value("name", "") == "example.com" && q.value("outcome", "") == "answered";
  EXPECT_TRUE(recorded) << r.report.dump();
}

}  // namespace
}  // namespace corral::testing
