#include "store/node_record.h"

namespace corral {

std::string_view node_state_name(NodeState state) {
  switch (state) {
    case NodeState::kLive:
      return "live";
    case NodeState::kLost:
      return "lost";
    case NodeState::kLeft:
      return "left";
  }
  return "unknown";
}

std::optional<NodeState> parse_node_state(std::string_view name) {
  for (NodeState s : {NodeState::kLive, NodeState::kLost, NodeState::kLeft})
    if (node_state_name(s) == name) return s;
  return std::nullopt;
}

bool valid_node_id(std::string_view id) {
  if (id.empty() || id.size() > 63 || id.front() == '-' || id.back() == '-') return false;
  for (char c : id) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

}  // namespace corral
