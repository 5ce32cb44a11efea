// Placement of a sandbox on a node of the fleet (issue 18, docs/fleet.md):
// the node a create goes to, chosen in one write transaction of the shared
// store, so that nodes placing at once never promise the same capacity
// twice. The choice is held by a placement row until the chosen node
// stores the sandbox (StateStore::create_sandbox removes the row in the
// same transaction), until the placing node releases it, or until it
// expires (a placing node that died on the way).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace corral {

// What one sandbox takes of a node's capacity besides its slot.
struct SandboxShare {
  std::uint64_t memory_bytes = 0;
  std::uint64_t disk_bytes = 0;
};

// The share a stored sandbox takes, from its spec_json (the store does not
// read specs: the daemon, which writes them, says).
using ShareOfSpec = std::function<SandboxShare(std::string_view spec_json)>;

struct PlacementRequest {
  SandboxShare share;
  std::string node;                           // only this node ("": any)
  std::map<std::string, std::string> labels;  // the node must carry each
  // A create from a warm pool: nodes with an unclaimed sandbox of the pool
  // come first (a claim takes no new capacity), then nodes that serve it;
  // nodes that do not serve it are not chosen.
  std::string pool;
  std::string warm_key_prefix;       // the idempotency-key prefix of the pool's unclaimed sandboxes
  std::vector<std::string> exclude;  // nodes that refused this create already
  // Only nodes registered with this key id (NodeRegistration::key_id) can
  // take a create forwarded from here; the placing node is always one.
  std::string key_id;
  std::int64_t hold_ms = 60'000;  // how long the choice is held at most
};

// Why a node was not chosen, for the error a create gets when none is.
struct NodeRefusal {
  std::string node;
  std::string why;
};

struct Placement {
  std::string id;  // the placement row; "" when no node was chosen
  std::string node;
  std::string address;
  bool warm = false;  // chosen for an unclaimed sandbox of the pool
  // True when some node matched the request and only capacity stood in
  // the way (429), false when none matched it at all (400).
  bool full = false;
  std::vector<NodeRefusal> refused;  // every live node not chosen, and why
};

// "node-a: full (4 of 4 sandboxes); node-b: labels do not match" for an error.
std::string describe_refusals(const std::vector<NodeRefusal>& refused);

}  // namespace corral
