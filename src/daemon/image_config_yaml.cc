#include "daemon/image_config_yaml.h"

#include <algorithm>
#include <array>

#include "spec/image_ref.h"
#include "spec/units.h"

namespace corral {
namespace {

constexpr std::array<std::string_view, 3> kImageKeys = {"registries", "insecure_registries",
                                                        "cache_max"};
constexpr std::size_t kMaxRegistries = 64;

Status check_registry(std::string& registry) {
  if (valid_registry(registry)) return ok();
  return make_error(ErrorCode::kInvalidArgument,
                    "\"" + registry.substr(0, 200) + "\" is not HOST[:PORT]",
                    "for example registry.example:5000 or 10.0.0.9:5000");
}

}  // namespace

Status apply_image_config(const YamlReader& reader, const YamlEntry& entry,
                          daemon::ImageSettings& out) {
  if (entry.value.IsNull()) return ok();
  CORRAL_TRY(reader.expect_map(entry, "a map (registries, insecure_registries, cache_max)"));
  CORRAL_TRY(reader.for_each_entry(entry.value, entry.path, [&](const YamlEntry& e) -> Status {
    if (e.name == "registries" || e.name == "insecure_registries") {
      auto list = reader.scalar_list(e, "HOST[:PORT]", check_registry, kMaxRegistries);
      if (!list) return tl::unexpected(list.error());
      (e.name == "registries" ? out.registries : out.insecure_registries) = std::move(*list);
      return ok();
    }
    if (e.name == "cache_max")
      return reader.read_into(e, "a size (20Gi)", parse_size, out.cache_max_bytes);
    return reader.unknown_key(e, kImageKeys, {{"registry", "registries"}, {"cache", "cache_max"}});
  }));
  for (const std::string& r : out.insecure_registries)
    if (std::find(out.registries.begin(), out.registries.end(), r) == out.registries.end())
      return reader.fail(entry.line, entry.path,
                         "insecure_registries names " + r + ", which registries does not list",
                         "list it under registries too: only those are pulled from");
  return ok();
}

}  // namespace corral
