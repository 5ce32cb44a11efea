// AuditLog: the chain holds across appends, reopen and threads, and
// verify_audit_log names the first line an edit, a swap, a removal or a
// truncation damaged.
#include "store/audit_log.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/sha256.h"
#include "jail/fs_util.h"

namespace corral {
namespace {

using nlohmann::json;

class AuditLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/corral-audit-unit-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/audit.log";
  }
  void TearDown() override { (void)remove_tree(dir_); }

  void write_records(int n, int first = 0) {
    auto log = AuditLog::open(path_);
    ASSERT_TRUE(log) << log.error().to_string();
    for (int i = 0; i < n; ++i) {
      auto s = log->append({{"type", "file.write"},
                            {"path", "/workspace/f" + std::to_string(first + i)},
                            {"bytes", 100 + i},
                            {"sha256", sha256_hex(std::to_string(i))}});
      ASSERT_TRUE(s) << s.error().to_string();
    }
  }

  std::vector<std::string> lines() const {
    std::ifstream in(path_);
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }

  void rewrite(const std::vector<std::string>& ls, bool final_newline = true) const {
    std::string content;
    for (size_t i = 0; i < ls.size(); ++i) {
      content += ls[i];
      if (i + 1 < ls.size() || final_newline) content += "\n";
    }
    std::ofstream(path_, std::ios::trunc) << content;
  }

  VerifyReport verify() const {
    auto r = verify_audit_log(path_);
    EXPECT_TRUE(r) << r.error().to_string();
    return r ? *r : VerifyReport{};
  }

  std::string dir_;
  std::string path_;
};

TEST_F(AuditLogTest, RecordsCarrySeqTimePrevAndHash) {
  write_records(3);
  auto ls = lines();
  ASSERT_EQ(ls.size(), 3u);
  std::string prev(kAuditGenesisPrev);
  for (size_t i = 0; i < ls.size(); ++i) {
    json r = json::parse(ls[i]);
    EXPECT_EQ(r["seq"], i + 1);
    EXPECT_EQ(r["type"], "file.write");
    EXPECT_EQ(r["prev"], prev);
    // RFC 3339 UTC with milliseconds: 2024-05-01T12:34:56.789Z
    std::string t = r["time"];
    ASSERT_EQ(t.size(), 24u) << t;
    EXPECT_EQ(t[10], 'T');
    EXPECT_EQ(t[19], '.');
    EXPECT_EQ(t.back(), 'Z');
    std::string hash = r["hash"];
    r.erase("hash");
    EXPECT_EQ(sha256_hex(audit_canonical(r)), hash);
    prev = sha256_hex(ls[i]);
  }
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(AuditLogTest, ManyRecordsVerify) {
  write_records(200);
  VerifyReport r = verify();
  EXPECT_TRUE(r.ok) << r.bad_line << ": " << r.reason;
  EXPECT_EQ(r.records, 200u);
  EXPECT_EQ(r.last_line_hash, sha256_hex(lines().back()));
}

TEST_F(AuditLogTest, EmptyFileIsValid) {
  rewrite({}, false);
  VerifyReport r = verify();
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.records, 0u);
  EXPECT_EQ(r.last_line_hash, kAuditGenesisPrev);
}

TEST_F(AuditLogTest, MissingFileIsAnErrorNamingIt) {
  auto r = verify_audit_log(dir_ + "/nope.log");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_NE(r.error().message.find("nope.log"), std::string::npos);
}

TEST_F(AuditLogTest, OneEditedByteNamesThatLine) {
  write_records(20);
  auto ls = lines();
  // Change a digit inside the path of line 10: still valid JSON.
  size_t at = ls[9].find("/workspace/f9");
  ASSERT_NE(at, std::string::npos);
  ls[9][at + 12] = '8';
  rewrite(ls);
  VerifyReport r = verify();
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.bad_line, 10u);
  EXPECT_EQ(r.problem, AuditProblem::kEdited) << r.reason;
  EXPECT_EQ(r.records, 9u);
}

TEST_F(AuditLogTest, EditBreakingJsonIsBadJson) {
  write_records(5);
  auto ls = lines();
  ls[2][0] = 'x';
  rewrite(ls);
  VerifyReport r = verify();
  EXPECT_EQ(r.bad_line, 3u);
  EXPECT_EQ(r.problem, AuditProblem::kBadJson);
}

TEST_F(AuditLogTest, DeeplyNestedLineIsABadRecordNotACrash) {
  // Arrays and objects nested far deeper than the stack allows a recursive
  // serialiser (the verifier checks canonical form by serialising).
  const std::string hex(64, '0');
  const std::string head =
      R"({"hash":")" + hex + R"(","prev":")" + hex + R"(","seq":2,"time":"t","x":)";
  for (const auto& [open, close] : {std::pair<std::string, std::string>{"[", "]"},
                                    std::pair<std::string, std::string>{"{\"a\":", "}"}}) {
    write_records(3);
    auto ls = lines();
    std::string nested;
    for (int i = 0; i < 200000; ++i) nested += open;
    nested += "1";
    for (int i = 0; i < 200000; ++i) nested += close;
    ls[1] = head + nested + "}";
    rewrite(ls);
    VerifyReport r = verify();
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.bad_line, 2u);
    EXPECT_EQ(r.problem, AuditProblem::kBadRecord) << r.reason;
    ASSERT_EQ(::unlink(path_.c_str()), 0);
  }
}

TEST_F(AuditLogTest, NestedEventsAndBracketsInStringsStillVerify) {
  auto log = AuditLog::open(path_);
  ASSERT_TRUE(log) << log.error().to_string();
  json nested = "leaf";
  for (int i = 0; i < 20; ++i) nested = json{{"a", nested}, {"b", json::array({i})}};
  ASSERT_TRUE(log->append({{"type", "t"}, {"n", nested}}));
  ASSERT_TRUE(log->append({{"type", "t"}, {"s", std::string(5000, '[') + "\"{"}}));
  VerifyReport r = verify();
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.records, 2u);
}

TEST_F(AuditLogTest, NonCanonicalSpacingIsAnEdit) {
  write_records(3);
  auto ls = lines();
  ls[1].insert(1, " ");  // same JSON value, different bytes
  rewrite(ls);
  VerifyReport r = verify();
  EXPECT_EQ(r.bad_line, 2u);
  EXPECT_EQ(r.problem, AuditProblem::kEdited);
}

TEST_F(AuditLogTest, RewrittenRecordWithRecomputedHashIsCaughtByTheNextLine) {
  write_records(6);
  auto ls = lines();
  json rec = json::parse(ls[2]);
  rec["path"] = "/workspace/innocent";
  rec.erase("hash");
  rec["hash"] = sha256_hex(audit_canonical(rec));
  ls[2] = audit_canonical(rec);
  rewrite(ls);
  VerifyReport r = verify();
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.bad_line, 3u);
  EXPECT_EQ(r.problem, AuditProblem::kEdited) << r.reason;
  EXPECT_EQ(r.records, 2u);
}

TEST_F(AuditLogTest, SwappedLinesAreReordered) {
  write_records(10);
  auto ls = lines();
  std::swap(ls[4], ls[5]);
  rewrite(ls);
  VerifyReport r = verify();
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.bad_line, 5u);
  EXPECT_EQ(r.problem, AuditProblem::kReordered) << r.reason;
}

TEST_F(AuditLogTest, DeletedMiddleLineIsMissing) {
  write_records(10);
  auto ls = lines();
  ls.erase(ls.begin() + 6);
  rewrite(ls);
  VerifyReport r = verify();
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.bad_line, 7u);
  EXPECT_EQ(r.problem, AuditProblem::kMissing) << r.reason;
  EXPECT_NE(r.reason.find("expected seq 7, found seq 8"), std::string::npos) << r.reason;
}

TEST_F(AuditLogTest, DeletedFirstLineIsMissing) {
  write_records(3);
  auto ls = lines();
  ls.erase(ls.begin());
  rewrite(ls);
  VerifyReport r = verify();
  EXPECT_EQ(r.bad_line, 1u);
  EXPECT_EQ(r.problem, AuditProblem::kMissing);
}

TEST_F(AuditLogTest, TruncatedLastLine) {
  write_records(8);
  auto ls = lines();
  ls.back().resize(ls.back().size() / 2);
  rewrite(ls, /*final_newline=*/false);
  VerifyReport r = verify();
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.bad_line, 8u);
  EXPECT_EQ(r.problem, AuditProblem::kTruncated);
  EXPECT_EQ(r.records, 7u);
}

TEST_F(AuditLogTest, ReopenContinuesSeqAndChain) {
  write_records(5);
  {
    auto log = AuditLog::open(path_);
    ASSERT_TRUE(log) << log.error().to_string();
    EXPECT_EQ(log->last_seq(), 5u);
    EXPECT_EQ(log->last_line_hash(), sha256_hex(lines().back()));
  }
  write_records(4, 5);
  auto ls = lines();
  ASSERT_EQ(ls.size(), 9u);
  EXPECT_EQ(json::parse(ls[5])["seq"], 6);
  EXPECT_EQ(json::parse(ls[5])["prev"], sha256_hex(ls[4]));
  VerifyReport r = verify();
  EXPECT_TRUE(r.ok) << r.bad_line << ": " << r.reason;
  EXPECT_EQ(r.records, 9u);
}

// A torn last line (no final newline) is repaired instead: audit_repair_test.cc.
TEST_F(AuditLogTest, DamagedTailRefusesToOpen) {
  // An edited last line, or a last line that does not chain.
  write_records(4);
  auto ls = lines();
  std::swap(ls[2], ls[3]);
  rewrite(ls);
  auto log = AuditLog::open(path_);
  ASSERT_FALSE(log);
  EXPECT_NE(log.error().message.find("damaged"), std::string::npos) << log.error().message;
  EXPECT_NE(log.error().hint.find("corral audit verify"), std::string::npos);
  ls = lines();
  std::swap(ls[2], ls[3]);
  ls[3][ls[3].size() - 3] ^= 1;  // inside the record
  rewrite(ls);
  EXPECT_FALSE(AuditLog::open(path_));
}

TEST_F(AuditLogTest, ConcurrentAppendsFormOneChain) {
  auto log = AuditLog::open(path_);
  ASSERT_TRUE(log) << log.error().to_string();
  constexpr int kThreads = 4, kEach = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&log, t] {
      for (int i = 0; i < kEach; ++i) {
        auto s = log->append({{"type", "exec.start"}, {"thread", t}, {"i", i}});
        EXPECT_TRUE(s) << s.error().to_string();
      }
    });
  }
  for (auto& th : threads) th.join();
  VerifyReport r = verify();
  EXPECT_TRUE(r.ok) << r.bad_line << ": " << r.reason;
  EXPECT_EQ(r.records, static_cast<std::uint64_t>(kThreads * kEach));
  std::set<std::pair<int, int>> seen;
  for (const auto& l : lines()) {
    json j = json::parse(l);
    seen.insert({j["thread"].get<int>(), j["i"].get<int>()});
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kThreads * kEach));
}

TEST_F(AuditLogTest, SecondWriterIsRefusedClearly) {
  auto first = AuditLog::open(path_);
  ASSERT_TRUE(first) << first.error().to_string();
  auto second = AuditLog::open(path_);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(second.error().message.find("another writer"), std::string::npos)
      << second.error().message;
  EXPECT_NE(second.error().message.find(path_), std::string::npos);
  // Released with the first.
  first = AuditLog::open(dir_ + "/other.log");
  ASSERT_TRUE(first);
  EXPECT_TRUE(AuditLog::open(path_));
}

TEST_F(AuditLogTest, EventsAreValidated) {
  auto log = AuditLog::open(path_);
  ASSERT_TRUE(log);
  EXPECT_FALSE(log->append(json::array()));
  EXPECT_FALSE(log->append({{"path", "/x"}}));  // no type
  auto s = log->append({{"type", "x"}, {"seq", 7}});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("\"seq\" is reserved"), std::string::npos);
  EXPECT_EQ(log->last_seq(), 0u);
}

TEST_F(AuditLogTest, InvalidUtf8IsReplacedAndStillVerifies) {
  {
    auto log = AuditLog::open(path_);
    ASSERT_TRUE(log);
    ASSERT_TRUE(log->append({{"type", "file.read"}, {"path", std::string("/a\xff\xfe")}}));
    ASSERT_TRUE(log->append({{"type", "file.read"}, {"path", "/b\n\"quoted\""}}));
  }
  VerifyReport r = verify();
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.records, 2u);
}

TEST_F(AuditLogTest, WriteBehindTheWritersBackStopsAppends) {
  auto log = AuditLog::open(path_);
  ASSERT_TRUE(log);
  ASSERT_TRUE(log->append({{"type", "a"}}));
  std::ofstream(path_, std::ios::app) << "junk\n";
  auto s = log->append({{"type", "b"}});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("changed behind"), std::string::npos) << s.error().message;
  EXPECT_FALSE(log->append({{"type", "c"}}));
}

TEST_F(AuditLogTest, TailReturnsTheLastLines) {
  write_records(30);
  auto all = lines();
  auto t = tail_audit_log(path_, 5);
  ASSERT_TRUE(t) << t.error().to_string();
  ASSERT_EQ(t->size(), 5u);
  EXPECT_EQ((*t)[0], all[25]);
  EXPECT_EQ((*t)[4], all[29]);
  t = tail_audit_log(path_, 100);
  ASSERT_TRUE(t);
  EXPECT_EQ(*t, all);
  t = tail_audit_log(path_, 0);
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->empty());
}

TEST_F(AuditLogTest, TailAcrossChunksAndWithATruncatedLine) {
  // Lines longer than the 64 KiB read chunk.
  {
    auto log = AuditLog::open(path_);
    ASSERT_TRUE(log);
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(log->append({{"type", "big"}, {"pad", std::string(50000, 'a' + i)}}));
    }
  }
  auto all = lines();
  auto t = tail_audit_log(path_, 3);
  ASSERT_TRUE(t);
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ((*t)[0], all[1]);
  EXPECT_EQ((*t)[2], all[3]);
  all.back().resize(100);
  rewrite(all, false);
  t = tail_audit_log(path_, 2);
  ASSERT_TRUE(t);
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[1], all.back());
}

}  // namespace
}  // namespace corral
