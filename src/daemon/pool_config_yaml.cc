#include "daemon/pool_config_yaml.h"

#include <array>
#include <charconv>
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "spec/units.h"

namespace corral {
namespace {

constexpr std::array<std::string_view, 5> kPoolKeys = {"name", "min", "max", "idle_limit",
                                                       "sandbox"};

// A YAML value as the JSON of a create body: a plain scalar that reads as
// a number or a boolean is one (`cpus: 1`), a quoted one stays a string.
nlohmann::json to_json(const YAML::Node& node) {
  using nlohmann::json;
  if (node.IsMap()) {
    json j = json::object();
    for (const auto& kv : node) j[kv.first.as<std::string>()] = to_json(kv.second);
    return j;
  }
  if (node.IsSequence()) {
    json j = json::array();
    for (const auto& item : node) j.push_back(to_json(item));
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

Result<std::int64_t> positive_ms(std::string_view text) {
  auto d = parse_duration(text);
  if (!d) return tl::unexpected(d.error());
  if (d->count() <= 0) return make_error(ErrorCode::kInvalidArgument, "must be more than 0");
  return static_cast<std::int64_t>(d->count());
}

}  // namespace

Status apply_pool_config(const YamlReader& reader, const YamlEntry& entry,
                         std::vector<daemon::PoolSettings>& out) {
  out.clear();
  if (entry.value.IsNull()) return ok();
  if (!entry.value.IsSequence())
    return reader.fail(entry.line, entry.path,
                       "expected a list of pools, found " + describe_node(entry.value),
                       "each pool: {name: py, min: 4, sandbox: {image: python}}");
  for (std::size_t i = 0; i < entry.value.size(); ++i) {
    const YAML::Node item = entry.value[i];
    const std::string path = item_path(entry.path, i);
    const int line = item.Mark().line;
    if (!item.IsMap())
      return reader.fail(line, path, "expected a map (name, min, max, idle_limit, sandbox)");
    daemon::PoolSettings p;
    CORRAL_TRY(reader.for_each_entry(item, path, [&](const YamlEntry& e) -> Status {
      auto text = [](std::string_view v) -> Result<std::string> { return std::string(v); };
      if (e.name == "name") return reader.read_into(e, "a pool name", text, p.name);
      if (e.name == "min") return reader.read_into(e, "a count (4)", parse_count, p.min);
      if (e.name == "max") return reader.read_into(e, "a count (8)", parse_count, p.max);
      if (e.name == "idle_limit")
        return reader.read_into(e, "a duration (10m)", positive_ms, p.idle_limit_ms);
      if (e.name == "sandbox") {
        if (e.value.IsNull()) return ok();
        CORRAL_TRY(reader.expect_map(e, "a map: a create body (image, limits, ...)"));
        p.sandbox_json = json_text(to_json(e.value));
        return ok();
      }
      return reader.unknown_key(e, kPoolKeys, {{"size", "min"}, {"spec", "sandbox"}});
    }));
    if (p.name.empty()) return reader.fail(line, path, "a pool needs a name");
    for (const auto& earlier : out) {
      if (earlier.name == p.name) return reader.fail(line, path, "a second pool named " + p.name);
    }
    out.push_back(std::move(p));
  }
  return ok();
}

}  // namespace corral
