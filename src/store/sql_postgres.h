// sql::Connection over libpq (store/sql.h, ADR 0020): one connection to a
// PostgreSQL database named by a postgres:// URL. Statements are prepared
// on the server once per connection and parameter types; results come as
// text (bytea decoded). A write transaction first takes a transaction-scoped
// advisory lock, so writers of the same database exclude each other across
// daemons as SQLite's BEGIN IMMEDIATE does within one host. A connection the
// server dropped is re-established before the next statement that is not
// inside a transaction; inside one, the statement fails (the transaction
// is gone with the connection) and the caller's error says so.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "store/sql.h"

// libpq's handles, declared as <libpq-fe.h> does: only the .cc files see
// libpq's header (and only corral_store has its include directory).
typedef struct pg_conn PGconn;
typedef struct pg_result PGresult;
typedef unsigned int Oid;

namespace corral::sql {

struct PqLibrary;

class PgConnection final : public Connection {
 public:
  // Connects to `url` (postgres://user:password@host:port/db?options);
  // libpq's own settings (PGPASSWORD, ~/.pgpass, sslmode=...) apply.
  static Result<std::unique_ptr<PgConnection>> open(std::string_view url);
  ~PgConnection() override;
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  Backend backend() const override { return Backend::kPostgres; }
  const std::string& describe() const override { return describe_; }
  Result<Stmt> prepare(std::string_view sql) override;
  Status exec(std::string_view sql, std::string_view what) override;
  Status begin() override;
  Status commit() override;
  void rollback() override;
  bool in_transaction() const override { return in_txn_; }

  // Runs `sql` (already numbered) as a prepared statement with text or
  // binary parameters: its result (rows or a command's), or the error, with
  // `fault` set. Used by this connection's statements.
  Result<PGresult*> run(const std::string& sql, const std::vector<Oid>& types,
                        const std::vector<const char*>& values, const std::vector<int>& lengths,
                        const std::vector<int>& formats, std::string_view what, Fault& fault);
  const PqLibrary& pq() const { return *pq_; }

 private:
  PgConnection(const PqLibrary* pq, PGconn* conn, std::string describe)
      : pq_(pq), conn_(conn), describe_(std::move(describe)) {}
  Status ensure_connected(std::string_view what);
  Error error_of(PGresult* result, std::string_view what, Fault* fault) const;

  const PqLibrary* pq_;
  PGconn* conn_;
  std::string describe_;
  std::unordered_map<std::string, std::string> prepared_;  // sql + types -> statement name
  std::uint64_t next_name_ = 0;
  bool in_txn_ = false;
};

}  // namespace corral::sql
