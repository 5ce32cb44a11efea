// A YAML value as the JSON of a create body (serve.pools' and
// serve.e2b.templates' sandbox maps): a plain scalar that reads as a number
// or a boolean is one (`cpus: 1`), a quoted one stays a string.
#pragma once

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

namespace corral {

nlohmann::json yaml_to_json(const YAML::Node& node);

}  // namespace corral
