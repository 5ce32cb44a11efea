// serve.state and serve.node of the daemon config: where the state store
// is, and who this daemon is in a fleet that shares it (issue 18,
// docs/fleet.md, docs/config.md "state and node").
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace corral::daemon {

struct NodeSettings {
  // This node's id (store/node_record.h valid_node_id). Empty: the host
  // name, lowercased, when it is a valid id; else "local".
  std::string id;
  // Where the other nodes reach this node's API ("10.0.0.5:7070"). Empty:
  // the TCP listener's address.
  std::string address;
  std::map<std::string, std::string> labels;
  std::int64_t heartbeat_interval_ms = 2'000;
  // A node whose last heartbeat is older than this is marked lost by the
  // next sweep of any live node (at least three heartbeat intervals).
  std::int64_t lost_after_ms = 15'000;
};

}  // namespace corral::daemon
