// NodeService: this daemon as a node of the fleet that shares its state
// store (issue 18, docs/fleet.md). It registers the node, records a
// heartbeat every serve.node.heartbeat_interval, and sweeps for nodes
// whose heartbeats stopped (StateStore::sweep_lost_nodes: their sandboxes
// reported lost, their tasks run elsewhere once or failed node_lost).
// Heartbeat and sweep run on threads of their own: a sweep waiting on the
// fleet's write lock never delays this node's heartbeat, which would get
// a healthy node marked lost.
//
// When its own heartbeat is refused (another node marked it lost while it
// was cut off or stalled), what it held is no longer its own: on_lost
// destroys those sandboxes, and the node registers again as its next
// incarnation. A daemon on its own SQLite file is a fleet of one: the
// heartbeat is a cheap write and the sweep finds nobody.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <thread>

#include "base/result.h"
#include "daemon/node_settings.h"
#include "store/node_record.h"

namespace corral {
class MetricsRegistry;
class StateStore;
}  // namespace corral

namespace corral::daemon {

class NodeService {
 public:
  struct Hooks {
    // The store says this node was lost: destroy what it no longer owns.
    // Returns a line for the log.
    std::function<std::string()> on_lost;
    // An audit record (node.lost, node.registered).
    std::function<void(nlohmann::json)> audit;
  };

  NodeService(NodeSettings settings, StateStore& store, MetricsRegistry& metrics, Hooks hooks);
  ~NodeService();
  NodeService(const NodeService&) = delete;
  NodeService& operator=(const NodeService&) = delete;

  // Registers the node (set_node must have been called on the store) and
  // starts the heartbeat thread. Fails when the store refuses the
  // registration.
  Status start(NodeRegistration registration);
  // Stops the thread; with `leave`, marks the node left (a drained stop).
  void stop(bool leave);

  // Whether this node should be sent work (GET /readyz): its last
  // heartbeat was written, at most lost_after ago, and it is not cordoned.
  // When not, why.
  struct Readiness {
    bool ready = false;
    std::string reason;
  };
  Readiness readiness() const;
  // The node as registered at start (its incarnation may grow later).
  const NodeRecord& registered() const { return registered_; }

 private:
  // Runs `step` every heartbeat_interval until stop().
  void every_interval(void (NodeService::*step)());
  void beat();
  void sweep();

  NodeSettings settings_;
  StateStore& store_;
  MetricsRegistry& metrics_;
  Hooks hooks_;
  NodeRegistration registration_;
  NodeRecord registered_;  // at start; the beat thread keeps its own copy after
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  // Since when this node's heartbeats have succeeded without a break: it
  // judges others only after lost_after of that (after a store outage every
  // node's heartbeat is old, and none of them is lost for it). Under mu_.
  std::optional<std::chrono::steady_clock::time_point> healthy_since_;
  // The last heartbeat written, and why the last one was not (under mu_).
  std::optional<std::chrono::steady_clock::time_point> last_beat_;
  std::string unready_;
  bool cordoned_ = false;  // as the last heartbeat read it
  std::thread beater_;
  std::thread sweeper_;
};

}  // namespace corral::daemon
