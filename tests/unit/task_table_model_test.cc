// The task table (REQUIREMENTS.md D6) against a model: random submits (the
// same request, another one), updates (any status, stage and reason) and
// deletes, each checked against what a small in-memory model of the rules in
// state_store.h says should happen, and the whole table compared with the
// model as it goes.
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "store/state_store.h"
#include "store/task_record.h"
#include "task_test_support.h"

namespace corral {
namespace {

using namespace task_test;  // NOLINT(google-build-using-namespace): the tests' helpers

struct ModelTask {
  std::string body;
  T status = T::kQueued;
  TaskStage stage = TaskStage::kNone;
  int attempt = 1;
  std::optional<std::string> reason;
  std::size_t rows = 1;
};

// Edges written out again, not read from task_transition_table().
bool model_allows(T from, T to) {
  switch (from) {
    case T::kQueued:
      return to == T::kRunning || to == T::kCancelled || to == T::kFailed;
    case T::kRunning:
      return to == T::kSucceeded || to == T::kFailed || to == T::kTimedOut || to == T::kCancelled;
    default:
      return false;  // failed -> queued is a submit's, not an update's
  }
}

bool model_finished(T s) { return s != T::kQueued && s != T::kRunning; }

TEST(TaskTableModel, RandomOperationsFollowTheRules) {
  TempDir dir;
  auto opened = StateStore::open(dir.file("state.db"), StateStore::Durability::kProcessCrash);
  ASSERT_TRUE(opened) << opened.error().to_string();
  StateStore& store = *opened;
  std::mt19937 rng(15);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  const std::array<std::string, 6> ids = {"a", "b", "c", "d", "e", "f"};
  const std::array<std::string, 3> bodies = {R"({"command":["true"]})", R"({"command":["false"]})",
                                             R"({"sh":"exit 3","env":{"A":"1"}})"};
  const std::array<std::string, 3> reasons = {"storage_unavailable", "exit_code", "timeout"};
  const std::array<TaskStage, 4> stages = {TaskStage::kCreate, TaskStage::kExecute,
                                           TaskStage::kCollect, TaskStage::kDone};
  std::map<std::string, ModelTask> model;
  std::map<std::string, int> counts;

  for (int step = 0; step < 2500; ++step) {
    const std::string& id = ids[static_cast<std::size_t>(pick(6))];
    auto it = model.find(id);
    int op = pick(10);
    std::string where = "step " + std::to_string(step) + " on " + id;
    if (op < 3) {
      const std::string& body = bodies[static_cast<std::size_t>(pick(3))];
      auto r = store.submit_task(request(id, body));
      if (it == model.end()) {
        ASSERT_TRUE(r) << where << ": " << r.error().to_string();
        EXPECT_TRUE(r->created) << where;
        model[id] = ModelTask{body};
        ++counts["created"];
      } else if (it->second.body != body) {
        ASSERT_FALSE(r) << where;
        EXPECT_EQ(r.error().code, ErrorCode::kAlreadyExists) << where;
        ++counts["conflict"];
      } else {
        ASSERT_TRUE(r) << where << ": " << r.error().to_string();
        EXPECT_FALSE(r->created) << where;
        ModelTask& m = it->second;
        bool retry = m.status == T::kFailed && m.reason == "storage_unavailable";
        EXPECT_EQ(r->retried, retry) << where;
        if (retry) {
          m.status = T::kQueued;
          m.stage = TaskStage::kNone;
          m.attempt += 1;
          m.reason.reset();
          m.rows += 1;
          ++counts["retried"];
        } else {
          ++counts["repeat"];
        }
      }
    } else if (op < 9) {
      TaskUpdate u;
      if (pick(4) != 0) u.status = kAllTaskStatuses[static_cast<std::size_t>(pick(6))];
      if (pick(2) == 0) u.stage = stages[static_cast<std::size_t>(pick(4))];
      if (pick(2) == 0) u.reason = reasons[static_cast<std::size_t>(pick(3))];
      auto r = store.update_task(id, u);
      if (it == model.end()) {
        ASSERT_FALSE(r) << where;
        EXPECT_EQ(r.error().code, ErrorCode::kNotFound) << where;
        continue;
      }
      ModelTask& m = it->second;
      bool changes_status = u.status && *u.status != m.status;
      if (changes_status && !model_allows(m.status, *u.status)) {
        ASSERT_FALSE(r) << where << ": " << task_status_name(m.status) << " -> "
                        << task_status_name(*u.status) << " was allowed";
        EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << where;
        ++counts["refused"];
        continue;
      }
      ASSERT_TRUE(r) << where << ": " << r.error().to_string();
      bool changes_stage = u.stage && *u.stage != m.stage;
      if (changes_status) m.status = *u.status;
      if (u.stage) m.stage = *u.stage;
      if (u.reason) m.reason = u.reason;
      if (changes_status || changes_stage) m.rows += 1;
      ++counts[changes_status ? "moved" : "updated"];
    } else {
      auto r = store.delete_task(id);
      if (it == model.end()) {
        ASSERT_FALSE(r) << where;
        EXPECT_EQ(r.error().code, ErrorCode::kNotFound) << where;
      } else if (!model_finished(it->second.status)) {
        ASSERT_FALSE(r) << where;
        EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << where;
      } else {
        ASSERT_TRUE(r) << where << ": " << r.error().to_string();
        model.erase(it);
        ++counts["deleted"];
      }
    }

    // The whole table against the model.
    for (const auto& [mid, m] : model) {
      auto t = store.get_task(mid);
      ASSERT_TRUE(t) << where << ": " << mid << " lost";
      EXPECT_EQ(t->status, m.status) << where << " " << mid;
      EXPECT_EQ(t->stage, m.stage) << where << " " << mid;
      EXPECT_EQ(t->attempt, m.attempt) << where << " " << mid;
      EXPECT_EQ(t->reason, m.reason) << where << " " << mid;
      EXPECT_EQ(t->finished_at_ms.has_value(), model_finished(m.status)) << where << " " << mid;
      EXPECT_EQ(t->started_at_ms.has_value() && m.status == T::kQueued, false)
          << where << " " << mid << ": a queued attempt has a start time";
      auto rows = store.task_transitions(mid);
      ASSERT_TRUE(rows);
      ASSERT_EQ(rows->size(), m.rows) << where << " " << mid;
      EXPECT_EQ(rows->back().to, m.status) << where << " " << mid;
      EXPECT_EQ(rows->back().attempt, m.attempt) << where << " " << mid;
    }
    if (step % 50 == 0) {
      auto page = store.list_tasks(TaskFilter{});
      ASSERT_TRUE(page);
      std::set<std::string> listed;
      for (const auto& t : page->tasks) listed.insert(t.id);
      std::set<std::string> expected;
      std::size_t unfinished = 0;
      for (const auto& [mid, m] : model) {
        expected.insert(mid);
        if (!model_finished(m.status)) ++unfinished;
      }
      EXPECT_EQ(listed, expected) << where;
      EXPECT_EQ(store.unfinished_tasks()->size(), unfinished) << where;
    }
  }
  // Every kind of outcome happened, or the model proved little.
  for (const char* kind :
       {"created", "conflict", "retried", "repeat", "refused", "moved", "updated", "deleted"}) {
    EXPECT_GT(counts[kind], 5) << kind;
  }
}

}  // namespace
}  // namespace corral
