// The diagnostics table (REQUIREMENTS.md T1, issue 16 point 4): the
// schema 6 -> 7 migration on a literal schema-6 database (every table and
// index as corral wrote them before issue 16, with rows in each), and the
// table's put / get / prune.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>
#include <vector>

#include "store/state_store.h"
#include "store_test_support.h"
#include "support/temp_dir.h"

namespace corral {
namespace {

using store_test::open_or_die;
using store_test::raw_sql;

class TempDir : public ::corral::testing::TempDir {
 public:
  TempDir() : ::corral::testing::TempDir("corral-diag-table") {}
};

// Schema 6 exactly as migrations 0 -> 6 built it (state_store.cc at
// 24e1596), then one row in each table, and user_version 6.
constexpr const char* kSchema6 = R"sql(
CREATE TABLE sandboxes (
  id TEXT PRIMARY KEY NOT NULL,
  state TEXT NOT NULL CHECK (state IN
    ('creating','initializing','ready','running','destroying','cleaned','failed')),
  spec_json TEXT NOT NULL,
  idempotency_key TEXT UNIQUE,
  host_uid_base INTEGER,
  cgroup TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  expires_at INTEGER,
  error TEXT
) STRICT;
CREATE INDEX sandboxes_by_state ON sandboxes(state);
CREATE INDEX sandboxes_by_expiry ON sandboxes(expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE transitions (
  id INTEGER PRIMARY KEY,
  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,
  from_state TEXT CHECK (from_state IN
    ('creating','initializing','ready','running','destroying','cleaned','failed')),
  to_state TEXT NOT NULL CHECK (to_state IN
    ('creating','initializing','ready','running','destroying','cleaned','failed')),
  at INTEGER NOT NULL,
  reason TEXT NOT NULL
) STRICT;
CREATE INDEX transitions_by_sandbox ON transitions(sandbox_id, id);
CREATE TABLE processes (
  id TEXT PRIMARY KEY NOT NULL,
  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,
  argv_json TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('starting','running','exited','lost')),
  exit_code INTEGER,
  signal INTEGER,
  started_at INTEGER NOT NULL,
  ended_at INTEGER
) STRICT;
CREATE INDEX processes_by_sandbox ON processes(sandbox_id);

ALTER TABLE sandboxes ADD COLUMN runtime_json TEXT;

ALTER TABLE processes ADD COLUMN deadline_at INTEGER;
ALTER TABLE processes ADD COLUMN host_pid INTEGER CHECK (host_pid > 0);
ALTER TABLE processes ADD COLUMN host_start_time INTEGER CHECK (host_start_time > 0);

ALTER TABLE processes ADD COLUMN timed_out INTEGER NOT NULL DEFAULT 0 CHECK (timed_out IN (0, 1));
UPDATE processes SET timed_out = 1
  WHERE state = 'exited' AND exit_code = 124 AND signal IS NOT NULL;

CREATE TABLE tasks (
  id TEXT PRIMARY KEY NOT NULL,
  ns TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN
    ('queued','running','succeeded','failed','timed_out','cancelled')),
  stage TEXT NOT NULL,
  request_json TEXT NOT NULL,
  resolved_json TEXT NOT NULL DEFAULT '',
  exit_code INTEGER,
  signal INTEGER,
  reason TEXT,
  detail TEXT,
  sandbox_id TEXT,
  process_id TEXT,
  outputs_json TEXT NOT NULL DEFAULT '[]',
  snapshot_id TEXT,
  snapshot_error TEXT,
  attempt INTEGER NOT NULL DEFAULT 1 CHECK (attempt >= 1),
  replay_of TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  started_at INTEGER,
  finished_at INTEGER,
  CHECK ((finished_at IS NULL) = (status IN ('queued','running')))
) STRICT;
CREATE INDEX tasks_by_status ON tasks(status);
CREATE INDEX tasks_by_created ON tasks(created_at, id);
CREATE INDEX tasks_by_finished ON tasks(finished_at) WHERE finished_at IS NOT NULL;
CREATE TABLE task_transitions (
  id INTEGER PRIMARY KEY,
  task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
  from_status TEXT CHECK (from_status IN
    ('queued','running','succeeded','failed','timed_out','cancelled')),
  to_status TEXT NOT NULL CHECK (to_status IN
    ('queued','running','succeeded','failed','timed_out','cancelled')),
  stage TEXT NOT NULL,
  attempt INTEGER NOT NULL CHECK (attempt >= 1),
  at INTEGER NOT NULL,
  reason TEXT NOT NULL
) STRICT;
CREATE INDEX task_transitions_by_task ON task_transitions(task_id, id);

CREATE TABLE task_inputs (
  task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL CHECK (idx >= 0),
  sha256 TEXT NOT NULL CHECK (length(sha256) = 64),
  content BLOB NOT NULL,
  PRIMARY KEY (task_id, idx)
) STRICT;
INSERT INTO sandboxes (id, state, spec_json, idempotency_key, host_uid_base, cgroup, created_at,
                       updated_at, expires_at, error, runtime_json)
  VALUES ('sb-old', 'cleaned', '{"limits":{"memory":"64Mi"}}', 'key-1', 165536, 'sb-old', 10, 20,
          NULL, NULL, '{"init_pid":1234}'),
         ('sb-live', 'ready', '{}', NULL, 231072, 'sb-live', 30, 31, 4102444800000, NULL, NULL);
INSERT INTO transitions (sandbox_id, from_state, to_state, at, reason)
  VALUES ('sb-old', NULL, 'creating', 10, 'create'),
         ('sb-old', 'creating', 'initializing', 11, 'x'),
         ('sb-old', 'initializing', 'ready', 12, 'ready'),
         ('sb-old', 'ready', 'destroying', 19, 'deleted'),
         ('sb-old', 'destroying', 'cleaned', 20, 'teardown verified');
INSERT INTO processes (id, sandbox_id, argv_json, state, exit_code, signal, started_at, ended_at,
                       deadline_at, host_pid, host_start_time, timed_out)
  VALUES ('p-1', 'sb-old', '["sleep","9"]', 'exited', 124, 9, 13, 18, 17, 4242, 777, 1);
INSERT INTO tasks (id, ns, status, stage, request_json, created_at, updated_at, started_at,
                   finished_at, sandbox_id, reason)
  VALUES ('t-1', 'default', 'failed', 'execute', '{"command":["false"]}', 40, 41, 40, 41,
          'sb-old', 'exit_code');
INSERT INTO task_transitions (task_id, from_status, to_status, stage, attempt, at, reason)
  VALUES ('t-1', NULL, 'queued', 'none', 1, 40, 'submitted');
INSERT INTO task_inputs (task_id, idx, sha256, content)
  VALUES ('t-1', 0, '2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824', X'68656c6c6f');
PRAGMA user_version = 6;
)sql";

void write_schema6_database(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, kSchema6, nullptr, nullptr, &err), SQLITE_OK)
      << (err != nullptr ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

// Every row of `sql`, each column as text joined by '|': what the
// migration must not change.
std::vector<std::string> rows(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  std::vector<std::string> out;
  while (st != nullptr && sqlite3_step(st) == SQLITE_ROW) {
    std::string row;
    for (int c = 0; c < sqlite3_column_count(st); ++c) {
      row += std::to_string(sqlite3_column_type(st, c)) + ":";
      if (const unsigned char* p = sqlite3_column_text(st, c); p != nullptr)
        row += reinterpret_cast<const char*>(p);
      row += "|";
    }
    out.push_back(std::move(row));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

const char* const kOldTables[] = {
    // sandboxes and tasks: their columns of then (schema 11 added node, lost_at).
    ("SELECT id, state, spec_json, idempotency_key, host_uid_base, cgroup, created_at, "
     "updated_at, expires_at, error, runtime_json FROM sandboxes ORDER BY rowid"),
    "SELECT * FROM transitions ORDER BY id",
    // processes: its columns of then (schema 10 added tag).
    ("SELECT id, sandbox_id, argv_json, state, exit_code, signal, started_at, ended_at, "
     "deadline_at, host_pid, host_start_time, timed_out FROM processes ORDER BY rowid"),
    ("SELECT id, ns, status, stage, request_json, resolved_json, exit_code, signal, reason, "
     "detail, sandbox_id, process_id, outputs_json, snapshot_id, snapshot_error, attempt, "
     "replay_of, created_at, updated_at, started_at, finished_at FROM tasks ORDER BY rowid"),
    "SELECT * FROM task_transitions ORDER BY id",
    "SELECT task_id, idx, sha256, hex(content) FROM task_inputs ORDER BY rowid",
};

TEST(DiagnosticsTable, MigratesFromSchema6WithoutLoss) {
  TempDir dir;
  const std::string path = dir.file("state.db");
  write_schema6_database(path);
  ASSERT_EQ(raw_sql(path, "PRAGMA user_version"), "6");
  ASSERT_EQ(raw_sql(path, "SELECT count(*) FROM sqlite_master WHERE name = 'sandbox_diagnostics'"),
            "0");
  std::vector<std::vector<std::string>> before;
  for (const char* sql : kOldTables) before.push_back(rows(path, sql));
  for (const auto& t : before) ASSERT_FALSE(t.empty());
  {
    StateStore store = open_or_die(path);
    EXPECT_GE(StateStore::kSchemaVersion, 7);  // 8: the pools (pool_table_test.cc)
    EXPECT_EQ(*store.pragma("user_version"), std::to_string(StateStore::kSchemaVersion));
    EXPECT_EQ(*store.integrity_check(), "ok");
    // The old rows read through today's store.
    auto old = store.get("sb-old");
    ASSERT_TRUE(old) << old.error().to_string();
    EXPECT_EQ(old->state, SandboxState::kCleaned);
    EXPECT_EQ(store.transitions("sb-old")->size(), 5u);
    EXPECT_TRUE(store.list_processes("sb-old")->at(0).timed_out);
    EXPECT_EQ(store.get_task("t-1")->sandbox_id, "sb-old");
    EXPECT_EQ(store.task_input_content("t-1", 0)->bytes, "hello");
    // The new table works on the migrated database.
    EXPECT_FALSE(store.get_diagnostics("sb-old")->has_value());
    ASSERT_TRUE(store.put_diagnostics({"sb-old", "default", 20, R"({"oom_kills":1})"}));
    auto got = store.get_diagnostics("sb-old");
    ASSERT_TRUE(got && got->has_value());
    EXPECT_EQ((*got)->diagnostics_json, R"({"oom_kills":1})");
  }
  EXPECT_EQ(
      raw_sql(path, "SELECT strict FROM pragma_table_list WHERE name = 'sandbox_diagnostics'"),
      "1");
  EXPECT_EQ(raw_sql(path,
                    "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = "
                    "'sandbox_diagnostics_by_time'"),
            "1");
  for (std::size_t i = 0; i < std::size(kOldTables); ++i)
    EXPECT_EQ(rows(path, kOldTables[i]), before[i]) << kOldTables[i];
  // Reopening does not migrate again, and keeps the row.
  StateStore again = open_or_die(path);
  EXPECT_TRUE(again.get_diagnostics("sb-old")->has_value());
}

TEST(DiagnosticsTable, PutReplacesGetReadsPruneRemovesOnlyOlderRows) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  ASSERT_TRUE(store.put_diagnostics({"sb-a", "team-a", 1000, R"({"v":1})"}));
  ASSERT_TRUE(store.put_diagnostics({"sb-a", "team-a", 1500, R"({"v":2})"}));  // replaced
  ASSERT_TRUE(store.put_diagnostics({"sb-b", "default", 2000, R"({"v":3})"}));
  auto a = store.get_diagnostics("sb-a");
  ASSERT_TRUE(a && a->has_value());
  EXPECT_EQ((*a)->ns, "team-a");
  EXPECT_EQ((*a)->recorded_at_ms, 1500);
  EXPECT_EQ((*a)->diagnostics_json, R"({"v":2})");
  EXPECT_FALSE(store.get_diagnostics("sb-none")->has_value());

  auto pruned = store.prune_diagnostics(2000);  // strictly before
  ASSERT_TRUE(pruned) << pruned.error().to_string();
  EXPECT_EQ(*pruned, 1u);
  EXPECT_FALSE(store.get_diagnostics("sb-a")->has_value());
  EXPECT_TRUE(store.get_diagnostics("sb-b")->has_value());
  EXPECT_EQ(*store.prune_diagnostics(2000), 0u);
}

TEST(DiagnosticsTable, RefusesWhatIsNotAJsonObjectOrHasNoNamespace) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  for (const char* bad : {"", "[1]", "{", "3"}) {
    auto st = store.put_diagnostics({"sb", "default", 1, bad});
    ASSERT_FALSE(st) << bad;
    EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  }
  EXPECT_FALSE(store.put_diagnostics({"sb", "", 1, "{}"}));
  EXPECT_FALSE(store.put_diagnostics({"", "default", 1, "{}"}));
  EXPECT_FALSE(store.get_diagnostics("sb")->has_value());
}

}  // namespace
}  // namespace corral
