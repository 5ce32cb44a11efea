// `corral serve`: wires the daemon together (config, state store, audit
// log, sandbox factory, service, HTTP listeners) and runs until SIGINT or
// SIGTERM. Sandboxes outlive a stop: the next start re-attaches to them.
#pragma once

#include <string>
#include <vector>

namespace corral::daemon {

struct ServeFlags {
  std::string config_path;
  std::string listen;       // "HOST:PORT", overrides the config
  std::string socket_path;  // overrides the config
  std::string data_dir;     // overrides the config
  std::vector<std::string> api_key_files;
  bool no_tcp = false;  // socket only
  // serve.node.id and serve.node.address (e.g. a Kubernetes node's name
  // and its pod's IP, which a config file cannot know).
  std::string node_id;  // a host name is taken up to its first '.'
  std::string node_address;
};

// Returns the process exit code.
int serve(const ServeFlags& flags);

}  // namespace corral::daemon
