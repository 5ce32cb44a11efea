// /v1/nodes (issue 18, docs/api.md "Nodes", docs/fleet.md): the nodes
// sharing this daemon's state store, as the store has them. Addresses and
// capacity are the operator's business: the default namespace only.
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "daemon/api_context.h"
#include "daemon/sandbox_service.h"
#include "store/state_store.h"

namespace corral::daemon {
namespace {

using nlohmann::json;

json node_json(const NodeRecord& n, const std::string& self) {
  json j{{"id", n.id},
         {"address", n.address},
         {"state", node_state_name(n.state)},
         {"capacity", json::parse(n.capacity_json, nullptr, false)},
         {"labels", json::parse(n.labels_json, nullptr, false)},
         {"pools", json::parse(n.pools_json, nullptr, false)},
         {"incarnation", n.incarnation},
         {"started_at_ms", n.started_at_ms},
         {"heartbeat_at_ms", n.heartbeat_at_ms},
         {"self", n.id == self}};
  j["lost_at_ms"] = n.lost_at_ms ? json(*n.lost_at_ms) : json();
  return j;
}

bool operator_or_answer(ApiRequest& r) {
  if (r.ns == "default") return true;
  send_error(r.out, api::make_api_error(api::ApiErrorCode::kForbidden,
                                        "nodes are the operator's: only the default namespace "
                                        "lists them",
                                        "", "ask the daemon's operator"));
  return false;
}

}  // namespace

void handle_list_nodes(ApiContext& ctx, ApiRequest& r) {
  if (!operator_or_answer(r)) return;
  StateStore& store = ctx.sandboxes.store();
  auto nodes = store.list_nodes();
  if (!nodes)
    return send_error(
        r.out, api::make_api_error(api::ApiErrorCode::kUnavailable, nodes.error().message, "",
                                   "check the state store"));
  json out = json::array();
  for (const NodeRecord& n : *nodes) out.push_back(node_json(n, store.node()));
  send_json(r.out, 200, json_text(json{{"nodes", std::move(out)}, {"self", store.node()}}));
}

}  // namespace corral::daemon
