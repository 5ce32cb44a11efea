// The placements table (issue 18, store/placement.h): which node a create
// goes to. The choice reads every live node's capacity and what it holds
// (its sandboxes that are not cleaned, and the placements still pending
// on it) and records the new placement, all in one write transaction:
// on PostgreSQL every write transaction takes the store's one advisory
// lock first, so two nodes placing at once see each other's placements.
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "base/random.h"
#include "base/strings.h"
#include "store/placement.h"
#include "store/sql.h"
#include "store/state_db_internal.h"
#include "store/state_store.h"

namespace corral {

namespace {

using sql::Txn;

// What a node offers and what it holds now.
struct NodeLoad {
  std::string id;
  std::string address;
  std::string key_id;
  std::uint64_t max_sandboxes = 0;
  std::uint64_t max_memory = 0;  // 0: no bound
  std::uint64_t max_disk = 0;    // 0: no bound
  std::map<std::string, std::string> labels;
  std::vector<std::string> pools;
  std::uint64_t sandboxes = 0;
  std::uint64_t memory = 0;
  std::uint64_t disk = 0;
  std::uint64_t warm = 0;  // unclaimed sandboxes of the request's pool, less placements on them
  bool cordoned = false;
};

std::uint64_t json_u64(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) return 0;
  return it->get<std::uint64_t>();
}

NodeLoad load_of(const NodeRecord& n) {
  NodeLoad l;
  l.id = n.id;
  l.address = n.address;
  l.key_id = n.key_id;
  l.cordoned = n.cordoned;
  auto cap = nlohmann::json::parse(n.capacity_json, nullptr, false);
  if (cap.is_object()) {
    l.max_sandboxes = json_u64(cap, "sandboxes");
    l.max_memory = json_u64(cap, "memory_bytes");
    l.max_disk = json_u64(cap, "disk_bytes");
  }
  auto labels = nlohmann::json::parse(n.labels_json, nullptr, false);
  if (labels.is_object())
    for (auto it = labels.begin(); it != labels.end(); ++it)
      if (it->is_string()) l.labels[it.key()] = it->get<std::string>();
  auto pools = nlohmann::json::parse(n.pools_json, nullptr, false);
  if (pools.is_array())
    for (const auto& p : pools)
      if (p.is_string()) l.pools.push_back(p.get<std::string>());
  return l;
}

// Why `l` cannot take the request ("" when it can).
std::string refusal(const NodeLoad& l, const PlacementRequest& req) {
  for (const auto& [k, v] : req.labels) {
    auto it = l.labels.find(k);
    if (it == l.labels.end() || it->second != v)
      return "labels do not match (" + k + "=" + v + " wanted)";
  }
  if (!req.pool.empty() && std::find(l.pools.begin(), l.pools.end(), req.pool) == l.pools.end())
    return "serves no pool named " + req.pool;
  if (l.warm > 0) return "";  // a claim takes no new capacity
  if (l.sandboxes + 1 > l.max_sandboxes)
    return "full (" + std::to_string(l.sandboxes) + " of " + std::to_string(l.max_sandboxes) +
           " sandboxes)";
  if (l.max_memory != 0 && l.memory + req.share.memory_bytes > l.max_memory)
    return "not enough memory (" + std::to_string(l.max_memory - std::min(l.memory, l.max_memory)) +
           " of " + std::to_string(l.max_memory) + " bytes free)";
  if (l.max_disk != 0 && l.disk + req.share.disk_bytes > l.max_disk)
    return "not enough disk (" + std::to_string(l.max_disk - std::min(l.disk, l.max_disk)) +
           " of " + std::to_string(l.max_disk) + " bytes free)";
  return "";
}

// The share of free sandbox slots: the node with the most room (for its
// size) comes first, which fills nodes in proportion to their capacity.
double free_ratio(const NodeLoad& l) {
  if (l.max_sandboxes == 0) return 0;
  return static_cast<double>(l.max_sandboxes - std::min(l.sandboxes, l.max_sandboxes)) /
         static_cast<double>(l.max_sandboxes);
}

std::string new_placement_id() {
  unsigned char b[12];
  fill_random(b, sizeof b);
  return "pl-" + to_hex(b, sizeof b);
}

}  // namespace

std::string describe_refusals(const std::vector<NodeRefusal>& refused) {
  std::string out;
  for (const NodeRefusal& r : refused) {
    if (!out.empty()) out += "; ";
    out += r.node + ": " + r.why;
  }
  return out.empty() ? "no node is live" : out;
}

Result<Placement> StateStore::place_sandbox(const PlacementRequest& req,
                                            const ShareOfSpec& share_of) {
  const std::string what = "placing a sandbox";
  if (!req.node.empty() && !valid_node_id(req.node))
    return make_error(ErrorCode::kInvalidArgument,
                      what + ": \"" + req.node.substr(0, 80) + "\" is not a node id");
  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  Txn txn(h);
  CORRAL_TRY_CTX(txn.begin(), what);
  // Other nodes drop expired placements by this time: the fleet's clock.
  auto clock = store_detail::fleet_now_ms(h);
  if (!clock) return tl::unexpected<Error>(std::move(clock).error().wrap(what));
  const std::int64_t now = *clock;

  std::map<std::string, NodeLoad> loads;
  {
    auto live = store_detail::live_nodes(h);
    if (!live) return tl::unexpected<Error>(std::move(live).error().wrap(what));
    for (const NodeRecord& n : *live) loads.emplace(n.id, load_of(n));
  }
  // What each holds: sandboxes not cleaned (a failed or destroying one
  // holds its share until its teardown ends), not marked lost.
  {
    auto st = h.prepare(
        "SELECT node, spec_json, idempotency_key, state FROM sandboxes "
        "WHERE state <> 'cleaned' AND lost_at IS NULL AND node <> ''");
    if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
    for (;;) {
      auto row = st->step("SELECT sandboxes");
      if (!row) return tl::unexpected<Error>(std::move(row).error().wrap(what));
      if (!*row) break;
      auto it = loads.find(st->text(0));
      if (it == loads.end()) continue;
      NodeLoad& l = it->second;
      const SandboxShare share = share_of(st->text(1));
      ++l.sandboxes;
      l.memory += share.memory_bytes;
      l.disk += share.disk_bytes;
      const std::string key = st->opt_text(2).value_or("");
      const std::string state = st->text(3);
      if (!req.warm_key_prefix.empty() && key.rfind(req.warm_key_prefix, 0) == 0 &&
          (state == "ready" || state == "running"))
        ++l.warm;
    }
  }
  // Placements still pending; expired ones are dropped here.
  {
    auto gone = h.prepare("DELETE FROM placements WHERE expires_at <= ?1");
    if (!gone) return tl::unexpected<Error>(std::move(gone).error().wrap(what));
    gone->bind(1, now);
    CORRAL_TRY_CTX(gone->run("DELETE FROM placements"), what);
    auto st = h.prepare("SELECT node, pool, memory_bytes, disk_bytes FROM placements");
    if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
    for (;;) {
      auto row = st->step("SELECT placements");
      if (!row) return tl::unexpected<Error>(std::move(row).error().wrap(what));
      if (!*row) break;
      auto it = loads.find(st->text(0));
      if (it == loads.end()) continue;
      NodeLoad& l = it->second;
      const std::string pool = st->opt_text(1).value_or("");
      if (!pool.empty()) {
        // Sent to claim a warm sandbox: takes that, not a new slot.
        if (pool == req.pool && l.warm > 0) --l.warm;
        continue;
      }
      ++l.sandboxes;
      l.memory += static_cast<std::uint64_t>(st->int64(2));
      l.disk += static_cast<std::uint64_t>(st->int64(3));
    }
  }

  Placement out;
  const NodeLoad* best = nullptr;
  bool any_matched = false;
  for (const auto& [id, l] : loads) {
    std::string why;
    if (!req.node.empty() && id != req.node) {
      why = "not the node asked for";
    } else if (id != db_->node && l.key_id != req.key_id) {
      why = "has another cluster key, or none: cannot take a create from " + db_->node;
    } else if (std::find(req.exclude.begin(), req.exclude.end(), id) != req.exclude.end()) {
      why = "refused this create";
      any_matched = true;
    } else {
      why = refusal(l, req);
      if (why.empty() || why.rfind("full", 0) == 0 || why.rfind("not enough", 0) == 0)
        any_matched = true;
      // Would take it, but takes nothing new until uncordoned: as if full.
      if (why.empty() && l.cordoned) why = "cordoned";
    }
    if (!why.empty()) {
      out.refused.push_back({id, why});
      continue;
    }
    auto better = [&](const NodeLoad& a, const NodeLoad& b) {
      if ((a.warm > 0) != (b.warm > 0)) return a.warm > 0;
      if (free_ratio(a) != free_ratio(b)) return free_ratio(a) > free_ratio(b);
      if ((a.id == db_->node) != (b.id == db_->node)) return a.id == db_->node;  // no hop
      return a.id < b.id;
    };
    if (best == nullptr || better(l, *best)) best = &l;
  }
  if (!req.node.empty() && loads.find(req.node) == loads.end())
    out.refused.push_back({req.node, "is not a live node"});
  if (best == nullptr) {
    out.full = any_matched;
    return out;  // nothing written: the transaction rolls back
  }
  // The others, for the record: only the refusals matter to a caller.
  std::erase_if(out.refused, [&](const NodeRefusal& r) { return r.node == best->id; });

  out.id = new_placement_id();
  out.node = best->id;
  out.address = best->address;
  out.warm = best->warm > 0;
  auto ins = h.prepare(
      "INSERT INTO placements (id, node, pool, memory_bytes, disk_bytes, created_at, expires_at) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  if (!ins) return tl::unexpected<Error>(std::move(ins).error().wrap(what));
  ins->bind(1, out.id).bind(2, out.node);
  if (out.warm) {
    ins->bind(3, req.pool);
  } else {
    ins->bind(3, std::nullopt);
  }
  ins->bind(4, static_cast<std::int64_t>(req.share.memory_bytes))
      .bind(5, static_cast<std::int64_t>(req.share.disk_bytes))
      .bind(6, now)
      .bind(7, now + std::max<std::int64_t>(req.hold_ms, 1));
  CORRAL_TRY_CTX(ins->run("INSERT INTO placements"), what);
  CORRAL_TRY_CTX(txn.commit(), what);
  return out;
}

Status StateStore::release_placement(std::string_view id) {
  std::lock_guard lock(db_->mu);
  auto st = db_->conn->prepare("DELETE FROM placements WHERE id = ?1");
  if (!st) return tl::unexpected<Error>(std::move(st).error().wrap("releasing a placement"));
  st->bind(1, id);
  return st->run("DELETE FROM placements");
}

}  // namespace corral
