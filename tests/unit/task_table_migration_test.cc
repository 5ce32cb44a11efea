// The schema 4 -> 5 migration (REQUIREMENTS.md D6; issue 15 point 3) on a
// state.db written by corral before the task table existed
// (tests/fixtures/state-v4, made by the schema-4 sources: see its README):
// every old row is kept as it was, the task tables arrive and work, and a
// database of a newer schema is still refused.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "store/state_store.h"
#include "support/temp_dir.h"

namespace corral {
namespace {

using S = SandboxState;

const std::string kFixture =
    std::string(CORRAL_TEST_SOURCE_DIR) + "/tests/fixtures/state-v4/state.db";

class TempDir : public ::corral::testing::TempDir {
 public:
  TempDir() : ::corral::testing::TempDir("corral-task-migration") {}
};

// Every row of `sql`'s result, each column with its SQLite type, on a
// connection of its own (read-only): what the migration must not change.
std::vector<std::string> rows(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  std::vector<std::string> out;
  while (st != nullptr && sqlite3_step(st) == SQLITE_ROW) {
    std::string row;
    for (int c = 0; c < sqlite3_column_count(st); ++c) {
      int type = sqlite3_column_type(st, c);
      row += std::to_string(type) + ":";
      if (type != SQLITE_NULL) {
        const unsigned char* p = sqlite3_column_text(st, c);
        row.append(reinterpret_cast<const char*>(p),
                   static_cast<std::size_t>(sqlite3_column_bytes(st, c)));
      }
      row += "|";
    }
    out.push_back(std::move(row));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

std::string one(const std::string& path, const std::string& sql) {
  auto r = rows(path, sql);
  if (r.empty()) return "";
  std::string v = r.front();
  // "<type>:<value>|" -> "<value>"
  return v.substr(v.find(':') + 1, v.size() - v.find(':') - 2);
}

// The schema-4 columns of the schema-4 tables, in a fixed order.
const char* const kOldTables[] = {
    "SELECT id, state, spec_json, idempotency_key, host_uid_base, cgroup, created_at, "
    "updated_at, expires_at, error, runtime_json FROM sandboxes ORDER BY rowid",
    "SELECT id, sandbox_id, from_state, to_state, at, reason FROM transitions ORDER BY id",
    "SELECT id, sandbox_id, argv_json, state, exit_code, signal, started_at, ended_at, "
    "deadline_at, host_pid, host_start_time, timed_out FROM processes ORDER BY rowid",
};

// The fixture is in WAL mode (as the daemon left it): even a read-only
// open would make -wal and -shm files beside it, so only copies are opened.
TEST(TaskTableMigration, FixtureIsOfSchema4) {
  ASSERT_TRUE(std::filesystem::exists(kFixture)) << kFixture;
  TempDir dir;
  std::string path = dir.file("state.db");
  std::filesystem::copy_file(kFixture, path);
  EXPECT_EQ(one(path, "PRAGMA user_version"), "4")
      << "the fixture was migrated in place; restore it from git";
  EXPECT_EQ(one(path, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(one(path, "SELECT count(*) FROM sqlite_master WHERE name = 'tasks'"), "0");
  EXPECT_FALSE(std::filesystem::exists(kFixture + "-wal"))
      << "something opened the fixture in place";
}

TEST(TaskTableMigration, Schema4DataDirOpensWithoutLoss) {
  TempDir dir;
  std::string path = dir.file("state.db");
  std::filesystem::copy_file(kFixture, path);
  std::vector<std::vector<std::string>> before;
  for (const char* sql : kOldTables) before.push_back(rows(path, sql));
  ASSERT_EQ(before[0].size(), 8u);   // sandboxes
  ASSERT_EQ(before[1].size(), 28u);  // transitions
  ASSERT_EQ(before[2].size(), 5u);   // processes

  {
    auto opened = StateStore::open(path);
    ASSERT_TRUE(opened) << opened.error().to_string();
    StateStore& store = *opened;
    EXPECT_EQ(*store.pragma("user_version"), std::to_string(StateStore::kSchemaVersion));
    EXPECT_EQ(*store.integrity_check(), "ok");

    // What the old rows say, read through today's store.
    auto ready = store.get("sb-ready");
    ASSERT_TRUE(ready) << ready.error().to_string();
    EXPECT_EQ(ready->state, S::kReady);
    EXPECT_EQ(ready->idempotency_key, "key-ready");
    EXPECT_EQ(ready->host_uid_base, 165536);
    EXPECT_EQ(ready->cgroup, "corral.slice/sb-ready");
    EXPECT_EQ(ready->runtime_json, R"({"init_pid":4242,"init_start_time":987654})");
    EXPECT_EQ(ready->expires_at_ms, 4102444900000);
    EXPECT_EQ(store.get("sb-initializing")->spec_json, R"({"env":{"GREETING":"grüß dich \"x\""}})");
    EXPECT_EQ(store.transitions("sb-cleaned")->size(), 7u);
    EXPECT_EQ(store.get("sb-failed")->error, "image 'missing' not found");
    EXPECT_TRUE(*store.idempotency_key_released(*store.get("sb-failed")));
    EXPECT_EQ(store.sandboxes_to_reconcile()->size(), 7u);
    auto procs = store.list_processes("sb-running");
    ASSERT_TRUE(procs) << procs.error().to_string();
    ASSERT_EQ(procs->size(), 5u);
    for (const ProcessRecord& p : *procs) {
      if (p.id == "p-timed-out") {
        EXPECT_TRUE(p.timed_out);
        EXPECT_EQ(p.exit_code, 124);
        EXPECT_EQ(p.signal, 9);
        EXPECT_EQ(p.host_pid, 31338);
        EXPECT_EQ(p.host_start_time, 123456790u);
      }
      if (p.id == "p-running") {
        EXPECT_EQ(p.state, ProcessState::kRunning);
      }
      if (p.id == "p-lost") {
        EXPECT_EQ(p.state, ProcessState::kLost);
      }
    }
    // The old tables still take writes.
    ASSERT_TRUE(store.transition("sb-ready", S::kDestroying, "after the upgrade"));
    ASSERT_TRUE(store.transition("sb-ready", S::kCleaned, "after the upgrade"));

    // The task tables are there and work.
    TaskRecord t;
    t.id = "after-upgrade";
    t.request_json = R"({"command":["true"]})";
    auto s = store.submit_task(t);
    ASSERT_TRUE(s) << s.error().to_string();
    EXPECT_TRUE(s->created);
    TaskUpdate u;
    u.status = TaskStatus::kRunning;
    u.sandbox_id = "sb-running";
    ASSERT_TRUE(store.update_task("after-upgrade", u));
    auto page = store.list_tasks(TaskFilter{});
    ASSERT_TRUE(page) << page.error().to_string();
    ASSERT_EQ(page->tasks.size(), 1u);
    EXPECT_EQ(page->tasks[0].status, TaskStatus::kRunning);
    EXPECT_EQ(store.task_transitions("after-upgrade")->size(), 2u);
  }
  EXPECT_EQ(one(path, "SELECT strict FROM pragma_table_list WHERE name = 'tasks'"), "1");
  EXPECT_EQ(one(path, "SELECT strict FROM pragma_table_list WHERE name = 'task_transitions'"), "1");

  // Every old row as it was, but the two transitions written above.
  std::vector<std::vector<std::string>> after;
  for (const char* sql : kOldTables) after.push_back(rows(path, sql));
  EXPECT_EQ(after[0].size(), before[0].size());
  for (std::size_t i = 0; i < before[0].size(); ++i) {
    if (before[0][i].find("sb-ready") != std::string::npos) continue;  // moved on above
    EXPECT_EQ(after[0][i], before[0][i]);
  }
  ASSERT_EQ(after[1].size(), before[1].size() + 2);
  for (std::size_t i = 0; i < before[1].size(); ++i) EXPECT_EQ(after[1][i], before[1][i]);
  EXPECT_EQ(after[2], before[2]);

  // Reopening does not migrate again.
  {
    auto again = StateStore::open(path);
    ASSERT_TRUE(again) << again.error().to_string();
    EXPECT_EQ(again->get_task("after-upgrade")->status, TaskStatus::kRunning);
    EXPECT_EQ(again->list()->size(), 8u);
  }
}

TEST(TaskTableMigration, NewerSchemaIsStillRefused) {
  // One past what this corral knows (schema 8 since the pools table).
  const std::string newer_version = std::to_string(StateStore::kSchemaVersion + 1);
  TempDir dir;
  std::string path = dir.file("state.db");
  std::filesystem::copy_file(kFixture, path);
  { ASSERT_TRUE(StateStore::open(path)); }
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const std::string bump = "PRAGMA user_version = " + newer_version;
    ASSERT_EQ(sqlite3_exec(db, bump.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto newer = StateStore::open(path);
  ASSERT_FALSE(newer);
  EXPECT_EQ(newer.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(newer.error().message.find("schema version " + newer_version), std::string::npos)
      << newer.error().message;
  EXPECT_EQ(one(path, "PRAGMA user_version"), newer_version);
  EXPECT_EQ(one(path, "SELECT count(*) FROM sandboxes"), "8");
}

}  // namespace
}  // namespace corral

namespace corral {
namespace {

// Schema 11 (issue 18): tasks stored before nodes existed hold no node. On
// an SQLite file (one daemon's) the unfinished ones are the node's that
// opens it, whatever its id, so a running one is resumed after the upgrade.
TEST(TaskTableMigration, UnfinishedTasksOfBeforeNodesAreTheOpeningNodes) {
  TempDir dir;
  const std::string path = dir.file("state.db");
  {
    auto store = StateStore::open(path);
    ASSERT_TRUE(store) << store.error().to_string();
    for (const char* id : {"was-running", "was-queued", "was-done"}) {
      TaskRecord t;
      t.id = id;
      t.request_json = "{}";
      ASSERT_TRUE(store->submit_task(t));
    }
    TaskUpdate run;
    run.status = TaskStatus::kRunning;
    run.stage = TaskStage::kExecute;
    ASSERT_TRUE(store->update_task("was-running", run));
    ASSERT_TRUE(store->update_task("was-done", run));
    TaskUpdate done;
    done.status = TaskStatus::kSucceeded;
    ASSERT_TRUE(store->update_task("was-done", done));
  }
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "UPDATE tasks SET node = NULL", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = StateStore::open(path);
  ASSERT_TRUE(store) << store.error().to_string();
  ASSERT_TRUE(store->set_node("node-7"));
  auto unfinished = store->unfinished_tasks();
  ASSERT_TRUE(unfinished) << unfinished.error().to_string();
  ASSERT_EQ(unfinished->size(), 2u);
  for (const auto& t : *unfinished) EXPECT_EQ(t.node, std::optional<std::string>("node-7")) << t.id;
  EXPECT_FALSE(store->get_task("was-done")->node.has_value()) << "a finished task is left as it is";
}

}  // namespace
}  // namespace corral
