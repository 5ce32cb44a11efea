#include "daemon/e2b_config_yaml.h"

#include <array>

#include "base/json_text.h"
#include "daemon/yaml_json.h"
#include "spec/volume_ref.h"

namespace corral {
namespace {

constexpr std::array<std::string_view, 4> kE2bKeys = {"enabled", "prefix", "network", "templates"};
constexpr std::size_t kMaxTemplates = 1024;

bool valid_template_name(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.' || c == ':' || c == '/';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

bool valid_e2b_prefix(std::string_view prefix) {
  if (prefix.size() < 2 || prefix.front() != '/' || prefix.back() == '/') return false;
  char prev = '/';
  for (std::size_t i = 1; i < prefix.size(); ++i) {
    const char c = prefix[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                    c == '-' || c == '/';
    if (!ok || (c == '/' && prev == '/')) return false;
    prev = c;
  }
  // Never over corral's own routes.
  return prefix != "/v1" && prefix.rfind("/v1/", 0) != 0 && prefix != "/healthz" &&
         prefix != "/readyz" && prefix != "/metrics";
}

Status apply_e2b_config(const YamlReader& reader, const YamlEntry& entry,
                        daemon::E2bSettings& out) {
  if (entry.value.IsNull()) return ok();
  CORRAL_TRY(reader.expect_map(entry, "a map (enabled, prefix, network, templates)"));
  return reader.for_each_entry(entry.value, entry.path, [&](const YamlEntry& e) -> Status {
    if (e.name == "enabled") return reader.read_bool(e, out.enabled);
    if (e.name == "prefix") {
      auto text = reader.scalar(e, "a path such as /e2b");
      if (!text) return tl::unexpected(text.error());
      if (!valid_e2b_prefix(*text))
        return reader.fail(e.value_line, e.path,
                           "\"" + *text + "\" is not a prefix the facade can serve under",
                           "a path of [a-z0-9._-] segments such as /e2b, not /v1, /healthz, "
                           "/readyz or /metrics, without a trailing /");
      out.prefix = std::move(*text);
      return ok();
    }
    if (e.name == "network") {
      auto text = reader.scalar(e, "open, none or a network template's name");
      if (!text) return tl::unexpected(text.error());
      if (text->empty())
        return reader.fail(e.value_line, e.path, "is empty", "use open, none or a template name");
      out.network = std::move(*text);
      return ok();
    }
    if (e.name == "templates") {
      if (e.value.IsNull()) return ok();
      CORRAL_TRY(reader.expect_map(e, "a map of E2B template -> image or pool:<name>"));
      if (e.value.size() > kMaxTemplates)
        return reader.fail(e.line, e.path,
                           "has more than " + std::to_string(kMaxTemplates) + " templates");
      return reader.for_each_entry(e.value, e.path, [&](const YamlEntry& t) -> Status {
        if (!valid_template_name(t.name))
          return reader.fail(t.line, t.path, "is not a template name ([A-Za-z0-9._:/-], 1-128)");
        if (t.value.IsMap()) {
          out.templates[t.name] = {"", json_text(yaml_to_json(t.value))};
          return ok();
        }
        auto target = reader.scalar(t, "an image name, pool:<name>, or a create body (a map)");
        if (!target) return tl::unexpected(target.error());
        std::string_view name = *target;
        if (name.rfind("pool:", 0) == 0) name.remove_prefix(5);
        if (!is_valid_volume_name(name))
          return reader.fail(t.value_line, t.path,
                             "\"" + *target + "\" is not an image or pool name",
                             "an image name ([a-z0-9][a-z0-9._-]{0,62}) or pool:<pool name>");
        out.templates[t.name] = {std::move(*target), ""};
        return ok();
      });
    }
    return reader.unknown_key(e, kE2bKeys, {});
  });
}

}  // namespace corral
