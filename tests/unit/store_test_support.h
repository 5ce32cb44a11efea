// What the state store's unit tests share (state_store_test.cc and the
// task table's, through task_test_support.h): a second, raw SQLite
// connection and a store opened or the test ended.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdlib>
#include <string>

#include "store/state_store.h"

namespace corral::store_test {

// Runs one SQL statement on a second, raw connection (as another process
// or an operator would) and returns the first column of the first row.
inline std::string raw_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* st = nullptr;
  std::string out;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  int rc = sqlite3_step(st);
  EXPECT_TRUE(rc == SQLITE_ROW || rc == SQLITE_DONE) << sqlite3_errmsg(db);
  if (rc == SQLITE_ROW && sqlite3_column_text(st, 0) != nullptr) {
    out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

// The store at `path`; a store that does not open ends the test binary
// (nothing after it could mean anything).
inline StateStore open_or_die(const std::string& path) {
  auto s = StateStore::open(path);
  if (!s) {
    ADD_FAILURE() << s.error().to_string();
    std::abort();
  }
  return std::move(*s);
}

}  // namespace corral::store_test
