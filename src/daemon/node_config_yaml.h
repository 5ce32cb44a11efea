// serve.node of the daemon config (issue 18; docs/config.md "state and
// node"):
//
//   node:
//     id: node-a                 # default: the host name, else "local"
//     address: 10.0.0.5:7070     # default: the TCP listener's
//     labels: {zone: eu-1, gpu: "no"}
//     heartbeat_interval: 2s
//     lost_after: 15s            # at least 3 x heartbeat_interval
#pragma once

#include "base/result.h"
#include "daemon/node_settings.h"
#include "spec/yaml_reader.h"

namespace corral {

Status apply_node_config(const YamlReader& reader, const YamlEntry& entry,
                         daemon::NodeSettings& out);

// serve.state: a path of an SQLite file, or a postgres:// (postgresql://)
// URL. Checked for its form only; the daemon opens it at start.
Result<std::string> parse_state_location(std::string_view text);

// The id a node without serve.node.id takes: `hostname` lowercased when
// that is a valid node id, else "local".
std::string default_node_id(std::string_view hostname);

// serve.node.address (and --node-address): IP:port, [IPv6]:port.
Result<std::string> parse_node_address(std::string_view text);

}  // namespace corral
