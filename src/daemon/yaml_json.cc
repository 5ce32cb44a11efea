#include "daemon/yaml_json.h"

#include <charconv>
#include <cstdint>
#include <string>

namespace corral {

nlohmann::json yaml_to_json(const YAML::Node& node) {
  using nlohmann::json;
  if (node.IsMap()) {
    json j = json::object();
    for (const auto& kv : node) j[kv.first.as<std::string>()] = yaml_to_json(kv.second);
    return j;
  }
  if (node.IsSequence()) {
    json j = json::array();
    for (const auto& item : node) j.push_back(yaml_to_json(item));
    return j;
  }
  if (node.IsNull()) return nullptr;
  const std::string text = node.Scalar();
  if (node.Tag() == "?") {
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
    std::int64_t i = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), i);
    if (ec == std::errc() && end == text.data() + text.size()) return i;
    double d = 0;
    auto [dend, dec] = std::from_chars(text.data(), text.data() + text.size(), d);
    if (dec == std::errc() && dend == text.data() + text.size()) return d;
  }
  return text;
}

}  // namespace corral
