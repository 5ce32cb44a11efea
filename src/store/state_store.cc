#include "store/state_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <utility>

#include "store/sql_postgres.h"
#include "store/sql_sqlite.h"
#include "store/sqlite.h"
#include "store/state_db_internal.h"

namespace corral {

namespace {

using Json = nlohmann::json;
using sql::Stmt;
using sql::Txn;
using sqlite::exec_sql;
using sqlite::fail;
using sqlite::kBusyTimeoutMs;
using sqlite::pragma_text;
using store_detail::bad_row;
using store_detail::check_id;
constexpr std::size_t kMaxKeyBytes = 256;

// Migrations[v] brings a database from user_version v to v + 1. Append only:
// a released step is never edited.
constexpr const char* kMigrations[] = {
    // 0 -> 1: the first schema.
    R"sql(
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
)sql",
    // 1 -> 2: what the daemon needs to find a live sandbox again after a
    // restart (init pid and start time, its environment), as JSON.
    R"sql(
ALTER TABLE sandboxes ADD COLUMN runtime_json TEXT;
)sql",
    // 2 -> 3: what the daemon needs to find a background process again
    // after a restart (host pid and start time) and to keep its timeout.
    R"sql(
ALTER TABLE processes ADD COLUMN deadline_at INTEGER;
ALTER TABLE processes ADD COLUMN host_pid INTEGER CHECK (host_pid > 0);
ALTER TABLE processes ADD COLUMN host_start_time INTEGER CHECK (host_start_time > 0);
)sql",
    // 3 -> 4: whether a process was ended by its timeout, so that a
    // restarted daemon reports an ended process's whole result (and keeps
    // the mark of one its timeout was killing when the daemon died). Rows
    // of earlier daemons: an exit code and a signal both set can only be a
    // timeout's end (124 replaces the kill's status); a timed-out process
    // that exited before the kill landed cannot be told apart and stays 0.
    R"sql(
ALTER TABLE processes ADD COLUMN timed_out INTEGER NOT NULL DEFAULT 0 CHECK (timed_out IN (0, 1));
UPDATE processes SET timed_out = 1
  WHERE state = 'exited' AND exit_code = 124 AND signal IS NOT NULL;
)sql",
    // 4 -> 5: the task state table (D6, issue 15) and its transitions. A
    // task outlives its sandbox (sandbox_id is no foreign key); the stage
    // has no CHECK so that a later stage needs no table rebuild (the store
    // refuses unknown names when it reads them). outputs_json is an array
    // of {path, present, size, sha256, object_key}.
    R"sql(
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
)sql",
    // 5 -> 6: the bytes of a task's inline inputs, beside its row rather
    // than inside request_json: the row stays small (it is read at every
    // transition and answer) and replay (T2) finds the stored copies.
    R"sql(
CREATE TABLE task_inputs (
  task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL CHECK (idx >= 0),
  sha256 TEXT NOT NULL CHECK (length(sha256) = 64),
  content BLOB NOT NULL,
  PRIMARY KEY (task_id, idx)
) STRICT;
)sql",
    // 6 -> 7: what a sandbox's diagnostics said when it was destroyed (T1,
    // issue 16): kept for serve.diagnostics.retention after the sandbox is
    // gone, then pruned by recorded_at. No foreign key: the row is history
    // of its own. ns: the namespace that created the sandbox, whose callers
    // alone may read it.
    R"sql(
CREATE TABLE sandbox_diagnostics (
  sandbox_id TEXT PRIMARY KEY NOT NULL,
  ns TEXT NOT NULL,
  recorded_at INTEGER NOT NULL,
  diagnostics_json TEXT NOT NULL
) STRICT;
CREATE INDEX sandbox_diagnostics_by_time ON sandbox_diagnostics(recorded_at);
)sql",
    // 7 -> 8: the warm pools made through POST /v1/pools (C4, issue 16),
    // rebuilt when the daemon starts again; serve.pools stay in the config.
    // settings_json: {name, min, max, idle_limit_ms, sandbox}.
    R"sql(
CREATE TABLE pools (
  name TEXT PRIMARY KEY NOT NULL,
  settings_json TEXT NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;
)sql",
    // 8 -> 9: an inline input's bytes in a file beside the database
    // (store/task_input_files.h) rather than in `content`, which is then
    // empty. Rows written before keep their blob (in_file = 0).
    R"sql(
ALTER TABLE task_inputs ADD COLUMN in_file INTEGER NOT NULL DEFAULT 0 CHECK (in_file IN (0, 1));
)sql",
    // 9 -> 10: the tag a process was started with (the E2B facade's
    // commands.run tag, issue 17), so that it still selects the process
    // after a restart. NULL: none.
    R"sql(
ALTER TABLE processes ADD COLUMN tag TEXT;
)sql",
    // 10 -> 11: the nodes of a fleet sharing one store (issue 18,
    // store/node_record.h), and which node owns each sandbox and holds each
    // task. Rows of earlier daemons have node '' (sandboxes: adopted by the
    // node that opens the store next, StateStore::set_node) and NULL
    // (tasks: claimed by whichever node claims first).
    R"sql(
CREATE TABLE nodes (
  id TEXT PRIMARY KEY NOT NULL,
  address TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('live','lost','left')),
  capacity_json TEXT NOT NULL,
  labels_json TEXT NOT NULL,
  pools_json TEXT NOT NULL,
  incarnation INTEGER NOT NULL CHECK (incarnation >= 1),
  started_at INTEGER NOT NULL,
  heartbeat_at INTEGER NOT NULL,
  lost_at INTEGER
) STRICT;
ALTER TABLE sandboxes ADD COLUMN node TEXT NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN lost_at INTEGER;
CREATE INDEX sandboxes_by_node ON sandboxes(node, state);
ALTER TABLE tasks ADD COLUMN node TEXT;
CREATE INDEX tasks_by_node ON tasks(node, status);
)sql",
    // 11 -> 12: creates placed on a node and not yet stored there
    // (store/placement.h). pool: set when sent to claim a warm sandbox.
    // nodes.key_id: which cluster key a node forwards with (placement goes
    // only to nodes that share the placing node's).
    R"sql(
CREATE TABLE placements (
  id TEXT PRIMARY KEY NOT NULL,
  node TEXT NOT NULL,
  pool TEXT,
  memory_bytes INTEGER NOT NULL CHECK (memory_bytes >= 0),
  disk_bytes INTEGER NOT NULL CHECK (disk_bytes >= 0),
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
) STRICT;
CREATE INDEX placements_by_node ON placements(node);
ALTER TABLE nodes ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
)sql",
    // 12 -> 13: which daemon (its data dir's instance token) registered a
    // node id, so that a second daemon with the same id is refused.
    R"sql(
ALTER TABLE nodes ADD COLUMN instance TEXT NOT NULL DEFAULT '';
)sql",
    // 13 -> 14: a daemon's claim on its node id from before it reconciles
    // until it registers (StateStore::claim_node): two daemons started at
    // once with one id cannot both pass the check.
    R"sql(
CREATE TABLE node_claims (
  id TEXT PRIMARY KEY NOT NULL,
  instance TEXT NOT NULL,
  claimed_at INTEGER NOT NULL
) STRICT;
)sql",
    // 14 -> 15: a cordoned node (StateStore::set_node_cordoned) is placed
    // no creates and claims no queued tasks; it keeps what it runs.
    R"sql(
ALTER TABLE nodes ADD COLUMN cordoned INTEGER NOT NULL DEFAULT 0;
)sql",
};
static_assert(std::size(kMigrations) == StateStore::kSchemaVersion,
              "one migration per schema version");

constexpr const char* kSandboxColumns =
    "id, state, spec_json, idempotency_key, host_uid_base, cgroup, created_at, updated_at, "
    "expires_at, error, runtime_json, node, lost_at";

Result<SandboxRecord> read_sandbox(const Stmt& st) {
  SandboxRecord r;
  r.id = st.text(0);
  std::string state = st.text(1);
  auto s = parse_sandbox_state(state);
  if (!s) return bad_row("sandboxes", "state", state);
  r.state = *s;
  r.spec_json = st.text(2);
  r.idempotency_key = st.opt_text(3);
  r.host_uid_base = st.opt_int64(4);
  r.cgroup = st.opt_text(5);
  r.created_at_ms = st.int64(6);
  r.updated_at_ms = st.int64(7);
  r.expires_at_ms = st.opt_int64(8);
  r.error = st.opt_text(9);
  r.runtime_json = st.opt_text(10);
  r.node = st.text(11);
  r.lost_at_ms = st.opt_int64(12);
  return r;
}

Result<std::vector<SandboxRecord>> read_sandboxes(Stmt& st, std::string_view what) {
  return store_detail::read_rows(st, what, read_sandbox);
}

// See StateStore::idempotency_key_released. With the store's lock held.
Result<bool> key_released(sql::Connection& h, const SandboxRecord& r) {
  if (r.state != SandboxState::kDestroying && r.state != SandboxState::kCleaned &&
      r.state != SandboxState::kFailed)
    return false;
  auto st = h.prepare(
      "SELECT EXISTS (SELECT 1 FROM transitions WHERE sandbox_id = ?1 "
      "AND to_state = 'ready')");
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  st->bind(1, r.id);
  auto row = st->step("SELECT transitions");
  if (!row) return tl::unexpected<Error>(std::move(row).error());
  return *row && st->int64(0) == 0;
}

tl::unexpected<Error> no_sandbox(std::string_view id) {
  return make_error(ErrorCode::kNotFound, "sandbox '" + std::string(id) + "' does not exist",
                    "list the existing sandboxes with GET /v1/sandboxes");
}

// Why an UPDATE of a process that has not ended changed no row: there is
// no such process, or it has ended.
Status why_process_unchanged(sql::Connection& h, std::string_view id, const std::string& what) {
  auto sel = h.prepare("SELECT state FROM processes WHERE id = ?1");
  if (!sel) return tl::unexpected<Error>(std::move(sel).error().wrap(what));
  sel->bind(1, id);
  auto row = sel->step("SELECT state");
  if (!row) return tl::unexpected<Error>(std::move(row).error().wrap(what));
  if (!*row) {
    return make_error(ErrorCode::kNotFound, "process '" + std::string(id) + "' does not exist");
  }
  return make_error(ErrorCode::kInvalidArgument,
                    what + ": it has already ended (" + sel->text(0) + ")",
                    "an ended process is never updated again");
}

}  // namespace

std::string_view process_state_name(ProcessState state) {
  switch (state) {
    case ProcessState::kStarting:
      return "starting";
    case ProcessState::kRunning:
      return "running";
    case ProcessState::kExited:
      return "exited";
    case ProcessState::kLost:
      return "lost";
  }
  return "unknown";
}

std::optional<ProcessState> parse_process_state(std::string_view name) {
  for (ProcessState s : {ProcessState::kStarting, ProcessState::kRunning, ProcessState::kExited,
                         ProcessState::kLost}) {
    if (process_state_name(s) == name) return s;
  }
  return std::nullopt;
}

namespace {

// Removes the input files no row names: written by a submit whose commit a
// crash (or an error) prevented, or left by a delete that was killed
// between its commit and the unlink.
Status sweep_input_files(sql::Connection& h, const TaskInputFiles& files) {
  auto found = files.list_and_clean();
  if (!found) return tl::unexpected<Error>(found.error());
  for (const auto& [id, index] : *found) {
    auto sel =
        h.prepare("SELECT 1 FROM task_inputs WHERE task_id = ?1 AND idx = ?2 AND in_file = 1");
    if (!sel) return tl::unexpected<Error>(sel.error());
    sel->bind(1, id).bind(2, static_cast<std::int64_t>(index));
    auto row = sel->step("SELECT task_inputs");
    if (!row) return tl::unexpected<Error>(row.error());
    if (!*row) files.remove(id, index);
  }
  return ok();
}

}  // namespace

StateStore::StateStore(std::unique_ptr<Db> db) : db_(std::move(db)) {}
StateStore::StateStore(StateStore&&) noexcept = default;
StateStore& StateStore::operator=(StateStore&&) noexcept = default;
StateStore::~StateStore() = default;

const std::string& StateStore::path() const { return db_->path; }

std::int64_t StateStore::now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Result<StateStore> StateStore::open(const std::string& path) {
  return open(path, Durability::kPowerLoss);
}

namespace {

// kMigrations' SQLite DDL as PostgreSQL takes it: no STRICT, 64-bit
// integers, bytea for blobs, identity columns for SQLite's rowid keys, and
// every table a `rowid` identity column of its own, so that the store's
// "ORDER BY rowid" (insertion order) means the same on both. The steps are
// plain enough that these rewrites are all it takes (tests/integration/
// state_store_backends_test.cc runs every step on both). A later step that
// rebuilds a table must name its columns (a SELECT * would carry rowid).
std::string postgres_ddl(std::string_view ddl) {
  std::string out(ddl);
  auto replace_all = [&out](std::string_view from, std::string_view to) {
    for (std::size_t at = out.find(from); at != std::string::npos;
         at = out.find(from, at + to.size()))
      out.replace(at, from.size(), to);
  };
  replace_all("INTEGER PRIMARY KEY,", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,");
  replace_all("INTEGER", "BIGINT");
  replace_all("\n) STRICT;", ",\n  rowid BIGINT GENERATED ALWAYS AS IDENTITY\n);");
  replace_all(" BLOB ", " BYTEA ");
  return out;
}

// The schema version: SQLite's user_version; on PostgreSQL the one row of
// corral_schema (made by the first open, inside the migration's lock).
Result<int> schema_version(sql::Connection& c) {
  if (c.backend() == sql::Backend::kPostgres) {
    CORRAL_TRY(c.exec("CREATE TABLE IF NOT EXISTS corral_schema (version BIGINT NOT NULL)",
                      "CREATE TABLE corral_schema"));
  }
  auto st = c.prepare(c.backend() == sql::Backend::kSqlite ? "PRAGMA user_version"
                                                           : "SELECT version FROM corral_schema");
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  auto row = st->step("reading the schema version");
  if (!row) return tl::unexpected<Error>(std::move(row).error());
  return *row ? static_cast<int>(st->int64(0)) : 0;
}

Status set_schema_version(sql::Connection& c, int version) {
  const std::string v = std::to_string(version);
  if (c.backend() == sql::Backend::kSqlite)
    return c.exec("PRAGMA user_version=" + v, "PRAGMA user_version=" + v);
  return c.exec("DELETE FROM corral_schema; INSERT INTO corral_schema (version) VALUES (" + v + ")",
                "recording schema version " + v);
}

// Creates or migrates the schema in one write transaction, so that a kill
// leaves either the old version or the new one, and of several nodes
// opening one PostgreSQL database at once exactly one migrates.
Status migrate(sql::Connection& c, const std::string& where) {
  sql::Txn txn(c);
  CORRAL_TRY_CTX(txn.begin(), "migrating " + where);
  auto version = schema_version(c);
  if (!version) return tl::unexpected<Error>(std::move(version).error().wrap("migrating " + where));
  if (*version > StateStore::kSchemaVersion || *version < 0) {
    return make_error(ErrorCode::kUnavailable,
                      where + " has schema version " + std::to_string(*version) +
                          ", newer than this corral knows (" +
                          std::to_string(StateStore::kSchemaVersion) + ")",
                      "run the corral version that wrote it, or upgrade corral");
  }
  if (*version == StateStore::kSchemaVersion) return ok();  // rolled back: nothing written
  for (int i = *version; i < StateStore::kSchemaVersion; ++i) {
    const std::string step = c.backend() == sql::Backend::kSqlite ? std::string(kMigrations[i])
                                                                  : postgres_ddl(kMigrations[i]);
    CORRAL_TRY_CTX(c.exec(step, "schema step " + std::to_string(i + 1)), "migrating " + where);
  }
  CORRAL_TRY_CTX(set_schema_version(c, StateStore::kSchemaVersion), "migrating " + where);
  return txn.commit();
}

}  // namespace

Result<StateStore> StateStore::open(const std::string& path, Durability durability) {
  if (path.empty()) {
    return make_error(ErrorCode::kInvalidArgument, "state store path is empty",
                      "give the path of the state database file, or a postgres:// URL");
  }
  if (sql::is_postgres_url(path)) return open_postgres(path);
  // Create the file ourselves so that it (and the -wal/-shm files SQLite
  // makes with the same mode) is private to the daemon: it holds specs.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return errno_error("open(" + path + ")", errno,
                       "the directory of the state database must exist and be writable");
  }
  ::close(fd);

  auto db = std::make_unique<Db>();
  db->path = path;
  std::string where = "state store " + path;
  int rc =
      sqlite3_open_v2(path.c_str(), &db->handle,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE, nullptr);
  if (rc != SQLITE_OK) return fail(db->handle, "opening " + where, rc);
  sqlite3* h = db->handle;
  sqlite3_busy_timeout(h, kBusyTimeoutMs);

  auto mode = pragma_text(h, "PRAGMA journal_mode=WAL");
  if (!mode) return tl::unexpected<Error>(std::move(mode).error().wrap("opening " + where));
  if (*mode != "wal") {
    return make_error(ErrorCode::kUnavailable,
                      "opening " + where + ": journal_mode=WAL refused (mode is '" + *mode + "')",
                      "put the state database on a local file system that supports shared "
                      "memory (not NFS)");
  }
  const char* sync = durability == Durability::kPowerLoss
                         ? "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;"
                         : "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;";
  CORRAL_TRY_CTX(exec_sql(h, sync, "setting synchronous and foreign_keys=ON"), "opening " + where);
  auto fk = pragma_text(h, "PRAGMA foreign_keys");
  if (!fk || *fk != "1") {
    return make_error(ErrorCode::kUnavailable,
                      "opening " + where + ": this SQLite cannot enforce foreign keys",
                      "link corral against an SQLite built without SQLITE_OMIT_FOREIGN_KEY");
  }
  db->conn = std::make_unique<sql::SqliteConnection>(h, path);
  CORRAL_TRY(migrate(*db->conn, where));
  auto inputs = TaskInputFiles::open(path + "-inputs", durability == Durability::kPowerLoss);
  if (!inputs) return tl::unexpected<Error>(std::move(inputs).error().wrap("opening " + where));
  db->inputs = std::move(*inputs);
  CORRAL_TRY_CTX(sweep_input_files(*db->conn, *db->inputs), "opening " + where);
  CORRAL_TRY_CTX(store_detail::adopt_rows(*db->conn, db->node), "opening " + where);
  CORRAL_TRY_CTX(db->checkpointer.start(path, h), "opening " + where);
  return StateStore(std::move(db));
}

Result<StateStore> StateStore::open_postgres(const std::string& url) {
  auto conn = sql::PgConnection::open(url);
  if (!conn) return tl::unexpected<Error>(std::move(conn).error().wrap("opening the state store"));
  auto db = std::make_unique<Db>();
  db->path = (*conn)->describe();
  db->conn = std::move(*conn);
  CORRAL_TRY(migrate(*db->conn, "state store " + db->path));
  auto beat = sql::PgConnection::open(url);
  if (!beat)
    return tl::unexpected<Error>(
        std::move(beat).error().wrap("opening the state store's heartbeat connection"));
  db->beat_conn = std::move(*beat);
  return StateStore(std::move(db));
}

Result<CreateResult> StateStore::create_sandbox(std::string_view id, std::string_view spec_json,
                                                std::optional<std::string_view> idempotency_key,
                                                std::optional<std::int64_t> expires_at_ms,
                                                std::optional<std::string_view> placement) {
  CORRAL_TRY(check_id("sandbox", id));
  if (idempotency_key && (idempotency_key->empty() || idempotency_key->size() > kMaxKeyBytes)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "Idempotency-Key must be 1-" + std::to_string(kMaxKeyBytes) + " bytes, got " +
                          std::to_string(idempotency_key->size()),
                      "send a short unique key, such as a UUID, or none");
  }
  auto spec = store_detail::canonical_json(spec_json, "spec_json",
                                           "pass the sandbox spec serialized as JSON");
  if (!spec) return tl::unexpected<Error>(std::move(spec).error());

  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  std::string what = "creating sandbox " + std::string(id);
  Txn txn(h);
  CORRAL_TRY_CTX(txn.begin(), what);
  std::optional<std::string> key_taken_from;

  if (idempotency_key) {
    auto st = h.prepare(std::string("SELECT ") + kSandboxColumns +
                        " FROM sandboxes WHERE idempotency_key = ?1");
    if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
    st->bind(1, *idempotency_key);
    auto found = read_sandboxes(*st, "looking up the idempotency key");
    if (!found) return tl::unexpected<Error>(std::move(found).error().wrap(what));
    if (!found->empty()) {
      SandboxRecord& prev = found->front();
      if (prev.spec_json != *spec) {
        return make_error(ErrorCode::kAlreadyExists,
                          "Idempotency-Key '" + std::string(*idempotency_key) +
                              "' was already used for another request (sandbox " + prev.id +
                              ", with a different spec)",
                          "use a new Idempotency-Key for a new request; a retry must resend the "
                          "original request unchanged");
      }
      auto released = key_released(h, prev);
      if (!released) return tl::unexpected<Error>(std::move(released).error().wrap(what));
      if (!*released) return CreateResult{std::move(prev), false};
      // Its create was never acknowledged: the key goes to this one.
      auto free_key = h.prepare("UPDATE sandboxes SET idempotency_key = NULL WHERE id = ?1");
      if (!free_key) return tl::unexpected<Error>(std::move(free_key).error().wrap(what));
      free_key->bind(1, prev.id);
      CORRAL_TRY_CTX(free_key->run("UPDATE sandboxes"), what);
      key_taken_from = prev.id;
    }
  }

  // created_at is compared with lost_at, which another node stamps: the
  // fleet's clock.
  auto clock = store_detail::fleet_now_ms(h);
  if (!clock) return tl::unexpected<Error>(std::move(clock).error().wrap(what));
  const std::int64_t now = *clock;
  auto ins = h.prepare(
      "INSERT INTO sandboxes (id, state, spec_json, idempotency_key, "
      "created_at, updated_at, expires_at, node) VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7)");
  if (!ins) return tl::unexpected<Error>(std::move(ins).error().wrap(what));
  ins->bind(1, id)
      .bind(2, sandbox_state_name(SandboxState::kCreating))
      .bind(3, *spec)
      .bind(5, now)
      .bind(6, expires_at_ms)
      .bind(7, db_->node);
  if (idempotency_key) {
    ins->bind(4, *idempotency_key);
  } else {
    ins->bind(4, std::nullopt);
  }
  if (auto r = ins->run("INSERT INTO sandboxes"); !r) {
    if (ins->fault() == sql::Fault::kUniqueViolation) {
      return make_error(ErrorCode::kAlreadyExists,
                        "sandbox id '" + std::string(id) + "' is already in the state store",
                        "sandbox ids must be unique: generate a new one");
    }
    return tl::unexpected<Error>(std::move(r).error().wrap(what));
  }
  auto tr = h.prepare(
      "INSERT INTO transitions (sandbox_id, from_state, to_state, at, reason) "
      "VALUES (?1, NULL, ?2, ?3, 'created')");
  if (!tr) return tl::unexpected<Error>(std::move(tr).error().wrap(what));
  tr->bind(1, id).bind(2, sandbox_state_name(SandboxState::kCreating)).bind(3, now);
  CORRAL_TRY_CTX(tr->run("INSERT INTO transitions"), what);
  if (placement) {
    auto done = h.prepare("DELETE FROM placements WHERE id = ?1");
    if (!done) return tl::unexpected<Error>(std::move(done).error().wrap(what));
    done->bind(1, *placement);
    CORRAL_TRY_CTX(done->run("DELETE FROM placements"), what);
  }
  CORRAL_TRY_CTX(txn.commit(), what);

  SandboxRecord r;
  r.id = std::string(id);
  r.state = SandboxState::kCreating;
  r.spec_json = std::move(*spec);
  if (idempotency_key) r.idempotency_key = std::string(*idempotency_key);
  r.created_at_ms = now;
  r.updated_at_ms = now;
  r.expires_at_ms = expires_at_ms;
  r.node = db_->node;
  return CreateResult{std::move(r), true, std::move(key_taken_from)};
}

Result<TransitionRecord> StateStore::transition(std::string_view id, SandboxState to,
                                                std::string_view reason) {
  CORRAL_TRY(check_id("sandbox", id));
  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  std::string what =
      "moving sandbox " + std::string(id) + " to " + std::string(sandbox_state_name(to));
  Txn txn(h);
  CORRAL_TRY_CTX(txn.begin(), what);

  auto sel = h.prepare("SELECT state FROM sandboxes WHERE id = ?1");
  if (!sel) return tl::unexpected<Error>(std::move(sel).error().wrap(what));
  sel->bind(1, id);
  auto row = sel->step("SELECT state");
  if (!row) return tl::unexpected<Error>(std::move(row).error().wrap(what));
  if (!*row) return no_sandbox(id);
  std::string from_name = sel->text(0);
  auto from = parse_sandbox_state(from_name);
  if (!from) return bad_row("sandboxes", "state", from_name);
  if (!transition_allowed(*from, to)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "sandbox " + std::string(id) + ": transition " + from_name + " -> " +
                          std::string(sandbox_state_name(to)) + " is not allowed (from " +
                          from_name + ": " + allowed_targets(*from) + ")",
                      "re-read the sandbox: another request may have changed its state");
  }

  std::int64_t now = now_ms();
  auto upd = h.prepare(
      "UPDATE sandboxes SET state = ?2, updated_at = ?3, "
      "error = CASE WHEN ?2 = 'failed' THEN ?4 ELSE error END WHERE id = ?1");
  if (!upd) return tl::unexpected<Error>(std::move(upd).error().wrap(what));
  upd->bind(1, id).bind(2, sandbox_state_name(to)).bind(3, now).bind(4, reason);
  CORRAL_TRY_CTX(upd->run("UPDATE sandboxes"), what);

  auto ins = h.prepare(
      "INSERT INTO transitions (sandbox_id, from_state, to_state, at, reason) "
      "VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id");
  if (!ins) return tl::unexpected<Error>(std::move(ins).error().wrap(what));
  ins->bind(1, id)
      .bind(2, sandbox_state_name(*from))
      .bind(3, sandbox_state_name(to))
      .bind(4, now)
      .bind(5, reason);
  auto inserted = ins->returned_id("INSERT INTO transitions");
  if (!inserted) return tl::unexpected<Error>(std::move(inserted).error().wrap(what));
  const std::int64_t tid = *inserted;
  CORRAL_TRY_CTX(txn.commit(), what);

  return TransitionRecord{tid, std::string(id), *from, to, now, std::string(reason)};
}

Status StateStore::set_resources(std::string_view id, std::optional<std::int64_t> host_uid_base,
                                 std::optional<std::string_view> cgroup) {
  CORRAL_TRY(check_id("sandbox", id));
  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  std::string what = "recording the resources of sandbox " + std::string(id);
  auto st = h.prepare(
      "UPDATE sandboxes SET host_uid_base = ?2, cgroup = ?3, updated_at = ?4 "
      "WHERE id = ?1");
  if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
  st->bind(1, id).bind(2, host_uid_base).bind(4, now_ms());
  if (cgroup) {
    st->bind(3, *cgroup);
  } else {
    st->bind(3, std::nullopt);
  }
  CORRAL_TRY_CTX(st->run("UPDATE sandboxes"), what);
  if (st->changes() == 0) return no_sandbox(id);
  return ok();
}

Status StateStore::set_runtime(std::string_view id, std::string_view runtime_json) {
  CORRAL_TRY(check_id("sandbox", id));
  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  std::string what = "recording the runtime of sandbox " + std::string(id);
  auto st = h.prepare("UPDATE sandboxes SET runtime_json = ?2, updated_at = ?3 WHERE id = ?1");
  if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
  st->bind(1, id).bind(2, runtime_json).bind(3, now_ms());
  CORRAL_TRY_CTX(st->run("UPDATE sandboxes"), what);
  if (st->changes() == 0) return no_sandbox(id);
  return ok();
}

Status StateStore::set_expiry(std::string_view id, std::int64_t expires_at_ms) {
  CORRAL_TRY(check_id("sandbox", id));
  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  std::string what = "recording the expiry of sandbox " + std::string(id);
  auto st = h.prepare("UPDATE sandboxes SET expires_at = ?2, updated_at = ?3 WHERE id = ?1");
  if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
  st->bind(1, id).bind(2, expires_at_ms).bind(3, now_ms());
  CORRAL_TRY_CTX(st->run("UPDATE sandboxes"), what);
  if (st->changes() == 0) return no_sandbox(id);
  return ok();
}

Status StateStore::set_claimed(std::string_view id, std::string_view spec_json,
                               std::int64_t expires_at_ms,
                               std::optional<std::string_view> idempotency_key) {
  CORRAL_TRY(check_id("sandbox", id));
  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  std::string what = "recording the claim of sandbox " + std::string(id);
  auto st = h.prepare(
      "UPDATE sandboxes SET spec_json = ?2, expires_at = ?3, "
      "idempotency_key = ?5, updated_at = ?4 WHERE id = ?1");
  if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
  st->bind(1, id)
      .bind(2, spec_json)
      .bind(3, expires_at_ms)
      .bind(4, now_ms())
      .bind(5, idempotency_key);
  CORRAL_TRY_CTX(st->run("UPDATE sandboxes"), what);
  if (st->changes() == 0) return no_sandbox(id);
  return ok();
}

Result<std::optional<SandboxRecord>> StateStore::find_by_idempotency_key(std::string_view key) {
  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  auto st = h.prepare(std::string("SELECT ") + kSandboxColumns +
                      " FROM sandboxes WHERE idempotency_key = ?1");
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  st->bind(1, key);
  auto rows = read_sandboxes(*st, "looking up an idempotency key");
  if (!rows) return tl::unexpected<Error>(std::move(rows).error());
  if (rows->empty()) return std::optional<SandboxRecord>();
  return std::optional<SandboxRecord>(std::move(rows->front()));
}

Result<bool> StateStore::idempotency_key_released(const SandboxRecord& sandbox) {
  std::lock_guard lock(db_->mu);
  return key_released(*db_->conn, sandbox);
}

Result<SandboxRecord> StateStore::get(std::string_view id) {
  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  auto st = h.prepare(std::string("SELECT ") + kSandboxColumns + " FROM sandboxes WHERE id = ?1");
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  st->bind(1, id);
  auto rows = read_sandboxes(*st, "reading sandbox " + std::string(id));
  if (!rows) return tl::unexpected<Error>(std::move(rows).error());
  if (rows->empty()) return no_sandbox(id);
  return std::move(rows->front());
}

Result<std::vector<SandboxRecord>> StateStore::list(std::span<const SandboxState> states) {
  std::string sql = std::string("SELECT ") + kSandboxColumns + " FROM sandboxes";
  if (!states.empty()) {
    sql += " WHERE state IN (";
    for (std::size_t i = 0; i < states.size(); ++i) sql += i == 0 ? "?" : ", ?";
    sql += ")";
  }
  sql += " ORDER BY rowid";
  std::lock_guard lock(db_->mu);
  auto st = db_->conn->prepare(sql);
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  for (std::size_t i = 0; i < states.size(); ++i)
    st->bind(static_cast<int>(i + 1), sandbox_state_name(states[i]));
  return read_sandboxes(*st, "listing sandboxes");
}

Result<std::vector<TransitionRecord>> StateStore::transitions(std::string_view id) {
  std::lock_guard lock(db_->mu);
  auto st = db_->conn->prepare(
      "SELECT id, sandbox_id, from_state, to_state, at, reason FROM transitions "
      "WHERE sandbox_id = ?1 ORDER BY id");
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  st->bind(1, id);
  std::vector<TransitionRecord> out;
  for (;;) {
    auto row = st->step("reading the transitions of sandbox " + std::string(id));
    if (!row) return tl::unexpected<Error>(std::move(row).error());
    if (!*row) break;
    TransitionRecord t;
    t.id = st->int64(0);
    t.sandbox_id = st->text(1);
    if (auto f = st->opt_text(2)) {
      auto s = parse_sandbox_state(*f);
      if (!s) return bad_row("transitions", "from_state", *f);
      t.from = *s;
    }
    std::string to = st->text(3);
    auto s = parse_sandbox_state(to);
    if (!s) return bad_row("transitions", "to_state", to);
    t.to = *s;
    t.at_ms = st->int64(4);
    t.reason = st->text(5);
    out.push_back(std::move(t));
  }
  return out;
}

Status StateStore::add_process(const ProcessRecord& p) {
  CORRAL_TRY(check_id("process", p.id));
  CORRAL_TRY(check_id("sandbox", p.sandbox_id));
  Json argv = Json::array();
  for (const std::string& a : p.argv) argv.push_back(a);
  // argv arrives through the JSON API, so it is UTF-8; anything else is
  // stored with U+FFFD rather than refused.
  std::string argv_json = argv.dump(-1, ' ', false, Json::error_handler_t::replace);

  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  std::string what = "recording process " + p.id + " of sandbox " + p.sandbox_id;
  Txn txn(h);
  CORRAL_TRY_CTX(txn.begin(), what);
  auto sel = h.prepare("SELECT state FROM sandboxes WHERE id = ?1");
  if (!sel) return tl::unexpected<Error>(std::move(sel).error().wrap(what));
  sel->bind(1, p.sandbox_id);
  auto row = sel->step("SELECT state");
  if (!row) return tl::unexpected<Error>(std::move(row).error().wrap(what));
  if (!*row) return no_sandbox(p.sandbox_id);
  std::string state = sel->text(0);
  if (state != sandbox_state_name(SandboxState::kReady) &&
      state != sandbox_state_name(SandboxState::kRunning)) {
    return make_error(
        ErrorCode::kInvalidArgument,
        what + ": the sandbox is " + state + "; processes start only in a ready or running sandbox",
        "wait until the sandbox is ready");
  }
  auto ins = h.prepare(
      "INSERT INTO processes (id, sandbox_id, argv_json, state, exit_code, "
      "signal, started_at, ended_at, deadline_at, host_pid, host_start_time, "
      "timed_out, tag) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)");
  if (!ins) return tl::unexpected<Error>(std::move(ins).error().wrap(what));
  ins->bind(1, p.id).bind(2, p.sandbox_id).bind(3, argv_json).bind(4, process_state_name(p.state));
  ins->bind(5, p.exit_code ? std::optional<std::int64_t>(*p.exit_code) : std::nullopt);
  ins->bind(6, p.signal ? std::optional<std::int64_t>(*p.signal) : std::nullopt);
  ins->bind(7, p.started_at_ms != 0 ? p.started_at_ms : now_ms()).bind(8, p.ended_at_ms);
  ins->bind(9, p.deadline_at_ms).bind(10, p.host_pid);
  ins->bind(11, p.host_start_time
                    ? std::optional<std::int64_t>(static_cast<std::int64_t>(*p.host_start_time))
                    : std::nullopt);
  ins->bind(12, std::int64_t{p.timed_out ? 1 : 0}).bind(13, p.tag);
  if (auto r = ins->run("INSERT INTO processes"); !r) {
    if (ins->fault() == sql::Fault::kUniqueViolation) {
      return make_error(ErrorCode::kAlreadyExists,
                        "process id '" + p.id + "' is already in the state store",
                        "process ids must be unique: generate a new one");
    }
    return tl::unexpected<Error>(std::move(r).error().wrap(what));
  }
  CORRAL_TRY_CTX(txn.commit(), what);
  return ok();
}

Status StateStore::update_process(std::string_view id, ProcessState state,
                                  std::optional<int> exit_code, std::optional<int> signal,
                                  bool timed_out, std::optional<std::int64_t> ended_at_ms) {
  CORRAL_TRY(check_id("process", id));
  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  std::string what = "updating process " + std::string(id);
  Txn txn(h);
  CORRAL_TRY_CTX(txn.begin(), what);
  auto sel = h.prepare("SELECT state FROM processes WHERE id = ?1");
  if (!sel) return tl::unexpected<Error>(std::move(sel).error().wrap(what));
  sel->bind(1, id);
  auto row = sel->step("SELECT state");
  if (!row) return tl::unexpected<Error>(std::move(row).error().wrap(what));
  if (!*row) {
    return make_error(ErrorCode::kNotFound, "process '" + std::string(id) + "' does not exist");
  }
  std::string cur_name = sel->text(0);
  auto cur = parse_process_state(cur_name);
  if (!cur) return bad_row("processes", "state", cur_name);
  bool cur_ended = *cur == ProcessState::kExited || *cur == ProcessState::kLost;
  if (cur_ended) {
    return make_error(ErrorCode::kInvalidArgument,
                      what + " to " + std::string(process_state_name(state)) +
                          ": it has already ended (" + cur_name + ")",
                      "an ended process is never updated again");
  }
  bool ends = state == ProcessState::kExited || state == ProcessState::kLost;
  auto upd = h.prepare(
      "UPDATE processes SET state = ?2, exit_code = ?3, signal = ?4, "
      "ended_at = CASE WHEN ?5 = 1 THEN ?6 ELSE ended_at END, "
      "timed_out = CASE WHEN ?7 = 1 THEN 1 ELSE timed_out END WHERE id = ?1");
  if (!upd) return tl::unexpected<Error>(std::move(upd).error().wrap(what));
  upd->bind(1, id).bind(2, process_state_name(state));
  upd->bind(3, exit_code ? std::optional<std::int64_t>(*exit_code) : std::nullopt);
  upd->bind(4, signal ? std::optional<std::int64_t>(*signal) : std::nullopt);
  upd->bind(5, std::int64_t{ends ? 1 : 0}).bind(6, ended_at_ms.value_or(now_ms()));
  upd->bind(7, std::int64_t{timed_out ? 1 : 0});
  CORRAL_TRY_CTX(upd->run("UPDATE processes"), what);
  CORRAL_TRY_CTX(txn.commit(), what);
  return ok();
}

Status StateStore::set_process_host(std::string_view id, std::int64_t host_pid,
                                    std::uint64_t host_start_time) {
  CORRAL_TRY(check_id("process", id));
  std::string what = "recording the host pid of process " + std::string(id);
  if (host_pid <= 0 || host_start_time == 0 ||
      host_start_time > static_cast<std::uint64_t>(INT64_MAX)) {
    return make_error(ErrorCode::kInvalidArgument,
                      what + ": pid " + std::to_string(host_pid) + " and start time " +
                          std::to_string(host_start_time) + " must both be positive");
  }
  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  // One statement, so no transaction is needed: it changes only a process
  // that has not ended, and says which case it was through changes().
  auto upd = h.prepare(
      "UPDATE processes SET host_pid = ?2, host_start_time = ?3, "
      "state = CASE WHEN state = 'starting' THEN 'running' ELSE state END "
      "WHERE id = ?1 AND state IN ('starting', 'running')");
  if (!upd) return tl::unexpected<Error>(std::move(upd).error().wrap(what));
  upd->bind(1, id).bind(2, host_pid).bind(3, static_cast<std::int64_t>(host_start_time));
  CORRAL_TRY_CTX(upd->run("UPDATE processes"), what);
  if (upd->changes() > 0) return ok();
  return why_process_unchanged(h, id, what);
}

Status StateStore::mark_process_timed_out(std::string_view id) {
  CORRAL_TRY(check_id("process", id));
  std::string what = "marking process " + std::string(id) + " timed out";
  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  auto upd = h.prepare(
      "UPDATE processes SET timed_out = 1 "
      "WHERE id = ?1 AND state IN ('starting', 'running')");
  if (!upd) return tl::unexpected<Error>(std::move(upd).error().wrap(what));
  upd->bind(1, id);
  CORRAL_TRY_CTX(upd->run("UPDATE processes"), what);
  if (upd->changes() > 0) return ok();
  return why_process_unchanged(h, id, what);
}

Result<std::vector<ProcessRecord>> StateStore::list_processes(std::string_view sandbox_id) {
  std::lock_guard lock(db_->mu);
  auto st = db_->conn->prepare(
      "SELECT id, sandbox_id, argv_json, state, exit_code, signal, started_at, "
      "ended_at, deadline_at, host_pid, host_start_time, timed_out, tag "
      "FROM processes WHERE sandbox_id = ?1 ORDER BY rowid");
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  st->bind(1, sandbox_id);
  std::vector<ProcessRecord> out;
  for (;;) {
    auto row = st->step("listing the processes of sandbox " + std::string(sandbox_id));
    if (!row) return tl::unexpected<Error>(std::move(row).error());
    if (!*row) break;
    ProcessRecord p;
    p.id = st->text(0);
    p.sandbox_id = st->text(1);
    std::string argv_text = st->text(2);
    Json argv = Json::parse(argv_text, nullptr, /*allow_exceptions=*/false);
    if (argv.is_discarded() || !argv.is_array()) {
      return bad_row("processes", "argv_json", argv_text);
    }
    for (const Json& a : argv) {
      if (!a.is_string()) return bad_row("processes", "argv_json", argv_text);
      p.argv.push_back(a.get<std::string>());
    }
    std::string state = st->text(3);
    auto s = parse_process_state(state);
    if (!s) return bad_row("processes", "state", state);
    p.state = *s;
    if (auto v = st->opt_int64(4)) p.exit_code = static_cast<int>(*v);
    if (auto v = st->opt_int64(5)) p.signal = static_cast<int>(*v);
    p.started_at_ms = st->int64(6);
    p.ended_at_ms = st->opt_int64(7);
    p.deadline_at_ms = st->opt_int64(8);
    p.host_pid = st->opt_int64(9);
    if (auto v = st->opt_int64(10)) p.host_start_time = static_cast<std::uint64_t>(*v);
    p.timed_out = st->int64(11) != 0;
    p.tag = st->opt_text(12);
    out.push_back(std::move(p));
  }
  return out;
}

Result<std::vector<SandboxRecord>> StateStore::sandboxes_to_reconcile() {
  std::lock_guard lock(db_->mu);
  auto st = db_->conn->prepare(std::string("SELECT ") + kSandboxColumns +
                               " FROM sandboxes WHERE node = ?1 AND state <> 'cleaned' "
                               "ORDER BY rowid");
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  st->bind(1, db_->node);
  return read_sandboxes(*st, "listing the sandboxes to reconcile");
}

Result<std::vector<SandboxRecord>> StateStore::expired(std::int64_t now) {
  std::lock_guard lock(db_->mu);
  auto st = db_->conn->prepare(std::string("SELECT ") + kSandboxColumns +
                               " FROM sandboxes WHERE expires_at IS NOT NULL AND expires_at <= ?1 "
                               "AND state IN ('creating', 'initializing', 'ready', 'running') "
                               "AND node = ?2 ORDER BY expires_at, rowid");
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  st->bind(1, now).bind(2, db_->node);
  return read_sandboxes(*st, "listing expired sandboxes");
}

Result<std::string> StateStore::integrity_check() {
  std::lock_guard lock(db_->mu);
  if (db_->conn->backend() == sql::Backend::kPostgres) {
    // The server checks its own pages (data checksums, if enabled at
    // initdb); what the store can check is that it answers.
    CORRAL_TRY(db_->conn->exec("SELECT 1", "checking the PostgreSQL state store"));
    return std::string("ok");
  }
  auto st = db_->conn->prepare("PRAGMA integrity_check");
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  std::string out;
  for (;;) {
    auto row = st->step("PRAGMA integrity_check");
    if (!row) return tl::unexpected<Error>(std::move(row).error());
    if (!*row) break;
    if (!out.empty()) out += "\n";
    out += st->text(0);
  }
  return out;
}

Result<std::string> StateStore::pragma(std::string_view name) {
  static constexpr std::string_view kAllowed[] = {"journal_mode", "synchronous",
                                                  "foreign_keys", "user_version",
                                                  "busy_timeout", "wal_autocheckpoint"};
  bool allowed = false;
  for (std::string_view a : kAllowed) allowed = allowed || a == name;
  if (!allowed) {
    return make_error(ErrorCode::kInvalidArgument,
                      "PRAGMA " + std::string(name) + " is not readable through the state store",
                      "use journal_mode, synchronous, foreign_keys, user_version, busy_timeout or "
                      "wal_autocheckpoint");
  }
  std::lock_guard lock(db_->mu);
  if (db_->handle == nullptr)
    return make_error(
        ErrorCode::kInvalidArgument,
        "PRAGMA " + std::string(name) + ": the state store is PostgreSQL, not SQLite");
  return pragma_text(db_->handle, "PRAGMA " + std::string(name));
}

}  // namespace corral
