// A small RAII wrapper over the SQLite C API for the state store
// (ADR 0003): errors as corral Errors with hints, and prepared statements
// that are finalized (or handed back to a per-connection cache) on scope
// exit. store/sql_sqlite.h builds the store's sql::Connection on it
// (transactions are there); it knows nothing of the store's tables.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "base/result.h"

namespace corral::sqlite {

// How long a connection waits for another writer's lock (sqlite3_busy_timeout).
constexpr int kBusyTimeoutMs = 5000;

// An sqlite3 failure as an Error: what we were doing, SQLite's message, and
// a hint for the causes an operator can fix.
Error sqlite_error(sqlite3* db, std::string_view what, int rc);
tl::unexpected<Error> fail(sqlite3* db, std::string_view what, int rc);

// The prepared statements of one connection, kept for reuse: parsing the
// SQL costs more than running these small statements, and the exec path
// writes a few rows per command. Used under the connection's mutex.
class StmtCache {
 public:
  StmtCache() = default;
  StmtCache(const StmtCache&) = delete;
  StmtCache& operator=(const StmtCache&) = delete;
  ~StmtCache() { clear(); }
  void clear() {
    for (auto& [sql, entry] : entries_) sqlite3_finalize(entry.stmt);
    entries_.clear();
  }
  struct Entry {
    sqlite3_stmt* stmt = nullptr;
    bool in_use = false;
  };
  Entry& entry(std::string_view sql) { return entries_[std::string(sql)]; }

 private:
  std::unordered_map<std::string, Entry> entries_;
};

// A prepared statement, finalized on scope exit, or reset and handed back
// to its cache.
class Stmt {
 public:
  Stmt() = default;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt(Stmt&& o) noexcept
      : db_(o.db_), s_(std::exchange(o.s_, nullptr)), cached_(std::exchange(o.cached_, nullptr)) {}
  ~Stmt() {
    if (cached_ != nullptr) {
      sqlite3_reset(s_);
      sqlite3_clear_bindings(s_);
      cached_->in_use = false;
    } else {
      sqlite3_finalize(s_);
    }
  }

  static Result<Stmt> prepare(sqlite3* db, std::string_view sql, StmtCache* cache = nullptr) {
    Stmt st;
    st.db_ = db;
    StmtCache::Entry* entry = cache != nullptr ? &cache->entry(sql) : nullptr;
    // A statement already in use (a nested query of the same text) gets a
    // one-off copy.
    if (entry != nullptr && !entry->in_use) {
      if (entry->stmt == nullptr) {
        int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &entry->stmt, nullptr);
        if (rc != SQLITE_OK) return fail(db, "preparing `" + std::string(sql) + "`", rc);
      }
      entry->in_use = true;
      st.s_ = entry->stmt;
      st.cached_ = entry;
      return st;
    }
    int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &st.s_, nullptr);
    if (rc != SQLITE_OK) return fail(db, "preparing `" + std::string(sql) + "`", rc);
    return st;
  }

  Stmt& bind(int i, std::string_view v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  // Bytes as a BLOB (text() reads them back whole, NULs included).
  Stmt& bind_blob(int i, std::string_view v) {
    sqlite3_bind_blob64(s_, i, v.data(), v.size(), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind(int i, std::int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& bind(int i, std::nullopt_t) {
    sqlite3_bind_null(s_, i);
    return *this;
  }
  template <typename T>
  Stmt& bind(int i, const std::optional<T>& v) {
    if (v) return bind(i, *v);
    return bind(i, std::nullopt);
  }

  // true: a row is available; false: done.
  Result<bool> step(std::string_view what) {
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    // The extended code tells a foreign key from a unique violation.
    return fail(db_, what, sqlite3_extended_errcode(db_));
  }
  Status run(std::string_view what) {
    auto r = step(what);
    if (!r) return tl::unexpected<Error>(std::move(r).error());
    return ok();
  }

  bool is_null(int c) const { return sqlite3_column_type(s_, c) == SQLITE_NULL; }
  std::string text(int c) const {
    const unsigned char* p = sqlite3_column_type(s_, c) == SQLITE_BLOB
                                 ? static_cast<const unsigned char*>(sqlite3_column_blob(s_, c))
                                 : sqlite3_column_text(s_, c);
    int n = sqlite3_column_bytes(s_, c);
    return p != nullptr ? std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n))
                        : std::string();
  }
  std::int64_t int64(int c) const { return sqlite3_column_int64(s_, c); }

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* s_ = nullptr;
  StmtCache::Entry* cached_ = nullptr;
};

// Runs SQL without results (several statements allowed).
Status exec_sql(sqlite3* db, const char* sql, std::string_view what);
// The first column of the first row of a PRAGMA ("" when it returns none).
Result<std::string> pragma_text(sqlite3* db, std::string_view sql);

}  // namespace corral::sqlite
