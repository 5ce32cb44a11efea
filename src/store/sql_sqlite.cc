#include "store/sql_sqlite.h"

namespace corral::sql {
namespace {

class SqliteStmt final : public StmtImpl {
 public:
  SqliteStmt(sqlite3* db, sqlite::Stmt st) : db_(db), st_(std::move(st)) {}
  void bind_text(int i, std::string_view v) override { st_.bind(i, v); }
  void bind_blob(int i, std::string_view v) override { st_.bind_blob(i, v); }
  void bind_int64(int i, std::int64_t v) override { st_.bind(i, v); }
  void bind_null(int i) override { st_.bind(i, std::nullopt); }
  Result<bool> step(std::string_view what) override {
    auto r = st_.step(what);
    fault_ = Fault::kNone;
    if (!r) {
      switch (sqlite3_extended_errcode(db_)) {
        case SQLITE_CONSTRAINT_PRIMARYKEY:
        case SQLITE_CONSTRAINT_UNIQUE:
          fault_ = Fault::kUniqueViolation;
          break;
        case SQLITE_CONSTRAINT_FOREIGNKEY:
          fault_ = Fault::kForeignKeyViolation;
          break;
        default:
          fault_ = Fault::kOther;
      }
    }
    return r;
  }
  std::int64_t changes() const override { return sqlite3_changes64(db_); }
  Fault fault() const override { return fault_; }
  bool is_null(int c) const override { return st_.is_null(c); }
  std::string text(int c) const override { return st_.text(c); }
  std::int64_t int64(int c) const override { return st_.int64(c); }

 private:
  sqlite3* db_;
  sqlite::Stmt st_;
  Fault fault_ = Fault::kNone;
};

}  // namespace

Result<Stmt> SqliteConnection::prepare(std::string_view sql) {
  auto st = sqlite::Stmt::prepare(h_, sql, &cache_);
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  return Stmt(std::make_unique<SqliteStmt>(h_, std::move(*st)));
}

Status SqliteConnection::exec(std::string_view sql, std::string_view what) {
  const std::string text(sql);
  return sqlite::exec_sql(h_, text.c_str(), what);
}

Status SqliteConnection::begin() {
  return sqlite::exec_sql(h_, "BEGIN IMMEDIATE", "BEGIN IMMEDIATE");
}

Status SqliteConnection::commit() { return sqlite::exec_sql(h_, "COMMIT", "COMMIT"); }

void SqliteConnection::rollback() {
  if (in_transaction()) sqlite3_exec(h_, "ROLLBACK", nullptr, nullptr, nullptr);
}

}  // namespace corral::sql
