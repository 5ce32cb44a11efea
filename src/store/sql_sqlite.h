// sql::Connection over an SQLite handle (store/sql.h): statements prepared
// once and cached (store/sqlite.h), BEGIN IMMEDIATE transactions.
#pragma once

#include <sqlite3.h>

#include <string>

#include "store/sql.h"
#include "store/sqlite.h"

namespace corral::sql {

class SqliteConnection final : public Connection {
 public:
  // Over `handle`, which the caller opened and closes after this is gone.
  SqliteConnection(sqlite3* handle, std::string path) : h_(handle), path_(std::move(path)) {}
  ~SqliteConnection() override { cache_.clear(); }

  Backend backend() const override { return Backend::kSqlite; }
  const std::string& describe() const override { return path_; }
  Result<Stmt> prepare(std::string_view sql) override;
  Status exec(std::string_view sql, std::string_view what) override;
  Status begin() override;
  Status commit() override;
  void rollback() override;
  bool in_transaction() const override { return sqlite3_get_autocommit(h_) == 0; }

  sqlite3* handle() const { return h_; }

 private:
  sqlite3* h_;
  std::string path_;
  sqlite::StmtCache cache_;
};

}  // namespace corral::sql
