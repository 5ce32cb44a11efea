// /v1/nodes (issue 18, docs/api.md "Nodes", docs/fleet.md): the nodes
// sharing this daemon's state store, as the store has them, and the cordon
// that keeps new work off one. Addresses, capacity and where work goes are
// the operator's business: the default namespace only.
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "daemon/api_context.h"
#include "daemon/sandbox_placer.h"
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
         {"cordoned", n.cordoned},
         {"self", n.id == self}};
  j["lost_at_ms"] = n.lost_at_ms ? json(*n.lost_at_ms) : json();
  return j;
}

bool operator_or_answer(ApiRequest& r) {
  if (r.ns == "default") return true;
  send_error(r.out, api::make_api_error(api::ApiErrorCode::kForbidden,
                                        "nodes are the operator's: only the default namespace "
                                        "lists or cordons them",
                                        "", "ask the daemon's operator"));
  return false;
}

void set_cordon(ApiContext& ctx, ApiRequest& r, bool cordoned) {
  if (!operator_or_answer(r)) return;
  // Outside a fleet every create is made where it is sent and there is no
  // one to hand work to: a cordon would be a promise nothing keeps.
  if (ctx.placer == nullptr || !ctx.placer->fleet())
    return send_error(
        r.out, api::make_api_error(api::ApiErrorCode::kConflict,
                                   "this daemon is not in a fleet: every create it is sent is made "
                                   "here, so a cordon would keep nothing off it",
                                   "", "to drain a lone daemon, stop it with SIGTERM"));
  StateStore& store = ctx.sandboxes.store();
  auto node = store.set_node_cordoned(r.params[0], cordoned);
  if (!node) {
    if (node.error().code == ErrorCode::kNotFound ||
        node.error().code == ErrorCode::kInvalidArgument)
      return send_error(r.out, api::to_api_error(node.error()));
    return send_error(r.out,
                      api::make_api_error(api::ApiErrorCode::kUnavailable, node.error().message, "",
                                          "check the state store"));
  }
  ctx.sandboxes.audit_async({{"type", cordoned ? "node.cordoned" : "node.uncordoned"},
                             {"node", node->id},
                             {"by", store.node()}});
  send_json(r.out, 200, json_text(node_json(*node, store.node())));
}

}  // namespace

void handle_cordon_node(ApiContext& ctx, ApiRequest& r) { set_cordon(ctx, r, true); }
void handle_uncordon_node(ApiContext& ctx, ApiRequest& r) { set_cordon(ctx, r, false); }

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
