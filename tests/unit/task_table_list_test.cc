// Listing and pruning the task table (REQUIREMENTS.md D6): newest first
// with filters, keyset pages that cover every task once while tasks are
// added, forged cursors refused, unfinished tasks, prunable ones and delete.
#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "store/state_store.h"
#include "store/task_record.h"
#include "task_test_support.h"

namespace corral {
namespace {

using namespace task_test;  // NOLINT(google-build-using-namespace): the tests' helpers

// ---- listing ----

TEST(TaskTableTest, ListsNewestFirstWithFilters) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  std::vector<std::int64_t> created;
  for (int i = 0; i < 12; ++i) {
    std::string id = "l" + std::to_string(i);
    auto r = store.submit_task(request(id, "{}", i % 3 == 0 ? "team-b" : "default"));
    ASSERT_TRUE(r);
    created.push_back(r->task.created_at_ms);
    if (i % 4 == 1) make_task_in(store, "x" + id, T::kFailed);
    // Distinct times, so that the time filters have something to split.
    while (StateStore::now_ms() == created.back()) std::this_thread::yield();
  }
  TaskFilter all;
  auto page = store.list_tasks(all);
  ASSERT_TRUE(page) << page.error().to_string();
  EXPECT_FALSE(page->next_cursor);
  ASSERT_EQ(page->tasks.size(), 15u);
  for (std::size_t i = 1; i < page->tasks.size(); ++i) {
    const TaskRecord& newer = page->tasks[i - 1];
    const TaskRecord& older = page->tasks[i];
    EXPECT_TRUE(newer.created_at_ms > older.created_at_ms ||
                (newer.created_at_ms == older.created_at_ms && newer.id > older.id));
  }

  TaskFilter failed;
  failed.statuses = {T::kFailed, T::kTimedOut};
  page = store.list_tasks(failed);
  ASSERT_TRUE(page);
  ASSERT_EQ(page->tasks.size(), 3u);
  for (const auto& t : page->tasks) EXPECT_EQ(t.status, T::kFailed);

  TaskFilter ns;
  ns.ns = "team-b";
  page = store.list_tasks(ns);
  ASSERT_TRUE(page);
  ASSERT_EQ(page->tasks.size(), 4u);
  for (const auto& t : page->tasks) EXPECT_EQ(t.ns, "team-b");

  TaskFilter window;
  window.created_after_ms = created[3];   // inclusive
  window.created_before_ms = created[7];  // exclusive
  window.ns = "default";
  page = store.list_tasks(window);
  ASSERT_TRUE(page);
  std::set<std::string> ids;
  for (const auto& t : page->tasks) ids.insert(t.id);
  EXPECT_EQ(ids, (std::set<std::string>{"l4", "l5", "xl5"}));

  for (std::size_t bad : {std::size_t{0}, std::size_t{1001}}) {
    TaskFilter f;
    f.limit = bad;
    auto r = store.list_tasks(f);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  }
}

TEST(TaskTableTest, PagesCoverEveryTaskOnceWhileTasksAreAdded) {
  TempDir dir;
  std::string path = dir.file("state.db");
  StateStore store = open_or_die(path);
  // A second connection (as another daemon thread would) adds tasks between
  // the pages; many share a millisecond, so the id breaks the ties.
  auto other = StateStore::open(path, StateStore::Durability::kProcessCrash);
  ASSERT_TRUE(other) << other.error().to_string();
  std::set<std::string> before;
  for (int i = 0; i < 150; ++i) {
    std::string id = "p" + std::to_string(i);
    ASSERT_TRUE(other->submit_task(request(id)));
    before.insert(id);
  }
  int added = 0;
  for (std::size_t limit : {std::size_t{1}, std::size_t{7}, std::size_t{100}}) {
    std::map<std::string, int> seen;
    TaskFilter f;
    f.limit = limit;
    std::size_t pages = 0;
    for (;;) {
      auto page = store.list_tasks(f);
      ASSERT_TRUE(page) << page.error().to_string();
      EXPECT_LE(page->tasks.size(), limit);
      for (const auto& t : page->tasks) ++seen[t.id];
      ++pages;
      for (int k = 0; k < 2; ++k) {
        // Ids before and after the "p" ones, so that new rows sort on both
        // sides of the cursor within a millisecond.
        std::string id = (k == 0 ? "a" : "z") + std::to_string(added++);
        ASSERT_TRUE(other->submit_task(request(id)));
      }
      if (!page->next_cursor) break;
      f.cursor = page->next_cursor;
      ASSERT_LT(pages, 10000u);
    }
    for (const auto& [id, count] : seen) EXPECT_EQ(count, 1) << id << " listed twice";
    for (const std::string& id : before) EXPECT_EQ(seen.count(id), 1u) << id << " never listed";
  }
}

TEST(TaskTableTest, ForgedCursorsAreRefused) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(store.submit_task(request("c" + std::to_string(i))));
  TaskFilter f;
  f.limit = 2;
  auto page = store.list_tasks(f);
  ASSERT_TRUE(page);
  ASSERT_TRUE(page->next_cursor);
  const std::string good = *page->next_cursor;

  auto hex = [](std::string_view s) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : s) {
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
    return out;
  };
  std::string upper = good;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::vector<std::string> forged = {
      "",
      "0",
      good.substr(1),
      good + "0",
      upper,
      good.substr(0, good.size() - 2) + "zz",
      "' OR 1=1 --",
      "1/0/c0",
      hex("' OR 1=1 --"),
      hex("1/0/c0' OR '1'='1"),
      hex("1/abc/c0"),
      hex("1/-5/c0"),
      hex("1/+5/c0"),
      hex("1//c0"),
      hex("1/5/"),
      hex("1/5"),
      hex("2/5/c0"),
      hex("1/99999999999999999999/c0"),
      hex("1/5/c0 c1"),
      hex("1/5/" + std::string(129, 'a')),
      hex(std::string("1/5/c0\0", 7)),
      std::string(100000, 'a'),
  };
  for (const std::string& c : forged) {
    TaskFilter bad;
    bad.cursor = c;
    auto r = store.list_tasks(bad);
    ASSERT_FALSE(r) << "cursor accepted: " << c.substr(0, 80);
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << r.error().message;
  }
  EXPECT_EQ(raw_sql(store.path(), "SELECT count(*) FROM tasks"), "5");
  // A well-formed cursor names a position, nothing else: one made by hand
  // lists what is older than that position.
  TaskFilter by_hand;
  by_hand.cursor = hex("1/" + std::to_string(INT64_MAX) + "/c");
  auto all = store.list_tasks(by_hand);
  ASSERT_TRUE(all) << all.error().to_string();
  EXPECT_EQ(all->tasks.size(), 5u);
  f.cursor = good;
  auto next = store.list_tasks(f);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->tasks.size(), 2u);
}

// ---- unfinished, pruning ----

TEST(TaskTableTest, UnfinishedPrunableAndDelete) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  std::map<T, std::string> ids;
  for (T s : kAllTaskStatuses) {
    std::string id = "d-" + std::string(task_status_name(s));
    make_task_in(store, id, s);
    ids[s] = id;
  }
  auto unfinished = store.unfinished_tasks();
  ASSERT_TRUE(unfinished);
  ASSERT_EQ(unfinished->size(), 2u);
  EXPECT_EQ((*unfinished)[0].id, ids[T::kQueued]);  // oldest first
  EXPECT_EQ((*unfinished)[1].id, ids[T::kRunning]);

  std::int64_t later = StateStore::now_ms() + 1;
  auto prunable = store.finished_tasks_before(later, 100);
  ASSERT_TRUE(prunable);
  ASSERT_EQ(prunable->size(), 4u);
  for (std::size_t i = 1; i < prunable->size(); ++i) {
    EXPECT_LE(*(*prunable)[i - 1].finished_at_ms, *(*prunable)[i].finished_at_ms);
  }
  EXPECT_EQ(store.finished_tasks_before(later, 2)->size(), 2u);
  EXPECT_EQ(store.finished_tasks_before(later, 0)->size(), 0u);
  EXPECT_EQ(store.finished_tasks_before(*prunable->front().finished_at_ms, 100)->size(), 0u);

  for (T s : {T::kQueued, T::kRunning}) {
    auto r = store.delete_task(ids[s]);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_TRUE(store.get_task(ids[s]));
  }
  for (T s : {T::kSucceeded, T::kFailed, T::kTimedOut, T::kCancelled}) {
    ASSERT_TRUE(store.delete_task(ids[s])) << ids[s];
    EXPECT_EQ(store.get_task(ids[s]).error().code, ErrorCode::kNotFound);
    EXPECT_TRUE(store.task_transitions(ids[s])->empty()) << "transition rows outlived the task";
  }
  EXPECT_EQ(store.delete_task("d-succeeded").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(raw_sql(store.path(), "SELECT count(*) FROM task_transitions"), "3");
  // A deleted id can be submitted again: a new task.
  auto again = store.submit_task(request(ids[T::kFailed]));
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->created);
  EXPECT_EQ(*store.integrity_check(), "ok");
}

}  // namespace
}  // namespace corral
