#include "daemon/pool_config_yaml.h"

#include <array>
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "daemon/yaml_json.h"
#include "spec/units.h"

namespace corral {
namespace {

constexpr std::array<std::string_view, 5> kPoolKeys = {"name", "min", "max", "idle_limit",
                                                       "sandbox"};

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
        p.sandbox_json = json_text(yaml_to_json(e.value));
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
