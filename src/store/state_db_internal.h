// What the state store's source files share (state_store.cc: sandboxes and
// processes; task_table.cc: tasks): the connection, and the small helpers
// every table's methods use. Internal to src/store: nothing else includes it.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "store/sql.h"
#include "store/sqlite.h"
#include "store/state_store.h"
#include "store/task_input_files.h"
#include "store/wal_checkpointer.h"

namespace corral {

struct StateStore::Db {
  std::string path;           // the SQLite file, or the PostgreSQL URL without its password
  sqlite3* handle = nullptr;  // SQLite only: the file's handle, which conn uses
  std::unique_ptr<sql::Connection> conn;  // the store's one connection (store/sql.h)
  std::mutex mu;                          // one writer connection, shared by all threads
  // PostgreSQL only: the heartbeat's own connection (StateStore::heartbeat),
  // so that a heartbeat never queues behind this node's store traffic,
  // which under load waits on the fleet's write lock for seconds.
  std::unique_ptr<sql::Connection> beat_conn;
  std::mutex beat_mu;
  WalCheckpointer checkpointer;  // SQLite only: checkpoints off the commit path
  // SQLite only: <path>-inputs, inline input bytes beside the file. On
  // PostgreSQL they are in task_inputs.content, where every node sees them.
  std::optional<TaskInputFiles> inputs;
  std::string node = "local";  // StateStore::set_node
  ~Db() {
    checkpointer.stop();
    beat_conn.reset();
    conn.reset();
    if (handle != nullptr) sqlite3_close_v2(handle);
  }
};

namespace store_detail {

constexpr std::size_t kMaxIdBytes = 128;

// Every row `st` steps through, each read by `read_row(st)` (a Result).
template <typename ReadRow>
auto read_rows(sql::Stmt& st, std::string_view what, ReadRow read_row)
    -> Result<std::vector<typename decltype(read_row(st))::value_type>> {
  std::vector<typename decltype(read_row(st))::value_type> out;
  for (;;) {
    auto row = st.step(what);
    if (!row) return tl::unexpected<Error>(std::move(row).error());
    if (!*row) break;
    auto r = read_row(st);
    if (!r) return tl::unexpected<Error>(std::move(r).error());
    out.push_back(std::move(*r));
  }
  return out;
}

// `text` in canonical JSON (keys sorted, no spaces), or kInvalidArgument
// "<what> is not valid JSON" with `hint`.
Result<std::string> canonical_json(std::string_view text, std::string_view what,
                                   std::string_view hint);

// kInvalidArgument unless `id` is 1-kMaxIdBytes bytes.
Status check_id(std::string_view what, std::string_view id);

// A row holding a value this corral does not know (kInternal).
tl::unexpected<Error> bad_row(std::string_view table, std::string_view column,
                              std::string_view value);

// Gives `node` the rows it owns by adoption (StateStore::set_node): on
// SQLite every sandbox and held task, on PostgreSQL the sandboxes stored
// before nodes existed. With the store's lock held (or before it is shared).
Status adopt_rows(sql::Connection& h, const std::string& node);

// The time, in ms since the epoch, that everything nodes compare across
// the fleet is stamped with (heartbeats, claims, lost_at, placements'
// expiry, sandboxes' created_at): the database server's clock on
// PostgreSQL, so that nodes whose clocks disagree still agree on how old a
// heartbeat is; this host's on SQLite (one host). One round trip on
// PostgreSQL.
Result<std::int64_t> fleet_now_ms(sql::Connection& h);

// The live nodes, by id (node_table.cc).
Result<std::vector<NodeRecord>> live_nodes(sql::Connection& h);

// Handles the tasks node `node` (marked lost) still holds, as
// StateStore::sweep_lost_nodes describes; adds their ids to `sweep`. With
// the store's lock held, in a write transaction (task_table.cc).
Status release_tasks_of_lost_node(sql::Connection& h, std::string_view node, std::int64_t now_ms,
                                  LostNodeSweep& sweep);

}  // namespace store_detail
}  // namespace corral
