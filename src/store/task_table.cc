// The task state table (REQUIREMENTS.md D6): StateStore's task methods.
// The tables are in state_store.cc's migration 4 -> 5; the statuses and
// their transitions in task_record.cc. Every write is one transaction under
// the store's lock, as for sandboxes.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>

#include "base/scope_guard.h"
#include "store/state_db_internal.h"
#include "store/state_store.h"

namespace corral {
namespace {

using Json = nlohmann::json;
using sql::Stmt;
using sql::Txn;
using store_detail::bad_row;
using store_detail::check_id;

constexpr const char* kTaskColumns =
    "id, ns, status, stage, request_json, resolved_json, exit_code, signal, reason, detail, "
    "sandbox_id, process_id, outputs_json, snapshot_id, snapshot_error, attempt, replay_of, "
    "created_at, updated_at, started_at, finished_at, node";
constexpr std::size_t kMaxTaskIdBytes = 128;
constexpr std::size_t kMaxNsBytes = 128;
constexpr std::size_t kMaxListLimit = 1000;
// The cursor's format version: a cursor of another version is refused.
constexpr std::string_view kCursorVersion = "1";

bool task_id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == ':' || c == '-';
}

bool valid_task_id(std::string_view id) {
  return !id.empty() && id.size() <= kMaxTaskIdBytes &&
         std::all_of(id.begin(), id.end(), task_id_char);
}

Status check_task_id(std::string_view what, std::string_view id) {
  if (valid_task_id(id)) return ok();
  return make_error(ErrorCode::kInvalidArgument,
                    std::string(what) + " must be 1-" + std::to_string(kMaxTaskIdBytes) +
                        " characters of [A-Za-z0-9._:-], got " + std::to_string(id.size()) +
                        " bytes",
                    "choose an id such as build-42 or job:2026-12-01.7");
}

std::optional<std::int64_t> opt_int(const std::optional<int>& v) {
  return v ? std::optional<std::int64_t>(*v) : std::nullopt;
}

std::optional<int> opt_narrow(const std::optional<std::int64_t>& v) {
  return v ? std::optional<int>(static_cast<int>(*v)) : std::nullopt;
}

bool is_sha256_hex(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

Status check_outputs(const std::vector<TaskOutputRecord>& outputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const TaskOutputRecord& o = outputs[i];
    std::string at = "output " + std::to_string(i);
    if (o.path.empty()) return make_error(ErrorCode::kInvalidArgument, at + " has no path");
    if (!o.sha256.empty() && !is_sha256_hex(o.sha256)) {
      return make_error(ErrorCode::kInvalidArgument,
                        at + " (" + o.path + "): sha256 must be 64 lowercase hex digits");
    }
  }
  return ok();
}

std::string outputs_to_json(const std::vector<TaskOutputRecord>& outputs) {
  Json a = Json::array();
  for (const TaskOutputRecord& o : outputs) {
    a.push_back({{"path", o.path},
                 {"present", o.present},
                 {"size", o.size},
                 {"sha256", o.sha256},
                 {"object_key", o.object_key}});
  }
  return a.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<std::vector<TaskOutputRecord>> outputs_from_json(const std::string& text) {
  Json a = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (a.is_discarded() || !a.is_array()) return bad_row("tasks", "outputs_json", text);
  std::vector<TaskOutputRecord> out;
  for (const Json& o : a) {
    bool shaped = o.is_object() && o.size() == 5 && o.contains("path") && o["path"].is_string() &&
                  o.contains("present") && o["present"].is_boolean() && o.contains("size") &&
                  o["size"].is_number_unsigned() && o.contains("sha256") &&
                  o["sha256"].is_string() && o.contains("object_key") &&
                  o["object_key"].is_string();
    if (!shaped) return bad_row("tasks", "outputs_json", text);
    out.push_back(TaskOutputRecord{o["path"].get<std::string>(), o["present"].get<bool>(),
                                   o["size"].get<std::uint64_t>(), o["sha256"].get<std::string>(),
                                   o["object_key"].get<std::string>()});
  }
  return out;
}

Result<TaskRecord> read_task(const Stmt& st) {
  TaskRecord r;
  r.id = st.text(0);
  r.ns = st.text(1);
  std::string status = st.text(2);
  auto s = parse_task_status(status);
  if (!s) return bad_row("tasks", "status", status);
  r.status = *s;
  std::string stage = st.text(3);
  auto g = parse_task_stage(stage);
  if (!g) return bad_row("tasks", "stage", stage);
  r.stage = *g;
  r.request_json = st.text(4);
  r.resolved_json = st.text(5);
  r.exit_code = opt_narrow(st.opt_int64(6));
  r.signal = opt_narrow(st.opt_int64(7));
  r.reason = st.opt_text(8);
  r.detail = st.opt_text(9);
  r.sandbox_id = st.opt_text(10);
  r.process_id = st.opt_text(11);
  auto outputs = outputs_from_json(st.text(12));
  if (!outputs) return tl::unexpected<Error>(std::move(outputs).error());
  r.outputs = std::move(*outputs);
  r.snapshot_id = st.opt_text(13);
  r.snapshot_error = st.opt_text(14);
  r.attempt = static_cast<int>(st.int64(15));
  r.replay_of = st.opt_text(16);
  r.created_at_ms = st.int64(17);
  r.updated_at_ms = st.int64(18);
  r.started_at_ms = st.opt_int64(19);
  r.finished_at_ms = st.opt_int64(20);
  r.node = st.opt_text(21);
  return r;
}

Result<std::vector<TaskRecord>> read_tasks(Stmt& st, std::string_view what) {
  return store_detail::read_rows(st, what, read_task);
}

tl::unexpected<Error> no_task(std::string_view id) {
  return make_error(ErrorCode::kNotFound, "task '" + std::string(id) + "' does not exist",
                    "list the tasks with GET /v1/tasks");
}

// With the store's lock held.
Result<std::optional<TaskRecord>> find_task(sql::Connection& h, std::string_view id) {
  auto st = h.prepare(std::string("SELECT ") + kTaskColumns + " FROM tasks WHERE id = ?1");
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  st->bind(1, id);
  auto rows = read_tasks(*st, "reading task " + std::string(id));
  if (!rows) return tl::unexpected<Error>(std::move(rows).error());
  if (rows->empty()) return std::optional<TaskRecord>();
  return std::optional<TaskRecord>(std::move(rows->front()));
}

// Writes every column but id, ns, request_json and created_at (which never
// change) from `t`. With the store's lock held, in a transaction.
Status write_task(sql::Connection& h, const TaskRecord& t) {
  auto st = h.prepare(
      "UPDATE tasks SET status = ?2, stage = ?3, resolved_json = ?4, "
      "exit_code = ?5, signal = ?6, reason = ?7, detail = ?8, sandbox_id = ?9, "
      "process_id = ?10, outputs_json = ?11, snapshot_id = ?12, "
      "snapshot_error = ?13, attempt = ?14, replay_of = ?15, updated_at = ?16, "
      "started_at = ?17, finished_at = ?18, node = ?19 WHERE id = ?1");
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  st->bind(1, t.id).bind(2, task_status_name(t.status)).bind(3, task_stage_name(t.stage));
  st->bind(4, t.resolved_json).bind(5, opt_int(t.exit_code)).bind(6, opt_int(t.signal));
  st->bind(7, t.reason).bind(8, t.detail).bind(9, t.sandbox_id).bind(10, t.process_id);
  st->bind(11, outputs_to_json(t.outputs)).bind(12, t.snapshot_id).bind(13, t.snapshot_error);
  st->bind(14, std::int64_t{t.attempt}).bind(15, t.replay_of).bind(16, t.updated_at_ms);
  st->bind(17, t.started_at_ms).bind(18, t.finished_at_ms).bind(19, t.node);
  return st->run("UPDATE tasks");
}

Result<std::int64_t> insert_transition(sql::Connection& h, const TaskRecord& t,
                                       std::optional<TaskStatus> from, std::string_view reason) {
  auto st = h.prepare(
      "INSERT INTO task_transitions (task_id, from_status, to_status, stage, "
      "attempt, at, reason) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id");
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  st->bind(1, t.id);
  if (from) {
    st->bind(2, task_status_name(*from));
  } else {
    st->bind(2, std::nullopt);
  }
  st->bind(3, task_status_name(t.status)).bind(4, task_stage_name(t.stage));
  st->bind(5, std::int64_t{t.attempt}).bind(6, t.updated_at_ms).bind(7, reason);
  return st->returned_id("INSERT INTO task_transitions");
}

bool retryable(const TaskRecord& t) {
  if (t.status != TaskStatus::kFailed || !t.reason) return false;
  return std::find(kRetryableTaskReasons.begin(), kRetryableTaskReasons.end(), *t.reason) !=
         kRetryableTaskReasons.end();
}

// Moves a failed task back to queued as its next attempt: what the record
// says of one run (sandbox, result, outputs, snapshot) starts empty again;
// the transition rows keep the history.
void start_next_attempt(TaskRecord& t, std::string resolved_json, std::int64_t now) {
  t.status = TaskStatus::kQueued;
  t.stage = TaskStage::kNone;
  t.attempt += 1;
  t.resolved_json = std::move(resolved_json);
  t.exit_code.reset();
  t.signal.reset();
  t.reason.reset();
  t.detail.reset();
  t.sandbox_id.reset();
  t.process_id.reset();
  t.outputs.clear();
  t.snapshot_id.reset();
  t.snapshot_error.reset();
  t.started_at_ms.reset();
  t.finished_at_ms.reset();
  t.updated_at_ms = now;
}

// The cursor names the last task of a page by (created_at, id), the
// listing's order; hex-encoded so that clients treat it as opaque.
std::string encode_cursor(const TaskRecord& last) {
  std::string plain =
      std::string(kCursorVersion) + "/" + std::to_string(last.created_at_ms) + "/" + last.id;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : plain) {
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  }
  return out;
}

struct CursorPosition {
  std::int64_t created_at_ms = 0;
  std::string id;
};

Result<CursorPosition> decode_cursor(std::string_view cursor) {
  auto forged = [] {
    return make_error(ErrorCode::kInvalidArgument, "cursor is not one this server gave out",
                      "pass the next_cursor of the previous page unchanged, or none for the "
                      "first page");
  };
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  // The longest cursor: version, two slashes, an int64 and a whole id.
  constexpr std::size_t kMaxPlain = kCursorVersion.size() + 2 + 20 + kMaxTaskIdBytes;
  if (cursor.empty() || cursor.size() % 2 != 0 || cursor.size() > 2 * kMaxPlain) return forged();
  std::string plain;
  for (std::size_t i = 0; i < cursor.size(); i += 2) {
    int hi = nibble(cursor[i]);
    int lo = nibble(cursor[i + 1]);
    if (hi < 0 || lo < 0) return forged();
    plain += static_cast<char>(hi * 16 + lo);
  }
  std::string_view p = plain;
  std::string prefix = std::string(kCursorVersion) + "/";
  if (p.substr(0, prefix.size()) != prefix) return forged();
  p.remove_prefix(prefix.size());
  std::size_t slash = p.find('/');
  if (slash == std::string_view::npos || slash == 0) return forged();
  std::string_view number = p.substr(0, slash);
  if (!std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return forged();
  CursorPosition pos;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), pos.created_at_ms);
  if (ec != std::errc() || end != number.data() + number.size()) return forged();
  pos.id = std::string(p.substr(slash + 1));
  if (!valid_task_id(pos.id)) return forged();
  return pos;
}

}  // namespace

namespace store_detail {

Status release_tasks_of_lost_node(sql::Connection& h, std::string_view node, std::int64_t now,
                                  LostNodeSweep& sweep) {
  auto st = h.prepare(std::string("SELECT ") + kTaskColumns +
                      " FROM tasks WHERE node = ?1 AND status IN ('queued', 'running') "
                      "ORDER BY created_at, id");
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  st->bind(1, node);
  auto held = read_tasks(*st, "listing the tasks of lost node " + std::string(node));
  if (!held) return tl::unexpected<Error>(std::move(held).error());
  for (TaskRecord& t : *held) {
    const TaskStatus from = t.status;
    // Started: the execute stage was reached, so the command may have run
    // (in part). It must not run twice behind the caller's back.
    const bool started = from == TaskStatus::kRunning && t.stage >= TaskStage::kExecute;
    std::string why;
    if (started) {
      t.status = TaskStatus::kFailed;
      t.reason = std::string(kNodeLostReason);
      t.detail = "node " + std::string(node) +
                 " was lost while the command ran; submit the same request again to run it anew";
      t.finished_at_ms = now;
      t.updated_at_ms = now;
      why = std::string(kNodeLostReason);
      sweep.tasks_failed.push_back(t.id);
    } else {
      why = "node " + std::string(node) + " lost before the command started";
      if (from == TaskStatus::kRunning) {
        start_next_attempt(t, t.resolved_json, now);
      } else {
        t.updated_at_ms = now;
      }
      sweep.tasks_requeued.push_back(t.id);
    }
    t.node.reset();
    CORRAL_TRY(write_task(h, t));
    if (t.status != from) {
      auto tid = insert_transition(h, t, from, why);
      if (!tid) return tl::unexpected<Error>(std::move(tid).error());
    }
  }
  return ok();
}

}  // namespace store_detail

Result<TaskSubmitResult> StateStore::submit_task(const TaskRecord& task,
                                                 const std::vector<TaskInputContent>& inputs) {
  CORRAL_TRY(check_task_id("task id", task.id));
  for (const TaskInputContent& in : inputs) {
    if (in.sha256.size() != 64 || in.index > INT32_MAX)
      return make_error(ErrorCode::kInvalidArgument, "task " + task.id + ": input " +
                                                         std::to_string(in.index) +
                                                         " needs its sha256 (64 hex digits)");
  }
  if (task.ns.empty() || task.ns.size() > kMaxNsBytes) {
    return make_error(ErrorCode::kInvalidArgument,
                      "task namespace must be 1-" + std::to_string(kMaxNsBytes) + " bytes");
  }
  if (task.replay_of) CORRAL_TRY(check_task_id("replay_of", *task.replay_of));
  auto request = store_detail::canonical_json(task.request_json, "the task request",
                                              "pass the task request serialized as JSON");
  if (!request) return tl::unexpected<Error>(std::move(request).error());
  std::string resolved;
  if (!task.resolved_json.empty()) {
    auto r = store_detail::canonical_json(task.resolved_json, "the task's resolved_json",
                                          "pass what replay needs serialized as JSON, or nothing");
    if (!r) return tl::unexpected<Error>(std::move(r).error());
    resolved = std::move(*r);
  }

  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  std::string what = "submitting task " + task.id;
  Txn txn(h);
  CORRAL_TRY_CTX(txn.begin(), what);
  auto found = find_task(h, task.id);
  if (!found) return tl::unexpected<Error>(std::move(found).error().wrap(what));
  std::int64_t now = now_ms();

  if (*found) {
    TaskRecord& prev = **found;
    if (prev.ns != task.ns) {
      return make_error(ErrorCode::kAlreadyExists,
                        "task " + task.id + " exists in another namespace",
                        "task ids are unique across namespaces: choose another id");
    }
    if (prev.request_json != *request) {
      std::string field = first_differing_field(prev.request_json, *request);
      return make_error(
          ErrorCode::kAlreadyExists,
          "task " + task.id + " exists with another request: field " + field + " differs",
          "a retry must resend the original request unchanged; a new request "
          "needs a new id");
    }
    if (!retryable(prev)) return TaskSubmitResult{std::move(prev), false, false};
    std::string why = "retry after " + *prev.reason;
    start_next_attempt(prev, std::move(resolved), now);
    prev.node = db_->node;
    CORRAL_TRY_CTX(write_task(h, prev), what);
    auto tid = insert_transition(h, prev, TaskStatus::kFailed, why);
    if (!tid) return tl::unexpected<Error>(std::move(tid).error().wrap(what));
    CORRAL_TRY_CTX(txn.commit(), what);
    return TaskSubmitResult{std::move(prev), false, true};
  }

  TaskRecord t;
  t.id = task.id;
  t.ns = task.ns;
  t.request_json = std::move(*request);
  t.resolved_json = std::move(resolved);
  t.replay_of = task.replay_of;
  t.created_at_ms = now;
  t.updated_at_ms = now;
  t.node = db_->node;
  auto ins = h.prepare(
      "INSERT INTO tasks (id, ns, status, stage, request_json, resolved_json, "
      "attempt, replay_of, created_at, updated_at, node) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, ?10)");
  if (!ins) return tl::unexpected<Error>(std::move(ins).error().wrap(what));
  ins->bind(1, t.id).bind(2, t.ns).bind(3, task_status_name(t.status));
  ins->bind(4, task_stage_name(t.stage)).bind(5, t.request_json).bind(6, t.resolved_json);
  ins->bind(7, std::int64_t{t.attempt}).bind(8, t.replay_of).bind(9, now).bind(10, t.node);
  CORRAL_TRY_CTX(ins->run("INSERT INTO tasks"), what);
  // On SQLite the bytes go to files (store/task_input_files.h), complete
  // before the rows that name them commit; removed again if the commit does
  // not come. On PostgreSQL (no files: other nodes read them) into the row.
  const TaskInputFiles* files = db_->inputs ? &*db_->inputs : nullptr;
  std::size_t written = 0;
  ScopeGuard unwritten([&] {
    for (std::size_t i = 0; i < written; ++i) files->remove(t.id, inputs[i].index);
  });
  for (const TaskInputContent& in : inputs) {
    if (files != nullptr) {
      CORRAL_TRY_CTX(files->write(t.id, in.index, in.bytes), what);
      ++written;
    }
    auto put = h.prepare(
        "INSERT INTO task_inputs (task_id, idx, sha256, content, in_file) "
        "VALUES (?1, ?2, ?3, ?4, ?5)");
    if (!put) return tl::unexpected<Error>(std::move(put).error().wrap(what));
    put->bind(1, t.id).bind(2, static_cast<std::int64_t>(in.index)).bind(3, in.sha256);
    put->bind_blob(4, files != nullptr ? std::string_view("", 0) : std::string_view(in.bytes));
    put->bind(5, std::int64_t{files != nullptr ? 1 : 0});
    CORRAL_TRY_CTX(put->run("INSERT INTO task_inputs"), what);
  }
  auto tid = insert_transition(h, t, std::nullopt, "submitted");
  if (!tid) return tl::unexpected<Error>(std::move(tid).error().wrap(what));
  CORRAL_TRY_CTX(txn.commit(), what);
  unwritten.dismiss();
  return TaskSubmitResult{std::move(t), true, false};
}

Result<TaskRecord> StateStore::get_task(std::string_view id) {
  std::lock_guard lock(db_->mu);
  auto found = find_task(*db_->conn, id);
  if (!found) return tl::unexpected<Error>(std::move(found).error());
  if (!*found) return no_task(id);
  return std::move(**found);
}

Result<TaskPage> StateStore::list_tasks(const TaskFilter& filter) {
  if (filter.limit < 1 || filter.limit > kMaxListLimit) {
    return make_error(ErrorCode::kInvalidArgument, "limit must be 1-" +
                                                       std::to_string(kMaxListLimit) + ", got " +
                                                       std::to_string(filter.limit));
  }
  std::optional<CursorPosition> after;
  if (filter.cursor) {
    auto pos = decode_cursor(*filter.cursor);
    if (!pos) return tl::unexpected<Error>(std::move(pos).error());
    after = std::move(*pos);
  }
  std::vector<TaskStatus> statuses;
  for (TaskStatus s : kAllTaskStatuses) {
    if (std::find(filter.statuses.begin(), filter.statuses.end(), s) != filter.statuses.end())
      statuses.push_back(s);
  }
  // Only placeholders are spliced into the SQL; every value is bound.
  std::string sql = std::string("SELECT ") + kTaskColumns + " FROM tasks WHERE 1 = 1";
  if (!statuses.empty()) {
    sql += " AND status IN (";
    for (std::size_t i = 0; i < statuses.size(); ++i) sql += i == 0 ? "?" : ", ?";
    sql += ")";
  }
  if (filter.ns) sql += " AND ns = ?";
  if (filter.created_after_ms) sql += " AND created_at >= ?";
  if (filter.created_before_ms) sql += " AND created_at < ?";
  if (after) sql += " AND (created_at, id) < (?, ?)";
  sql += " ORDER BY created_at DESC, id DESC LIMIT ?";

  std::lock_guard lock(db_->mu);
  auto st = db_->conn->prepare(sql);
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  int n = 0;
  for (TaskStatus s : statuses) st->bind(++n, task_status_name(s));
  if (filter.ns) st->bind(++n, *filter.ns);
  if (filter.created_after_ms) st->bind(++n, *filter.created_after_ms);
  if (filter.created_before_ms) st->bind(++n, *filter.created_before_ms);
  if (after) {
    st->bind(++n, after->created_at_ms);
    st->bind(++n, after->id);
  }
  // One more than a page: whether there is a next page.
  st->bind(++n, static_cast<std::int64_t>(filter.limit + 1));
  auto rows = read_tasks(*st, "listing tasks");
  if (!rows) return tl::unexpected<Error>(std::move(rows).error());
  TaskPage page;
  page.tasks = std::move(*rows);
  if (page.tasks.size() > filter.limit) {
    page.tasks.resize(filter.limit);
    page.next_cursor = encode_cursor(page.tasks.back());
  }
  return page;
}

Result<TaskRecord> StateStore::update_task(std::string_view id, const TaskUpdate& update) {
  CORRAL_TRY(check_task_id("task id", id));
  std::string what = "updating task " + std::string(id);
  std::optional<std::string> resolved = update.resolved_json;
  if (resolved && !resolved->empty()) {
    auto r = store_detail::canonical_json(*resolved, "the task's resolved_json",
                                          "pass what replay needs serialized as JSON");
    if (!r) return tl::unexpected<Error>(std::move(r).error().wrap(what));
    resolved = std::move(*r);
  }
  if (update.sandbox_id) CORRAL_TRY_CTX(check_id("sandbox", *update.sandbox_id), what);
  if (update.process_id) CORRAL_TRY_CTX(check_id("process", *update.process_id), what);
  if (update.outputs) CORRAL_TRY_CTX(check_outputs(*update.outputs), what);

  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  Txn txn(h);
  CORRAL_TRY_CTX(txn.begin(), what);
  auto found = find_task(h, id);
  if (!found) return tl::unexpected<Error>(std::move(found).error().wrap(what));
  if (!*found) return no_task(id);
  TaskRecord t = std::move(**found);
  const TaskStatus from = t.status;
  const TaskStage from_stage = t.stage;
  std::int64_t now = now_ms();

  // A task runs on the node that holds it, and on one node only: only that
  // node moves it on or records its progress. Any node may cancel a task
  // still queued (no command has started anywhere); a queued task that no
  // node holds is taken by the node that moves it to running.
  const bool cancel_queued =
      from == TaskStatus::kQueued && update.status && *update.status == TaskStatus::kCancelled;
  const bool takes_unheld = !t.node && from == TaskStatus::kQueued && update.status &&
                            *update.status == TaskStatus::kRunning;
  if (t.node != db_->node && !cancel_queued && !takes_unheld)
    return make_error(ErrorCode::kPermissionDenied,
                      "task " + t.id + " is held by " +
                          (t.node ? "node " + *t.node : std::string("no node")) + ", not " +
                          db_->node,
                      "only the node that claimed a task runs it and records its progress");
  if (update.attempt && *update.attempt != t.attempt)
    return make_error(ErrorCode::kPermissionDenied,
                      "task " + t.id + " is at attempt " + std::to_string(t.attempt) + ", not " +
                          std::to_string(*update.attempt),
                      "the attempt was superseded (its node was lost, or it was resubmitted)");
  if (update.status && *update.status != from) {
    TaskStatus to = *update.status;
    std::string edge =
        std::string(task_status_name(from)) + " -> " + std::string(task_status_name(to));
    if (to == TaskStatus::kQueued) {
      return make_error(ErrorCode::kInvalidArgument,
                        "task " + t.id + ": " + edge + " is taken only by a repeat submit",
                        "submit the same request again to start the next attempt");
    }
    if (!task_transition_allowed(from, to)) {
      return make_error(ErrorCode::kInvalidArgument,
                        "task " + t.id + ": transition " + edge + " is not allowed",
                        "re-read the task: another request may have changed its status");
    }
    if (to == TaskStatus::kRunning) t.node = db_->node;
    t.status = to;
    if (to == TaskStatus::kRunning && !t.started_at_ms) t.started_at_ms = now;
    if (is_finished(to)) t.finished_at_ms = now;
  }
  if (update.stage) t.stage = *update.stage;
  if (resolved) t.resolved_json = std::move(*resolved);
  if (update.exit_code) t.exit_code = update.exit_code;
  if (update.signal) t.signal = update.signal;
  if (update.reason) t.reason = update.reason;
  if (update.detail) t.detail = update.detail;
  if (update.sandbox_id) t.sandbox_id = update.sandbox_id;
  if (update.process_id) t.process_id = update.process_id;
  if (update.outputs) t.outputs = *update.outputs;
  if (update.snapshot_id) t.snapshot_id = update.snapshot_id;
  if (update.snapshot_error) t.snapshot_error = update.snapshot_error;
  t.updated_at_ms = now;

  CORRAL_TRY_CTX(write_task(h, t), what);
  // A row per change of status or stage: the stage rows time each stage.
  if (t.status != from || t.stage != from_stage) {
    auto tid = insert_transition(h, t, from, update.reason_for_transition);
    if (!tid) return tl::unexpected<Error>(std::move(tid).error().wrap(what));
  }
  CORRAL_TRY_CTX(txn.commit(), what);
  return t;
}

Result<std::vector<TaskRecord>> StateStore::unfinished_tasks() {
  std::lock_guard lock(db_->mu);
  auto st = db_->conn->prepare(std::string("SELECT ") + kTaskColumns +
                               " FROM tasks WHERE status IN ('queued', 'running') "
                               "AND node = ?1 ORDER BY created_at, id");
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  st->bind(1, db_->node);
  return read_tasks(*st, "listing unfinished tasks");
}

Result<std::vector<std::string>> StateStore::claim_queued_tasks(std::size_t limit) {
  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  const std::string what = "claiming queued tasks for node " + db_->node;
  Txn txn(h);
  CORRAL_TRY_CTX(txn.begin(), what);
  // SKIP LOCKED: rows another node's claim holds are passed over rather
  // than waited for (the write lock already orders claims; this keeps a
  // claim from queueing behind a slow one should that lock ever narrow).
  std::string sql =
      "SELECT id FROM tasks WHERE status = 'queued' AND node IS NULL "
      // A cordoned node takes no new work.
      "AND NOT EXISTS (SELECT 1 FROM nodes WHERE id = ?2 AND cordoned <> 0) "
      "ORDER BY created_at, id LIMIT ?1";
  if (h.backend() == sql::Backend::kPostgres) sql += " FOR UPDATE SKIP LOCKED";
  auto sel = h.prepare(sql);
  if (!sel) return tl::unexpected<Error>(std::move(sel).error().wrap(what));
  sel->bind(1, static_cast<std::int64_t>(limit)).bind(2, db_->node);
  std::vector<std::string> ids;
  for (;;) {
    auto row = sel->step("SELECT tasks");
    if (!row) return tl::unexpected<Error>(std::move(row).error().wrap(what));
    if (!*row) break;
    ids.push_back(sel->text(0));
  }
  for (const std::string& id : ids) {
    auto up = h.prepare("UPDATE tasks SET node = ?2 WHERE id = ?1 AND node IS NULL");
    if (!up) return tl::unexpected<Error>(std::move(up).error().wrap(what));
    up->bind(1, id).bind(2, db_->node);
    CORRAL_TRY_CTX(up->run("UPDATE tasks"), what);
  }
  CORRAL_TRY_CTX(txn.commit(), what);
  return ids;
}

Result<std::vector<TaskTransitionRecord>> StateStore::task_transitions(std::string_view id) {
  std::lock_guard lock(db_->mu);
  auto st = db_->conn->prepare(
      "SELECT id, task_id, from_status, to_status, stage, attempt, at, reason "
      "FROM task_transitions WHERE task_id = ?1 ORDER BY id");
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  st->bind(1, id);
  std::vector<TaskTransitionRecord> out;
  for (;;) {
    auto row = st->step("reading the transitions of task " + std::string(id));
    if (!row) return tl::unexpected<Error>(std::move(row).error());
    if (!*row) break;
    TaskTransitionRecord r;
    r.id = st->int64(0);
    r.task_id = st->text(1);
    if (auto f = st->opt_text(2)) {
      auto s = parse_task_status(*f);
      if (!s) return bad_row("task_transitions", "from_status", *f);
      r.from = *s;
    }
    std::string to = st->text(3);
    auto s = parse_task_status(to);
    if (!s) return bad_row("task_transitions", "to_status", to);
    r.to = *s;
    std::string stage = st->text(4);
    auto g = parse_task_stage(stage);
    if (!g) return bad_row("task_transitions", "stage", stage);
    r.stage = *g;
    r.attempt = static_cast<int>(st->int64(5));
    r.at_ms = st->int64(6);
    r.reason = st->text(7);
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::vector<TaskRecord>> StateStore::finished_tasks_before(std::int64_t before_ms,
                                                                  std::size_t limit) {
  if (limit == 0) return std::vector<TaskRecord>();
  std::lock_guard lock(db_->mu);
  auto st = db_->conn->prepare(std::string("SELECT ") + kTaskColumns +
                               " FROM tasks WHERE finished_at IS NOT NULL AND finished_at < ?1 "
                               "ORDER BY finished_at, id LIMIT ?2");
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  st->bind(1, before_ms);
  st->bind(2, static_cast<std::int64_t>(std::min<std::size_t>(limit, INT64_MAX)));
  return read_tasks(*st, "listing finished tasks");
}

Result<TaskInputContent> StateStore::task_input_content(std::string_view id, std::size_t index) {
  CORRAL_TRY(check_task_id("task id", id));
  std::lock_guard lock(db_->mu);
  auto sel = db_->conn->prepare(
      "SELECT sha256, content, in_file FROM task_inputs WHERE task_id = ?1 AND idx = ?2");
  if (!sel) return tl::unexpected<Error>(std::move(sel).error());
  sel->bind(1, id).bind(2, static_cast<std::int64_t>(std::min<std::size_t>(index, INT64_MAX)));
  auto row = sel->step("SELECT task_inputs");
  if (!row) return tl::unexpected<Error>(std::move(row).error());
  if (!*row)
    return make_error(ErrorCode::kNotFound,
                      "task " + std::string(id) + " has no stored input " + std::to_string(index));
  TaskInputContent c;
  c.index = index;
  c.sha256 = sel->text(0);
  if (sel->int64(2) == 0) {
    c.bytes = sel->text(1);  // a row of schema 8 or older
    return c;
  }
  if (!db_->inputs)
    return make_error(ErrorCode::kInternal, "task " + std::string(id) + ": stored input " +
                                                std::to_string(index) +
                                                " names a file, and this "
                                                "store keeps none");
  auto bytes = db_->inputs->read(id, index);
  if (!bytes)
    return tl::unexpected<Error>(std::move(bytes).error().wrap(
        "task " + std::string(id) + ": stored input " + std::to_string(index)));
  c.bytes = std::move(*bytes);
  return c;
}

Status StateStore::delete_task(std::string_view id) {
  CORRAL_TRY(check_task_id("task id", id));
  std::string what = "deleting task " + std::string(id);
  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  Txn txn(h);
  CORRAL_TRY_CTX(txn.begin(), what);
  auto sel = h.prepare("SELECT status FROM tasks WHERE id = ?1");
  if (!sel) return tl::unexpected<Error>(std::move(sel).error().wrap(what));
  sel->bind(1, id);
  auto row = sel->step("SELECT status");
  if (!row) return tl::unexpected<Error>(std::move(row).error().wrap(what));
  if (!*row) return no_task(id);
  std::string status_name = sel->text(0);
  auto status = parse_task_status(status_name);
  if (!status) return bad_row("tasks", "status", status_name);
  if (!is_finished(*status)) {
    return make_error(ErrorCode::kInvalidArgument,
                      what + ": it is " + status_name + "; only a finished task is deleted",
                      "cancel it first, or wait until it finishes");
  }
  // Its input files go after the commit (a kill in between leaves them to
  // the next open's sweep).
  std::vector<std::size_t> in_files;
  auto files = h.prepare("SELECT idx FROM task_inputs WHERE task_id = ?1 AND in_file = 1");
  if (!files) return tl::unexpected<Error>(std::move(files).error().wrap(what));
  files->bind(1, id);
  for (;;) {
    auto more = files->step("SELECT task_inputs");
    if (!more) return tl::unexpected<Error>(std::move(more).error().wrap(what));
    if (!*more) break;
    in_files.push_back(static_cast<std::size_t>(files->int64(0)));
  }
  // The transition and input rows go with it (ON DELETE CASCADE).
  auto del = h.prepare("DELETE FROM tasks WHERE id = ?1");
  if (!del) return tl::unexpected<Error>(std::move(del).error().wrap(what));
  del->bind(1, id);
  CORRAL_TRY_CTX(del->run("DELETE FROM tasks"), what);
  CORRAL_TRY_CTX(txn.commit(), what);
  if (db_->inputs)
    for (std::size_t index : in_files) db_->inputs->remove(id, index);
  return ok();
}

}  // namespace corral
