// The state store on both backends (issue 18, ADR 0020): the same calls
// give the same answers on SQLite (a temporary file) and on PostgreSQL (a
// throwaway cluster, support/pg_cluster.h): sandboxes with idempotency
// keys and transitions, processes, tasks with inline input bytes, pools,
// diagnostics, and a store opened again (the schema migrated once). On
// PostgreSQL alone: two stores on one database (two nodes) creating with
// the same idempotency keys at once make one sandbox per key.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "store/state_store.h"
#include "support/pg_cluster.h"
#include "support/skip.h"
#include "support/store_backend.h"

namespace corral::testing {
namespace {

using S = SandboxState;

class StoreBackends : public StoreBackendTest {};

TEST_P(StoreBackends, SandboxesKeysAndTransitions) {
  auto store = open();
  ASSERT_NE(store, nullptr);
  auto c = store->create_sandbox("sb-1", R"({"b":1,"a":"x"})", "key-1", 5000);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_TRUE(c->created);
  EXPECT_EQ(c->sandbox.spec_json, R"({"a":"x","b":1})") << "stored canonical";
  // The same key and spec: the same sandbox; another spec: refused.
  auto again = store->create_sandbox("sb-2", R"({"a":"x","b":1})", "key-1", 5000);
  ASSERT_TRUE(again) << again.error().to_string();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->sandbox.id, "sb-1");
  auto other = store->create_sandbox("sb-3", R"({"a":"y"})", "key-1", std::nullopt);
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, ErrorCode::kAlreadyExists);
  auto dup = store->create_sandbox("sb-1", "{}", std::nullopt, std::nullopt);
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kAlreadyExists) << dup.error().to_string();

  auto t1 = store->transition("sb-1", S::kInitializing, "allocated");
  ASSERT_TRUE(t1) << t1.error().to_string();
  auto t2 = store->transition("sb-1", S::kReady, "up");
  ASSERT_TRUE(t2) << t2.error().to_string();
  EXPECT_GT(t2->id, t1->id);
  auto bad = store->transition("sb-1", S::kCreating, "back");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  auto ts = store->transitions("sb-1");
  ASSERT_TRUE(ts);
  ASSERT_EQ(ts->size(), 3u);
  EXPECT_FALSE((*ts)[0].from.has_value());
  EXPECT_EQ((*ts)[2].to, S::kReady);

  EXPECT_TRUE(store->set_resources("sb-1", 100000, "corral/sb-1"));
  EXPECT_TRUE(store->set_runtime("sb-1", R"({"pid":7})"));
  EXPECT_TRUE(store->set_expiry("sb-1", 9000));
  EXPECT_EQ(store->set_expiry("nope", 1).error().code, ErrorCode::kNotFound);
  auto got = store->get("sb-1");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->host_uid_base, 100000);
  EXPECT_EQ(got->cgroup, "corral/sb-1");
  EXPECT_EQ(got->runtime_json, R"({"pid":7})");
  EXPECT_EQ(got->expires_at_ms, 9000);
  auto expired = store->expired(10000);
  ASSERT_TRUE(expired) << expired.error().to_string();
  ASSERT_EQ(expired->size(), 1u);
  const S ready[] = {S::kReady};
  EXPECT_EQ(store->list(ready)->size(), 1u);
  auto t3 = store->transition("sb-1", S::kFailed, "it broke");
  ASSERT_TRUE(t3);
  EXPECT_EQ(store->get("sb-1")->error, "it broke");
  EXPECT_EQ(*store->integrity_check(), "ok");
}

TEST_P(StoreBackends, ProcessesRecordTheirEnds) {
  auto store = open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->create_sandbox("sb-p", "{}", std::nullopt, std::nullopt));
  ProcessRecord early{"p-0", "sb-p", {"true"}, ProcessState::kRunning, {}, {}, 1, {}};
  EXPECT_EQ(store->add_process(early).error().code, ErrorCode::kInvalidArgument)
      << "a sandbox that is not ready takes no process";
  ASSERT_TRUE(store->transition("sb-p", S::kInitializing, "x"));
  ASSERT_TRUE(store->transition("sb-p", S::kReady, "x"));
  ProcessRecord p{"p-1", "sb-p", {"sh", "-c", "echo 'a?b'"}, ProcessState::kStarting, {}, {},
                  5,     {}};
  p.tag = "tag-1";
  ASSERT_TRUE(store->add_process(p));
  EXPECT_EQ(store->add_process(p).error().code, ErrorCode::kAlreadyExists);
  ASSERT_TRUE(store->set_process_host("p-1", 4242, 777));
  ASSERT_TRUE(store->mark_process_timed_out("p-1"));
  auto ended = store->update_process("p-1", ProcessState::kExited, 124, 9, true, 10);
  ASSERT_TRUE(ended) << ended.error().to_string();
  EXPECT_FALSE(store->mark_process_timed_out("p-1")) << "an ended process is never updated";
  auto list = store->list_processes("sb-p");
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 1u);
  const ProcessRecord& r = list->front();
  EXPECT_EQ(r.argv, p.argv);
  EXPECT_EQ(r.state, ProcessState::kExited);
  EXPECT_EQ(r.exit_code, 124);
  EXPECT_EQ(r.signal, 9);
  EXPECT_EQ(r.host_pid, 4242);
  EXPECT_EQ(r.host_start_time, 777u);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.tag, "tag-1");
}

TEST_P(StoreBackends, TasksKeepTheirInputBytesAndHistory) {
  auto store = open();
  ASSERT_NE(store, nullptr);
  TaskRecord t;
  t.id = "task-1";
  t.ns = "default";
  t.request_json = R"({"command":["true"]})";
  const std::string bytes("\0\x01\xff binary\n", 11);
  TaskInputContent in{0, std::string(64, 'a'), bytes};
  auto s = store->submit_task(t, {in});
  ASSERT_TRUE(s) << s.error().to_string();
  auto back = store->task_input_content("task-1", 0);
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(back->bytes, bytes);
  EXPECT_EQ(store->task_input_content("task-1", 1).error().code, ErrorCode::kNotFound);
  TaskUpdate u;
  u.status = TaskStatus::kRunning;
  u.reason_for_transition = "started";
  auto running = store->update_task("task-1", u);
  ASSERT_TRUE(running) << running.error().to_string();
  u.status = TaskStatus::kSucceeded;
  u.reason_for_transition = "done";
  ASSERT_TRUE(store->update_task("task-1", u));
  auto history = store->task_transitions("task-1");
  ASSERT_TRUE(history);
  EXPECT_EQ(history->size(), 3u);
  EXPECT_EQ(store->get_task("task-1")->status, TaskStatus::kSucceeded);
  EXPECT_TRUE(store->unfinished_tasks()->empty());
  // Listing pages through a cursor, newest first.
  for (int i = 2; i <= 5; ++i) {
    TaskRecord more = t;
    more.id = "task-" + std::to_string(i);
    ASSERT_TRUE(store->submit_task(more));
  }
  TaskFilter filter;
  filter.limit = 3;
  filter.statuses = {TaskStatus::kQueued, TaskStatus::kSucceeded};
  filter.ns = "default";
  auto page = store->list_tasks(filter);
  ASSERT_TRUE(page) << page.error().to_string();
  ASSERT_EQ(page->tasks.size(), 3u);
  ASSERT_TRUE(page->next_cursor.has_value());
  filter.cursor = page->next_cursor;
  auto rest = store->list_tasks(filter);
  ASSERT_TRUE(rest) << rest.error().to_string();
  EXPECT_EQ(rest->tasks.size(), 2u);
  EXPECT_FALSE(rest->next_cursor.has_value());
  std::set<std::string> ids;
  for (const auto* p : {&*page, &*rest})
    for (const auto& task : p->tasks) ids.insert(task.id);
  EXPECT_EQ(ids.size(), 5u);
  ASSERT_TRUE(store->delete_task("task-1"));
  EXPECT_EQ(store->get_task("task-1").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store->task_input_content("task-1", 0).error().code, ErrorCode::kNotFound);
}

TEST_P(StoreBackends, PoolsDiagnosticsAndAReopenedStore) {
  {
    auto store = open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->put_pool({"py", R"({"name":"py","min":1})", 1}));
    EXPECT_EQ(store->put_pool({"py", R"({"name":"py"})", 2}).error().code,
              ErrorCode::kAlreadyExists);
    auto put = store->put_diagnostics({"sb-d", "default", 100, R"({"oom":1})"});
    ASSERT_TRUE(put) << put.error().to_string();
    ASSERT_TRUE(store->put_diagnostics({"sb-e", "default", 300, R"({})"}));
    EXPECT_EQ(*store->prune_diagnostics(200), 1u);
    ASSERT_TRUE(store->create_sandbox("sb-r", "{}", "k", std::nullopt));
  }
  auto again = open();  // the schema is there: migrated once, not again
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->list_pools()->size(), 1u);
  EXPECT_FALSE(again->get_diagnostics("sb-d")->has_value());
  EXPECT_EQ((*again->get_diagnostics("sb-e"))->diagnostics_json, "{}");
  EXPECT_TRUE(again->get("sb-r"));
  EXPECT_TRUE(*again->delete_pool("py"));
  EXPECT_FALSE(*again->delete_pool("py"));
}

INSTANTIATE_TEST_SUITE_P(, StoreBackends,
                         ::testing::Values(StoreKind::kSqlite, StoreKind::kPostgres),
                         store_kind_name);

// Two daemons' stores on one PostgreSQL database, creating with the same
// idempotency keys from several threads each: exactly one sandbox per key,
// and every caller gets that one (the write lock spans the lookup and the
// insert, across connections).
TEST(StoreOnPostgres, TwoStoresCreatingWithTheSameKeysMakeOneSandboxEach) {
  auto cluster = PgCluster::start();
  if (!cluster) CORRAL_SKIP_OR_FAIL("no PostgreSQL cluster: " + cluster.error().message);
  auto url = (*cluster)->create_database("shared");
  ASSERT_TRUE(url) << url.error().to_string();
  std::vector<std::unique_ptr<StateStore>> stores;
  for (int i = 0; i < 2; ++i) {
    auto s = StateStore::open(*url);
    ASSERT_TRUE(s) << s.error().to_string();
    stores.push_back(std::make_unique<StateStore>(std::move(*s)));
  }
  constexpr int kKeys = 20;
  std::mutex mu;
  std::map<std::string, std::set<std::string>> seen;  // key -> sandbox ids answered
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      StateStore& store = *stores[t % 2];
      for (int k = 0; k < kKeys; ++k) {
        const std::string key = "key-" + std::to_string(k);
        const std::string id = "sb-" + std::to_string(t) + "-" + std::to_string(k);
        auto r = store.create_sandbox(id, R"({"k":)" + std::to_string(k) + "}", key, std::nullopt);
        if (!r) {
          if (++failures == 1) ADD_FAILURE() << r.error().to_string();
          continue;
        }
        std::lock_guard lock(mu);
        seen[key].insert(r->sandbox.id);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures, 0);
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(kKeys));
  for (const auto& [key, ids] : seen) EXPECT_EQ(ids.size(), 1u) << key;
  EXPECT_EQ(stores[0]->list()->size(), static_cast<std::size_t>(kKeys));
}

}  // namespace
}  // namespace corral::testing
