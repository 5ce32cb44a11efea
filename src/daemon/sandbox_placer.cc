#include "daemon/sandbox_placer.h"

#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "daemon/api_context.h"
#include "daemon/metrics.h"
#include "daemon/node_forwarder.h"
#include "daemon/pool_service.h"
#include "store/state_store.h"

namespace corral::daemon {

namespace {

constexpr std::size_t kMaxWishLabels = 32;

bool refused_for_capacity(const api::ApiError& e) {
  return e.http_status == 429 || e.http_status == 507;
}

}  // namespace

ApiResult<BodyAndWish> take_placement_wish(const std::string& body) {
  BodyAndWish out{body, {}};
  auto j = nlohmann::json::parse(body.empty() ? "{}" : body, nullptr, false);
  // Anything but an object with "placement" is the create codec's to judge.
  if (!j.is_object() || !j.contains("placement")) return out;
  const nlohmann::json p = j["placement"];
  j.erase("placement");
  out.body = json_text(j);
  if (p.is_null()) return out;
  if (!p.is_object())
    return api_fail(api::ApiErrorCode::kWrongType, "placement must be an object", "placement",
                    R"(for example {"labels": {"zone": "eu-1"}} or {"node": "node-b"})");
  for (auto it = p.begin(); it != p.end(); ++it) {
    if (it.key() != "node" && it.key() != "labels")
      return api_fail(api::ApiErrorCode::kUnknownField,
                      "placement has no field \"" + it.key().substr(0, 64) + "\"",
                      "placement." + it.key().substr(0, 64), "its fields are node and labels");
  }
  if (p.contains("node") && !p["node"].is_null()) {
    if (!p["node"].is_string())
      return api_fail(api::ApiErrorCode::kWrongType, "placement.node must be a string",
                      "placement.node");
    out.wish.node = p["node"].get<std::string>();
    if (!valid_node_id(out.wish.node))
      return api_fail(api::ApiErrorCode::kInvalidValue,
                      "placement.node \"" + out.wish.node.substr(0, 80) + "\" is not a node id",
                      "placement.node", "list the nodes with GET /v1/nodes");
  }
  if (p.contains("labels") && !p["labels"].is_null()) {
    const nlohmann::json& l = p["labels"];
    if (!l.is_object())
      return api_fail(api::ApiErrorCode::kWrongType,
                      "placement.labels must be an object of strings", "placement.labels");
    if (l.size() > kMaxWishLabels)
      return api_fail(
          api::ApiErrorCode::kInvalidValue,
          "placement.labels has more than " + std::to_string(kMaxWishLabels) + " labels",
          "placement.labels");
    for (auto it = l.begin(); it != l.end(); ++it) {
      if (!it->is_string() || it.key().empty() || it.key().size() > 63 ||
          it->get<std::string>().size() > 63)
        return api_fail(api::ApiErrorCode::kInvalidValue,
                        "placement.labels: each label is a name of 1-63 bytes with a string of "
                        "at most 63",
                        "placement.labels." + it.key().substr(0, 63));
      out.wish.labels[it.key()] = it->get<std::string>();
    }
  }
  return out;
}

SandboxShare share_of_spec(std::string_view spec_json) {
  SandboxShare s;
  auto j = nlohmann::json::parse(spec_json, nullptr, false);
  if (!j.is_object() || !j.contains("limits") || !j["limits"].is_object()) return s;
  const nlohmann::json& l = j["limits"];
  if (l.contains("memory_bytes") && l["memory_bytes"].is_number_unsigned())
    s.memory_bytes = l["memory_bytes"].get<std::uint64_t>();
  if (l.contains("disk_bytes") && l["disk_bytes"].is_number_unsigned())
    s.disk_bytes = l["disk_bytes"].get<std::uint64_t>();
  return s;
}

SandboxPlacer::SandboxPlacer(StateStore& store, NodeForwarder& forwarder, MetricsRegistry& metrics,
                             bool fleet)
    : store_(store), forwarder_(forwarder), metrics_(metrics), fleet_(fleet) {}

void SandboxPlacer::create(ApiRequest& r, const std::string& body, const PlacementWish& wish,
                           const api::CreateSandboxRequest& request, const LocalCreate& local) {
  Door v1;
  v1.answer_created = [&r](ApiResult<SandboxService::Created> created) {
    if (!created) return send_error(r.out, created.error());
    send_json(r.out, created->created ? 201 : 200, api::to_json(created->info));
  };
  v1.answer_error = [&r](const api::ApiError& e) { send_error(r.out, e); };
  v1.create_path = "/v1/sandboxes";
  create(r, body, wish, request, local, v1);
}

void SandboxPlacer::create(ApiRequest& r, const std::string& body, const PlacementWish& wish,
                           const api::CreateSandboxRequest& request, const LocalCreate& local,
                           const Door& door) {
  // A create another node placed here (signed, the placement in the
  // query): made here, never placed again.
  if (NodeForwarder::is_forwarded(r.head))
    return door.answer_created(local(r.query_value("placement")));
  // Outside a fleet nothing is placed unless the create asks where.
  if (!fleet_ && wish.empty()) return door.answer_created(local(std::nullopt));
  if (!fleet_ && !wish.node.empty() && wish.node != store_.node())
    return door.answer_error(
        api::make_api_error(api::ApiErrorCode::kConflict,
                                   "placement.node is " + wish.node + ", and this node (" +
                                       store_.node() + ") cannot send creates to other nodes",
                                   "placement.node",
                                   "send the create to that node, or give every node of the fleet "
                                   "a shared PostgreSQL state and serve.cluster_key_file"));

  PlacementRequest req;
  req.share = SandboxShare{request.spec.limits.memory_bytes, request.spec.limits.disk_bytes};
  req.node = fleet_ ? wish.node : store_.node();
  req.labels = wish.labels;
  req.key_id = forwarder_.key_id();
  if (request.pool) {
    req.pool = *request.pool;
    req.warm_key_prefix = std::string(kPoolKeyPrefix) + *request.pool + ":";
  }
  auto counted = [&](std::string_view result) {
    metrics_
        .counter("corral_placements_total", "Creates placed, by where they went",
                 {{"result", std::string(result)}})
        .inc();
  };
  // Each round leaves out the nodes that refused: at most one per node.
  for (;;) {
    auto placed = store_.place_sandbox(req, share_of_spec);
    if (!placed) return door.answer_error(api::to_api_error(placed.error()));
    if (placed->id.empty()) {
      counted("none");
      const std::string why = describe_refusals(placed->refused);
      if (placed->full)
        return door.answer_error(api::make_api_error(
            api::ApiErrorCode::kOverCapacity,
            "no node of the fleet has room for this sandbox (" + why + ")", "",
            "retry later, or ask for less"));
      return door.answer_error(api::make_api_error(
          api::ApiErrorCode::kInvalidValue, "no live node matches this create (" + why + ")",
          wish.empty() ? "pool" : "placement",
          "list the nodes, their labels and pools with GET /v1/nodes"));
    }
    const std::string id = placed->id;
    if (placed->node == store_.node()) {
      auto created = local(id);
      (void)store_.release_placement(id);
      if (!created && refused_for_capacity(created.error()) && fleet_) {
        req.exclude.push_back(placed->node);
        continue;
      }
      counted("local");
      return door.answer_created(std::move(created));
    }
    auto node = store_.get_node(placed->node);
    if (!node) {
      (void)store_.release_placement(id);
      return door.answer_error(api::to_api_error(node.error()));
    }
    std::string lost;
    const auto outcome = forwarder_.forward_create(r.head, body, r.out, r.ns, *node,
                                                   door.create_path + "?placement=" + id, &lost);
    (void)store_.release_placement(id);
    switch (outcome) {
      case NodeForwarder::CreateOutcome::kAnswered:
        counted("forwarded");
        return;
      case NodeForwarder::CreateOutcome::kLost:
        counted("forwarded");
        return door.answer_error(api::make_api_error(
            api::ApiErrorCode::kUnavailable, lost, "",
            "list the sandboxes (or retry with the same Idempotency-Key)"));
      case NodeForwarder::CreateOutcome::kFull:
      case NodeForwarder::CreateOutcome::kNotReached:
        req.exclude.push_back(placed->node);
        continue;
      case NodeForwarder::CreateOutcome::kNoKey:
        return door.answer_error(api::make_api_error(
            api::ApiErrorCode::kInternal,
            "placed on node " + placed->node + " with no cluster key to forward with"));
    }
  }
}

}  // namespace corral::daemon
