// The YAML configuration file: the keys of a sandbox's settings. Reading
// the file and its one document, walking maps and wording the messages are
// spec/yaml_reader's, which also catches what yaml-cpp throws.
#include "spec/config_file.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "base/strings.h"
#include "spec/mount_arg.h"
#include "spec/units.h"
#include "spec/yaml_reader.h"

namespace corral {
namespace {

constexpr std::size_t kMaxHostnameBytes = 64;  // HOST_NAME_MAX on Linux
constexpr std::size_t kMaxDomainBytes = 253;
constexpr std::size_t kMaxLabelBytes = 63;

// The keys of each map, in the order the reference (docs/config.md) lists
// them (the settings themselves: kSandboxSettingKeys).
constexpr std::array<std::string_view, 4> kNetworkKeys = {"default", "allow_domains", "dns_servers",
                                                          "mode"};
constexpr std::array<std::string_view, 3> kMountKeys = {"source", "target", "writable"};
constexpr std::string_view kWrapperKey = "sandbox";
constexpr std::array<std::string_view, 2> kNetworkDefaults = {"deny", "allow"};
constexpr std::array<std::string_view, 3> kNetworkModes = {"none", "allowlist", "open"};

bool is_domain_label(std::string_view label) {
  if (label.empty() || label.size() > kMaxLabelBytes) return false;
  if (label.front() == '-' || label.back() == '-') return false;
  return std::all_of(label.begin(), label.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  });
}

// "pypi.org", "files.pythonhosted.org", "*.example.com".
bool is_domain_pattern(std::string_view domain) {
  if (domain.starts_with("*.")) domain.remove_prefix(2);
  if (domain.empty() || domain.size() > kMaxDomainBytes) return false;
  std::size_t start = 0;
  while (true) {
    std::size_t dot = domain.find('.', start);
    std::string_view label =
        domain.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (!is_domain_label(label)) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

}  // namespace

bool is_valid_hostname(std::string_view name) {
  return !name.empty() && name.size() <= kMaxHostnameBytes && !name.starts_with("*.") &&
         is_domain_pattern(name);
}

namespace {

bool is_ip_address(std::string_view text) {
  const std::string s(text);
  in6_addr buf{};
  return inet_pton(AF_INET, s.c_str(), &buf) == 1 || inet_pton(AF_INET6, s.c_str(), &buf) == 1;
}

bool has_control_chars(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

Result<std::string> parse_image_name(std::string_view text) {
  if (text.empty() || has_control_chars(text)) {
    return make_error(ErrorCode::kInvalidArgument, "invalid image name " + quote_for_message(text),
                      "list images with: corral image ls");
  }
  return std::string(text);
}

Result<std::string> parse_hostname(std::string_view text) {
  if (!is_valid_hostname(text)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "invalid host name " + quote_for_message(text) +
                          ": expected at most 64 letters, digits, '-' and '.'");
  }
  return std::string(text);
}

Result<std::string> parse_workdir(std::string_view dir) {
  auto refuse = [&](std::string_view why, std::string hint = {}) {
    return make_error(ErrorCode::kInvalidArgument, quote_for_message(dir) + std::string(why),
                      std::move(hint));
  };
  if (dir.empty() || dir.front() != '/') {
    return refuse(" is not an absolute path", "for example /workspace");
  }
  if (dir.find('\0') != std::string_view::npos || dir.size() > 4095) {
    return refuse(" is not a usable path");
  }
  std::size_t start = 0;
  while (start <= dir.size()) {
    std::size_t slash = dir.find('/', start);
    std::size_t end = slash == std::string_view::npos ? dir.size() : slash;
    if (dir.substr(start, end - start) == "..") return refuse(" contains a \"..\" component");
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return std::string(dir);
}

Result<std::string> parse_mount_source(std::string_view text) {
  CORRAL_TRY(check_mount_source(text));
  return std::string(text);
}

// A list item check: `valid` items pass, others are refused with
// "invalid <what> \"x\": <expected>".
YamlItemCheck items_that(bool (*valid)(std::string_view), std::string_view what,
                         std::string_view expected) {
  return [=](std::string& item) -> Status {
    if (valid(item)) return ok();
    return make_error(ErrorCode::kInvalidArgument, "invalid " + std::string(what) + " " +
                                                       quote_for_message(item) + ": " +
                                                       std::string(expected));
  };
}

// What the `network` map of one file said, before it is turned into a mode.
struct NetworkKeys {
  std::optional<std::string> mode;
  int mode_line = -1;
  std::optional<bool> default_allow;
  int default_line = -1;
  std::optional<std::vector<std::string>> allow_domains;
  int domains_line = -1;
};

// Walks one parsed document and applies it to `spec_`. Every method may
// throw yaml-cpp exceptions; read_yaml_document catches them.
class Applier : private YamlReader {
 public:
  Applier(std::string_view source, SandboxSpec& spec) : YamlReader(source), spec_(spec) {}

  Status apply_root(const YAML::Node& root) {
    if (root.IsNull()) return ok();  // an empty file, or only comments
    if (!root.IsMap()) {
      return fail(
          root.Mark().line, "",
          "expected a map of settings (such as memory_limit: 2Gi), found " + describe_node(root));
    }
    bool wrapped = false;
    for (auto it = root.begin(); it != root.end(); ++it) {
      if (it->first.IsScalar() && it->first.Scalar() == kWrapperKey) wrapped = true;
    }
    if (!wrapped) return apply_settings(root, "");

    return for_each_entry(root, "", [&](const YamlEntry& e) -> Status {
      if (e.name == kWrapperKey) return apply_wrapper(e);
      if (std::find(kSandboxSettingKeys.begin(), kSandboxSettingKeys.end(), e.name) !=
          kSandboxSettingKeys.end()) {
        return fail(e.line, e.path,
                    "belongs inside the sandbox: map (this file uses the sandbox: layout)",
                    "indent it under sandbox:, or drop the sandbox: line and put every "
                    "setting at the top level");
      }
      std::vector<KeySuggestion> candidates = {
          {std::string(kWrapperKey), std::string(kWrapperKey)}};
      add_suggestions(candidates, kSandboxSettingKeys, "sandbox.");
      return unknown_key(e.line, e.path, e.name, candidates,
                         std::array<std::string_view, 1>{kWrapperKey});
    });
  }

  // The `sandbox:` entry: a map of settings.
  Status apply_wrapper(const YamlEntry& e) {
    if (e.value.IsNull()) return ok();  // every setting commented out
    CORRAL_TRY(expect_map(e, "a map of settings"));
    return apply_settings(e.value, kWrapperKey);
  }

 private:
  // The settings of `map`, whose key path is `parent` ("" at the top level).
  Status apply_settings(const YAML::Node& map, std::string_view parent) {
    return for_each_entry(map, parent,
                          [&](const YamlEntry& e) { return apply_setting(e, parent); });
  }

  Status apply_setting(const YamlEntry& e, std::string_view parent) {
    Limits& limits = spec_.limits;
    const std::string& name = e.name;
    if (name == "cpu_limit") {
      return read_into(e, "a number of CPUs (2, 1.5, 500m)", parse_cpus, limits.cpus);
    }
    if (name == "memory_limit" || name == "disk_limit") {
      return read_into(e, "a size (512Mi, 2Gi)", parse_size,
                       name == "memory_limit" ? limits.memory_bytes : limits.disk_bytes);
    }
    if (name == "inodes_limit") {
      return read_into(e, "a number of inodes", parse_count64, limits.inodes);
    }
    if (name == "pids_limit") {
      return read_into(e, "a number of processes", parse_count, limits.pids);
    }
    if (name == "timeout" || name == "max_lifetime") {
      return read_into(e, "a duration (300, 5m, 1h30m)", parse_duration,
                       name == "timeout" ? limits.timeout : limits.max_lifetime);
    }
    if (name == "network") {
      CORRAL_TRY(expect_map(e, "a map (default, allow_domains, ...)"));
      return apply_network(e.value, e.path);
    }
    if (name == "image") return read_into(e, "an image name", parse_image_name, spec_.image);
    if (name == "hostname") return read_into(e, "a host name", parse_hostname, spec_.hostname);
    if (name == "root") return read_bool(e, spec_.root);
    if (name == "workdir") return read_into(e, "an absolute path", parse_workdir, spec_.workdir);
    if (name == "env") return apply_env(e);
    if (name == "mounts") return apply_mounts(e);

    std::vector<KeySuggestion> candidates;
    add_suggestions(candidates, kSandboxSettingKeys);
    // A network key one level too high: "allow_domains" -> network.allow_domains.
    add_suggestions(candidates, kNetworkKeys,
                    parent.empty() ? "network." : std::string(parent) + ".network.");
    if (parent.empty()) candidates.push_back({std::string(kWrapperKey), std::string(kWrapperKey)});
    return unknown_key(e.line, e.path, name, candidates, kSandboxSettingKeys);
  }

  Status apply_env(const YamlEntry& env_entry) {
    CORRAL_TRY(expect_map(env_entry, "a map of NAME: value (use {} for none)"));
    std::vector<std::pair<std::string, std::string>> env;
    CORRAL_TRY(for_each_entry(env_entry.value, env_entry.path, [&](const YamlEntry& e) -> Status {
      if (!is_valid_env_name(e.name)) {
        return fail(e.line, e.path,
                    "invalid variable name: it must start with a letter or '_' and contain only "
                    "letters, digits and '_'");
      }
      auto text = scalar(e, "a string (write \"\" for an empty value)");
      if (!text) return tl::unexpected<Error>(text.error());
      if (text->find('\0') != std::string::npos) {
        return fail(e.line, e.path, "the value contains a NUL byte");
      }
      env.emplace_back(e.name, std::move(*text));
      return ok();
    }));
    spec_.env = std::move(env);
    return ok();
  }

  Status apply_mounts(const YamlEntry& e) {
    if (!e.value.IsSequence()) {
      return fail(e.line, e.path,
                  "expected a list of mounts (use [] for none), found " + describe_node(e.value));
    }
    std::vector<MountSpec> mounts;
    std::size_t index = 0;
    for (auto it = e.value.begin(); it != e.value.end(); ++it, ++index) {
      const YAML::Node item = *it;
      const std::string path = item_path(e.path, index);
      MountSpec mount;
      if (item.IsScalar()) {
        auto parsed = parse_mount_arg(item.Scalar());
        if (!parsed) return fail(item.Mark().line, path, parsed.error());
        mount = std::move(*parsed);
      } else if (item.IsMap()) {
        auto parsed = mount_from_map(item, path);
        if (!parsed) return tl::unexpected<Error>(parsed.error());
        mount = std::move(*parsed);
      } else {
        int line = item.IsNull() ? e.line : item.Mark().line;
        return fail(line, path,
                    "expected \"SRC:DST[:ro|:rw]\" or a map {source, target, writable}, found " +
                        describe_node(item));
      }
      for (const MountSpec& earlier : mounts) {
        if (earlier.target == mount.target) {
          return fail(item.Mark().line, path,
                      "a second mount on " + quote_for_message(mount.target));
        }
      }
      mounts.push_back(std::move(mount));
    }
    spec_.mounts = std::move(mounts);
    return ok();
  }

  Result<MountSpec> mount_from_map(const YAML::Node& map, const std::string& path) {
    MountSpec mount;
    bool have_source = false;
    bool have_target = false;
    CORRAL_TRY(for_each_entry(map, path, [&](const YamlEntry& e) -> Status {
      if (e.name == "source") {
        CORRAL_TRY(read_into(e, "a host path", parse_mount_source, mount.source));
        have_source = true;
        return ok();
      }
      if (e.name == "target") {
        CORRAL_TRY(read_into(e, "an absolute path inside the sandbox", normalize_mount_target,
                             mount.target));
        have_target = true;
        return ok();
      }
      if (e.name == "writable") return read_bool(e, mount.writable);
      return unknown_key(e, kMountKeys,
                         {{"src", "source"},
                          {"dst", "target"},
                          {"destination", "target"},
                          {"rw", "writable"},
                          {"ro", "writable: false"},
                          {"read_only", "writable: false"},
                          {"readonly", "writable: false"}});
    }));
    if (!have_source || !have_target) {
      return fail(map.Mark().line, path,
                  std::string("missing ") + (have_source ? "target" : "source") +
                      " (a mount needs source and target)");
    }
    return mount;
  }

  Status apply_network(const YAML::Node& map, const std::string& path) {
    NetworkKeys keys;
    std::optional<std::vector<std::string>> dns;
    CORRAL_TRY(for_each_entry(map, path, [&](const YamlEntry& e) -> Status {
      if (e.name == "default") {
        auto text = one_of(e, kNetworkDefaults, "deny or allow");
        if (!text) return tl::unexpected<Error>(text.error());
        keys.default_allow = *text == "allow";
        keys.default_line = e.line;
      } else if (e.name == "mode") {
        auto text = one_of(e, kNetworkModes, "none, allowlist or open");
        if (!text) return tl::unexpected<Error>(text.error());
        keys.mode = *text;
        keys.mode_line = e.line;
      } else if (e.name == "allow_domains") {
        auto list = scalar_list(e, "domain names",
                                items_that(is_domain_pattern, "domain",
                                           "expected a name such as pypi.org or *.example.com"));
        if (!list) return tl::unexpected<Error>(list.error());
        keys.allow_domains = std::move(*list);
        keys.domains_line = e.line;
      } else if (e.name == "dns_servers") {
        auto list = scalar_list(e, "IP addresses",
                                items_that(is_ip_address, "DNS server",
                                           "expected an IPv4 or IPv6 address such as 10.0.0.53"));
        if (!list) return tl::unexpected<Error>(list.error());
        dns = std::move(*list);
      } else {
        return unknown_key(e, kNetworkKeys);
      }
      return ok();
    }));
    CORRAL_TRY(resolve_network_mode(keys, path));
    if (dns) spec_.network.dns_servers = std::move(*dns);
    return ok();
  }

  // Turns `default` / `mode` / `allow_domains` into spec_.network.mode:
  // deny without domains = none, deny with domains = allowlist, allow = open.
  // `allow_domains` alone implies deny, like the design source's default.
  Status resolve_network_mode(NetworkKeys& keys, const std::string& path) {
    NetworkSpec& net = spec_.network;
    if (keys.mode && keys.default_allow) {
      bool mode_allows = *keys.mode == "open";
      if (mode_allows != *keys.default_allow) {
        return fail(keys.mode_line, path + ".mode",
                    "mode " + *keys.mode +
                        " contradicts default: " + (*keys.default_allow ? "allow" : "deny") +
                        " on line " + std::to_string(keys.default_line + 1),
                    "give only one of mode and default");
      }
    }
    std::string mode;
    int mode_line = keys.mode_line;
    if (keys.mode) {
      mode = *keys.mode;
    } else if (keys.default_allow) {
      mode_line = keys.default_line;
      if (*keys.default_allow) {
        mode = "open";
      } else {
        bool any = keys.allow_domains ? !keys.allow_domains->empty() : !net.allow_domains.empty();
        mode = any ? "allowlist" : "none";
      }
    } else if (keys.allow_domains) {
      mode_line = keys.domains_line;
      mode = keys.allow_domains->empty() ? "none" : "allowlist";
    } else {
      return ok();  // only dns_servers, or an empty map: the mode stays
    }

    std::vector<std::string> domains =
        keys.allow_domains ? std::move(*keys.allow_domains) : net.allow_domains;
    if (mode != "allowlist" && !domains.empty()) {
      if (keys.allow_domains) {
        return fail(keys.domains_line, path + ".allow_domains",
                    "lists domains, but the network mode is " + mode +
                        (mode == "open" ? " (every domain is reachable)" : " (no network)"),
                    mode == "open" ? "use default: deny to allow only these domains"
                                   : "remove the domains, or use mode: allowlist");
      }
      domains.clear();  // a list from an earlier layer does not apply to this mode
    }
    if (mode == "allowlist" && domains.empty()) {
      return fail(mode_line, path + ".mode", "allowlist needs at least one entry in allow_domains",
                  "add the domains to allow, or use mode: none");
    }
    net.mode = std::move(mode);
    net.allow_domains = std::move(domains);
    return ok();
  }

  SandboxSpec& spec_;
};

}  // namespace

Status apply_config_yaml(std::string_view yaml_text, std::string_view source_name,
                         SandboxSpec& spec) {
  // Work on a copy so that a file with an error changes nothing.
  SandboxSpec next = spec;
  Applier applier(source_name, next);
  CORRAL_TRY(read_yaml_document(
      yaml_text, source_name,
      [&](const YAML::Node& root, const std::string&) { return applier.apply_root(root); }));
  spec = std::move(next);
  return ok();
}

Status apply_config_entry(const YamlEntry& sandbox, std::string_view source_name,
                          SandboxSpec& spec) {
  SandboxSpec next = spec;
  Applier applier(source_name, next);
  CORRAL_TRY(applier.apply_wrapper(sandbox));
  spec = std::move(next);
  return ok();
}

Status apply_config_file(const std::string& path, SandboxSpec& spec) {
  auto text = read_config_text(path, "reading config file",
                               "a corral config file holds a few settings; check the path");
  if (!text) return tl::unexpected<Error>(std::move(text.error()));
  return apply_config_yaml(*text, path, spec);
}

}  // namespace corral
