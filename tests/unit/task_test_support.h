// What the task table's unit tests share: a temporary dir, a second raw
// SQLite connection, and tasks driven to a status along allowed edges.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "store/state_store.h"
#include "store_test_support.h"
#include "support/temp_dir.h"
#include "store/task_record.h"

namespace corral::task_test {

using T = TaskStatus;

class TempDir : public ::corral::testing::TempDir {
 public:
  TempDir() : ::corral::testing::TempDir("corral-task-unit") {}
};

using store_test::open_or_die;
using store_test::raw_sql;

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
