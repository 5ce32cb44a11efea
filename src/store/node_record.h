// The nodes of a fleet (issue 18, docs/fleet.md): every daemon that shares
// one state store registers itself as a node, keeps a heartbeat, and owns
// the sandboxes it made and the tasks it claimed. A node whose heartbeat
// stops is marked lost by whichever node sweeps first; what it owned is
// then handled by the rules of LostNodeSweep. A daemon on its own SQLite
// file is a fleet of one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace corral {

enum class NodeState {
  kLive,  // heartbeating
  kLost,  // missed its heartbeats: its sandboxes are reported lost
  kLeft,  // stopped on purpose (drained)
};

// "live", "lost", "left": the names stored and shown by GET /v1/nodes.
std::string_view node_state_name(NodeState state);
std::optional<NodeState> parse_node_state(std::string_view name);

// A node id: 1-63 of [a-z0-9-], not starting or ending with '-' (a DNS
// label, so that a Kubernetes node or pod name fits as it is).
bool valid_node_id(std::string_view id);

// What a daemon says of itself when it (re)registers.
struct NodeRegistration {
  std::string id;
  std::string address;        // where other nodes reach its API ("" : nowhere)
  std::string capacity_json;  // a JSON object: {"sandboxes": N, ...}
  std::string labels_json;    // a JSON object of strings
  std::string pools_json;     // a JSON array of pool names
  // Names the cluster key the node forwards and accepts calls with
  // (ClusterKey::id; "": none): creates are placed only on nodes that share
  // the placing node's key.
  std::string key_id;
  // A random token of the daemon's data dir (<data_dir>/node-instance): a
  // daemon restarted on the same data dir is the same node, one elsewhere
  // with the same id is another daemon. "": not checked.
  std::string instance;
  // A live row of this id written by another instance whose heartbeat is
  // younger than this (serve.node.lost_after) is another daemon that runs:
  // the registration is refused (two daemons with one id would take each
  // other's sandboxes for their own).
  std::int64_t live_within_ms = 0;
};

struct NodeRecord {
  std::string id;
  std::string address;
  NodeState state = NodeState::kLive;
  std::string capacity_json;
  std::string labels_json;
  std::string pools_json;
  // How many times the node has registered: a node that comes back (after
  // a restart, or after it was marked lost) is the same id, next incarnation.
  std::int64_t incarnation = 1;
  std::int64_t started_at_ms = 0;  // of this incarnation
  std::int64_t heartbeat_at_ms = 0;
  std::optional<std::int64_t> lost_at_ms;
  std::string key_id;
  bool cordoned = false;  // StateStore::set_node_cordoned
};

// What a heartbeat learns of its own node (StateStore::heartbeat).
struct NodeBeat {
  bool cordoned = false;  // the fleet's operator keeps new work off it
};

// What one sweep for lost nodes did (StateStore::sweep_lost_nodes).
struct LostNodeSweep {
  std::vector<std::string> nodes_lost;  // marked lost by this sweep
  std::size_t sandboxes_lost = 0;       // of those nodes, marked lost
  // Tasks of lost nodes whose command had not started: back to queued as
  // their next attempt, for another node to claim.
  std::vector<std::string> tasks_requeued;
  // Tasks of lost nodes whose command had started: failed, reason node_lost.
  std::vector<std::string> tasks_failed;
};

// The reason a task fails with when its node was lost after its command
// started (docs/tasks.md).
inline constexpr std::string_view kNodeLostReason = "node_lost";

}  // namespace corral
