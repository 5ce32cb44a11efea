#include "daemon/node_setup.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/fs.h"
#include "base/json_text.h"
#include "base/key_file.h"
#include "daemon/node_config_yaml.h"

namespace corral::daemon {

Result<std::string> state_location(const DaemonConfig& config) {
  if (!config.state.empty() && !config.state_url_file.empty())
    return make_error(ErrorCode::kInvalidArgument,
                      "serve.state and serve.state_url_file are both set",
                      "give the state store in one of them");
  if (config.state_url_file.empty())
    return config.state.empty() ? config.data_dir + "/state.db" : config.state;
  UniqueFd fd(::open(config.state_url_file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd)
    return errno_error("serve.state_url_file: open(" + config.state_url_file + ")", errno,
                       "the file must exist and be readable by the daemon");
  auto text = read_up_to(fd.get(), 4097, config.state_url_file);
  if (!text) return tl::unexpected<Error>(std::move(text).error().wrap("serve.state_url_file"));
  if (text->size() > 4096)
    return make_error(ErrorCode::kInvalidArgument,
                      "serve.state_url_file: " + config.state_url_file + " is larger than 4 KiB",
                      "the file holds one postgres:// URL");
  const auto first = text->find_first_not_of(" \t\r\n");
  const auto last = text->find_last_not_of(" \t\r\n");
  const std::string url =
      first == std::string::npos ? std::string() : text->substr(first, last - first + 1);
  auto location = parse_state_location(url);
  if (!location)
    return make_error(
        ErrorCode::kInvalidArgument,
        "serve.state_url_file: " + config.state_url_file + " " + location.error().message,
        location.error().hint);
  return location;
}

std::string node_id(const DaemonConfig& config) {
  if (!config.node.id.empty()) return config.node.id;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "local";
  return default_node_id(host);
}

NodeRegistration node_registration(const DaemonConfig& config, std::uint16_t bound_port,
                                   std::string instance) {
  NodeRegistration r;
  r.id = node_id(config);
  r.instance = std::move(instance);
  r.live_within_ms = config.node.lost_after_ms;
  if (!config.node.address.empty()) {
    r.address = config.node.address;
  } else if (bound_port != 0) {
    const bool v6 = config.listen_host.find(':') != std::string::npos;
    r.address = (v6 ? "[" + config.listen_host + "]" : config.listen_host) + ":" +
                std::to_string(bound_port);
  }
  r.capacity_json = json_text(nlohmann::json{{"sandboxes", config.max_sandboxes},
                                             {"memory_bytes", config.max_memory_bytes},
                                             {"disk_bytes", config.max_disk_bytes}});
  nlohmann::json labels = nlohmann::json::object();
  for (const auto& [k, v] : config.node.labels) labels[k] = v;
  r.labels_json = json_text(labels);
  nlohmann::json pools = nlohmann::json::array();
  for (const auto& p : config.pools) pools.push_back(p.name);
  r.pools_json = json_text(pools);
  return r;
}

Result<std::string> node_instance(const DaemonConfig& config) {
  return load_or_make_hex_file(config.data_dir + "/node-instance", 16,
                               "a daemon still running with this node id on the old token is "
                               "taken for another one until it is marked lost");
}

}  // namespace corral::daemon
