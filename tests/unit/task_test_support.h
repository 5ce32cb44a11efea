// What the task table's unit tests share: a temporary dir, a second raw
// SQLite connection, and tasks driven to a status along allowed edges.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "support/temp_dir.h"
#include "store/state_store.h"
#include "store/task_record.h"

namespace corral::task_test {

using T = TaskStatus;

class TempDir : public ::corral::testing::TempDir {
 public:
  TempDir() : ::corral::testing::TempDir("corral-task-unit") {}
};

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

inline StateStore open_or_die(const std::string& path) {
  auto s = StateStore::open(path);
  if (!s) {
    ADD_FAILURE() << s.error().to_string();
    std::abort();
  }
  return std::move(*s);
}

inline TaskRecord request(const std::string& id,
                          const std::string& body = R"({"command":["true"]})",
                          const std::string& ns = "default") {
  TaskRecord t;
  t.id = id;
  t.ns = ns;
  t.request_json = body;
  return t;
}

inline TaskUpdate to_status(T status, std::string why = "test") {
  TaskUpdate u;
  u.status = status;
  u.reason_for_transition = std::move(why);
  return u;
}

// Submits `id` and moves it along allowed edges to `target`.
inline void make_task_in(StateStore& store, const std::string& id, T target) {
  auto s = store.submit_task(request(id));
  ASSERT_TRUE(s) << s.error().to_string();
  if (target == T::kQueued) return;
  if (target == T::kCancelled) {
    ASSERT_TRUE(store.update_task(id, to_status(T::kCancelled)));
    return;
  }
  ASSERT_TRUE(store.update_task(id, to_status(T::kRunning)));
  if (target == T::kRunning) return;
  auto r = store.update_task(id, to_status(target));
  ASSERT_TRUE(r) << r.error().to_string();
}

}  // namespace corral::task_test
