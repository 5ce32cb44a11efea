// The task state table (REQUIREMENTS.md D6) on temporary SQLite files:
// every pair of statuses against the transition table, idempotent submits
// (the same request, another request naming its first differing field,
// twenty threads at once), the retry of a retryable failure, paged listing
// under concurrent inserts, forged cursors, durability when the writer is
// SIGKILLed, and pruning.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "store/state_store.h"
#include "store/task_record.h"

namespace corral {
namespace {

using T = TaskStatus;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/corral-task-unit-XXXXXX";
    char* d = mkdtemp(tmpl.data());
    EXPECT_NE(d, nullptr);
    path_ = d != nullptr ? d : "/nonexistent";
  }
  ~TempDir() {
    std::string cmd = "rm -rf '" + path_ + "'";
    (void)std::system(cmd.c_str());
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string raw_sql(const std::string& path, const std::string& sql) {
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

StateStore open_or_die(const std::string& path) {
  auto s = StateStore::open(path);
  if (!s) {
    ADD_FAILURE() << s.error().to_string();
    std::abort();
  }
  return std::move(*s);
}

TaskRecord request(const std::string& id, const std::string& body = R"({"command":["true"]})",
                   const std::string& ns = "default") {
  TaskRecord t;
  t.id = id;
  t.ns = ns;
  t.request_json = body;
  return t;
}

TaskUpdate to_status(T status, std::string why = "test") {
  TaskUpdate u;
  u.status = status;
  u.reason_for_transition = std::move(why);
  return u;
}

// Submits `id` and moves it along allowed edges to `target`.
void make_task_in(StateStore& store, const std::string& id, T target) {
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

// ---- the record: names and the transition table ----

TEST(TaskRecordTest, NamesRoundTripAndUnknownNamesAreRefused) {
  std::set<std::string_view> names;
  for (T s : kAllTaskStatuses) {
    EXPECT_EQ(parse_task_status(task_status_name(s)), s);
    names.insert(task_status_name(s));
  }
  EXPECT_EQ(names.size(), kAllTaskStatuses.size());
  for (std::string_view bad : {"", "Queued", "done", "timed-out", "queued ", "none"}) {
    EXPECT_FALSE(parse_task_status(bad)) << bad;
  }
  for (std::string_view bad : {"", "Create", "running", "exec", "done ", "queued"}) {
    EXPECT_FALSE(parse_task_stage(bad)) << bad;
  }
  for (std::string_view stage : {"none", "create", "initialize", "execute", "collect", "snapshot",
                                 "destroy", "cleanup", "done"}) {
    auto s = parse_task_stage(stage);
    ASSERT_TRUE(s) << stage;
    EXPECT_EQ(task_stage_name(*s), stage);
  }
  EXPECT_FALSE(is_finished(T::kQueued));
  EXPECT_FALSE(is_finished(T::kRunning));
  for (T s : {T::kSucceeded, T::kFailed, T::kTimedOut, T::kCancelled}) EXPECT_TRUE(is_finished(s));
}

// The edges the docs promise (docs/tasks.md), written out again here.
const std::set<std::pair<T, T>> kExpectedEdges = {
    {T::kQueued, T::kRunning},    {T::kQueued, T::kCancelled},  {T::kQueued, T::kFailed},
    {T::kRunning, T::kSucceeded}, {T::kRunning, T::kFailed},    {T::kRunning, T::kTimedOut},
    {T::kRunning, T::kCancelled}, {T::kFailed, T::kQueued},
};

TEST(TaskRecordTest, TransitionTableIsExactlyTheDocumentedEdges) {
  std::set<std::pair<T, T>> table;
  for (const TaskTransitionEdge& e : task_transition_table()) {
    EXPECT_TRUE(table.insert({e.from, e.to}).second) << "duplicate edge";
    EXPECT_FALSE(e.why.empty());
  }
  EXPECT_EQ(table, kExpectedEdges);
  for (T from : kAllTaskStatuses) {
    for (T to : kAllTaskStatuses) {
      EXPECT_EQ(task_transition_allowed(from, to), kExpectedEdges.count({from, to}) == 1)
          << task_status_name(from) << " -> " << task_status_name(to);
    }
  }
  // Nothing leaves succeeded, timed_out or cancelled; failed only by a retry.
  for (T to : kAllTaskStatuses) {
    EXPECT_FALSE(task_transition_allowed(T::kSucceeded, to));
    EXPECT_FALSE(task_transition_allowed(T::kTimedOut, to));
    EXPECT_FALSE(task_transition_allowed(T::kCancelled, to));
  }
}

// ---- the table: schema ----

TEST(TaskTableTest, SchemaHasStrictTaskTables) {
  TempDir dir;
  std::string path = dir.file("state.db");
  { StateStore store = open_or_die(path); }
  EXPECT_EQ(raw_sql(path, "PRAGMA user_version"), "5");
  EXPECT_EQ(raw_sql(path, "SELECT strict FROM pragma_table_list WHERE name = 'tasks'"), "1");
  EXPECT_EQ(raw_sql(path, "SELECT strict FROM pragma_table_list WHERE name = 'task_transitions'"),
            "1");
  for (const char* index : {"tasks_by_status", "tasks_by_created", "tasks_by_finished",
                            "task_transitions_by_task"}) {
    EXPECT_EQ(raw_sql(path, std::string("SELECT count(*) FROM sqlite_master WHERE type = 'index' "
                                        "AND name = '") +
                                index + "'"),
              "1")
        << index;
  }
}

// ---- update_task against every pair of statuses ----

TEST(TaskTableTest, UpdateFollowsTheTableForEveryPairOfStatuses) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  int n = 0;
  for (T from : kAllTaskStatuses) {
    for (T to : kAllTaskStatuses) {
      std::string id = "pair-" + std::to_string(n++);
      make_task_in(store, id, from);
      auto before = store.task_transitions(id);
      ASSERT_TRUE(before);
      auto r = store.update_task(id, to_status(to, "pair"));
      std::string edge = std::string(task_status_name(from)) + " -> " +
                         std::string(task_status_name(to));
      auto after = store.get_task(id);
      ASSERT_TRUE(after);
      auto rows = store.task_transitions(id);
      ASSERT_TRUE(rows);
      if (from == to) {
        // The same status is no change: no row.
        ASSERT_TRUE(r) << edge << ": " << r.error().to_string();
        EXPECT_EQ(rows->size(), before->size()) << edge;
        continue;
      }
      // Only a repeat submit moves a task back to queued.
      bool allowed = task_transition_allowed(from, to) && to != T::kQueued;
      ASSERT_EQ(r.has_value(), allowed) << edge;
      if (!allowed) {
        EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << edge;
        EXPECT_NE(r.error().message.find(edge), std::string::npos) << r.error().message;
        EXPECT_EQ(after->status, from) << edge << ": a refused move changed the task";
        EXPECT_EQ(rows->size(), before->size()) << edge;
        continue;
      }
      EXPECT_EQ(after->status, to);
      ASSERT_EQ(rows->size(), before->size() + 1) << edge;
      EXPECT_EQ(rows->back().from, from);
      EXPECT_EQ(rows->back().to, to);
      EXPECT_EQ(rows->back().reason, "pair");
      EXPECT_EQ(after->finished_at_ms.has_value(), is_finished(to)) << edge;
    }
  }
}

TEST(TaskTableTest, UpdateSetsTimesStagesAndFields) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  auto s = store.submit_task(request("t1"));
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_TRUE(s->created);
  EXPECT_EQ(s->task.status, T::kQueued);
  EXPECT_EQ(s->task.stage, TaskStage::kNone);
  EXPECT_FALSE(s->task.started_at_ms);
  EXPECT_FALSE(s->task.finished_at_ms);

  TaskUpdate u = to_status(T::kRunning, "worker took it");
  u.stage = TaskStage::kCreate;
  auto r = store.update_task("t1", u);
  ASSERT_TRUE(r) << r.error().to_string();
  ASSERT_TRUE(r->started_at_ms);
  std::int64_t started = *r->started_at_ms;

  // A stage change alone is a row too (from == to), and keeps started_at.
  TaskUpdate stage;
  stage.stage = TaskStage::kExecute;
  stage.sandbox_id = "sb-1";
  stage.process_id = "p-1";
  stage.reason_for_transition = "inputs pushed";
  r = store.update_task("t1", stage);
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->started_at_ms, started);
  EXPECT_EQ(r->sandbox_id, "sb-1");
  EXPECT_EQ(r->process_id, "p-1");

  // Nothing of status or stage: no row.
  TaskUpdate fields;
  fields.resolved_json = R"({"b": 2, "a": 1})";
  r = store.update_task("t1", fields);
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->resolved_json, R"({"a":1,"b":2})");

  TaskUpdate done = to_status(T::kFailed, "output missing");
  done.stage = TaskStage::kDone;
  done.exit_code = 0;
  done.reason = "output_missing";
  done.detail = "required output /workspace/out.txt is missing";
  done.outputs = std::vector<TaskOutputRecord>{
      {"/workspace/out.txt", false, 0, "", ""},
      {"/workspace/log.txt", true, 12, std::string(64, 'a'), "tasks/t1/1/outputs/1"}};
  done.snapshot_error = "disk full";
  r = store.update_task("t1", done);
  ASSERT_TRUE(r) << r.error().to_string();
  ASSERT_TRUE(r->finished_at_ms);

  // A finished task keeps taking fields (a snapshot taken after the result).
  TaskUpdate snap;
  snap.snapshot_id = "snap-1";
  ASSERT_TRUE(store.update_task("t1", snap));

  TaskRecord t = *store.get_task("t1");
  EXPECT_EQ(t.status, T::kFailed);
  EXPECT_EQ(t.stage, TaskStage::kDone);
  EXPECT_EQ(t.exit_code, 0);
  EXPECT_FALSE(t.signal);
  EXPECT_EQ(t.reason, "output_missing");
  EXPECT_EQ(t.snapshot_id, "snap-1");
  EXPECT_EQ(t.snapshot_error, "disk full");
  EXPECT_EQ(t.started_at_ms, started);
  ASSERT_EQ(t.outputs.size(), 2u);
  EXPECT_EQ(t.outputs[0].path, "/workspace/out.txt");
  EXPECT_FALSE(t.outputs[0].present);
  EXPECT_TRUE(t.outputs[1].present);
  EXPECT_EQ(t.outputs[1].size, 12u);
  EXPECT_EQ(t.outputs[1].sha256, std::string(64, 'a'));
  EXPECT_EQ(t.outputs[1].object_key, "tasks/t1/1/outputs/1");
  EXPECT_GE(*t.finished_at_ms, started);

  auto rows = store.task_transitions("t1");
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 4u);
  EXPECT_FALSE((*rows)[0].from);
  EXPECT_EQ((*rows)[0].to, T::kQueued);
  EXPECT_EQ((*rows)[0].reason, "submitted");
  EXPECT_EQ((*rows)[1].stage, TaskStage::kCreate);
  EXPECT_EQ((*rows)[2].from, T::kRunning);
  EXPECT_EQ((*rows)[2].to, T::kRunning);
  EXPECT_EQ((*rows)[2].stage, TaskStage::kExecute);
  EXPECT_EQ((*rows)[2].reason, "inputs pushed");
  EXPECT_EQ((*rows)[3].to, T::kFailed);
  EXPECT_EQ((*rows)[3].stage, TaskStage::kDone);
  for (const auto& row : *rows) EXPECT_EQ(row.attempt, 1);
}

TEST(TaskTableTest, UpdateRefusesBadFieldsAndUnknownTasks) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  ASSERT_TRUE(store.submit_task(request("t1")));
  auto missing = store.update_task("nope", to_status(T::kRunning));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store.get_task("nope").error().code, ErrorCode::kNotFound);

  std::vector<TaskUpdate> bad(5);
  bad[0].outputs = std::vector<TaskOutputRecord>{{"/a", true, 1, "ABC", "k"}};
  bad[1].outputs = std::vector<TaskOutputRecord>{{"/a", true, 1, std::string(64, 'A'), "k"}};
  bad[2].outputs = std::vector<TaskOutputRecord>{{"", true, 1, "", "k"}};
  bad[3].resolved_json = "{not json";
  bad[4].sandbox_id = std::string(200, 'x');
  for (const TaskUpdate& u : bad) {
    auto r = store.update_task("t1", u);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << r.error().message;
  }
  TaskRecord t = *store.get_task("t1");
  EXPECT_TRUE(t.outputs.empty());
  EXPECT_TRUE(t.resolved_json.empty());
  EXPECT_FALSE(t.sandbox_id);
}

// ---- submit: validation and idempotency ----

TEST(TaskTableTest, SubmitRefusesBadIdsAndRequests) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  for (std::string id : {std::string(), std::string(129, 'a'), std::string("a b"),
                         std::string("a/b"), std::string("a'b"), std::string("ä"),
                         std::string("a\0b", 3), std::string("a;DROP TABLE tasks")}) {
    auto r = store.submit_task(request(id));
    ASSERT_FALSE(r) << id;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << id;
  }
  ASSERT_TRUE(store.submit_task(request(std::string(128, 'a'))));
  ASSERT_TRUE(store.submit_task(request("A-z_0.9:x")));
  for (std::string body : {"", "{", "{\"a\":}", "nul"}) {
    auto r = store.submit_task(request("json", body));
    ASSERT_FALSE(r) << body;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  }
  TaskRecord bad_resolved = request("resolved");
  bad_resolved.resolved_json = "[1,";
  EXPECT_FALSE(store.submit_task(bad_resolved));
  TaskRecord bad_replay = request("replay");
  bad_replay.replay_of = "no spaces allowed";
  EXPECT_FALSE(store.submit_task(bad_replay));
  TaskRecord no_ns = request("ns", "{}", "");
  EXPECT_FALSE(store.submit_task(no_ns));
  EXPECT_EQ(raw_sql(store.path(), "SELECT count(*) FROM tasks"), "2");
}

TEST(TaskTableTest, SameRequestReturnsTheStoredTask) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  TaskRecord first = request("build-42", R"({"command":["make"],"env":{"B":"2","A":"1"}})");
  first.resolved_json = R"({"image":"sha256:abc"})";
  auto a = store.submit_task(first);
  ASSERT_TRUE(a) << a.error().to_string();
  EXPECT_TRUE(a->created);
  EXPECT_FALSE(a->retried);
  EXPECT_EQ(a->task.request_json, R"({"command":["make"],"env":{"A":"1","B":"2"}})");
  ASSERT_TRUE(store.update_task("build-42", to_status(T::kRunning)));

  // Another key order and spacing is the same request.
  auto b = store.submit_task(
      request("build-42", "{ \"env\" : {\"A\":\"1\", \"B\":\"2\"}, \"command\": [\"make\"] }"));
  ASSERT_TRUE(b) << b.error().to_string();
  EXPECT_FALSE(b->created);
  EXPECT_FALSE(b->retried);
  EXPECT_EQ(b->task.status, T::kRunning);
  EXPECT_EQ(b->task.created_at_ms, a->task.created_at_ms);
  EXPECT_EQ(b->task.resolved_json, R"({"image":"sha256:abc"})");

  // Finished: still the stored result, never a new run.
  ASSERT_TRUE(store.update_task("build-42", to_status(T::kSucceeded)));
  auto c = store.submit_task(request("build-42", R"({"env":{"B":"2","A":"1"},"command":["make"]})"));
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->created);
  EXPECT_EQ(c->task.status, T::kSucceeded);
  EXPECT_EQ(c->task.attempt, 1);
  EXPECT_EQ(store.task_transitions("build-42")->size(), 3u);
}

TEST(TaskTableTest, AnotherRequestIsAConflictNamingTheFirstDifferingField) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  const std::string stored =
      R"({"command":["python3","main.py"],"env":{"A":"1","PATH":"/bin"},)"
      R"("outputs":[{"path":"/workspace/a","max_size":"1MiB"},{"path":"/workspace/b"}],)"
      R"("sandbox":{"limits":{"memory":"1G"}},"timeout":"10m"})";
  ASSERT_TRUE(store.submit_task(request("t", stored)));
  struct Case {
    std::string body;
    std::string field;
  };
  const Case cases[] = {
      // A value in a nested object.
      {R"({"command":["python3","main.py"],"env":{"A":"1","PATH":"/usr/bin"},)"
       R"("outputs":[{"path":"/workspace/a","max_size":"1MiB"},{"path":"/workspace/b"}],)"
       R"("sandbox":{"limits":{"memory":"1G"}},"timeout":"10m"})",
       "env.PATH"},
      // A value in an object in an array.
      {R"({"command":["python3","main.py"],"env":{"A":"1","PATH":"/bin"},)"
       R"("outputs":[{"path":"/workspace/a","max_size":"2MiB"},{"path":"/workspace/b"}],)"
       R"("sandbox":{"limits":{"memory":"1G"}},"timeout":"10m"})",
       "outputs[0].max_size"},
      // A key missing in the new request.
      {R"({"command":["python3","main.py"],"env":{"A":"1","PATH":"/bin"},)"
       R"("outputs":[{"path":"/workspace/a"},{"path":"/workspace/b"}],)"
       R"("sandbox":{"limits":{"memory":"1G"}},"timeout":"10m"})",
       "outputs[0].max_size"},
      // A key only in the new request.
      {R"({"command":["python3","main.py"],"env":{"A":"1","PATH":"/bin"},)"
       R"("outputs":[{"path":"/workspace/a","max_size":"1MiB"},{"path":"/workspace/b","required":false}],)"
       R"("sandbox":{"limits":{"memory":"1G"}},"timeout":"10m"})",
       "outputs[1].required"},
      // An array element more.
      {R"({"command":["python3","main.py","-v"],"env":{"A":"1","PATH":"/bin"},)"
       R"("outputs":[{"path":"/workspace/a","max_size":"1MiB"},{"path":"/workspace/b"}],)"
       R"("sandbox":{"limits":{"memory":"1G"}},"timeout":"10m"})",
       "command[2]"},
      // Deeply nested; a type change.
      {R"({"command":["python3","main.py"],"env":{"A":"1","PATH":"/bin"},)"
       R"("outputs":[{"path":"/workspace/a","max_size":"1MiB"},{"path":"/workspace/b"}],)"
       R"("sandbox":{"limits":{"memory":1}},"timeout":"10m"})",
       "sandbox.limits.memory"},
      // A top-level key missing.
      {R"({"command":["python3","main.py"],"env":{"A":"1","PATH":"/bin"},)"
       R"("outputs":[{"path":"/workspace/a","max_size":"1MiB"},{"path":"/workspace/b"}],)"
       R"("sandbox":{"limits":{"memory":"1G"}}})",
       "timeout"},
      // The first differing field in sorted key order wins.
      {R"({"command":["python3"],"env":{"A":"2","PATH":"/bin"},"outputs":[],)"
       R"("sandbox":{},"timeout":"1m"})",
       "command[1]"},
      {"[]", "(document)"},
  };
  for (const Case& c : cases) {
    auto r = store.submit_task(request("t", c.body));
    ASSERT_FALSE(r) << c.body;
    EXPECT_EQ(r.error().code, ErrorCode::kAlreadyExists);
    EXPECT_NE(r.error().message.find("field " + c.field + " differs"), std::string::npos)
        << "want " << c.field << ", got: " << r.error().message;
    EXPECT_EQ(first_differing_field(stored, c.body), c.field);
  }
  // Nothing changed.
  EXPECT_EQ(first_differing_field(stored, store.get_task("t")->request_json), "");
  EXPECT_EQ(store.task_transitions("t")->size(), 1u);

  // The same id in another namespace is taken, whatever the body.
  auto other = store.submit_task(request("t", stored, "team-b"));
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, ErrorCode::kAlreadyExists);
  EXPECT_NE(other.error().message.find("another namespace"), std::string::npos);
  EXPECT_EQ(other.error().message.find("python3"), std::string::npos)
      << "the other namespace's request leaked: " << other.error().message;
}

TEST(TaskTableTest, TwentyConcurrentSubmitsCreateOneTask) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  for (int round = 0; round < 5; ++round) {
    std::string id = "same-" + std::to_string(round);
    std::atomic<int> created{0};
    std::atomic<int> errors{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < 20; ++i) {
      threads.emplace_back([&, i] {
        while (!go.load()) std::this_thread::yield();
        // Each thread spells the same request its own way.
        std::string body = i % 2 == 0 ? R"({"a":1,"b":[1,2]})" : R"({ "b" : [1, 2], "a" : 1 })";
        auto r = store.submit_task(request(id, body));
        if (!r) {
          ++errors;
        } else if (r->created) {
          ++created;
        }
      });
    }
    go = true;
    for (auto& t : threads) t.join();
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(created.load(), 1) << id;
    EXPECT_EQ(store.task_transitions(id)->size(), 1u);
  }
}

TEST(TaskTableTest, ConcurrentSubmitsFromTwoConnectionsCreateOneTask) {
  TempDir dir;
  std::string path = dir.file("state.db");
  StateStore a = open_or_die(path);
  StateStore b = open_or_die(path);
  std::atomic<int> created{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 20; ++i) {
    threads.emplace_back([&, i] {
      StateStore& s = i % 2 == 0 ? a : b;
      for (int k = 0; k < 10; ++k) {
        auto r = s.submit_task(request("two-" + std::to_string(k)));
        if (!r) {
          ++errors;
        } else if (r->created) {
          ++created;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(created.load(), 10);
}

// ---- retry ----

TEST(TaskTableTest, RetryOfStorageUnavailableStartsTheNextAttempt) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  ASSERT_TRUE(store.submit_task(request("r1")));
  TaskUpdate run = to_status(T::kRunning);
  run.stage = TaskStage::kExecute;
  run.sandbox_id = "sb-1";
  ASSERT_TRUE(store.update_task("r1", run));
  TaskUpdate fail = to_status(T::kFailed, "outputs could not be stored");
  fail.stage = TaskStage::kDone;
  fail.reason = "storage_unavailable";
  fail.detail = "object store unreachable";
  fail.exit_code = 0;
  fail.outputs = std::vector<TaskOutputRecord>{{"/o", true, 1, "", ""}};
  ASSERT_TRUE(store.update_task("r1", fail));

  // Another request is still a conflict, even though a retry is allowed.
  auto conflict = store.submit_task(request("r1", R"({"command":["false"]})"));
  ASSERT_FALSE(conflict);
  EXPECT_EQ(conflict.error().code, ErrorCode::kAlreadyExists);

  TaskRecord again = request("r1");
  again.resolved_json = R"({"attempt":"two"})";
  auto r = store.submit_task(again);
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_FALSE(r->created);
  EXPECT_TRUE(r->retried);
  EXPECT_EQ(r->task.status, T::kQueued);
  EXPECT_EQ(r->task.stage, TaskStage::kNone);
  EXPECT_EQ(r->task.attempt, 2);
  EXPECT_EQ(r->task.resolved_json, R"({"attempt":"two"})");
  for (const TaskRecord& t : {r->task, *store.get_task("r1")}) {
    EXPECT_FALSE(t.reason);
    EXPECT_FALSE(t.detail);
    EXPECT_FALSE(t.exit_code);
    EXPECT_FALSE(t.sandbox_id);
    EXPECT_FALSE(t.started_at_ms);
    EXPECT_FALSE(t.finished_at_ms);
    EXPECT_TRUE(t.outputs.empty());
    EXPECT_EQ(t.attempt, 2);
  }
  auto rows = store.task_transitions("r1");
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 4u);
  EXPECT_EQ(rows->back().from, T::kFailed);
  EXPECT_EQ(rows->back().to, T::kQueued);
  EXPECT_EQ(rows->back().attempt, 2);
  EXPECT_NE(rows->back().reason.find("storage_unavailable"), std::string::npos);

  // The repeat while attempt 2 is queued returns it.
  auto same = store.submit_task(request("r1"));
  ASSERT_TRUE(same);
  EXPECT_FALSE(same->created);
  EXPECT_FALSE(same->retried);
  EXPECT_EQ(same->task.attempt, 2);

  // Attempt 2 runs and sets started_at anew; its transition rows say 2.
  auto run2 = store.update_task("r1", to_status(T::kRunning));
  ASSERT_TRUE(run2);
  EXPECT_TRUE(run2->started_at_ms);
  EXPECT_EQ(store.task_transitions("r1")->back().attempt, 2);
}

TEST(TaskTableTest, OtherFailuresAreNotRetried) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  int n = 0;
  for (std::string reason : {"exit_code", "oom", "timeout", "output_missing", "input_mismatch",
                             "setup", "daemon_restart", "internal", "storage_unavailable "}) {
    std::string id = "nr-" + std::to_string(n++);
    make_task_in(store, id, T::kRunning);
    TaskUpdate fail = to_status(T::kFailed);
    fail.reason = reason;
    ASSERT_TRUE(store.update_task(id, fail));
    auto r = store.submit_task(request(id));
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->retried) << reason;
    EXPECT_EQ(r->task.status, T::kFailed) << reason;
    EXPECT_EQ(r->task.attempt, 1);
  }
  // Timed out and cancelled are final whatever the reason says.
  for (T s : {T::kTimedOut, T::kCancelled, T::kSucceeded}) {
    std::string id = "nr-" + std::to_string(n++);
    make_task_in(store, id, T::kRunning);
    TaskUpdate end = to_status(s);
    end.reason = "storage_unavailable";
    ASSERT_TRUE(store.update_task(id, end));
    auto r = store.submit_task(request(id));
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->retried);
    EXPECT_EQ(r->task.status, s);
  }
}

TEST(TaskTableTest, TwentyConcurrentRetriesStartOneAttempt) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  make_task_in(store, "cr", T::kRunning);
  TaskUpdate fail = to_status(T::kFailed);
  fail.reason = "storage_unavailable";
  ASSERT_TRUE(store.update_task("cr", fail));
  std::atomic<int> retried{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 20; ++i) {
    threads.emplace_back([&] {
      auto r = store.submit_task(request("cr"));
      if (!r) {
        ++errors;
      } else {
        if (r->retried) ++retried;
        if (r->created || r->task.attempt != 2) ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(retried.load(), 1);
}

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

// ---- durability ----

// Submits tasks and moves each along running -> a finished status,
// acknowledging each call on `fd` once it returned.
[[noreturn]] void task_crash_child(const std::string& path, int iter, int fd) {
  auto store = StateStore::open(path);
  if (!store) _exit(3);
  auto ack = [&](const std::string& line) {
    std::string l = line + "\n";
    if (write(fd, l.data(), l.size()) != static_cast<ssize_t>(l.size())) _exit(4);
  };
  for (int n = 0; n < 100000; ++n) {
    std::string id = "k" + std::to_string(iter) + "-" + std::to_string(n);
    auto s = store->submit_task(request(id, R"({"n":)" + std::to_string(n) + "}"));
    if (!s || !s->created) _exit(5);
    ack("S " + id);
    if (!store->update_task(id, to_status(T::kRunning))) _exit(6);
    ack("U " + id + " running");
    T end = n % 2 == 0 ? T::kSucceeded : T::kFailed;
    if (!store->update_task(id, to_status(end))) _exit(7);
    ack("U " + id + " " + std::string(task_status_name(end)));
  }
  _exit(0);
}

TEST(TaskTableTest, AcknowledgedSubmitsSurviveSigkill) {
  TempDir dir;
  std::string path = dir.file("state.db");
  std::mt19937 rng(20261202);
  std::uniform_int_distribution<int> delay_us(0, 150'000);
  std::map<std::string, std::string> acked;  // task -> last acknowledged status
  for (int iter = 0; iter < 12; ++iter) {
    int fds[2];
    ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      task_crash_child(path, iter, fds[1]);
    }
    close(fds[1]);
    std::string buf;
    auto drain = [&](int timeout_ms) {
      pollfd pfd{fds[0], POLLIN, 0};
      if (poll(&pfd, 1, timeout_ms) <= 0) return false;
      char chunk[4096];
      ssize_t n = read(fds[0], chunk, sizeof chunk);
      if (n <= 0) return n < 0 && errno == EINTR;
      buf.append(chunk, static_cast<std::size_t>(n));
      return true;
    };
    auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(delay_us(rng));
    while (std::chrono::steady_clock::now() < deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      drain(static_cast<int>(left.count()));
    }
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child failed early, status " << status;
    while (drain(0)) {
    }
    close(fds[0]);
    std::size_t start = 0;
    for (std::size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string line = buf.substr(start, nl - start);
      std::string id = line.substr(2, line.find(' ', 2) - 2);
      acked[id] = line[0] == 'S' ? "queued" : line.substr(line.rfind(' ') + 1);
    }

    StateStore store = open_or_die(path);
    ASSERT_EQ(*store.integrity_check(), "ok") << "iteration " << iter;
    for (const auto& [id, status_name] : acked) {
      auto t = store.get_task(id);
      ASSERT_TRUE(t) << "acknowledged task lost: " << id << " (iteration " << iter << ")";
      T want = *parse_task_status(status_name);
      // At most one unacknowledged step more may have committed.
      bool ok = t->status == want || task_transition_allowed(want, t->status);
      EXPECT_TRUE(ok) << id << ": acknowledged " << status_name << ", stored "
                      << task_status_name(t->status);
      auto rows = store.task_transitions(id);
      ASSERT_TRUE(rows);
      EXPECT_FALSE(rows->empty());
      EXPECT_EQ(rows->back().to, t->status) << id;
    }
  }
  EXPECT_GT(acked.size(), 5u) << "the children acknowledged almost nothing; the test proves little";
}

}  // namespace
}  // namespace corral
