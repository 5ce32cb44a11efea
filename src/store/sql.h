// The state store's SQL, spoken to SQLite (the embedded default) or to
// PostgreSQL (a fleet's shared state, issue 18): one connection interface
// with the same statements, placeholders and answers on both (ADR 0020).
//
//   Connection   prepare(sql), exec(sql), begin/commit/rollback
//   Stmt         bind(i, v) from 1, step() row by row, columns from 0,
//                changes() of the last run, fault() of the last failure
//   Txn          a write transaction, rolled back unless committed
//
// Statements use `?` placeholders, numbered in order, or `?NNN` (PostgreSQL
// gets `$1`, `$2`, ...). Columns are read as text, int64 or bytes; booleans are
// stored as integers on both. A write transaction excludes every other
// writer of the same database, from any process or host: SQLite's BEGIN
// IMMEDIATE; on PostgreSQL a transaction-scoped advisory lock taken first.
// It knows nothing of the store's tables: store/state_store.cc holds those.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace corral::sql {

enum class Backend { kSqlite, kPostgres };

// What a failed statement ran into, beyond its ErrorCode: the store turns
// a unique violation into its own answer (an id taken, a key reused).
enum class Fault { kNone, kUniqueViolation, kForeignKeyViolation, kOther };

// A backend's prepared statement (sql_sqlite.cc, sql_postgres.cc).
class StmtImpl {
 public:
  virtual ~StmtImpl() = default;
  virtual void bind_text(int i, std::string_view v) = 0;
  virtual void bind_blob(int i, std::string_view v) = 0;
  virtual void bind_int64(int i, std::int64_t v) = 0;
  virtual void bind_null(int i) = 0;
  virtual Result<bool> step(std::string_view what) = 0;
  virtual std::int64_t changes() const = 0;
  virtual Fault fault() const = 0;
  virtual bool is_null(int c) const = 0;
  virtual std::string text(int c) const = 0;
  virtual std::int64_t int64(int c) const = 0;
};

class Stmt {
 public:
  explicit Stmt(std::unique_ptr<StmtImpl> impl) : impl_(std::move(impl)) {}

  Stmt& bind(int i, std::string_view v) {
    impl_->bind_text(i, v);
    return *this;
  }
  Stmt& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
  Stmt& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  // Bytes, NULs included (a BLOB; bytea on PostgreSQL); text() reads them back.
  Stmt& bind_blob(int i, std::string_view v) {
    impl_->bind_blob(i, v);
    return *this;
  }
  Stmt& bind(int i, std::int64_t v) {
    impl_->bind_int64(i, v);
    return *this;
  }
  Stmt& bind(int i, int v) { return bind(i, static_cast<std::int64_t>(v)); }
  Stmt& bind(int i, std::nullopt_t) {
    impl_->bind_null(i);
    return *this;
  }
  template <typename T>
  Stmt& bind(int i, const std::optional<T>& v) {
    if (v) return bind(i, *v);
    return bind(i, std::nullopt);
  }

  // true: a row is available; false: done. The first call runs it.
  Result<bool> step(std::string_view what) { return impl_->step(what); }
  Status run(std::string_view what) {
    auto r = step(what);
    if (!r) return tl::unexpected<Error>(std::move(r).error());
    return ok();
  }
  // For an INSERT ... RETURNING <id> of one row: runs it to its end (SQLite
  // keeps a statement that is not at its end open, and a COMMIT then fails)
  // and gives the id.
  Result<std::int64_t> returned_id(std::string_view what) {
    auto row = step(what);
    if (!row) return tl::unexpected<Error>(std::move(row).error());
    if (!*row) return make_error(ErrorCode::kInternal, std::string(what) + " returned no row");
    const std::int64_t id = int64(0);
    auto end = step(what);
    if (!end) return tl::unexpected<Error>(std::move(end).error());
    return id;
  }
  // Rows the statement inserted, updated or deleted (after it ran).
  std::int64_t changes() const { return impl_->changes(); }
  // Why the last step failed (kNone after a success).
  Fault fault() const { return impl_->fault(); }

  bool is_null(int c) const { return impl_->is_null(c); }
  std::string text(int c) const { return impl_->text(c); }
  std::int64_t int64(int c) const { return impl_->int64(c); }
  std::optional<std::string> opt_text(int c) const {
    if (is_null(c)) return std::nullopt;
    return text(c);
  }
  std::optional<std::int64_t> opt_int64(int c) const {
    if (is_null(c)) return std::nullopt;
    return int64(c);
  }

 private:
  std::unique_ptr<StmtImpl> impl_;
};

// One connection; not thread-safe (the store guards it with its mutex).
class Connection {
 public:
  virtual ~Connection() = default;
  virtual Backend backend() const = 0;
  // What it is connected to, for messages: a file path, or a PostgreSQL
  // URL without its password.
  virtual const std::string& describe() const = 0;
  // A statement of `sql`: prepared once per connection and reused.
  virtual Result<Stmt> prepare(std::string_view sql) = 0;
  // SQL without parameters or rows (several statements allowed).
  virtual Status exec(std::string_view sql, std::string_view what) = 0;
  // A write transaction (see the top of this file).
  virtual Status begin() = 0;
  virtual Status commit() = 0;
  virtual void rollback() = 0;
  virtual bool in_transaction() const = 0;
};

// begin() ... commit(); rolled back on scope exit unless committed.
class Txn {
 public:
  explicit Txn(Connection& c) : c_(c) {}
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;
  ~Txn() {
    if (open_ && c_.in_transaction()) c_.rollback();
  }
  Status begin() {
    CORRAL_TRY(c_.begin());
    open_ = true;
    return ok();
  }
  // Returns once the commit is as durable as the connection promises.
  Status commit() {
    CORRAL_TRY(c_.commit());
    open_ = false;
    return ok();
  }

 private:
  Connection& c_;
  bool open_ = false;
};

// Whether `target` names a PostgreSQL database (postgres:// or
// postgresql://) rather than an SQLite file.
bool is_postgres_url(std::string_view target);

// `text` with each `?` outside quotes and comments replaced by $1, $2, ...
// and each `?NNN` by `$NNN` (PostgreSQL's placeholders; a statement uses one
// form or the other). Exposed for its unit test.
std::string number_placeholders(std::string_view text);

}  // namespace corral::sql
