// What `corral serve` needs from its config to join a fleet (issue 18):
// where the state store is, this node's id, and what it registers.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "daemon/daemon_config.h"
#include "store/node_record.h"

namespace corral::daemon {

// serve.state, or the URL in serve.state_url_file (a regular file of at
// most 4 KiB; surrounding white space ignored), or <data_dir>/state.db.
Result<std::string> state_location(const DaemonConfig& config);

// serve.node.id, or the host name as default_node_id() takes it.
std::string node_id(const DaemonConfig& config);

// This node as it registers: its address (serve.node.address, or the TCP
// listener's with `bound_port`), capacity, labels and configured pools,
// and, with `instance` (node_instance), what tells it from another daemon
// given the same id.
NodeRegistration node_registration(const DaemonConfig& config, std::uint16_t bound_port,
                                   std::string instance);

// The data dir's instance token (<data_dir>/node-instance, 16 random bytes
// in hex, made on the first start): the same daemon after a restart, or
// another one with the same node id.
Result<std::string> node_instance(const DaemonConfig& config);

}  // namespace corral::daemon
