// The YAML configuration file. yaml-cpp reports errors by throwing; every
// call into it happens inside apply_config_yaml's try block, and what it
// throws becomes an Error carrying the file name and line.
#include "spec/config_file.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <exception>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "spec/mount_arg.h"
#include "spec/units.h"

namespace corral {
namespace {

constexpr std::size_t kMaxConfigBytes = 1 * kMiB;
constexpr std::size_t kMaxHostnameBytes = 64;  // HOST_NAME_MAX on Linux
constexpr std::size_t kMaxDomainBytes = 253;
constexpr std::size_t kMaxLabelBytes = 63;

// The keys of each map, in the order the reference (docs/config.md) lists them.
constexpr std::array<std::string_view, 14> kSettingKeys = {
    "cpu_limit", "memory_limit", "disk_limit", "inodes_limit", "pids_limit",
    "timeout",   "max_lifetime", "network",    "image",        "hostname",
    "root",      "workdir",      "env",        "mounts"};
constexpr std::array<std::string_view, 4> kNetworkKeys = {"default", "allow_domains", "dns_servers",
                                                          "mode"};
constexpr std::array<std::string_view, 3> kMountKeys = {"source", "target", "writable"};
constexpr std::string_view kWrapperKey = "sandbox";

// A key the user might have meant: `name` is compared with the typed key,
// `display` is what the message shows.
struct Candidate {
  std::string_view name;
  std::string display;
};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c == '-') c = '_';
  }
  return out;
}

// Edit distance counting a swap of neighbours as one edit ("memroy").
std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size();
  const std::size_t m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1, 0));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

// The closest candidate, if it is close enough to be a likely typo.
std::optional<std::string> nearest(std::string_view typed,
                                   const std::vector<Candidate>& candidates) {
  constexpr std::size_t kMaxTypedBytes = 64;  // longer keys are not typos
  if (typed.empty() || typed.size() > kMaxTypedBytes) return std::nullopt;
  std::string t = lower(typed);
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (const Candidate& c : candidates) {
    std::string name = lower(c.name);
    std::size_t dist = edit_distance(t, name);
    std::size_t allowed = std::clamp<std::size_t>(name.size() / 3, 1, 3);
    // "memory" for "memory_limit": a prefix of three or more letters.
    bool prefix = t.size() >= 3 && name.starts_with(t);
    if (dist > allowed && !prefix) continue;
    if (prefix && dist > allowed) dist = allowed;
    if (!best || dist < best_distance) {
      best = c.display;
      best_distance = dist;
    }
  }
  return best;
}

std::string join_keys(const auto& keys) {
  std::string out;
  for (std::string_view k : keys) {
    if (!out.empty()) out.append(", ");
    out.append(k);
  }
  return out;
}

// A key as it appears in a message's key path: as written when it is a
// plain name, else quoted and escaped (a key may hold any text).
std::string path_part(std::string_view key) {
  constexpr std::size_t kMaxPlainBytes = 64;
  bool plain = !key.empty() && key.size() <= kMaxPlainBytes &&
               std::all_of(key.begin(), key.end(), [](char c) {
                 return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '_' || c == '-';
               });
  return plain ? std::string(key) : quote_for_message(key);
}

std::string join_path(std::string_view parent, std::string_view key) {
  std::string path(parent);
  if (!path.empty()) path.push_back('.');
  path.append(path_part(key));
  return path;
}

// yaml-cpp's own message, made safe to print (it may quote input bytes).
std::string printable(std::string_view text) {
  std::string quoted = quote_for_message(text);
  return quoted.substr(1, quoted.size() - 2);
}

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "no value";
    case YAML::NodeType::Scalar:
      return "the value " + quote_for_message(node.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

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

bool is_ip_address(const std::string& text) {
  in6_addr buf{};
  return inet_pton(AF_INET, text.c_str(), &buf) == 1 ||
         inet_pton(AF_INET6, text.c_str(), &buf) == 1;
}

bool has_control_chars(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
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
// throw yaml-cpp exceptions; apply_config_yaml catches them.
class Applier {
 public:
  Applier(std::string_view source, SandboxSpec& spec) : source_(source), spec_(spec) {}

  Status apply_root(const YAML::Node& root) {
    if (root.IsNull()) return ok();  // an empty file, or only comments
    if (!root.IsMap()) {
      return fail(
          root.Mark().line, "",
          "expected a map of settings (such as memory_limit: 2Gi), found " + describe(root));
    }
    bool wrapped = false;
    for (auto it = root.begin(); it != root.end(); ++it) {
      if (it->first.IsScalar() && it->first.Scalar() == kWrapperKey) wrapped = true;
    }
    if (!wrapped) return apply_settings(root, "");

    std::set<std::string> seen;
    for (auto it = root.begin(); it != root.end(); ++it) {
      CORRAL_TRY(check_key(it->first, "", seen));
      const std::string key = it->first.Scalar();
      const std::string path = path_part(key);
      const int line = it->first.Mark().line;
      if (key == kWrapperKey) {
        if (it->second.IsNull()) continue;  // every setting commented out
        if (!it->second.IsMap()) {
          return fail(line, path, "expected a map of settings, found " + describe(it->second));
        }
        CORRAL_TRY(apply_settings(it->second, "sandbox."));
        continue;
      }
      if (std::find(kSettingKeys.begin(), kSettingKeys.end(), key) != kSettingKeys.end()) {
        return fail(line, path,
                    "belongs inside the sandbox: map (this file uses the sandbox: layout)",
                    "indent it under sandbox:, or drop the sandbox: line and put every "
                    "setting at the top level");
      }
      std::vector<Candidate> candidates = {{kWrapperKey, std::string(kWrapperKey)}};
      for (std::string_view k : kSettingKeys)
        candidates.push_back({k, "sandbox." + std::string(k)});
      return unknown_key(line, path, key, candidates, std::array<std::string_view, 1>{kWrapperKey});
    }
    return ok();
  }

 private:
  // "<source>:<line>: <key.path>: <what>"; line is yaml-cpp's 0-based line
  // (-1 when unknown).
  tl::unexpected<Error> fail(int line, std::string_view path, std::string_view what,
                             std::string hint = {}) const {
    std::string msg(source_);
    if (line >= 0) msg.append(":").append(std::to_string(line + 1));
    msg.append(": ");
    if (!path.empty()) msg.append(path).append(": ");
    msg.append(what);
    return make_error(ErrorCode::kInvalidArgument, std::move(msg), std::move(hint));
  }

  tl::unexpected<Error> fail(int line, std::string_view path, const Error& cause) const {
    return fail(line, path, cause.message, cause.hint);
  }

  tl::unexpected<Error> unknown_key(int line, std::string_view path, std::string_view key,
                                    const std::vector<Candidate>& candidates,
                                    const auto& known) const {
    if (auto guess = nearest(key, candidates)) {
      return fail(line, path, "unknown key (did you mean " + *guess + "?)");
    }
    return fail(line, path, "unknown key", "the keys allowed here are: " + join_keys(known));
  }

  // A map key must be a plain scalar that appears once.
  Status check_key(const YAML::Node& key, std::string_view parent, std::set<std::string>& seen) {
    std::string where = parent.empty() ? std::string("(top level)") : std::string(parent);
    if (!key.IsScalar()) {
      return fail(key.Mark().line, where, "keys must be plain names, found " + describe(key));
    }
    if (!seen.insert(key.Scalar()).second) {
      return fail(key.Mark().line, join_path(parent, key.Scalar()),
                  "duplicate key (each key may appear once in a map)");
    }
    return ok();
  }

  // The value of a key that takes a single value.
  Result<std::string> scalar(const YAML::Node& key, const YAML::Node& value, std::string_view path,
                             std::string_view expected) const {
    if (!value.IsScalar()) {
      return fail(key.Mark().line, path,
                  "expected " + std::string(expected) + ", found " + describe(value));
    }
    return value.Scalar();
  }

  Result<bool> boolean(const YAML::Node& key, const YAML::Node& value,
                       std::string_view path) const {
    auto text = scalar(key, value, path, "true or false");
    if (!text) return tl::unexpected<Error>(text.error());
    if (*text == "true" || *text == "True" || *text == "TRUE") return true;
    if (*text == "false" || *text == "False" || *text == "FALSE") return false;
    return fail(value.Mark().line, path,
                "expected true or false, found " + quote_for_message(*text));
  }

  // A list whose items are single values.
  Result<std::vector<std::string>> scalar_list(const YAML::Node& key, const YAML::Node& value,
                                               std::string_view path,
                                               std::string_view item_expected) const {
    if (!value.IsSequence()) {
      return fail(key.Mark().line, path,
                  "expected a list of " + std::string(item_expected) +
                      " (use [] for none), found " + describe(value));
    }
    std::vector<std::string> items;
    std::size_t index = 0;
    for (auto it = value.begin(); it != value.end(); ++it, ++index) {
      const YAML::Node item = *it;
      std::string item_path = std::string(path) + "[" + std::to_string(index) + "]";
      if (!item.IsScalar()) {
        int line = item.IsNull() ? key.Mark().line : item.Mark().line;
        return fail(line, item_path,
                    "expected " + std::string(item_expected) + ", found " + describe(item));
      }
      items.push_back(item.Scalar());
    }
    return items;
  }

  Status apply_settings(const YAML::Node& map, std::string_view prefix) {
    std::set<std::string> seen;
    std::string parent(prefix.empty() ? prefix : prefix.substr(0, prefix.size() - 1));
    for (auto it = map.begin(); it != map.end(); ++it) {
      const YAML::Node key = it->first;
      const YAML::Node value = it->second;
      CORRAL_TRY(check_key(key, parent, seen));
      const std::string name = key.Scalar();
      const std::string path = join_path(parent, name);
      const int line = key.Mark().line;
      const int value_line = value.IsScalar() ? value.Mark().line : line;
      Limits& limits = spec_.limits;

      if (name == "cpu_limit") {
        auto text = scalar(key, value, path, "a number of CPUs (2, 1.5, 500m)");
        if (!text) return tl::unexpected<Error>(text.error());
        auto cpus = parse_cpus(*text);
        if (!cpus) return fail(value_line, path, cpus.error());
        limits.cpus = *cpus;
      } else if (name == "memory_limit" || name == "disk_limit") {
        auto text = scalar(key, value, path, "a size (512Mi, 2Gi)");
        if (!text) return tl::unexpected<Error>(text.error());
        auto bytes = parse_size(*text);
        if (!bytes) return fail(value_line, path, bytes.error());
        (name == "memory_limit" ? limits.memory_bytes : limits.disk_bytes) = *bytes;
      } else if (name == "inodes_limit") {
        auto text = scalar(key, value, path, "a number of inodes");
        if (!text) return tl::unexpected<Error>(text.error());
        auto count = parse_count64(*text);
        if (!count) return fail(value_line, path, count.error());
        limits.inodes = *count;
      } else if (name == "pids_limit") {
        auto text = scalar(key, value, path, "a number of processes");
        if (!text) return tl::unexpected<Error>(text.error());
        auto count = parse_count(*text);
        if (!count) return fail(value_line, path, count.error());
        limits.pids = *count;
      } else if (name == "timeout" || name == "max_lifetime") {
        auto text = scalar(key, value, path, "a duration (300, 5m, 1h30m)");
        if (!text) return tl::unexpected<Error>(text.error());
        auto duration = parse_duration(*text);
        if (!duration) return fail(value_line, path, duration.error());
        (name == "timeout" ? limits.timeout : limits.max_lifetime) = *duration;
      } else if (name == "network") {
        if (!value.IsMap()) {
          return fail(line, path,
                      "expected a map (default, allow_domains, ...), found " + describe(value));
        }
        CORRAL_TRY(apply_network(value, path));
      } else if (name == "image") {
        auto text = scalar(key, value, path, "an image name");
        if (!text) return tl::unexpected<Error>(text.error());
        if (text->empty() || has_control_chars(*text)) {
          return fail(value_line, path, "invalid image name " + quote_for_message(*text),
                      "list images with: corral image ls");
        }
        spec_.image = *text;
      } else if (name == "hostname") {
        auto text = scalar(key, value, path, "a host name");
        if (!text) return tl::unexpected<Error>(text.error());
        if (!is_valid_hostname(*text)) {
          return fail(value_line, path,
                      "invalid host name " + quote_for_message(*text) +
                          ": expected at most 64 letters, digits, '-' and '.'");
        }
        spec_.hostname = *text;
      } else if (name == "root") {
        auto flag = boolean(key, value, path);
        if (!flag) return tl::unexpected<Error>(flag.error());
        spec_.root = *flag;
      } else if (name == "workdir") {
        auto text = scalar(key, value, path, "an absolute path");
        if (!text) return tl::unexpected<Error>(text.error());
        CORRAL_TRY(check_workdir(*text, value_line, path));
        spec_.workdir = *text;
      } else if (name == "env") {
        CORRAL_TRY(apply_env(key, value, path));
      } else if (name == "mounts") {
        CORRAL_TRY(apply_mounts(key, value, path));
      } else {
        std::vector<Candidate> candidates;
        for (std::string_view k : kSettingKeys) candidates.push_back({k, std::string(k)});
        // A network key one level too high: "allow_domains" -> network.allow_domains.
        for (std::string_view k : kNetworkKeys) {
          candidates.push_back({k, std::string(prefix) + "network." + std::string(k)});
        }
        if (prefix.empty()) candidates.push_back({kWrapperKey, std::string(kWrapperKey)});
        return unknown_key(line, path, name, candidates, kSettingKeys);
      }
    }
    return ok();
  }

  Status check_workdir(const std::string& dir, int line, std::string_view path) const {
    std::string quoted = quote_for_message(dir);
    if (dir.empty() || dir.front() != '/') {
      return fail(line, path, quoted + " is not an absolute path", "for example /workspace");
    }
    if (dir.find('\0') != std::string::npos || dir.size() > 4095) {
      return fail(line, path, quoted + " is not a usable path");
    }
    std::size_t start = 0;
    while (start <= dir.size()) {
      std::size_t slash = dir.find('/', start);
      std::size_t end = slash == std::string::npos ? dir.size() : slash;
      if (std::string_view(dir).substr(start, end - start) == "..") {
        return fail(line, path, quoted + " contains a \"..\" component");
      }
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    return ok();
  }

  Status apply_env(const YAML::Node& key, const YAML::Node& value, const std::string& path) {
    if (!value.IsMap()) {
      return fail(key.Mark().line, path,
                  "expected a map of NAME: value (use {} for none), found " + describe(value));
    }
    std::vector<std::pair<std::string, std::string>> env;
    std::set<std::string> seen;
    for (auto it = value.begin(); it != value.end(); ++it) {
      CORRAL_TRY(check_key(it->first, path, seen));
      const std::string name = it->first.Scalar();
      const std::string var_path = join_path(path, name);
      const int line = it->first.Mark().line;
      if (!is_valid_env_name(name)) {
        return fail(line, var_path,
                    "invalid variable name: it must start with a letter or '_' and contain only "
                    "letters, digits and '_'");
      }
      if (!it->second.IsScalar()) {
        return fail(
            line, var_path,
            "expected a string (write \"\" for an empty value), found " + describe(it->second));
      }
      std::string text = it->second.Scalar();
      if (text.find('\0') != std::string::npos) {
        return fail(line, var_path, "the value contains a NUL byte");
      }
      env.emplace_back(name, std::move(text));
    }
    spec_.env = std::move(env);
    return ok();
  }

  Status apply_mounts(const YAML::Node& key, const YAML::Node& value, const std::string& path) {
    if (!value.IsSequence()) {
      return fail(key.Mark().line, path,
                  "expected a list of mounts (use [] for none), found " + describe(value));
    }
    std::vector<MountSpec> mounts;
    std::size_t index = 0;
    for (auto it = value.begin(); it != value.end(); ++it, ++index) {
      const YAML::Node item = *it;
      const std::string item_path = path + "[" + std::to_string(index) + "]";
      MountSpec mount;
      if (item.IsScalar()) {
        auto parsed = parse_mount_arg(item.Scalar());
        if (!parsed) return fail(item.Mark().line, item_path, parsed.error());
        mount = std::move(*parsed);
      } else if (item.IsMap()) {
        auto parsed = mount_from_map(item, item_path);
        if (!parsed) return tl::unexpected<Error>(parsed.error());
        mount = std::move(*parsed);
      } else {
        int line = item.IsNull() ? key.Mark().line : item.Mark().line;
        return fail(line, item_path,
                    "expected \"SRC:DST[:ro|:rw]\" or a map {source, target, writable}, found " +
                        describe(item));
      }
      for (const MountSpec& earlier : mounts) {
        if (earlier.target == mount.target) {
          return fail(item.Mark().line, item_path,
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
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      const YAML::Node key = it->first;
      const YAML::Node value = it->second;
      CORRAL_TRY(check_key(key, path, seen));
      const std::string name = key.Scalar();
      const std::string key_path = join_path(path, name);
      const int value_line = value.IsScalar() ? value.Mark().line : key.Mark().line;
      if (name == "source") {
        auto text = scalar(key, value, key_path, "a host path");
        if (!text) return tl::unexpected<Error>(text.error());
        if (auto st = check_mount_source(*text); !st) return fail(value_line, key_path, st.error());
        mount.source = *text;
        have_source = true;
      } else if (name == "target") {
        auto text = scalar(key, value, key_path, "an absolute path inside the sandbox");
        if (!text) return tl::unexpected<Error>(text.error());
        auto target = normalize_mount_target(*text);
        if (!target) return fail(value_line, key_path, target.error());
        mount.target = std::move(*target);
        have_target = true;
      } else if (name == "writable") {
        auto flag = boolean(key, value, key_path);
        if (!flag) return tl::unexpected<Error>(flag.error());
        mount.writable = *flag;
      } else {
        std::vector<Candidate> candidates;
        for (std::string_view k : kMountKeys) candidates.push_back({k, std::string(k)});
        candidates.push_back({"src", "source"});
        candidates.push_back({"dst", "target"});
        candidates.push_back({"destination", "target"});
        candidates.push_back({"rw", "writable"});
        candidates.push_back({"ro", "writable: false"});
        candidates.push_back({"read_only", "writable: false"});
        candidates.push_back({"readonly", "writable: false"});
        return unknown_key(key.Mark().line, key_path, name, candidates, kMountKeys);
      }
    }
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
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      const YAML::Node key = it->first;
      const YAML::Node value = it->second;
      CORRAL_TRY(check_key(key, path, seen));
      const std::string name = key.Scalar();
      const std::string key_path = join_path(path, name);
      const int line = key.Mark().line;
      const int value_line = value.IsScalar() ? value.Mark().line : line;
      if (name == "default") {
        auto text = scalar(key, value, key_path, "deny or allow");
        if (!text) return tl::unexpected<Error>(text.error());
        if (*text != "deny" && *text != "allow") {
          return fail(value_line, key_path,
                      "expected deny or allow, found " + quote_for_message(*text));
        }
        keys.default_allow = *text == "allow";
        keys.default_line = line;
      } else if (name == "mode") {
        auto text = scalar(key, value, key_path, "none, allowlist or open");
        if (!text) return tl::unexpected<Error>(text.error());
        if (*text != "none" && *text != "allowlist" && *text != "open") {
          return fail(value_line, key_path,
                      "expected none, allowlist or open, found " + quote_for_message(*text));
        }
        keys.mode = *text;
        keys.mode_line = line;
      } else if (name == "allow_domains") {
        auto list = scalar_list(key, value, key_path, "domain names");
        if (!list) return tl::unexpected<Error>(list.error());
        std::size_t index = 0;
        for (auto item = value.begin(); item != value.end(); ++item, ++index) {
          const std::string& domain = (*list)[index];
          if (!is_domain_pattern(domain)) {
            return fail(item->Mark().line, key_path + "[" + std::to_string(index) + "]",
                        "invalid domain " + quote_for_message(domain) +
                            ": expected a name such as pypi.org or *.example.com");
          }
        }
        keys.allow_domains = std::move(*list);
        keys.domains_line = line;
      } else if (name == "dns_servers") {
        auto list = scalar_list(key, value, key_path, "IP addresses");
        if (!list) return tl::unexpected<Error>(list.error());
        std::size_t index = 0;
        for (auto item = value.begin(); item != value.end(); ++item, ++index) {
          const std::string& server = (*list)[index];
          if (!is_ip_address(server)) {
            return fail(item->Mark().line, key_path + "[" + std::to_string(index) + "]",
                        "invalid DNS server " + quote_for_message(server) +
                            ": expected an IPv4 or IPv6 address such as 10.0.0.53");
          }
        }
        dns = std::move(*list);
      } else {
        std::vector<Candidate> candidates;
        for (std::string_view k : kNetworkKeys) candidates.push_back({k, std::string(k)});
        return unknown_key(line, key_path, name, candidates, kNetworkKeys);
      }
    }
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

  std::string_view source_;
  SandboxSpec& spec_;
};

// Walks the documents of a text through yaml-cpp's event interface, to
// count the ones that hold something, before any node is built. This also
// guards against a yaml-cpp 0.7 bug: at a stray ',' between documents the
// parser reports an empty document without consuming anything, over and
// over, so that YAML::LoadAll never returns (and YAML::Load silently stops
// there). Such a document starts where the previous one did.
class DocumentScan : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    start_ = mark;
    content_ = false;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { content_ = true; }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {
    content_ = true;
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    content_ = true;
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    content_ = true;
  }
  void OnMapEnd() override {}

  const YAML::Mark& start() const { return start_; }
  bool has_content() const { return content_; }

 private:
  YAML::Mark start_;
  bool content_ = false;
};

}  // namespace

Status apply_config_yaml(std::string_view yaml_text, std::string_view source_name,
                         SandboxSpec& spec) {
  // Work on a copy so that a file with an error changes nothing.
  SandboxSpec next = spec;
  Applier applier(source_name, next);
  auto located = [&](const YAML::Mark& mark, std::string_view what) {
    std::string msg(source_name);
    if (!mark.is_null() && mark.line >= 0) msg.append(":").append(std::to_string(mark.line + 1));
    msg.append(": ").append(what);
    return make_error(ErrorCode::kInvalidArgument, std::move(msg),
                      "check the YAML syntax near that line");
  };
  try {
    const std::string text(yaml_text);
    std::optional<std::size_t> content_index;  // the document that holds the settings
    {
      std::istringstream in(text);
      YAML::Parser parser(in);
      DocumentScan scan;
      std::size_t index = 0;
      int previous_start = -1;
      while (parser.HandleNextDocument(scan)) {
        if (index > 0 && scan.start().pos == previous_start) {
          return located(scan.start(), "invalid YAML: unexpected character at column " +
                                           std::to_string(scan.start().column + 1));
        }
        previous_start = scan.start().pos;
        if (scan.has_content()) {
          if (content_index) {
            return located(scan.start(), "a second YAML document; a config file holds one");
          }
          content_index = index;
        }
        ++index;
      }
    }
    if (content_index) {
      // The scan above has shown that every document ends, so LoadAll does.
      std::vector<YAML::Node> docs = YAML::LoadAll(text);
      if (*content_index >= docs.size()) {
        return make_error(ErrorCode::kInternal,
                          std::string(source_name) + ": YAML documents changed between reads");
      }
      CORRAL_TRY(applier.apply_root(docs[*content_index]));
    }
  } catch (const YAML::Exception& e) {
    return located(e.mark, "invalid YAML: " + printable(e.msg));
  } catch (const std::exception& e) {
    return make_error(
        ErrorCode::kInternal,
        std::string(source_name) + ": reading the YAML failed: " + printable(e.what()));
  } catch (...) {
    return make_error(ErrorCode::kInternal, std::string(source_name) + ": reading the YAML failed");
  }
  spec = std::move(next);
  return ok();
}

Status apply_config_file(const std::string& path, SandboxSpec& spec) {
  const std::string quoted = quote_for_message(path);
  // O_NONBLOCK: opening a FIFO must not hang; it is refused below anyway.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) {
    return tl::unexpected<Error>(
        errno_error("open(" + path + ")", errno, "check the path given to --config")
            .value()
            .wrap("reading config file"));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return tl::unexpected<Error>(
        errno_error("fstat(" + path + ")").value().wrap("reading config file"));
  }
  if (!S_ISREG(st.st_mode)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "reading config file: " + quoted + " is not a regular file",
                      "give the path of a YAML file");
  }
  auto too_big = [&] {
    return make_error(ErrorCode::kInvalidArgument,
                      "reading config file: " + quoted + " is larger than 1 MiB",
                      "a corral config file holds a few settings; check the path");
  };
  if (static_cast<std::uint64_t>(st.st_size) > kMaxConfigBytes) return too_big();

  // Read at most one byte past the limit: the file may grow after fstat.
  std::string text(kMaxConfigBytes + 1, '\0');
  std::size_t used = 0;
  while (used < text.size()) {
    ssize_t n = ::read(fd.get(), text.data() + used, text.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return tl::unexpected<Error>(
          errno_error("read(" + path + ")").value().wrap("reading config file"));
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  if (used > kMaxConfigBytes) return too_big();
  text.resize(used);
  return apply_config_yaml(text, path, spec);
}

}  // namespace corral
