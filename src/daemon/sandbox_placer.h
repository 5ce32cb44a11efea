// SandboxPlacer: where a create made at this node runs (issue 18,
// docs/fleet.md "Placement"). In a fleet (a shared PostgreSQL store and a
// cluster key) every create is placed by the store (store/placement.h):
// the live node that matches the create's `placement` wish and has the
// most free room for its size; a pool create goes first to a node with an
// unclaimed warm sandbox of the pool. The create then runs here, or is
// forwarded to the chosen node, signed, naming the placement. A node that
// refuses it for capacity after all (its own ledger is the last word) is
// left out and the create placed again, at most once per node.
//
// Without a fleet, a create runs here; a `placement` wish is checked
// against this node (409 when it names another node or labels this node
// does not carry).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "daemon/api_result.h"
#include "daemon/sandbox_service.h"
#include "store/placement.h"

namespace corral {
class MetricsRegistry;
class StateStore;
}  // namespace corral

namespace corral::daemon {

class NodeForwarder;
struct ApiRequest;

// The create body's "placement": {"node": "<id>", "labels": {"k": "v"}}.
struct PlacementWish {
  std::string node;
  std::map<std::string, std::string> labels;
  bool empty() const { return node.empty() && labels.empty(); }
};

// Takes "placement" out of a create body: the wish, and the body without
// it (for the create codec, which knows no placement). 400 for a wish
// that is not of the shape above.
struct BodyAndWish {
  std::string body;
  PlacementWish wish;
};
ApiResult<BodyAndWish> take_placement_wish(const std::string& body);

// The share of a sandbox whose stored spec is `spec_json` (its memory and
// disk limits, as CapacityLedger counts them).
SandboxShare share_of_spec(std::string_view spec_json);

class SandboxPlacer {
 public:
  // `fleet`: creates may be placed on other nodes (a shared store and a
  // cluster key to forward with).
  SandboxPlacer(StateStore& store, NodeForwarder& forwarder, MetricsRegistry& metrics, bool fleet);
  bool fleet() const { return fleet_; }

  // Creates here, with the placement id the store's row is to fill (if any).
  using LocalCreate = std::function<ApiResult<SandboxService::Created>(
      const std::optional<std::string>& placement_id)>;

  // The API a create came through: how it answers, and where on the
  // chosen node a create it forwards goes (with ?placement=<id>, and the
  // body as sent). The /v1 API's by default; the E2B facade has its own.
  struct Door {
    std::function<void(ApiResult<SandboxService::Created>)> answer_created;
    std::function<void(const api::ApiError&)> answer_error;
    std::string create_path;
  };

  // Answers create `r` (its JSON body `body` as sent, the request parsed
  // from it): placed, then created here through `local` or forwarded. A
  // create another node placed here (signed, ?placement=<id>) is made here
  // through `local`, never placed again.
  void create(ApiRequest& r, const std::string& body, const PlacementWish& wish,
              const api::CreateSandboxRequest& request, const LocalCreate& local);
  void create(ApiRequest& r, const std::string& body, const PlacementWish& wish,
              const api::CreateSandboxRequest& request, const LocalCreate& local,
              const Door& door);

 private:
  StateStore& store_;
  NodeForwarder& forwarder_;
  MetricsRegistry& metrics_;
  const bool fleet_;
};

}  // namespace corral::daemon
