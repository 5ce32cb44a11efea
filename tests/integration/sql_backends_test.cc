// store/sql.h on both backends (issue 18, ADR 0020): SQLite on a temporary
// file, PostgreSQL on a throwaway cluster the suite starts
// (support/pg_cluster.h). The same statements must give the same answers:
// values of every kind, RETURNING, ON CONFLICT, changes, the faults the
// store tells apart, rolled-back transactions, and writers that exclude
// each other across connections. PostgreSQL alone: a server that went away
// and came back, and a wrong URL or password, each a clear error.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <thread>

#include "store/sql_postgres.h"
#include "store/sql_sqlite.h"
#include "support/pg_cluster.h"
#include "support/skip.h"

namespace corral::testing {
namespace {

using sql::Backend;
using sql::Connection;
using sql::Fault;

// One SQLite file, closed with the object; connections share it.
class SqliteFile {
 public:
  SqliteFile() {
    char tmpl[] = "/tmp/corral-sql-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  ~SqliteFile() {
    for (sqlite3* h : handles_) sqlite3_close_v2(h);
    std::filesystem::remove_all(dir_);
  }
  std::unique_ptr<Connection> connect() {
    const std::string path = dir_ + "/state.db";
    sqlite3* h = nullptr;
    sqlite3_open_v2(path.c_str(), &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    sqlite3_busy_timeout(h, 5000);
    sqlite3_exec(h, "PRAGMA journal_mode=WAL; PRAGMA foreign_keys=ON;", nullptr, nullptr, nullptr);
    handles_.push_back(h);
    return std::make_unique<sql::SqliteConnection>(h, path);
  }

 private:
  std::string dir_;
  std::vector<sqlite3*> handles_;
};

class SqlBackends : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kPostgres) {
      CORRAL_FRESH_PG_DATABASE(url_);
    } else {
      file_ = std::make_unique<SqliteFile>();
    }
    conn_ = connect();
    ASSERT_NE(conn_, nullptr);
  }

  std::unique_ptr<Connection> connect() {
    if (GetParam() == Backend::kSqlite) return file_->connect();
    auto c = sql::PgConnection::open(url_);
    EXPECT_TRUE(c) << c.error().to_string();
    return c ? std::move(*c) : nullptr;
  }
  bool pg() const { return GetParam() == Backend::kPostgres; }
  // The DDL that differs: bytes, and an id the database assigns.
  std::string bytes() const { return pg() ? "BYTEA" : "BLOB"; }
  std::string serial() const {
    return pg() ? "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY" : "INTEGER PRIMARY KEY";
  }
  void exec(const std::string& s) {
    auto st = conn_->exec(s, s);
    ASSERT_TRUE(st) << st.error().to_string();
  }
  std::int64_t count(Connection& c, const std::string& table) {
    auto st = c.prepare("SELECT COUNT(*) FROM " + table);
    EXPECT_TRUE(st);
    auto row = st->step("count");
    EXPECT_TRUE(row && *row);
    return st->int64(0);
  }

  std::unique_ptr<SqliteFile> file_;
  std::string url_;
  std::unique_ptr<Connection> conn_;
};

TEST_P(SqlBackends, ValuesOfEveryKindRoundTrip) {
  exec("CREATE TABLE t (id TEXT PRIMARY KEY, n BIGINT, b " + bytes() + ", note TEXT)");
  const std::string bytes_value("\0\x01\xff'?\\x00\"", 9);
  struct Row {
    std::string id;
    std::int64_t n;
  };
  for (const Row& r : {Row{"min", std::numeric_limits<std::int64_t>::min()},
                       Row{"max", std::numeric_limits<std::int64_t>::max()}, Row{"zero", 0}}) {
    auto st = conn_->prepare("INSERT INTO t (id, n, b, note) VALUES (?, ?, ?, ?)");
    ASSERT_TRUE(st) << st.error().to_string();
    st->bind(1, r.id).bind(2, r.n).bind_blob(3, bytes_value).bind(4, std::nullopt);
    auto done = st->run("insert");
    ASSERT_TRUE(done) << done.error().to_string();
    EXPECT_EQ(st->changes(), 1);
  }
  auto st = conn_->prepare("SELECT n, b, note, id FROM t WHERE id = ? OR note = '?' ORDER BY n");
  ASSERT_TRUE(st) << st.error().to_string();
  st->bind(1, std::string("max"));
  auto row = st->step("select");
  ASSERT_TRUE(row && *row) << (row ? "no row" : row.error().to_string());
  EXPECT_EQ(st->int64(0), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(st->text(1), bytes_value);
  EXPECT_TRUE(st->is_null(2));
  EXPECT_EQ(st->opt_text(2), std::nullopt);
  EXPECT_EQ(st->opt_int64(0), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(st->text(3), "max");
  row = st->step("select");
  ASSERT_TRUE(row);
  EXPECT_FALSE(*row);

  // UTF-8 text and quotes as values.
  auto ins = conn_->prepare("INSERT INTO t (id, note) VALUES (?, ?)");
  ASSERT_TRUE(ins);
  ins->bind(1, "ü'\"?").bind(2, "日本語 -- not a comment");
  ASSERT_TRUE(ins->run("insert utf8"));
  auto back = conn_->prepare("SELECT note FROM t WHERE id = ?");
  back->bind(1, "ü'\"?");
  row = back->step("select utf8");
  ASSERT_TRUE(row && *row);
  EXPECT_EQ(back->text(0), "日本語 -- not a comment");
}

TEST_P(SqlBackends, ReturningOnConflictAndChanges) {
  exec("CREATE TABLE e (id " + serial() + ", k TEXT UNIQUE, v BIGINT)");
  std::int64_t first = 0;
  for (int i = 0; i < 3; ++i) {
    auto st = conn_->prepare("INSERT INTO e (k, v) VALUES (?, ?) RETURNING id");
    ASSERT_TRUE(st);
    st->bind(1, "k" + std::to_string(i)).bind(2, i);
    auto row = st->step("insert returning");
    ASSERT_TRUE(row && *row) << (row ? "no row" : row.error().to_string());
    if (i == 0) first = st->int64(0);
    EXPECT_EQ(st->int64(0), first + i) << "ids increase";
  }
  auto again = conn_->prepare("INSERT INTO e (k, v) VALUES (?, ?) ON CONFLICT (k) DO NOTHING");
  again->bind(1, "k1").bind(2, 99);
  ASSERT_TRUE(again->run("insert on conflict"));
  EXPECT_EQ(again->changes(), 0);
  auto upd = conn_->prepare("UPDATE e SET v = v + 10 WHERE v >= ?");
  upd->bind(1, 1);
  ASSERT_TRUE(upd->run("update"));
  EXPECT_EQ(upd->changes(), 2);
  auto del = conn_->prepare("DELETE FROM e WHERE k = ?");
  del->bind(1, "nothing");
  ASSERT_TRUE(del->run("delete"));
  EXPECT_EQ(del->changes(), 0);
}

TEST_P(SqlBackends, UniqueAndForeignKeyViolationsAreToldApart) {
  exec("CREATE TABLE p (id TEXT PRIMARY KEY)");
  exec("CREATE TABLE c (id TEXT PRIMARY KEY, p TEXT NOT NULL REFERENCES p(id))");
  auto a = conn_->prepare("INSERT INTO p (id) VALUES (?)");
  a->bind(1, "x");
  ASSERT_TRUE(a->run("insert"));
  EXPECT_EQ(a->fault(), Fault::kNone);
  auto dup = conn_->prepare("INSERT INTO p (id) VALUES (?)");
  dup->bind(1, "x");
  auto r = dup->run("insert again");
  ASSERT_FALSE(r);
  EXPECT_EQ(dup->fault(), Fault::kUniqueViolation) << r.error().to_string();
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  auto orphan = conn_->prepare("INSERT INTO c (id, p) VALUES (?, ?)");
  orphan->bind(1, "c1").bind(2, "nobody");
  r = orphan->run("insert orphan");
  ASSERT_FALSE(r);
  EXPECT_EQ(orphan->fault(), Fault::kForeignKeyViolation) << r.error().to_string();
  auto bad = conn_->prepare("SELECT nope FROM p");
  auto step = bad ? bad->step("bad column") : Result<bool>(tl::unexpected(bad.error()));
  EXPECT_FALSE(step);
  // The connection is still good afterwards.
  EXPECT_EQ(count(*conn_, "p"), 1);
}

TEST_P(SqlBackends, ARolledBackTransactionLeavesNothing) {
  exec("CREATE TABLE r (id TEXT PRIMARY KEY)");
  {
    sql::Txn txn(*conn_);
    ASSERT_TRUE(txn.begin());
    EXPECT_TRUE(conn_->in_transaction());
    auto st = conn_->prepare("INSERT INTO r (id) VALUES (?)");
    st->bind(1, "gone");
    ASSERT_TRUE(st->run("insert"));
  }  // no commit
  EXPECT_FALSE(conn_->in_transaction());
  EXPECT_EQ(count(*conn_, "r"), 0);
  {
    sql::Txn txn(*conn_);
    ASSERT_TRUE(txn.begin());
    auto st = conn_->prepare("INSERT INTO r (id) VALUES (?)");
    st->bind(1, "kept");
    ASSERT_TRUE(st->run("insert"));
    ASSERT_TRUE(txn.commit());
  }
  auto other = connect();
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(count(*other, "r"), 1) << "a commit is seen by another connection";
}

// Two connections (as two daemons would hold): the second writer's begin
// waits until the first commits, so a read-check-write cannot interleave.
TEST_P(SqlBackends, WritersExcludeEachOther) {
  exec("CREATE TABLE w (id TEXT PRIMARY KEY, n BIGINT)");
  exec("INSERT INTO w (id, n) VALUES ('c', 0)");
  auto second = connect();
  ASSERT_NE(second, nullptr);
  sql::Txn first(*conn_);
  ASSERT_TRUE(first.begin());
  std::atomic<bool> began{false};
  std::thread t([&] {
    sql::Txn txn(*second);
    if (!txn.begin()) return;
    began = true;
    auto st = second->prepare("UPDATE w SET n = n + 1 WHERE id = 'c'");
    if (st && st->run("update")) (void)txn.commit();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(began) << "the second writer began while the first held the write lock";
  auto st = conn_->prepare("UPDATE w SET n = n + 10 WHERE id = 'c'");
  ASSERT_TRUE(st->run("update"));
  ASSERT_TRUE(first.commit());
  t.join();
  EXPECT_TRUE(began);
  auto read = conn_->prepare("SELECT n FROM w WHERE id = 'c'");
  auto row = read->step("read");
  ASSERT_TRUE(row && *row);
  EXPECT_EQ(read->int64(0), 11);
}

INSTANTIATE_TEST_SUITE_P(, SqlBackends, ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         [](const auto& info) {
                           return info.param == Backend::kSqlite ? std::string("Sqlite")
                                                                 : std::string("Postgres");
                         });

// PostgreSQL alone: the server going away and coming back, and bad URLs.
class SqlPostgres : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = PgCluster::start();
    if (!c) CORRAL_SKIP_OR_FAIL("no PostgreSQL cluster: " + c.error().message);
    cluster_ = std::move(*c);
  }
  std::unique_ptr<PgCluster> cluster_;
};

TEST_F(SqlPostgres, AConnectionTheServerDroppedIsMadeAgainOutsideATransaction) {
  auto c = sql::PgConnection::open(cluster_->url());
  ASSERT_TRUE(c) << c.error().to_string();
  Connection& conn = **c;
  ASSERT_TRUE(conn.exec("CREATE TABLE k (id TEXT PRIMARY KEY)", "create"));
  auto st = conn.prepare("INSERT INTO k (id) VALUES (?)");
  st->bind(1, "before");
  ASSERT_TRUE(st->run("insert"));

  ASSERT_TRUE(cluster_->restart(/*crash=*/true));
  auto again = conn.prepare("INSERT INTO k (id) VALUES (?)");
  again->bind(1, "after");
  auto r = again->run("insert after a restart");
  if (!r) {
    // The first statement may find the old session dead only when it
    // sends; the next one reconnects.
    EXPECT_EQ(r.error().code, ErrorCode::kUnavailable) << r.error().to_string();
    auto third = conn.prepare("INSERT INTO k (id) VALUES (?)");
    third->bind(1, "after");
    r = third->run("insert after a restart, again");
  }
  ASSERT_TRUE(r) << r.error().to_string();

  // Inside a transaction, a lost connection fails the transaction.
  sql::Txn txn(conn);
  ASSERT_TRUE(txn.begin());
  cluster_->stop(/*crash=*/true);
  auto in = conn.prepare("INSERT INTO k (id) VALUES (?)");
  in->bind(1, "lost");
  r = in->run("insert while the server is down");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable) << r.error().to_string();
}

TEST_F(SqlPostgres, AWrongPasswordOrPortIsAClearErrorWithoutThePassword) {
  std::string url = cluster_->url();
  const std::string wrong = "wrong-" + cluster_->password();
  url.replace(url.find(cluster_->password()), cluster_->password().size(), wrong);
  auto c = sql::PgConnection::open(url);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(c.error().message.find("password authentication failed"), std::string::npos)
      << c.error().message;
  EXPECT_EQ(c.error().to_string().find(wrong), std::string::npos) << c.error().to_string();
  EXPECT_NE(c.error().hint.find("serve.state"), std::string::npos);

  auto closed = sql::PgConnection::open("postgres://corral@127.0.0.1:1/postgres?connect_timeout=2");
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.error().code, ErrorCode::kUnavailable) << closed.error().to_string();

  auto ok_conn = sql::PgConnection::open(cluster_->url());
  ASSERT_TRUE(ok_conn) << ok_conn.error().to_string();
  EXPECT_EQ((*ok_conn)->describe(),
            "postgres://corral@127.0.0.1:" + std::to_string(cluster_->port()) + "/postgres");
}

}  // namespace
}  // namespace corral::testing
