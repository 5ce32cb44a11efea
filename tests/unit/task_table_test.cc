// The task state table (REQUIREMENTS.md D6) on temporary SQLite files:
// every pair of statuses against the transition table, idempotent submits
// (the same request, another request naming its first differing field,
// twenty threads at once), the retry of a retryable failure, and
// durability when the writer is SIGKILLed. Listing: task_table_list_test.cc.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "store/state_store.h"
#include "store/task_record.h"
#include "support/sigkill_child.h"
#include "task_test_support.h"

namespace corral {
namespace {

using namespace task_test;  // NOLINT(google-build-using-namespace): the tests' helpers

std::string read_file_or_empty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// ---- the table: schema ----

TEST(TaskTableTest, SchemaHasStrictTaskTables) {
  TempDir dir;
  std::string path = dir.file("state.db");
  { StateStore store = open_or_die(path); }
  EXPECT_EQ(raw_sql(path, "PRAGMA user_version"), std::to_string(StateStore::kSchemaVersion));
  EXPECT_EQ(raw_sql(path, "SELECT strict FROM pragma_table_list WHERE name = 'tasks'"), "1");
  EXPECT_EQ(raw_sql(path, "SELECT strict FROM pragma_table_list WHERE name = 'task_transitions'"),
            "1");
  EXPECT_EQ(raw_sql(path, "SELECT strict FROM pragma_table_list WHERE name = 'task_inputs'"), "1");
  for (const char* index :
       {"tasks_by_status", "tasks_by_created", "tasks_by_finished", "task_transitions_by_task"}) {
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
      std::string edge =
          std::string(task_status_name(from)) + " -> " + std::string(task_status_name(to));
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
  auto c =
      store.submit_task(request("build-42", R"({"env":{"B":"2","A":"1"},"command":["make"]})"));
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->created);
  EXPECT_EQ(c->task.status, T::kSucceeded);
  EXPECT_EQ(c->task.attempt, 1);
  EXPECT_EQ(store.task_transitions("build-42")->size(), 3u);
}

// Inline inputs' bytes live beside the row (schema 6): stored with a new
// task in its transaction, any bytes (NULs, 0xff) read back whole, kept by
// a repeat, gone with the task.
TEST(TaskTableTest, InlineInputBytesAreStoredBesideTheTask) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  const std::string bytes = std::string("a\0b\xff", 4) + std::string(1 << 20, 'z');
  std::vector<TaskInputContent> inputs = {{0, std::string(64, 'a'), bytes},
                                          {2, std::string(64, 'b'), ""}};
  auto a = store.submit_task(request("in-1"), inputs);
  ASSERT_TRUE(a) << a.error().to_string();
  auto got = store.task_input_content("in-1", 0);
  ASSERT_TRUE(got) << got.error().to_string();
  EXPECT_EQ(got->bytes, bytes);
  EXPECT_EQ(got->sha256, std::string(64, 'a'));
  ASSERT_TRUE(store.task_input_content("in-1", 2));
  EXPECT_EQ(store.task_input_content("in-1", 2)->bytes, "");
  EXPECT_EQ(store.task_input_content("in-1", 1).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store.task_input_content("nobody", 0).error().code, ErrorCode::kNotFound);

  // A repeat keeps the first bytes (its equal request names the same hashes).
  auto b = store.submit_task(request("in-1"), {{0, std::string(64, 'c'), "other"}});
  ASSERT_TRUE(b);
  EXPECT_FALSE(b->created);
  EXPECT_EQ(store.task_input_content("in-1", 0)->bytes, bytes);

  // A bad hash is refused, nothing stored.
  auto bad = store.submit_task(request("in-2"), {{0, "short", "x"}});
  EXPECT_FALSE(bad);
  EXPECT_EQ(store.get_task("in-2").error().code, ErrorCode::kNotFound);

  // The bytes are files beside the database (schema 9), not blobs in it.
  const std::string files = dir.file("state.db") + "-inputs";
  EXPECT_EQ(read_file_or_empty(files + "/in-1.0"), bytes);
  EXPECT_TRUE(file_exists(files + "/in-1.2"));
  EXPECT_EQ(raw_sql(dir.file("state.db"),
                    "SELECT sum(length(content)) || ' ' || sum(in_file) FROM task_inputs"),
            "0 2");
  struct stat st;
  ASSERT_EQ(stat(files.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u) << "the input files' directory is the daemon's alone";

  ASSERT_TRUE(store.update_task("in-1", to_status(T::kCancelled)));
  ASSERT_TRUE(store.delete_task("in-1"));
  EXPECT_EQ(raw_sql(dir.file("state.db"), "SELECT count(*) FROM task_inputs"), "0");
  EXPECT_FALSE(file_exists(files + "/in-1.0")) << "a deleted task's input file stayed";
  EXPECT_FALSE(file_exists(files + "/in-1.2"));
}

// A submit killed between its file and its commit, or a delete between its
// commit and the unlink, leaves a file no row names: the next open removes
// it (and half-written temporary files), and keeps every file a row names.
TEST(TaskTableTest, OpeningRemovesInputFilesNoRowNames) {
  TempDir dir;
  const std::string db = dir.file("state.db");
  const std::string files = db + "-inputs";
  {
    StateStore store = open_or_die(db);
    ASSERT_TRUE(store.submit_task(request("kept"), {{0, std::string(64, 'a'), "mine"}}));
  }
  for (const char* name : {"orphan.0", ".tmp-0123456789abcdef", "kept.1", "not-ours"}) {
    int fd = ::open((files + "/" + name).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0) << name;
    ::close(fd);
  }
  StateStore store = open_or_die(db);
  EXPECT_FALSE(file_exists(files + "/orphan.0"));
  EXPECT_FALSE(file_exists(files + "/.tmp-0123456789abcdef"));
  EXPECT_FALSE(file_exists(files + "/kept.1")) << "no row names input 1 of kept";
  EXPECT_FALSE(file_exists(files + "/not-ours"));
  EXPECT_EQ(read_file_or_empty(files + "/kept.0"), "mine");
  EXPECT_EQ(store.task_input_content("kept", 0)->bytes, "mine");
}

// A stored input whose file went missing is an error naming it, never
// empty bytes (the task then fails its input check, storage_unavailable).
TEST(TaskTableTest, AMissingInputFileIsAnErrorNotEmptyBytes) {
  TempDir dir;
  StateStore store = open_or_die(dir.file("state.db"));
  ASSERT_TRUE(store.submit_task(request("gone"), {{0, std::string(64, 'a'), "bytes"}}));
  ASSERT_EQ(::unlink((dir.file("state.db") + "-inputs/gone.0").c_str()), 0);
  auto got = store.task_input_content("gone", 0);
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().message.find("stored input 0"), std::string::npos) << got.error().message;
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

// ---- durability ----

// Submits tasks and moves each along running -> a finished status,
// acknowledging each call on `fd` once it returned.
[[noreturn]] void task_crash_child(const std::string& path, int iter, int fd) {
  // Both durability levels: the daemon's default (process, synchronous=
  // NORMAL) promises as much against a kill -9 as power-loss does.
  auto store = StateStore::open(path, iter % 2 == 0 ? StateStore::Durability::kProcessCrash
                                                    : StateStore::Durability::kPowerLoss);
  if (!store) _exit(3);
  auto ack = [fd](const std::string& line) { testing::acknowledge(fd, line); };
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
    auto lines = testing::lines_acknowledged_before_sigkill(
        [&](int fd) { task_crash_child(path, iter, fd); }, std::chrono::microseconds(delay_us(rng)),
        // Every fourth kill may land while the store opens; the others leave
        // the child its whole window however loaded the host is.
        iter % 4 == 0 ? testing::KillClock::kFromFork : testing::KillClock::kFromFirstLine);
    ASSERT_TRUE(lines);
    for (const std::string& line : *lines) {
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
