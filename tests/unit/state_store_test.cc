// StateStore on temporary SQLite files: schema and reopen, idempotency keys,
// every pair of states against transition_allowed(), atomicity of a failed
// transition, durability when the writer is SIGKILLed at random moments,
// and use from several threads.
#include "store/state_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "store_test_support.h"
#include "support/sigkill_child.h"
#include "support/temp_dir.h"

namespace corral {
namespace {

using S = SandboxState;

class TempDir : public ::corral::testing::TempDir {
 public:
  TempDir() : ::corral::testing::TempDir("corral-store-unit") {}
};

using store_test::open_or_die;
using store_test::raw_sql;

// The shortest path of allowed transitions from kCreating to `target`.
std::vector<S> path_to(S target) {
  std::map<S, S> prev;
  std::deque<S> queue{S::kCreating};
  std::set<S> seen{S::kCreating};
  while (!queue.empty()) {
    S cur = queue.front();
    queue.pop_front();
    if (cur == target) break;
    for (const TransitionEdge& e : transition_table()) {
      if (e.from == cur && seen.insert(e.to).second) {
        prev[e.to] = cur;
        queue.push_back(e.to);
      }
    }
  }
  std::vector<S> path;
  for (S s = target; s != S::kCreating; s = prev.at(s)) path.insert(path.begin(), s);
  return path;
}

bool reaches_cleaned(S from) {
  std::set<S> seen{from};
  std::deque<S> queue{from};
  while (!queue.empty()) {
    S cur = queue.front();
    queue.pop_front();
    if (cur == S::kCleaned) return true;
    for (const TransitionEdge& e : transition_table()) {
      if (e.from == cur && seen.insert(e.to).second) queue.push_back(e.to);
    }
  }
  return false;
}

// Every sandbox's transitions form a chain from creation, and its state is
// the last one's to_state.
void expect_consistent(StateStore& store) {
  auto all = store.list();
  ASSERT_TRUE(all) << all.error().to_string();
  for (const SandboxRecord& sb : *all) {
    auto ts = store.transitions(sb.id);
    ASSERT_TRUE(ts) << ts.error().to_string();
    ASSERT_FALSE(ts->empty()) << sb.id;
    EXPECT_FALSE(ts->front().from.has_value()) << sb.id;
    EXPECT_EQ(ts->front().to, S::kCreating) << sb.id;
    for (std::size_t i = 1; i < ts->size(); ++i) {
      ASSERT_TRUE((*ts)[i].from.has_value());
      EXPECT_EQ(*(*ts)[i].from, (*ts)[i - 1].to) << sb.id << " row " << i;
      EXPECT_TRUE(transition_allowed(*(*ts)[i].from, (*ts)[i].to));
    }
    EXPECT_EQ(sb.state, ts->back().to) << sb.id;
  }
}

TEST(SandboxStateTest, NamesRoundTrip) {
  for (S s : kAllSandboxStates) {
    auto back = parse_sandbox_state(sandbox_state_name(s));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, s);
  }
  EXPECT_FALSE(parse_sandbox_state("paused").has_value());
}

TEST(SandboxStateTest, TableShape) {
  std::set<std::pair<S, S>> edges;
  for (const TransitionEdge& e : transition_table()) {
    EXPECT_TRUE(edges.insert({e.from, e.to}).second) << "duplicate edge";
    EXPECT_NE(e.from, e.to);
    EXPECT_FALSE(e.why.empty());
  }
  for (S s : kAllSandboxStates) {
    // kFailed is reachable from every state that is not terminal.
    EXPECT_EQ(transition_allowed(s, S::kFailed), !is_terminal(s)) << sandbox_state_name(s);
    // Every state is reachable from kCreating, and every state but kCleaned
    // (which has no way out) leads to kCleaned.
    if (s != S::kCreating) {
      EXPECT_FALSE(path_to(s).empty()) << sandbox_state_name(s);
    }
    if (s != S::kCleaned) {
      EXPECT_TRUE(reaches_cleaned(s)) << sandbox_state_name(s);
    }
  }
  for (S to : kAllSandboxStates) {
    EXPECT_FALSE(transition_allowed(S::kCleaned, to));
    EXPECT_EQ(transition_allowed(S::kFailed, to), to == S::kDestroying);
  }
  EXPECT_EQ(allowed_targets(S::kCleaned), "none");
  EXPECT_EQ(allowed_targets(S::kRunning), "ready, destroying, failed");
}

TEST(StateStoreTest, CreatesSchemaAndReopens) {
  TempDir dir;
  std::string path = dir.file("state.db");
  {
    StateStore store = open_or_die(path);
    EXPECT_EQ(*store.pragma("journal_mode"), "wal");
    EXPECT_EQ(*store.pragma("synchronous"), "2");  // FULL
    EXPECT_EQ(*store.pragma("foreign_keys"), "1");
    EXPECT_EQ(*store.pragma("user_version"), std::to_string(StateStore::kSchemaVersion));
    EXPECT_FALSE(store.pragma("writable_schema").has_value());
    auto c = store.create_sandbox("sb-1", R"({"b": 1, "a": [1, 2]})", "key-1", 1234);
    ASSERT_TRUE(c) << c.error().to_string();
    EXPECT_TRUE(c->created);
    EXPECT_EQ(c->sandbox.spec_json, R"({"a":[1,2],"b":1})");
    ASSERT_TRUE(store.set_resources("sb-1", 100000, "corral/sb-1"));
  }
  EXPECT_EQ(raw_sql(path, "SELECT strict FROM pragma_table_list WHERE name = 'sandboxes'"), "1");
  StateStore store = open_or_die(path);
  auto sb = store.get("sb-1");
  ASSERT_TRUE(sb) << sb.error().to_string();
  EXPECT_EQ(sb->state, S::kCreating);
  EXPECT_EQ(sb->idempotency_key, "key-1");
  EXPECT_EQ(sb->host_uid_base, 100000);
  EXPECT_EQ(sb->cgroup, "corral/sb-1");
  EXPECT_EQ(sb->expires_at_ms, 1234);
  EXPECT_GT(sb->created_at_ms, 0);
  auto missing = store.get("nope");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(*store.integrity_check(), "ok");
}

TEST(StateStoreTest, RefusesNewerSchemaAndForeignFiles) {
  TempDir dir;
  std::string path = dir.file("state.db");
  { StateStore store = open_or_die(path); }
  raw_sql(path, "PRAGMA user_version = 99");
  auto newer = StateStore::open(path);
  ASSERT_FALSE(newer);
  EXPECT_EQ(newer.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(newer.error().message.find("schema version 99"), std::string::npos)
      << newer.error().message;

  std::string junk = dir.file("junk.db");
  std::ofstream(junk) << std::string(4096, 'x');
  auto bad = StateStore::open(junk);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().hint.find("not a corral state database"), std::string::npos)
      << bad.error().to_string();

  auto nodir = StateStore::open(dir.file("no/such/dir/state.db"));
  ASSERT_FALSE(nodir);
  EXPECT_EQ(nodir.error().code, ErrorCode::kNotFound);
}

TEST(StateStoreTest, IdempotencyKey) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  auto first = store.create_sandbox("sb-1", R"({"argv":["sh"],"cpus":1})", "k", std::nullopt);
  ASSERT_TRUE(first) << first.error().to_string();
  ASSERT_TRUE(store.transition("sb-1", S::kInitializing, "allocated"));

  // A retry with a new id but the same key and spec (keys in another order)
  // gets the first sandbox back, in its current state.
  auto retry = store.create_sandbox("sb-2", R"({ "cpus": 1, "argv": ["sh"] })", "k", std::nullopt);
  ASSERT_TRUE(retry) << retry.error().to_string();
  EXPECT_FALSE(retry->created);
  EXPECT_EQ(retry->sandbox.id, "sb-1");
  EXPECT_EQ(retry->sandbox.state, S::kInitializing);
  EXPECT_FALSE(store.get("sb-2"));

  auto other = store.create_sandbox("sb-3", R"({"argv":["sh"],"cpus":2})", "k", std::nullopt);
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, ErrorCode::kAlreadyExists);
  EXPECT_NE(other.error().message.find("already used for another request"), std::string::npos)
      << other.error().message;
  EXPECT_FALSE(store.get("sb-3"));

  // Without a key, or with another key, a new sandbox is made.
  ASSERT_TRUE(
      store.create_sandbox("sb-4", R"({"argv":["sh"],"cpus":1})", std::nullopt, std::nullopt));
  ASSERT_TRUE(
      store.create_sandbox("sb-5", R"({"argv":["sh"],"cpus":1})", std::nullopt, std::nullopt));
  ASSERT_TRUE(store.create_sandbox("sb-6", R"({"argv":["sh"],"cpus":1})", "k2", std::nullopt));

  auto dup = store.create_sandbox("sb-4", "{}", std::nullopt, std::nullopt);
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kAlreadyExists);
  auto notjson = store.create_sandbox("sb-7", "{argv", std::nullopt, std::nullopt);
  ASSERT_FALSE(notjson);
  EXPECT_EQ(notjson.error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(store.create_sandbox("", "{}", std::nullopt, std::nullopt));
  EXPECT_FALSE(store.create_sandbox("sb-8", "{}", "", std::nullopt));
  EXPECT_EQ(store.list()->size(), 4u);
}

TEST(StateStoreTest, EveryPairMatchesTheTable) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  int n = 0;
  for (S from : kAllSandboxStates) {
    for (S to : kAllSandboxStates) {
      std::string id = "sb-" + std::to_string(n++);
      ASSERT_TRUE(store.create_sandbox(id, "{}", std::nullopt, std::nullopt));
      for (S step : path_to(from)) {
        auto t = store.transition(id, step, "setup");
        ASSERT_TRUE(t) << t.error().to_string();
      }
      std::size_t rows_before = store.transitions(id)->size();
      auto r = store.transition(id, to, "under test");
      std::string pair =
          std::string(sandbox_state_name(from)) + " -> " + std::string(sandbox_state_name(to));
      EXPECT_EQ(r.has_value(), transition_allowed(from, to)) << pair;
      auto sb = store.get(id);
      ASSERT_TRUE(sb);
      auto rows = store.transitions(id);
      if (r) {
        EXPECT_EQ(sb->state, to) << pair;
        EXPECT_EQ(rows->size(), rows_before + 1) << pair;
        EXPECT_EQ(rows->back().reason, "under test");
        EXPECT_EQ(r->from, from);
      } else {
        EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << pair;
        EXPECT_NE(r.error().message.find(pair), std::string::npos) << r.error().message;
        EXPECT_EQ(sb->state, from) << pair;
        EXPECT_EQ(rows->size(), rows_before) << pair;  // no row for a refused move
      }
    }
  }
  auto missing = store.transition("nope", S::kFailed, "x");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  expect_consistent(store);
}

TEST(StateStoreTest, FailedStoresTheReasonAndCleanupFollows) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  ASSERT_TRUE(store.create_sandbox("sb", "{}", std::nullopt, std::nullopt));
  ASSERT_TRUE(store.transition("sb", S::kFailed, "init stage timed out after 30s"));
  EXPECT_EQ(store.get("sb")->error, "init stage timed out after 30s");
  ASSERT_TRUE(store.transition("sb", S::kDestroying, "cleanup"));
  ASSERT_TRUE(store.transition("sb", S::kCleaned, "verified"));
  EXPECT_EQ(store.get("sb")->error, "init stage timed out after 30s");
  EXPECT_EQ(store.transitions("sb")->size(), 4u);
}

TEST(StateStoreTest, TransitionIsAtomic) {
  TempDir dir;
  std::string path = dir.file("state.db");
  StateStore store = open_or_die(path);
  ASSERT_TRUE(store.create_sandbox("sb", "{}", std::nullopt, std::nullopt));
  ASSERT_TRUE(store.transition("sb", S::kInitializing, "ok"));
  // Make the second statement of the transaction (the transition row) fail
  // after the first (the state update) succeeded.
  raw_sql(path,
          "CREATE TRIGGER boom BEFORE INSERT ON transitions WHEN NEW.reason = 'boom' "
          "BEGIN SELECT RAISE(ABORT, 'boom'); END");
  auto r = store.transition("sb", S::kReady, "boom");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("boom"), std::string::npos) << r.error().message;
  EXPECT_EQ(store.get("sb")->state, S::kInitializing);
  EXPECT_EQ(store.transitions("sb")->size(), 2u);
  // The store is usable afterwards: no transaction was left open.
  ASSERT_TRUE(store.transition("sb", S::kReady, "fine"));
  EXPECT_EQ(store.get("sb")->state, S::kReady);
  expect_consistent(store);
}

TEST(StateStoreTest, ProcessesAndQueries) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  ASSERT_TRUE(store.create_sandbox("a", "{}", std::nullopt, 1000));
  ASSERT_TRUE(store.create_sandbox("b", "{}", std::nullopt, 5000));
  ASSERT_TRUE(store.create_sandbox("c", "{}", std::nullopt, std::nullopt));
  ASSERT_TRUE(store.create_sandbox("d", "{}", std::nullopt, 10));

  ProcessRecord p{"p1", "a", {"sh", "-c", "echo \"hi\" é"}, ProcessState::kStarting, {}, {}, 0, {}};
  auto early = store.add_process(p);
  ASSERT_FALSE(early);  // sandbox a is still creating
  EXPECT_NE(early.error().message.find("creating"), std::string::npos);
  for (S s : {S::kInitializing, S::kReady}) ASSERT_TRUE(store.transition("a", s, ""));
  ASSERT_TRUE(store.add_process(p)) << store.add_process(p).error().to_string();
  EXPECT_EQ(store.add_process(p).error().code, ErrorCode::kAlreadyExists);
  p.id = "p2";
  p.sandbox_id = "zz";
  EXPECT_EQ(store.add_process(p).error().code, ErrorCode::kNotFound);
  ASSERT_TRUE(store.update_process("p1", ProcessState::kRunning, std::nullopt, std::nullopt));
  ASSERT_TRUE(store.update_process("p1", ProcessState::kExited, std::nullopt, 9));
  EXPECT_FALSE(store.update_process("p1", ProcessState::kRunning, std::nullopt, std::nullopt));
  EXPECT_EQ(
      store.update_process("p9", ProcessState::kLost, std::nullopt, std::nullopt).error().code,
      ErrorCode::kNotFound);
  auto procs = store.list_processes("a");
  ASSERT_TRUE(procs);
  ASSERT_EQ(procs->size(), 1u);
  EXPECT_EQ((*procs)[0].argv, (std::vector<std::string>{"sh", "-c", "echo \"hi\" é"}));
  EXPECT_EQ((*procs)[0].state, ProcessState::kExited);
  EXPECT_EQ((*procs)[0].signal, 9);
  EXPECT_FALSE((*procs)[0].exit_code.has_value());
  EXPECT_TRUE((*procs)[0].ended_at_ms.has_value());

  // d: destroyed and cleaned; b: failed (still owes cleanup).
  for (S s : {S::kDestroying, S::kCleaned}) ASSERT_TRUE(store.transition("d", s, ""));
  ASSERT_TRUE(store.transition("b", S::kFailed, "x"));

  std::vector<S> live = {S::kReady};
  auto ready = store.list(live);
  ASSERT_EQ(ready->size(), 1u);
  EXPECT_EQ((*ready)[0].id, "a");
  EXPECT_EQ(store.list()->size(), 4u);

  auto rec = store.sandboxes_to_reconcile();
  ASSERT_TRUE(rec);
  std::vector<std::string> ids;
  for (const auto& s : *rec) ids.push_back(s.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "b", "c"}));

  // Past expiry and still live: a (1000) at 2000; b failed, c no expiry,
  // d cleaned.
  auto exp = store.expired(2000);
  ASSERT_TRUE(exp);
  ASSERT_EQ(exp->size(), 1u);
  EXPECT_EQ((*exp)[0].id, "a");
  EXPECT_TRUE(store.expired(999)->empty());
}

TEST(StateStoreTest, ProcessHostPidAndDeadline) {
  TempDir dir;
  std::string path = dir.file("state.db");
  {
    StateStore store = open_or_die(path);
    ASSERT_TRUE(store.create_sandbox("sb", "{}", std::nullopt, std::nullopt));
    for (S s : {S::kInitializing, S::kReady}) ASSERT_TRUE(store.transition("sb", s, ""));
    ProcessRecord p{"p1", "sb", {"sleep", "9"}, ProcessState::kStarting, {}, {}, 1000, {}};
    p.deadline_at_ms = 61000;
    ASSERT_TRUE(store.add_process(p));
    p.id = "p2";
    p.deadline_at_ms.reset();
    ASSERT_TRUE(store.add_process(p));
    auto procs = store.list_processes("sb");
    ASSERT_TRUE(procs);
    ASSERT_EQ(procs->size(), 2u);
    EXPECT_EQ((*procs)[0].deadline_at_ms, 61000);
    EXPECT_FALSE((*procs)[0].host_pid.has_value());
    EXPECT_FALSE((*procs)[0].host_start_time.has_value());
    EXPECT_FALSE((*procs)[1].deadline_at_ms.has_value());

    // Starting -> running, with who it is on the host.
    ASSERT_TRUE(store.set_process_host("p1", 4242, 987654321));
    // Running stays running; the values are replaced.
    ASSERT_TRUE(store.update_process("p2", ProcessState::kRunning, std::nullopt, std::nullopt));
    ASSERT_TRUE(store.set_process_host("p2", 7, 1));
    EXPECT_EQ(store.set_process_host("nope", 1, 1).error().code, ErrorCode::kNotFound);
    EXPECT_EQ(store.set_process_host("p1", 0, 1).error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(store.set_process_host("p1", 1, 0).error().code, ErrorCode::kInvalidArgument);
    ASSERT_TRUE(store.update_process("p2", ProcessState::kExited, 0, std::nullopt));
    auto ended = store.set_process_host("p2", 8, 2);
    ASSERT_FALSE(ended);
    EXPECT_EQ(ended.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(ended.error().message.find("already ended"), std::string::npos)
        << ended.error().message;
  }
  StateStore store = open_or_die(path);
  auto procs = store.list_processes("sb");
  ASSERT_TRUE(procs);
  ASSERT_EQ(procs->size(), 2u);
  EXPECT_EQ((*procs)[0].state, ProcessState::kRunning);
  EXPECT_EQ((*procs)[0].host_pid, 4242);
  EXPECT_EQ((*procs)[0].host_start_time, 987654321u);
  EXPECT_EQ((*procs)[0].deadline_at_ms, 61000);
  EXPECT_EQ((*procs)[1].state, ProcessState::kExited);
  EXPECT_EQ((*procs)[1].host_pid, 7);  // the refused update changed nothing
  EXPECT_EQ((*procs)[1].host_start_time, 1u);
  // A raw write of a nonsense pid is refused by the schema itself.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_NE(sqlite3_exec(db, "UPDATE processes SET host_pid = -1 WHERE id = 'p1'", nullptr, nullptr,
                         nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  EXPECT_EQ(store.list_processes("sb")->front().host_pid, 4242);
}

// A database as schema version 2 (the version before host pids) wrote it,
// with a sandbox and a running background process in it.
void write_schema2_database(const std::string& path) {
  static constexpr const char* kSchema2 = R"sql(
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
, runtime_json TEXT) STRICT;
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
INSERT INTO sandboxes (id, state, spec_json, created_at, updated_at, runtime_json)
  VALUES ('sb-old', 'running', '{}', 10, 20, '{"init_pid":1234}');
INSERT INTO transitions (sandbox_id, from_state, to_state, at, reason)
  VALUES ('sb-old', NULL, 'creating', 10, 'created'),
         ('sb-old', 'creating', 'initializing', 11, ''),
         ('sb-old', 'initializing', 'ready', 12, ''),
         ('sb-old', 'ready', 'running', 15, 'a process started');
INSERT INTO processes (id, sandbox_id, argv_json, state, started_at)
  VALUES ('p-old', 'sb-old', '["sleep","60"]', 'running', 15);
PRAGMA user_version = 2;
)sql";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, kSchema2, nullptr, nullptr, &err), SQLITE_OK)
      << (err != nullptr ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

TEST(StateStoreTest, MigratesFromSchema2) {
  TempDir dir;
  std::string path = dir.file("state.db");
  write_schema2_database(path);
  ASSERT_EQ(raw_sql(path, "PRAGMA user_version"), "2");
  StateStore store = open_or_die(path);
  EXPECT_EQ(*store.pragma("user_version"), std::to_string(StateStore::kSchemaVersion));
  EXPECT_EQ(StateStore::kSchemaVersion, 15);  // 15: nodes.cordoned
  EXPECT_EQ(
      raw_sql(path, "SELECT COUNT(*) FROM pragma_table_info('nodes') WHERE name = 'cordoned'"),
      "1");
  // The old rows are all there; the process has no host pid, start time or
  // deadline (its daemon did not record them).
  auto sb = store.get("sb-old");
  ASSERT_TRUE(sb) << sb.error().to_string();
  EXPECT_EQ(sb->state, S::kRunning);
  EXPECT_EQ(sb->runtime_json, R"({"init_pid":1234})");
  auto procs = store.list_processes("sb-old");
  ASSERT_TRUE(procs) << procs.error().to_string();
  ASSERT_EQ(procs->size(), 1u);
  const ProcessRecord& old = procs->front();
  EXPECT_EQ(old.id, "p-old");
  EXPECT_EQ(old.state, ProcessState::kRunning);
  EXPECT_EQ(old.argv, (std::vector<std::string>{"sleep", "60"}));
  EXPECT_EQ(old.started_at_ms, 15);
  EXPECT_FALSE(old.host_pid.has_value());
  EXPECT_FALSE(old.host_start_time.has_value());
  EXPECT_FALSE(old.deadline_at_ms.has_value());
  EXPECT_FALSE(old.tag.has_value());
  // The new columns work on migrated rows and new ones.
  ASSERT_TRUE(store.set_process_host("p-old", 99, 12345));
  ProcessRecord fresh{"p-new", "sb-old", {"true"}, ProcessState::kStarting, {}, {}, 30, {}};
  fresh.deadline_at_ms = 90;
  fresh.tag = "server";
  ASSERT_TRUE(store.add_process(fresh)) << store.add_process(fresh).error().to_string();
  procs = store.list_processes("sb-old");
  ASSERT_TRUE(procs);
  ASSERT_EQ(procs->size(), 2u);
  EXPECT_EQ((*procs)[0].host_pid, 99);
  EXPECT_EQ((*procs)[0].host_start_time, 12345u);
  EXPECT_EQ((*procs)[1].deadline_at_ms, 90);
  EXPECT_EQ((*procs)[1].tag, "server");
  EXPECT_FALSE((*procs)[0].tag.has_value());
  EXPECT_EQ(*store.integrity_check(), "ok");
  expect_consistent(store);
}

// The result of an ended process, whole (issue 14 item 5): what a restarted
// daemon lists again. timed_out is stored, a mark made before the kill is
// kept by the end, and the end time is the daemon's, not the write's.
TEST(StateStoreTest, ProcessResultAndTimeoutMark) {
  TempDir dir;
  std::string path = dir.file("state.db");
  {
    StateStore store = open_or_die(path);
    ASSERT_TRUE(store.create_sandbox("sb", "{}", std::nullopt, std::nullopt));
    for (S s : {S::kInitializing, S::kReady}) ASSERT_TRUE(store.transition("sb", s, ""));
    for (const char* id : {"p1", "p2", "p3", "p4"}) {
      ProcessRecord p;
      p.id = id;
      p.sandbox_id = "sb";
      p.argv = {"sleep", "9"};
      p.started_at_ms = 1000;
      ASSERT_TRUE(store.add_process(p));
    }
    // p1: timed out, the mark first (the reaper), then its end.
    ASSERT_TRUE(store.set_process_host("p1", 11, 1));
    ASSERT_TRUE(store.mark_process_timed_out("p1"));
    ASSERT_TRUE(store.update_process("p1", ProcessState::kExited, 124, 9, true, 5000));
    // p2: an ordinary exit, with its end time given.
    ASSERT_TRUE(store.update_process("p2", ProcessState::kExited, 3, std::nullopt, false, 4000));
    // p3: marked, and the daemon died before the end: the mark stays, and
    // an end reported without it (false) does not take it back.
    ASSERT_TRUE(store.mark_process_timed_out("p3"));
    // p4: running; marks of unknown or ended processes are refused.
    EXPECT_EQ(store.mark_process_timed_out("nope").error().code, ErrorCode::kNotFound);
    auto ended = store.mark_process_timed_out("p2");
    ASSERT_FALSE(ended);
    EXPECT_EQ(ended.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(ended.error().message.find("already ended"), std::string::npos);
  }
  StateStore store = open_or_die(path);
  auto procs = store.list_processes("sb");
  ASSERT_TRUE(procs);
  ASSERT_EQ(procs->size(), 4u);
  const ProcessRecord& p1 = (*procs)[0];
  EXPECT_EQ(p1.state, ProcessState::kExited);
  EXPECT_EQ(p1.exit_code, 124);
  EXPECT_EQ(p1.signal, 9);
  EXPECT_TRUE(p1.timed_out);
  EXPECT_EQ(p1.ended_at_ms, 5000);
  const ProcessRecord& p2 = (*procs)[1];
  EXPECT_EQ(p2.exit_code, 3);
  EXPECT_FALSE(p2.signal.has_value());
  EXPECT_FALSE(p2.timed_out);
  EXPECT_EQ(p2.ended_at_ms, 4000);
  EXPECT_EQ((*procs)[2].state, ProcessState::kStarting);
  EXPECT_TRUE((*procs)[2].timed_out);
  EXPECT_FALSE((*procs)[3].timed_out);
  ASSERT_TRUE(store.update_process("p3", ProcessState::kExited, std::nullopt, 9));
  EXPECT_TRUE(store.list_processes("sb")->at(2).timed_out);
  // The schema refuses anything but 0 and 1.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_NE(sqlite3_exec(db, "UPDATE processes SET timed_out = 2 WHERE id = 'p4'", nullptr, nullptr,
                         nullptr),
            SQLITE_OK);
  sqlite3_close(db);
}

// A database as schema version 3 (the daemon before timed_out was stored)
// left it: a sandbox with a running process (host pid recorded) and ended
// ones. It opens with every row and value as it was.
TEST(StateStoreTest, MigratesFromSchema3WithoutLoss) {
  TempDir dir;
  std::string path = dir.file("state.db");
  write_schema2_database(path);
  static constexpr const char* kTo3AndRows = R"sql(
ALTER TABLE processes ADD COLUMN deadline_at INTEGER;
ALTER TABLE processes ADD COLUMN host_pid INTEGER CHECK (host_pid > 0);
ALTER TABLE processes ADD COLUMN host_start_time INTEGER CHECK (host_start_time > 0);
UPDATE processes SET deadline_at = 75, host_pid = 4321, host_start_time = 777 WHERE id = 'p-old';
INSERT INTO processes (id, sandbox_id, argv_json, state, exit_code, signal, started_at, ended_at,
                       deadline_at, host_pid, host_start_time)
  VALUES ('p-exit', 'sb-old', '["sh","-c","exit 3"]', 'exited', 3, NULL, 16, 17, 60, 11, 12),
         ('p-sig', 'sb-old', '["sleep","9"]', 'exited', 124, 9, 18, 19, 20, 13, 14),
         ('p-lost', 'sb-old', '["true"]', 'lost', NULL, NULL, 21, 22, NULL, NULL, NULL);
PRAGMA user_version = 3;
)sql";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, kTo3AndRows, nullptr, nullptr, &err), SQLITE_OK)
      << (err != nullptr ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
  ASSERT_EQ(raw_sql(path, "PRAGMA user_version"), "3");

  StateStore store = open_or_die(path);
  EXPECT_EQ(*store.pragma("user_version"), std::to_string(StateStore::kSchemaVersion));
  auto sb = store.get("sb-old");
  ASSERT_TRUE(sb) << sb.error().to_string();
  EXPECT_EQ(sb->state, S::kRunning);
  EXPECT_EQ(sb->runtime_json, R"({"init_pid":1234})");
  EXPECT_EQ(store.transitions("sb-old")->size(), 4u);
  auto procs = store.list_processes("sb-old");
  ASSERT_TRUE(procs) << procs.error().to_string();
  ASSERT_EQ(procs->size(), 4u);
  const ProcessRecord& run = (*procs)[0];
  EXPECT_EQ(run.id, "p-old");
  EXPECT_EQ(run.state, ProcessState::kRunning);
  EXPECT_EQ(run.deadline_at_ms, 75);
  EXPECT_EQ(run.host_pid, 4321);
  EXPECT_EQ(run.host_start_time, 777u);
  const ProcessRecord& ex = (*procs)[1];
  EXPECT_EQ(ex.id, "p-exit");
  EXPECT_EQ(ex.argv, (std::vector<std::string>{"sh", "-c", "exit 3"}));
  EXPECT_EQ(ex.state, ProcessState::kExited);
  EXPECT_EQ(ex.exit_code, 3);
  EXPECT_FALSE(ex.signal.has_value());
  EXPECT_EQ(ex.started_at_ms, 16);
  EXPECT_EQ(ex.ended_at_ms, 17);
  EXPECT_EQ(ex.deadline_at_ms, 60);
  EXPECT_EQ(ex.host_pid, 11);
  EXPECT_EQ(ex.host_start_time, 12u);
  const ProcessRecord& sig = (*procs)[2];
  EXPECT_EQ(sig.exit_code, 124);
  EXPECT_EQ(sig.signal, 9);
  EXPECT_EQ(sig.ended_at_ms, 19);
  const ProcessRecord& lost = (*procs)[3];
  EXPECT_EQ(lost.state, ProcessState::kLost);
  EXPECT_FALSE(lost.exit_code.has_value());
  EXPECT_EQ(lost.ended_at_ms, 22);
  // Schema 3 did not store timeouts: the one end only a timeout gives (124
  // with a signal) is marked; no other row claims one.
  EXPECT_TRUE(sig.timed_out);
  for (const auto* p : {&run, &ex, &lost}) EXPECT_FALSE(p->timed_out) << p->id;
  // The new column works on migrated rows.
  ASSERT_TRUE(store.mark_process_timed_out("p-old"));
  EXPECT_TRUE(store.list_processes("sb-old")->front().timed_out);
  EXPECT_EQ(*store.integrity_check(), "ok");
  expect_consistent(store);
}

// The crash child: creates sandboxes and walks each through its lifecycle,
// writing one line to `fd` right after each call returned success. Never
// returns.
[[noreturn]] void crash_child(const std::string& path, int iter, int fd) {
  auto store = StateStore::open(path);
  if (!store) _exit(3);
  auto ack = [fd](const std::string& line) { testing::acknowledge(fd, line); };
  const S walk[] = {S::kInitializing, S::kReady,      S::kRunning,
                    S::kReady,        S::kDestroying, S::kCleaned};
  for (int n = 0; n < 100000; ++n) {
    std::string id = "it" + std::to_string(iter) + "-" + std::to_string(n);
    std::string key = "key-" + id;
    if (!store->create_sandbox(id, R"({"n":)" + std::to_string(n) + "}", key, std::nullopt))
      _exit(5);
    ack("C " + id);
    for (S s : walk) {
      if (!store->transition(id, s, "walk")) _exit(6);
      ack("T " + id + " " + std::string(sandbox_state_name(s)));
      if (s == S::kRunning) {
        ProcessRecord p{"p-" + id, id, {"true"}, ProcessState::kRunning, {}, {}, 0, {}};
        if (!store->add_process(p)) _exit(7);
        ack("P " + id);
      }
    }
  }
  _exit(0);
}

TEST(StateStoreTest, AcknowledgedWritesSurviveSigkill) {
  TempDir dir;
  std::string path = dir.file("state.db");
  std::mt19937 rng(20240601);
  std::uniform_int_distribution<int> delay_us(0, 150'000);
  // Everything acknowledged by any child: sandbox -> acknowledged states.
  std::map<std::string, std::vector<std::string>> acked;
  std::set<std::string> acked_procs;
  for (int iter = 0; iter < 20; ++iter) {
    auto lines = testing::lines_acknowledged_before_sigkill(
        [&](int fd) { crash_child(path, iter, fd); }, std::chrono::microseconds(delay_us(rng)),
        // Every fourth kill may land while the store opens; the others leave
        // the child its whole window however loaded the host is.
        iter % 4 == 0 ? testing::KillClock::kFromFork : testing::KillClock::kFromFirstLine);
    ASSERT_TRUE(lines);
    for (const std::string& line : *lines) {
      std::string id = line.substr(2, line.find(' ', 2) - 2);
      if (line[0] == 'C') acked[id];
      if (line[0] == 'T') acked[id].push_back(line.substr(line.rfind(' ') + 1));
      if (line[0] == 'P') acked_procs.insert(id);
    }

    StateStore store = open_or_die(path);
    ASSERT_EQ(*store.integrity_check(), "ok") << "iteration " << iter;
    for (const auto& [id, states] : acked) {
      auto sb = store.get(id);
      ASSERT_TRUE(sb) << "acknowledged sandbox lost: " << id << " (iteration " << iter << ")";
      auto ts = store.transitions(id);
      ASSERT_TRUE(ts);
      // The acknowledged transitions are a prefix of what is stored (one
      // more may have committed just before the kill, unacknowledged).
      ASSERT_GE(ts->size(), states.size() + 1) << id;
      for (std::size_t i = 0; i < states.size(); ++i) {
        EXPECT_EQ(sandbox_state_name((*ts)[i + 1].to), states[i]) << id << " #" << i;
      }
    }
    for (const std::string& id : acked_procs) {
      auto procs = store.list_processes(id);
      ASSERT_TRUE(procs);
      EXPECT_EQ(procs->size(), 1u) << "acknowledged process lost in " << id;
    }
    expect_consistent(store);
  }
  std::size_t n_transitions = 0;
  for (const auto& [id, states] : acked) n_transitions += states.size();
  std::printf("acknowledged before the kills: %zu sandboxes, %zu transitions, %zu processes\n",
              acked.size(), n_transitions, acked_procs.size());
  EXPECT_GT(acked.size(), 20u)
      << "the children acknowledged almost nothing; the test proves little";
}

TEST(StateStoreTest, ConcurrentThreads) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  constexpr int kThreads = 4;
  constexpr int kPerThread = 25;
  std::atomic<int> failures{0};
  std::atomic<int> created_with_shared_key{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // All threads race on one idempotency key: one sandbox results.
      auto shared =
          store.create_sandbox("shared-" + std::to_string(t), R"({"s":1})", "shared", std::nullopt);
      if (!shared) {
        ++failures;
      } else if (shared->created) {
        ++created_with_shared_key;
      }
      for (int i = 0; i < kPerThread; ++i) {
        std::string id = "t" + std::to_string(t) + "-" + std::to_string(i);
        if (!store.create_sandbox(id, "{}", std::nullopt, std::nullopt)) ++failures;
        for (S s : {S::kInitializing, S::kReady, S::kRunning}) {
          if (!store.transition(id, s, "go")) ++failures;
        }
        if (!store.list()) ++failures;
        if (!store.get(id)) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(created_with_shared_key.load(), 1);
  std::vector<S> running = {S::kRunning};
  EXPECT_EQ(store.list(running)->size(), static_cast<std::size_t>(kThreads * kPerThread));
  EXPECT_EQ(store.list()->size(), static_cast<std::size_t>(kThreads * kPerThread + 1));
  expect_consistent(store);
  EXPECT_EQ(*store.integrity_check(), "ok");
}

}  // namespace
}  // namespace corral
