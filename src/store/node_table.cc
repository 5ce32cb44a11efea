// The nodes table (issue 18, store/node_record.h): registration,
// heartbeats, and the sweep that marks silent nodes lost and hands on
// what they held.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "store/sql.h"
#include "store/state_db_internal.h"
#include "store/state_store.h"

namespace corral {

namespace {

using sql::Stmt;
using sql::Txn;
using store_detail::bad_row;

constexpr const char* kNodeColumns =
    "id, address, state, capacity_json, labels_json, pools_json, incarnation, started_at, "
    "heartbeat_at, lost_at, key_id, cordoned";
constexpr std::size_t kMaxNodeJsonBytes = 64 * 1024;
constexpr std::size_t kMaxAddressBytes = 255;

Result<NodeRecord> read_node(const Stmt& st) {
  NodeRecord n;
  n.id = st.text(0);
  n.address = st.text(1);
  const std::string state = st.text(2);
  auto s = parse_node_state(state);
  if (!s) return bad_row("nodes", "state", state);
  n.state = *s;
  n.capacity_json = st.text(3);
  n.labels_json = st.text(4);
  n.pools_json = st.text(5);
  n.incarnation = st.int64(6);
  n.started_at_ms = st.int64(7);
  n.heartbeat_at_ms = st.int64(8);
  n.lost_at_ms = st.opt_int64(9);
  n.key_id = st.text(10);
  n.cordoned = st.int64(11) != 0;
  return n;
}

Result<std::vector<NodeRecord>> read_nodes(Stmt& st, std::string_view what) {
  return store_detail::read_rows(st, what, read_node);
}

Status check_node_id(std::string_view id) {
  if (valid_node_id(id)) return ok();
  return make_error(ErrorCode::kInvalidArgument,
                    "node id \"" + std::string(id.substr(0, 80)) +
                        "\" is not 1-63 of a-z, 0-9 and '-' (not first or last)",
                    "set serve.node.id to a DNS label, such as the host's or the pod's name");
}

// `text` as canonical JSON of the kind a registration field must be: an
// object of anything (capacity), an object of strings (labels) or an array
// of strings (pools).
enum class Shape { kObject, kStringMap, kStringList };
Result<std::string> registration_json(std::string_view text, std::string_view field, Shape shape) {
  const std::string what = "node registration: " + std::string(field);
  if (text.size() > kMaxNodeJsonBytes)
    return make_error(ErrorCode::kInvalidArgument, what + " is larger than 64 KiB");
  auto j = nlohmann::json::parse(text, nullptr, false);
  bool fits = false;
  switch (shape) {
    case Shape::kObject:
      fits = j.is_object();
      break;
    case Shape::kStringMap:
      fits = j.is_object() &&
             std::all_of(j.begin(), j.end(), [](const auto& v) { return v.is_string(); });
      break;
    case Shape::kStringList:
      fits = j.is_array() &&
             std::all_of(j.begin(), j.end(), [](const auto& v) { return v.is_string(); });
      break;
  }
  if (!fits)
    return make_error(ErrorCode::kInvalidArgument,
                      what + " must be " +
                          (shape == Shape::kObject      ? "a JSON object"
                           : shape == Shape::kStringMap ? "a JSON object of strings"
                                                        : "a JSON array of strings"));
  return json_text(j);
}

}  // namespace

namespace store_detail {

Status adopt_rows(sql::Connection& h, const std::string& node) {
  const std::string what = "adopting the store's rows for node " + node;
  // An SQLite file is one daemon's whatever its node id: rows of an earlier
  // id (or of none, before nodes existed) are this node's. On PostgreSQL
  // only rows stored before nodes existed ('') are adopted, by the first
  // node that opens the store.
  const bool sqlite = h.backend() == sql::Backend::kSqlite;
  Txn txn(h);
  CORRAL_TRY_CTX(txn.begin(), what);
  auto sbx = h.prepare(sqlite ? "UPDATE sandboxes SET node = ?1 WHERE node <> ?1"
                              : "UPDATE sandboxes SET node = ?1 WHERE node = ''");
  if (!sbx) return tl::unexpected<Error>(std::move(sbx).error().wrap(what));
  sbx->bind(1, node);
  CORRAL_TRY_CTX(sbx->run("UPDATE sandboxes"), what);
  // Tasks: on SQLite every unfinished one (those stored before nodes
  // existed hold none); on PostgreSQL the running ones stored before nodes
  // existed (queued ones are for any node to claim).
  auto tasks =
      h.prepare(sqlite ? "UPDATE tasks SET node = ?1 WHERE status IN ('queued', 'running') "
                         "AND (node IS NULL OR node <> ?1)"
                       : "UPDATE tasks SET node = ?1 WHERE status = 'running' AND node IS "
                         "NULL");
  if (!tasks) return tl::unexpected<Error>(std::move(tasks).error().wrap(what));
  tasks->bind(1, node);
  CORRAL_TRY_CTX(tasks->run("UPDATE tasks"), what);
  return txn.commit();
}

Result<std::vector<NodeRecord>> live_nodes(sql::Connection& h) {
  auto st = h.prepare(std::string("SELECT ") + kNodeColumns +
                      " FROM nodes WHERE state = 'live' ORDER BY id");
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  return read_nodes(*st, "SELECT nodes");
}

}  // namespace store_detail

namespace {

// The way out when two daemons want one node id; with `waiting`, also
// when this one may start (the other one's heartbeat or claim is stale).
std::string own_id_hint(const NodeRegistration* waiting) {
  std::string hint = "give each daemon its own serve.node.id (--node-id)";
  if (waiting != nullptr)
    hint += "; if the other one is gone, start this one again after serve.node.lost_after (" +
            std::to_string(waiting->live_within_ms) +
            " ms), once its heartbeat or claim is that old";
  return hint;
}

// Node `id`'s row; kNotFound (with what to do) when there is none.
Result<NodeRecord> node_by_id(sql::Connection& h, std::string_view id) {
  auto st = h.prepare(std::string("SELECT ") + kNodeColumns + " FROM nodes WHERE id = ?1");
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  st->bind(1, id);
  auto rows = read_nodes(*st, "reading node " + std::string(id));
  if (!rows) return tl::unexpected<Error>(std::move(rows).error());
  if (rows->empty())
    return make_error(ErrorCode::kNotFound, "node '" + std::string(id) + "' is not registered",
                      "list the nodes with GET /v1/nodes");
  return std::move(rows->front());
}

// This daemon's claim on `reg.id` went to another daemon while it started.
tl::unexpected<Error> claim_taken(const NodeRegistration& reg, const std::string& what) {
  return make_error(ErrorCode::kAlreadyExists,
                    what + ": another daemon claimed node " + reg.id +
                        " while this one was starting (another data dir)",
                    own_id_hint(nullptr));
}

// kAlreadyExists when node `reg.id` is live in the store, registered by
// another daemon (another data dir's instance token) whose heartbeat is
// younger than reg.live_within_ms: that daemon runs, and two daemons with
// one id would each reconcile the other's sandboxes as their own. In the
// registration's transaction.
Status refuse_another_daemon(sql::Connection& h, const NodeRegistration& reg, std::int64_t now,
                             const std::string& what) {
  if (reg.instance.empty() || reg.live_within_ms <= 0) return ok();
  auto st = h.prepare(
      "SELECT address, instance, heartbeat_at FROM nodes WHERE id = ?1 AND state = 'live'");
  if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
  st->bind(1, reg.id);
  struct Holder {
    std::string address, instance;
    std::int64_t heartbeat_at = 0;
  };
  auto rows = store_detail::read_rows(*st, "SELECT nodes", [](sql::Stmt& r) -> Result<Holder> {
    return Holder{r.text(0), r.text(1), r.int64(2)};
  });
  if (!rows) return tl::unexpected<Error>(std::move(rows).error().wrap(what));
  if (rows->empty()) return ok();
  const Holder& other = rows->front();
  const std::int64_t age = now - other.heartbeat_at;
  if (other.instance.empty() || other.instance == reg.instance || age >= reg.live_within_ms)
    return ok();
  return make_error(ErrorCode::kAlreadyExists,
                    what + ": another daemon is node " + reg.id + " (address " +
                        (other.address.empty() ? std::string("none") : other.address) +
                        ", its last heartbeat " + std::to_string(age) +
                        " ms ago, another data dir)",
                    own_id_hint(&reg));
}

// The claim on node `reg.id` for this daemon (reg.instance), in the
// caller's transaction: taken when there is none, when it is this daemon's
// own, or when it is older than reg.live_within_ms (its daemon died before
// it registered). One upsert: on PostgreSQL a second daemon's waits for the
// first's transaction and then finds its claim; on SQLite the write lock
// orders them. kAlreadyExists when another daemon holds it.
Status take_claim(sql::Connection& h, const NodeRegistration& reg, std::int64_t now,
                  const std::string& what) {
  if (reg.instance.empty() || reg.live_within_ms <= 0) return ok();
  auto st = h.prepare(
      "INSERT INTO node_claims (id, instance, claimed_at) VALUES (?1, ?2, ?3) "
      "ON CONFLICT (id) DO UPDATE SET instance = excluded.instance, "
      "claimed_at = excluded.claimed_at "
      "WHERE node_claims.instance = excluded.instance OR node_claims.claimed_at < ?4");
  if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
  st->bind(1, reg.id).bind(2, reg.instance).bind(3, now).bind(4, now - reg.live_within_ms);
  CORRAL_TRY_CTX(st->run("INSERT INTO node_claims"), what);
  if (st->changes() == 1) return ok();
  auto held = h.prepare("SELECT claimed_at FROM node_claims WHERE id = ?1");
  if (!held) return tl::unexpected<Error>(std::move(held).error().wrap(what));
  held->bind(1, reg.id);
  auto row = held->step("SELECT node_claims");
  if (!row) return tl::unexpected<Error>(std::move(row).error().wrap(what));
  const std::int64_t age = *row ? now - held->int64(0) : 0;
  return make_error(ErrorCode::kAlreadyExists,
                    what + ": another daemon is starting as node " + reg.id +
                        " (it claimed the id " + std::to_string(age) +
                        " ms ago, from another data dir)",
                    own_id_hint(&reg));
}

// Whether this daemon's claim still stands when it registers: another
// daemon may have taken it over while this one reconciled for longer than
// live_within_ms. In the registration's transaction.
Status claim_still_ours(sql::Connection& h, const NodeRegistration& reg, const std::string& what) {
  if (reg.instance.empty() || reg.live_within_ms <= 0) return ok();
  auto st = h.prepare("SELECT instance FROM node_claims WHERE id = ?1");
  if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
  st->bind(1, reg.id);
  auto row = st->step("SELECT node_claims");
  if (!row) return tl::unexpected<Error>(std::move(row).error().wrap(what));
  if (!*row || st->text(0) == reg.instance) return ok();
  return claim_taken(reg, what);
}

}  // namespace

Status StateStore::set_node(std::string_view id) {
  CORRAL_TRY(check_node_id(id));
  std::lock_guard lock(db_->mu);
  db_->node = std::string(id);
  return store_detail::adopt_rows(*db_->conn, db_->node);
}

const std::string& StateStore::node() const { return db_->node; }

Status StateStore::claim_node(const NodeRegistration& reg) {
  const std::string what = "starting node " + reg.id;
  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  Txn txn(h);
  CORRAL_TRY_CTX(txn.begin(), what);
  auto now = store_detail::fleet_now_ms(h);
  if (!now) return tl::unexpected<Error>(std::move(now).error().wrap(what));
  CORRAL_TRY(refuse_another_daemon(h, reg, *now, what));
  CORRAL_TRY(take_claim(h, reg, *now, what));
  return txn.commit();
}

Status StateStore::renew_claim(const NodeRegistration& reg) {
  const std::string what = "renewing the claim on node " + reg.id;
  if (reg.instance.empty() || reg.live_within_ms <= 0) return ok();
  // The heartbeat's connection on PostgreSQL: never behind the reconcile's
  // statements on the other one.
  const bool own = db_->beat_conn != nullptr;
  std::lock_guard lock(own ? db_->beat_mu : db_->mu);
  sql::Connection& h = own ? *db_->beat_conn : *db_->conn;
  auto now = store_detail::fleet_now_ms(h);
  if (!now) return tl::unexpected<Error>(std::move(now).error().wrap(what));
  auto st = h.prepare("UPDATE node_claims SET claimed_at = ?3 WHERE id = ?1 AND instance = ?2");
  if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
  st->bind(1, reg.id).bind(2, reg.instance).bind(3, *now);
  CORRAL_TRY_CTX(st->run("UPDATE node_claims"), what);
  if (st->changes() == 1) return ok();
  return claim_taken(reg, what);
}

bool StateStore::shared() const { return db_->conn->backend() == sql::Backend::kPostgres; }

Result<NodeRecord> StateStore::register_node(const NodeRegistration& reg) {
  const std::string what = "registering node " + reg.id;
  CORRAL_TRY(check_node_id(reg.id));
  if (reg.key_id.size() > 64)
    return make_error(ErrorCode::kInvalidArgument, what + ": the key id is longer than 64 bytes");
  if (reg.address.size() > kMaxAddressBytes)
    return make_error(ErrorCode::kInvalidArgument, what + ": the address is longer than 255 bytes");
  if (reg.instance.size() > 64)
    return make_error(ErrorCode::kInvalidArgument,
                      what + ": the instance token is longer than 64 bytes");
  auto capacity = registration_json(reg.capacity_json, "capacity", Shape::kObject);
  if (!capacity) return tl::unexpected<Error>(std::move(capacity).error());
  auto labels = registration_json(reg.labels_json, "labels", Shape::kStringMap);
  if (!labels) return tl::unexpected<Error>(std::move(labels).error());
  auto pools = registration_json(reg.pools_json, "pools", Shape::kStringList);
  if (!pools) return tl::unexpected<Error>(std::move(pools).error());

  std::lock_guard lock(db_->mu);
  if (reg.id != db_->node)
    return make_error(ErrorCode::kInvalidArgument,
                      what + ": this store writes for node " + db_->node,
                      "call set_node with the node's id first");
  sql::Connection& h = *db_->conn;
  Txn txn(h);
  CORRAL_TRY_CTX(txn.begin(), what);
  auto now = store_detail::fleet_now_ms(h);
  if (!now) return tl::unexpected<Error>(std::move(now).error().wrap(what));
  CORRAL_TRY(refuse_another_daemon(h, reg, *now, what));
  CORRAL_TRY(claim_still_ours(h, reg, what));
  auto st = h.prepare(
      "INSERT INTO nodes (id, address, state, capacity_json, labels_json, pools_json, "
      "incarnation, started_at, heartbeat_at, lost_at, key_id, instance) "
      "VALUES (?1, ?2, 'live', ?3, ?4, ?5, 1, ?6, ?6, NULL, ?7, ?8) "
      "ON CONFLICT (id) DO UPDATE SET address = excluded.address, state = 'live', "
      "capacity_json = excluded.capacity_json, labels_json = excluded.labels_json, "
      "pools_json = excluded.pools_json, incarnation = nodes.incarnation + 1, "
      "started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, lost_at = NULL, "
      "key_id = excluded.key_id, instance = excluded.instance");
  if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
  st->bind(1, reg.id).bind(2, reg.address).bind(3, *capacity).bind(4, *labels).bind(5, *pools);
  st->bind(6, *now).bind(7, reg.key_id).bind(8, reg.instance);
  CORRAL_TRY_CTX(st->run("INSERT INTO nodes"), what);
  auto sel = h.prepare(std::string("SELECT ") + kNodeColumns + " FROM nodes WHERE id = ?1");
  if (!sel) return tl::unexpected<Error>(std::move(sel).error().wrap(what));
  sel->bind(1, reg.id);
  auto rows = read_nodes(*sel, "SELECT nodes");
  if (!rows) return tl::unexpected<Error>(std::move(rows).error().wrap(what));
  CORRAL_TRY_CTX(txn.commit(), what);
  if (rows->empty()) return make_error(ErrorCode::kInternal, what + ": the row is not there");
  return std::move(rows->front());
}

Result<NodeBeat> StateStore::heartbeat() {
  // On PostgreSQL the heartbeat has a connection of its own: it never waits
  // behind this node's other store calls (db_->mu), and, one write
  // statement outside a transaction, it takes no write lock, so it never
  // waits behind another node's either.
  const bool own = db_->beat_conn != nullptr;
  std::lock_guard lock(own ? db_->beat_mu : db_->mu);
  sql::Connection& h = own ? *db_->beat_conn : *db_->conn;
  const std::string what = "heartbeat of node " + db_->node;
  auto now = store_detail::fleet_now_ms(h);
  if (!now) return tl::unexpected<Error>(std::move(now).error().wrap(what));
  // The one write also reads the cordon: no second round trip.
  auto st = h.prepare(
      "UPDATE nodes SET heartbeat_at = ?2 WHERE id = ?1 AND state = 'live' RETURNING cordoned");
  if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
  st->bind(1, db_->node).bind(2, *now);
  auto row = st->step("UPDATE nodes");
  if (!row) return tl::unexpected<Error>(std::move(row).error().wrap(what));
  if (*row) {
    const NodeBeat beat{st->int64(0) != 0};
    auto end = st->step("UPDATE nodes");
    if (!end) return tl::unexpected<Error>(std::move(end).error().wrap(what));
    return beat;
  }
  return make_error(ErrorCode::kPermissionDenied,
                    what +
                        ": the node is not live in the store (marked lost, left, or never "
                        "registered)",
                    "what the node held is no longer its own: reconcile, then register again");
}

Status StateStore::leave() {
  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  const std::string what = "node " + db_->node + " leaving";
  Txn txn(h);
  CORRAL_TRY_CTX(txn.begin(), what);
  auto st = h.prepare("UPDATE nodes SET state = 'left' WHERE id = ?1 AND state = 'live'");
  if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
  st->bind(1, db_->node);
  CORRAL_TRY_CTX(st->run("UPDATE nodes"), what);
  // Its id is free at once for a daemon of another data dir.
  auto claim = h.prepare("DELETE FROM node_claims WHERE id = ?1");
  if (!claim) return tl::unexpected<Error>(std::move(claim).error().wrap(what));
  claim->bind(1, db_->node);
  CORRAL_TRY_CTX(claim->run("DELETE FROM node_claims"), what);
  // Its queued tasks are for the nodes that stay.
  auto tasks = h.prepare("UPDATE tasks SET node = NULL WHERE node = ?1 AND status = 'queued'");
  if (!tasks) return tl::unexpected<Error>(std::move(tasks).error().wrap(what));
  tasks->bind(1, db_->node);
  CORRAL_TRY_CTX(tasks->run("UPDATE tasks"), what);
  return txn.commit();
}

Result<std::vector<NodeRecord>> StateStore::list_nodes() {
  std::lock_guard lock(db_->mu);
  auto st = db_->conn->prepare(std::string("SELECT ") + kNodeColumns + " FROM nodes ORDER BY id");
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  return read_nodes(*st, "listing nodes");
}

Result<NodeRecord> StateStore::get_node(std::string_view id) {
  std::lock_guard lock(db_->mu);
  return node_by_id(*db_->conn, id);
}

Result<NodeRecord> StateStore::set_node_cordoned(std::string_view id, bool cordoned) {
  const std::string what = std::string(cordoned ? "cordoning" : "uncordoning") + " node " +
                           std::string(id.substr(0, 80));
  CORRAL_TRY(check_node_id(id));
  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  Txn txn(h);
  CORRAL_TRY_CTX(txn.begin(), what);
  auto st = h.prepare("UPDATE nodes SET cordoned = ?2 WHERE id = ?1");
  if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
  st->bind(1, id).bind(2, std::int64_t{cordoned ? 1 : 0});
  CORRAL_TRY_CTX(st->run("UPDATE nodes"), what);
  auto node = node_by_id(h, id);
  if (!node) return node;  // kNotFound says which node, and what to do
  CORRAL_TRY_CTX(txn.commit(), what);
  return node;
}

Result<LostNodeSweep> StateStore::sweep_lost_nodes(std::int64_t lost_after_ms) {
  return sweep_lost_nodes(std::nullopt, lost_after_ms);
}

Result<LostNodeSweep> StateStore::sweep_lost_nodes(std::optional<std::int64_t> at,
                                                   std::int64_t lost_after_ms) {
  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  const std::string what = "sweeping for lost nodes";
  Txn txn(h);
  CORRAL_TRY_CTX(txn.begin(), what);
  LostNodeSweep sweep;
  std::int64_t now = 0;
  if (at) {
    now = *at;
  } else {
    auto clock = store_detail::fleet_now_ms(h);
    if (!clock) return tl::unexpected<Error>(std::move(clock).error().wrap(what));
    now = *clock;
  }

  std::vector<std::string> candidates;
  auto silent = h.prepare(
      "SELECT id FROM nodes WHERE state = 'live' AND heartbeat_at < ?1 AND id <> ?2 ORDER BY id");
  if (!silent) return tl::unexpected<Error>(std::move(silent).error().wrap(what));
  silent->bind(1, now - lost_after_ms).bind(2, db_->node);
  for (;;) {
    auto row = silent->step("SELECT nodes");
    if (!row) return tl::unexpected<Error>(std::move(row).error().wrap(what));
    if (!*row) break;
    candidates.push_back(silent->text(0));
  }
  for (const std::string& id : candidates) {
    // Checked again here: a heartbeat takes no write lock and may have
    // landed since the SELECT.
    auto mark = h.prepare(
        "UPDATE nodes SET state = 'lost', lost_at = ?2 "
        "WHERE id = ?1 AND state = 'live' AND heartbeat_at < ?3");
    if (!mark) return tl::unexpected<Error>(std::move(mark).error().wrap(what));
    mark->bind(1, id).bind(2, now).bind(3, now - lost_after_ms);
    CORRAL_TRY_CTX(mark->run("UPDATE nodes"), what);
    if (mark->changes() == 1) sweep.nodes_lost.push_back(id);
  }

  // Every lost node, not only those marked now: what a sweep that failed
  // half way left is finished by the next one.
  std::vector<std::string> lost;
  auto all_lost = h.prepare("SELECT id FROM nodes WHERE state = 'lost' ORDER BY id");
  if (!all_lost) return tl::unexpected<Error>(std::move(all_lost).error().wrap(what));
  for (;;) {
    auto row = all_lost->step("SELECT nodes");
    if (!row) return tl::unexpected<Error>(std::move(row).error().wrap(what));
    if (!*row) break;
    lost.push_back(all_lost->text(0));
  }
  for (const std::string& id : lost) {
    // Only what the node held when it was marked: a sandbox it made after
    // (before it learnt it was lost) is not caught by a later sweep.
    auto sbx = h.prepare(
        "UPDATE sandboxes SET lost_at = ?2 "
        "WHERE node = ?1 AND state <> 'cleaned' AND lost_at IS NULL "
        "AND created_at <= (SELECT lost_at FROM nodes WHERE id = ?1)");
    if (!sbx) return tl::unexpected<Error>(std::move(sbx).error().wrap(what));
    sbx->bind(1, id).bind(2, now);
    CORRAL_TRY_CTX(sbx->run("UPDATE sandboxes"), what);
    sweep.sandboxes_lost += static_cast<std::size_t>(sbx->changes());
    CORRAL_TRY_CTX(store_detail::release_tasks_of_lost_node(h, id, now, sweep), what);
  }
  CORRAL_TRY_CTX(txn.commit(), what);
  return sweep;
}

}  // namespace corral
