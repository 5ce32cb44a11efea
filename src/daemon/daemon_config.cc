// The daemon's YAML file. Like spec/config_file.cc, every call into
// yaml-cpp happens inside a try block, the text is at most 1 MiB, and its
// documents are first walked with the event parser (which builds no nodes)
// so that a second document, or yaml-cpp 0.7's endless empty documents at a
// stray ',', are refused before YAML::LoadAll runs. The walk over the
// `serve:` map only follows keys it knows and refuses the first value of a
// wrong type, so an alias-heavy file costs no more than its size.
//
// The `sandbox:` map goes to apply_config_yaml unchanged: the text is
// handed over with every byte outside that map blanked (newlines kept), so
// its errors carry the right line numbers.
#include "daemon/daemon_config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <exception>
#include <optional>
#include <set>
#include <sstream>

#include "base/unique_fd.h"
#include "spec/config_file.h"
#include "spec/units.h"

namespace corral {
namespace {

constexpr std::size_t kMaxConfigBytes = 1 * kMiB;
constexpr std::size_t kMaxApiKeyEntries = 1024;
constexpr std::size_t kMaxPathBytes = 4095;

constexpr std::array<std::string_view, 2> kTopKeys = {"serve", "sandbox"};
constexpr std::array<std::string_view, 10> kServeKeys = {
    "listen",   "socket",          "data_dir",        "api_keys",
    "capacity", "request_timeout", "max_exec_output", "max_upload", "mount_roots", "durability"};
constexpr std::array<std::string_view, 2> kApiKeysKeys = {"sha256", "files"};
constexpr std::array<std::string_view, 3> kCapacityKeys = {"max_sandboxes", "memory", "disk"};
// The settings of the sandbox: map (spec/config_file.cc), to say where a
// misplaced one belongs.
constexpr std::array<std::string_view, 14> kSandboxKeys = {
    "cpu_limit", "memory_limit", "disk_limit", "inodes_limit", "pids_limit",
    "timeout",   "max_lifetime", "network",    "image",        "hostname",
    "root",      "workdir",      "env",        "mounts"};

template <std::size_t N>
bool contains(const std::array<std::string_view, N>& keys, std::string_view key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c == '-') c = '_';
  }
  return out;
}

// Edit distance counting a swap of neighbours as one edit ("lsiten").
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// A key the user may have meant: `name` is compared, `display` is shown.
struct Candidate {
  std::string name;
  std::string display;
};

std::optional<std::string> nearest(std::string_view typed, const std::vector<Candidate>& all) {
  if (typed.empty() || typed.size() > 64) return std::nullopt;
  const std::string t = lower(typed);
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (const Candidate& c : all) {
    const std::string name = lower(c.name);
    std::size_t dist = edit_distance(t, name);
    std::size_t allowed = std::clamp<std::size_t>(name.size() / 3, 1, 3);
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

template <std::size_t N>
std::string join_keys(const std::array<std::string_view, N>& keys) {
  std::string out;
  for (std::string_view k : keys) {
    if (!out.empty()) out.append(", ");
    out.append(k);
  }
  return out;
}

std::string path_part(std::string_view key) {
  bool plain = !key.empty() && key.size() <= 64 && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
  return plain ? std::string(key) : quote_for_message(key);
}

std::string join_path(std::string_view parent, std::string_view key) {
  std::string path(parent);
  if (!path.empty()) path.push_back('.');
  path.append(path_part(key));
  return path;
}

std::string printable(std::string_view text) {
  std::string quoted = quote_for_message(text);
  return quoted.substr(1, quoted.size() - 2);
}

std::string describe_node(const YAML::Node& node) {
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

// For a log line: the exact form when it is short ("8Gi", "512Mi"), else
// two decimals of the largest binary unit ("17.66Gi" for 18513069Ki).
std::string readable_size(std::uint64_t bytes) {
  std::string exact = format_size(bytes);
  if (bytes < kMiB || exact.ends_with("Mi") || exact.ends_with("Gi") || exact.ends_with("Ti")) {
    return exact;
  }
  constexpr std::array<std::pair<std::uint64_t, std::string_view>, 3> kUnits = {
      {{kKiB * kGiB, "Ti"}, {kGiB, "Gi"}, {kMiB, "Mi"}}};
  for (const auto& [unit, suffix] : kUnits) {
    if (bytes >= unit) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "%.2f%.*s",
                    static_cast<double>(bytes) / static_cast<double>(unit),
                    static_cast<int>(suffix.size()), suffix.data());
      return buf;
    }
  }
  return exact;
}

std::string format_ms(std::int64_t ms) {
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

bool is_absolute_path(std::string_view p) {
  return !p.empty() && p.front() == '/' && p.size() <= kMaxPathBytes &&
         p.find('\0') == std::string_view::npos;
}

// Line `index` (0-based) of `text`.
std::string_view yaml_line(std::string_view text, int index) {
  std::size_t start = 0;
  for (int i = 0; i < index; ++i) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) return {};
    start = nl + 1;
  }
  std::size_t end = text.find('\n', start);
  return text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
}

// Counts the documents that hold something, before any node is built; see
// DocumentScan in spec/config_file.cc, which this mirrors.
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

// The text with every byte outside [begin, end) turned into a space
// (newlines kept, so lines do not move). For a flow-style root map
// ("{serve: ..., sandbox: ...}") its '{' at `open_brace` is kept and a '}'
// put at `end`.
std::string blank_outside(const std::string& text, std::size_t begin, std::size_t end,
                          std::optional<std::size_t> open_brace) {
  std::string out = text;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (i >= begin && i < end) continue;
    if (open_brace && i == *open_brace) continue;
    if (out[i] != '\n' && out[i] != '\r') out[i] = ' ';
  }
  if (open_brace && end < out.size()) out[end] = '}';
  return out;
}

// Walks the top level and the `serve:` map of one parsed document. Every
// method may throw yaml-cpp exceptions; parse_daemon_config catches them.
class ServeApplier {
 public:
  ServeApplier(std::string_view source, DaemonConfig& config) : source_(source), config_(config) {}

  // Applies serve: and finds sandbox: (its key and value, left for
  // apply_config_yaml).
  Status apply_root(const YAML::Node& root) {
    if (root.IsNull()) return ok();
    if (!root.IsMap()) {
      return fail(root.Mark().line, "",
                  "expected a map with serve: and sandbox:, found " + describe_node(root));
    }
    std::set<std::string> seen;
    for (auto it = root.begin(); it != root.end(); ++it) {
      CORRAL_TRY(check_key(it->first, "", seen));
      const std::string key = it->first.Scalar();
      const int line = it->first.Mark().line;
      key_positions_.push_back(static_cast<std::size_t>(it->first.Mark().pos));
      if (key == "serve") {
        if (it->second.IsNull()) continue;
        if (!it->second.IsMap()) {
          return fail(line, "serve",
                      "expected a map of daemon settings, found " + describe_node(it->second));
        }
        CORRAL_TRY(apply_serve(it->second));
      } else if (key == "sandbox") {
        sandbox_value_ = it->second;
        sandbox_index_ = key_positions_.size() - 1;
      } else if (contains(kSandboxKeys, key)) {
        return fail(line, path_part(key), "belongs inside the sandbox: map",
                    "a daemon config keeps the defaults of every sandbox under sandbox:");
      } else if (contains(kServeKeys, key)) {
        return fail(line, path_part(key), "belongs inside the serve: map",
                    "indent it under serve:");
      } else {
        std::vector<Candidate> candidates;
        for (std::string_view k : kTopKeys) candidates.push_back({std::string(k), std::string(k)});
        candidates.push_back({"server", "serve"});
        candidates.push_back({"daemon", "serve"});
        candidates.push_back({"defaults", "sandbox"});
        return unknown_key(line, path_part(key), key, candidates, kTopKeys);
      }
    }
    return ok();
  }

  bool has_sandbox() const { return static_cast<bool>(sandbox_index_); }
  const YAML::Node& sandbox_value() const { return sandbox_value_; }
  // Byte range of the sandbox: entry in the text: from its key to the next
  // top-level key (or the end).
  std::size_t sandbox_begin() const { return key_positions_[*sandbox_index_]; }
  std::optional<std::size_t> sandbox_end() const {
    if (*sandbox_index_ + 1 < key_positions_.size()) return key_positions_[*sandbox_index_ + 1];
    return std::nullopt;
  }

 private:
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

  template <std::size_t N>
  tl::unexpected<Error> unknown_key(int line, std::string_view path, std::string_view key,
                                    const std::vector<Candidate>& candidates,
                                    const std::array<std::string_view, N>& known) const {
    if (auto guess = nearest(key, candidates)) {
      return fail(line, path, "unknown key (did you mean " + *guess + "?)");
    }
    return fail(line, path, "unknown key", "the keys allowed here are: " + join_keys(known));
  }

  Status check_key(const YAML::Node& key, std::string_view parent, std::set<std::string>& seen) {
    std::string where = parent.empty() ? std::string("(top level)") : std::string(parent);
    if (!key.IsScalar()) {
      return fail(key.Mark().line, where, "keys must be plain names, found " + describe_node(key));
    }
    if (!seen.insert(key.Scalar()).second) {
      return fail(key.Mark().line, join_path(parent, key.Scalar()),
                  "duplicate key (each key may appear once in a map)");
    }
    return ok();
  }

  Result<std::string> scalar(const YAML::Node& key, const YAML::Node& value, std::string_view path,
                             std::string_view expected) const {
    if (!value.IsScalar()) {
      return fail(key.Mark().line, path,
                  "expected " + std::string(expected) + ", found " + describe_node(value));
    }
    return value.Scalar();
  }

  // A size, or "auto" (0: computed).
  Result<std::uint64_t> size_or_auto(const YAML::Node& key, const YAML::Node& value,
                                     std::string_view path) const {
    auto text = scalar(key, value, path, "a size (512Mi, 8Gi) or auto");
    if (!text) return tl::unexpected<Error>(text.error());
    if (*text == "auto") return 0;
    auto size = parse_size(*text);
    if (!size) return fail(value.Mark().line, path, size.error());
    return *size;
  }

  Result<std::vector<std::string>> scalar_list(const YAML::Node& key, const YAML::Node& value,
                                               std::string_view path,
                                               std::string_view item_expected) const {
    if (!value.IsSequence()) {
      return fail(key.Mark().line, path,
                  "expected a list of " + std::string(item_expected) +
                      " (use [] for none), found " + describe_node(value));
    }
    std::vector<std::string> items;
    std::size_t index = 0;
    for (auto it = value.begin(); it != value.end(); ++it, ++index) {
      const YAML::Node item = *it;
      std::string item_path = std::string(path) + "[" + std::to_string(index) + "]";
      if (index >= kMaxApiKeyEntries) {
        return fail(item.Mark().line, item_path,
                    "too many entries (at most " + std::to_string(kMaxApiKeyEntries) + ")");
      }
      if (!item.IsScalar()) {
        int line = item.IsNull() ? key.Mark().line : item.Mark().line;
        return fail(line, item_path,
                    "expected " + std::string(item_expected) + ", found " + describe_node(item));
      }
      items.push_back(item.Scalar());
    }
    return items;
  }

  // Where a key one level off belongs ("memory" -> capacity.memory).
  std::vector<Candidate> serve_candidates() const {
    std::vector<Candidate> c;
    for (std::string_view k : kServeKeys) c.push_back({std::string(k), std::string(k)});
    for (std::string_view k : kApiKeysKeys) {
      c.push_back({std::string(k), "serve.api_keys." + std::string(k)});
    }
    for (std::string_view k : kCapacityKeys) {
      c.push_back({std::string(k), "serve.capacity." + std::string(k)});
    }
    c.push_back({"address", "listen"});
    c.push_back({"bind", "listen"});
    c.push_back({"unix_socket", "socket"});
    c.push_back({"socket_path", "socket"});
    c.push_back({"keys", "api_keys"});
    c.push_back({"timeout", "request_timeout"});
    return c;
  }

  Status apply_serve(const YAML::Node& map) {
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      const YAML::Node key = it->first;
      const YAML::Node value = it->second;
      CORRAL_TRY(check_key(key, "serve", seen));
      const std::string name = key.Scalar();
      const std::string path = join_path("serve", name);
      const int line = key.Mark().line;
      const int value_line = value.IsScalar() ? value.Mark().line : line;

      if (name == "listen") {
        auto text = scalar(key, value, path,
                           "an address such as \"127.0.0.1:7070\" (quote IPv6: \"[::1]:7070\")");
        if (!text) return tl::unexpected<Error>(text.error());
        auto listen = parse_listen(*text);
        if (!listen) return fail(value_line, path, listen.error());
        config_.listen_host = listen->first;
        config_.listen_port = listen->second;
      } else if (name == "durability") {
        auto text = scalar(key, value, path, "\"process\" or \"power-loss\"");
        if (!text) return tl::unexpected<Error>(text.error());
        if (*text != "process" && *text != "power-loss")
          return fail(value_line, path, quote_for_message(*text) + " is not a durability level",
                      "use \"process\" (survive a kill -9) or \"power-loss\" (fsync every write)");
        config_.power_loss_durable = *text == "power-loss";
      } else if (name == "mount_roots") {
        auto list = scalar_list(key, value, path, "absolute host directories");
        if (!list) return tl::unexpected<Error>(list.error());
        std::size_t index = 0;
        for (auto item = value.begin(); item != value.end(); ++item, ++index) {
          const std::string& dir = (*list)[index];
          if (!is_absolute_path(dir) || dir.size() > kMaxPathBytes) {
            return fail(item->Mark().line, path + "[" + std::to_string(index) + "]",
                        quote_for_message(dir) + " is not an absolute path",
                        "list host directories that sandboxes may mount, e.g. /srv/datasets");
          }
        }
        config_.mount_roots = std::move(*list);
      } else if (name == "socket") {
        auto text = scalar(key, value, path, "an absolute path");
        if (!text) return tl::unexpected<Error>(text.error());
        constexpr std::size_t kMaxSocketPath = sizeof(sockaddr_un::sun_path) - 1;
        if (!is_absolute_path(*text) || text->size() > kMaxSocketPath) {
          return fail(value_line, path,
                      quote_for_message(*text) + " is not an absolute path of at most " +
                          std::to_string(kMaxSocketPath) + " bytes",
                      "for example /run/corral/corral.sock");
        }
        config_.socket_path = *text;
      } else if (name == "data_dir") {
        auto text = scalar(key, value, path, "an absolute path");
        if (!text) return tl::unexpected<Error>(text.error());
        if (!is_absolute_path(*text)) {
          return fail(value_line, path, quote_for_message(*text) + " is not an absolute path",
                      "for example /var/lib/corral");
        }
        config_.data_dir = *text;
      } else if (name == "api_keys") {
        if (value.IsNull()) continue;
        if (!value.IsMap()) {
          return fail(line, path, "expected a map (sha256, files), found " + describe_node(value));
        }
        CORRAL_TRY(apply_api_keys(value, path));
      } else if (name == "capacity") {
        if (value.IsNull()) continue;
        if (!value.IsMap()) {
          return fail(
              line, path,
              "expected a map (max_sandboxes, memory, disk), found " + describe_node(value));
        }
        CORRAL_TRY(apply_capacity(value, path));
      } else if (name == "request_timeout") {
        auto text = scalar(key, value, path, "a duration (30s, 2m)");
        if (!text) return tl::unexpected<Error>(text.error());
        auto duration = parse_duration(*text);
        if (!duration) return fail(value_line, path, duration.error());
        config_.request_timeout_ms = duration->count();
      } else if (name == "max_exec_output") {
        auto text = scalar(key, value, path, "a size (64Mi)");
        if (!text) return tl::unexpected<Error>(text.error());
        auto size = parse_size(*text);
        if (!size) return fail(value_line, path, size.error());
        config_.max_exec_output_bytes = *size;
      } else if (name == "max_upload") {
        auto size = size_or_auto(key, value, path);
        if (!size) return tl::unexpected<Error>(size.error());
        config_.max_upload_bytes = *size;
      } else if (contains(kSandboxKeys, name)) {
        return fail(line, path, "is a sandbox setting: put it in the top-level sandbox: map",
                    "serve: holds the daemon's own settings; sandbox: the defaults of every "
                    "sandbox");
      } else {
        return unknown_key(line, path, name, serve_candidates(), kServeKeys);
      }
    }
    return ok();
  }

  Status apply_api_keys(const YAML::Node& map, const std::string& parent) {
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      const YAML::Node key = it->first;
      const YAML::Node value = it->second;
      CORRAL_TRY(check_key(key, parent, seen));
      const std::string name = key.Scalar();
      const std::string path = join_path(parent, name);
      if (name == "sha256") {
        auto list = scalar_list(key, value, path, "SHA-256 digests (64 hex digits)");
        if (!list) return tl::unexpected<Error>(list.error());
        std::size_t index = 0;
        for (auto item = value.begin(); item != value.end(); ++item, ++index) {
          std::string digest = lower((*list)[index]);
          bool hex = digest.size() == 64 && std::all_of(digest.begin(), digest.end(), [](char c) {
                       return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                     });
          if (!hex) {
            return fail(item->Mark().line, path + "[" + std::to_string(index) + "]",
                        quote_for_message((*list)[index]) +
                            " is not a SHA-256 digest (expected 64 hex digits)",
                        "make one with: printf %s \"$KEY\" | sha256sum");
          }
          (*list)[index] = std::move(digest);
        }
        config_.api_key_sha256 = std::move(*list);
      } else if (name == "files") {
        auto list = scalar_list(key, value, path, "key file paths");
        if (!list) return tl::unexpected<Error>(list.error());
        std::size_t index = 0;
        for (auto item = value.begin(); item != value.end(); ++item, ++index) {
          std::string& file = (*list)[index];
          if (file.empty() || file.find('\0') != std::string::npos || file.size() > kMaxPathBytes) {
            return fail(item->Mark().line, path + "[" + std::to_string(index) + "]",
                        quote_for_message(file) + " is not a usable path");
          }
          file = resolve_relative(file);
        }
        config_.api_key_files = std::move(*list);
      } else {
        std::vector<Candidate> candidates;
        for (std::string_view k : kApiKeysKeys) {
          candidates.push_back({std::string(k), std::string(k)});
        }
        candidates.push_back({"hashes", "sha256"});
        candidates.push_back({"sha256sum", "sha256"});
        candidates.push_back({"key_files", "files"});
        candidates.push_back({"keys", "files"});
        return unknown_key(key.Mark().line, path, name, candidates, kApiKeysKeys);
      }
    }
    return ok();
  }

  Status apply_capacity(const YAML::Node& map, const std::string& parent) {
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      const YAML::Node key = it->first;
      const YAML::Node value = it->second;
      CORRAL_TRY(check_key(key, parent, seen));
      const std::string name = key.Scalar();
      const std::string path = join_path(parent, name);
      const int value_line = value.IsScalar() ? value.Mark().line : key.Mark().line;
      if (name == "max_sandboxes") {
        auto text = scalar(key, value, path, "a number of sandboxes");
        if (!text) return tl::unexpected<Error>(text.error());
        auto count = parse_count(*text);
        if (!count) return fail(value_line, path, count.error());
        config_.max_sandboxes = *count;
      } else if (name == "memory" || name == "disk") {
        auto size = size_or_auto(key, value, path);
        if (!size) return tl::unexpected<Error>(size.error());
        (name == "memory" ? config_.max_memory_bytes : config_.max_disk_bytes) = *size;
      } else {
        std::vector<Candidate> candidates;
        for (std::string_view k : kCapacityKeys) {
          candidates.push_back({std::string(k), std::string(k)});
        }
        candidates.push_back({"sandboxes", "max_sandboxes"});
        candidates.push_back({"max_memory", "memory"});
        candidates.push_back({"memory_limit", "memory"});
        candidates.push_back({"max_disk", "disk"});
        candidates.push_back({"disk_limit", "disk"});
        return unknown_key(key.Mark().line, path, name, candidates, kCapacityKeys);
      }
    }
    return ok();
  }

  // A key file path relative to the config file's directory.
  std::string resolve_relative(const std::string& file) const {
    if (file.front() == '/') return file;
    std::size_t slash = source_.rfind('/');
    if (slash == std::string_view::npos) return file;
    return std::string(source_.substr(0, slash + 1)) + file;
  }

  std::string_view source_;
  DaemonConfig& config_;
  std::vector<std::size_t> key_positions_;  // top-level keys, in order
  std::optional<std::size_t> sandbox_index_;
  YAML::Node sandbox_value_;
};

// The text apply_config_yaml reads for the sandbox: map: the original with
// everything else blanked, when that still parses to exactly that map (an
// alias to an anchor outside it does not); else the map re-emitted, with
// lines that no longer match the file.
std::string sandbox_text(const std::string& text, const YAML::Node& root,
                         const ServeApplier& applier) {
  const std::size_t begin = applier.sandbox_begin();
  const std::size_t end = applier.sandbox_end().value_or(text.size());
  std::optional<std::size_t> brace;
  if (root.Style() == YAML::EmitterStyle::Flow) {
    std::size_t from = static_cast<std::size_t>(std::max(0, root.Mark().pos));
    std::size_t pos = text.find('{', from);
    if (pos != std::string::npos && pos < begin) brace = pos;
  }
  bool usable = root.Style() != YAML::EmitterStyle::Flow || brace.has_value();
  if (usable) {
    std::string blanked = blank_outside(text, begin, end, brace);
    try {
      const YAML::Node check = YAML::Load(blanked);
      if (check.IsMap() && check.size() == 1 && check["sandbox"]) return blanked;
    } catch (...) {
      // fall through to the re-emitted form
    }
  }
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "sandbox" << YAML::Value << applier.sandbox_value()
      << YAML::EndMap;
  return std::string(out.c_str(), out.size());
}

Result<std::string> read_config_text(const std::string& path) {
  const std::string quoted = quote_for_message(path);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) {
    return tl::unexpected<Error>(
        errno_error("open(" + path + ")", errno, "check the path given to --config")
            .value()
            .wrap("reading daemon config"));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return tl::unexpected<Error>(
        errno_error("fstat(" + path + ")").value().wrap("reading daemon config"));
  }
  if (!S_ISREG(st.st_mode)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "reading daemon config: " + quoted + " is not a regular file",
                      "give the path of a YAML file");
  }
  auto too_big = [&] {
    return make_error(ErrorCode::kInvalidArgument,
                      "reading daemon config: " + quoted + " is larger than 1 MiB",
                      "a daemon config holds a few settings; check the path");
  };
  if (static_cast<std::uint64_t>(st.st_size) > kMaxConfigBytes) return too_big();
  std::string text(kMaxConfigBytes + 1, '\0');
  std::size_t used = 0;
  while (used < text.size()) {
    ssize_t n = ::read(fd.get(), text.data() + used, text.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return tl::unexpected<Error>(
          errno_error("read(" + path + ")").value().wrap("reading daemon config"));
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  if (used > kMaxConfigBytes) return too_big();
  text.resize(used);
  return text;
}

constexpr std::string_view kDefaultYaml =
    R"(# corral serve --config FILE (docs/config.md, "Daemon configuration").
# Every key is optional; these are the defaults.
serve:
  listen: "127.0.0.1:7070"      # HTTP API; "[::1]:7070" for IPv6, ":7070" = 127.0.0.1
  # socket: /run/corral/corral.sock   (default: $CORRAL_RUN_DIR/corral.sock)
  # data_dir: /var/lib/corral         (default: $CORRAL_DATA_DIR)
  api_keys:
    sha256: []                  # hex SHA-256 digests of accepted keys
    files: []                   # files with one key per line (chmod 600)
  capacity:
    max_sandboxes: 256
    memory: auto                # 75% of MemTotal
    disk: auto                  # 50% of MemTotal (writable layers are tmpfs, in RAM)
  request_timeout: 30s
  max_exec_output: 64Mi
  max_upload: auto              # the sandbox's disk limit
  mount_roots: []               # host dirs API mounts may come from (none: no mounts)
  durability: process           # or power-loss: fsync before every acknowledgment
sandbox:                        # defaults of every sandbox, as for corral run --config
  cpu_limit: "2"
  memory_limit: "2Gi"
  disk_limit: "2Gi"
  pids_limit: 256
  timeout: 300
  max_lifetime: 600
  network:
    default: deny
)";

}  // namespace

DaemonConfig default_daemon_config() { return DaemonConfig{}; }

std::string_view default_daemon_config_yaml() { return kDefaultYaml; }

Result<DaemonConfig> parse_daemon_config(std::string_view yaml_text, std::string_view source_name) {
  DaemonConfig config = default_daemon_config();
  auto located = [&](const YAML::Mark& mark, std::string_view what) {
    std::string msg(source_name);
    if (!mark.is_null() && mark.line >= 0) msg.append(":").append(std::to_string(mark.line + 1));
    msg.append(": ").append(what);
    std::string hint = "check the YAML syntax near that line";
    // `listen: [::1]:7070` unquoted is a YAML list followed by junk.
    if (!mark.is_null() && mark.line >= 0 &&
        yaml_line(yaml_text, mark.line).find("listen: [") != std::string_view::npos) {
      hint = "quote an IPv6 listen address: listen: \"[::1]:7070\"";
    }
    return make_error(ErrorCode::kInvalidArgument, std::move(msg), std::move(hint));
  };
  try {
    const std::string text(yaml_text);
    std::optional<std::size_t> content_index;
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
    if (!content_index) return config;  // empty, or only comments
    std::vector<YAML::Node> docs = YAML::LoadAll(text);
    if (*content_index >= docs.size()) {
      return make_error(ErrorCode::kInternal,
                        std::string(source_name) + ": YAML documents changed between reads");
    }
    const YAML::Node& root = docs[*content_index];
    ServeApplier applier(source_name, config);
    CORRAL_TRY(applier.apply_root(root));
    if (applier.has_sandbox()) {
      CORRAL_TRY(
          apply_config_yaml(sandbox_text(text, root, applier), source_name, config.default_spec));
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
  config.default_max_lifetime_ms = config.default_spec.limits.max_lifetime.count();
  return config;
}

Result<DaemonConfig> load_daemon_config(const std::string& path) {
  auto text = read_config_text(path);
  if (!text) return tl::unexpected<Error>(text.error());
  return parse_daemon_config(*text, path);
}

Result<std::uint64_t> parse_meminfo_total(std::string_view meminfo) {
  std::size_t pos = 0;
  while (pos < meminfo.size()) {
    std::size_t nl = meminfo.find('\n', pos);
    std::string_view line =
        meminfo.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? meminfo.size() : nl + 1;
    if (!line.starts_with("MemTotal:")) continue;
    line.remove_prefix(9);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    std::uint64_t kib = 0;
    auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), kib);
    std::string_view unit(end, static_cast<std::size_t>(line.data() + line.size() - end));
    while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
    if (ec != std::errc() || unit != "kB" || kib == 0 || kib > UINT64_MAX / 1024) break;
    return kib * 1024;
  }
  return make_error(ErrorCode::kUnavailable, "/proc/meminfo has no usable MemTotal line",
                    "set serve.capacity.memory and serve.capacity.disk in the config");
}

Status resolve_capacity(DaemonConfig& config) {
  if (config.max_memory_bytes != 0 && config.max_disk_bytes != 0) {
    return resolve_capacity(config, 0);
  }
  UniqueFd fd(::open("/proc/meminfo", O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return tl::unexpected<Error>(
        errno_error("open(/proc/meminfo)", errno,
                    "set serve.capacity.memory and serve.capacity.disk in the config")
            .value()
            .wrap("computing the daemon's capacity"));
  }
  std::string text;
  char buf[4096];
  while (text.size() < 64 * kKiB) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return tl::unexpected<Error>(
          errno_error("read(/proc/meminfo)").value().wrap("computing the daemon's capacity"));
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  auto total = parse_meminfo_total(text);
  if (!total) {
    return tl::unexpected<Error>(std::move(total.error()).wrap("computing the daemon's capacity"));
  }
  return resolve_capacity(config, *total);
}

Status resolve_capacity(DaemonConfig& config, std::uint64_t mem_total_bytes) {
  if ((config.max_memory_bytes == 0 || config.max_disk_bytes == 0) && mem_total_bytes == 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      "computing the daemon's capacity: the host's memory size is unknown");
  }
  if (config.max_memory_bytes == 0) {
    config.max_memory_bytes = mem_total_bytes / 4 * 3 + mem_total_bytes % 4 * 3 / 4;
  }
  if (config.max_disk_bytes == 0) config.max_disk_bytes = mem_total_bytes / 2;

  // One sandbox made from the defaults alone must fit, or every create that
  // does not lower the limits would be refused.
  const Limits& limits = config.default_spec.limits;
  if (limits.memory_bytes > config.max_memory_bytes) {
    return make_error(ErrorCode::kInvalidArgument,
                      "the default sandbox's memory_limit (" + format_size(limits.memory_bytes) +
                          ") is more than the daemon's memory capacity (" +
                          format_size(config.max_memory_bytes) + ")",
                      "lower sandbox.memory_limit, or raise serve.capacity.memory");
  }
  if (limits.disk_bytes > config.max_disk_bytes) {
    return make_error(ErrorCode::kInvalidArgument,
                      "the default sandbox's disk_limit (" + format_size(limits.disk_bytes) +
                          ") is more than the daemon's disk capacity (" +
                          format_size(config.max_disk_bytes) + ")",
                      "lower sandbox.disk_limit, or raise serve.capacity.disk (writable layers "
                      "are tmpfs: their bytes are in RAM)");
  }
  return ok();
}

Result<std::pair<std::string, std::uint16_t>> parse_listen(std::string_view text) {
  const std::string quoted = quote_for_message(text);
  auto bad = [&](std::string_view why, std::string hint = {}) {
    if (hint.empty()) hint = "for example \"127.0.0.1:7070\", \"[::1]:7070\" or \":7070\"";
    return make_error(ErrorCode::kInvalidArgument,
                      "invalid listen address " + quoted + ": " + std::string(why),
                      std::move(hint));
  };
  std::string host;
  std::string_view port_text;
  if (text.starts_with("[")) {
    std::size_t close = text.find(']');
    if (close == std::string_view::npos) return bad("no ']' after the IPv6 address");
    host = std::string(text.substr(1, close - 1));
    std::string_view rest = text.substr(close + 1);
    if (!rest.starts_with(":")) return bad("expected :PORT after ']'");
    port_text = rest.substr(1);
    in6_addr addr{};
    if (inet_pton(AF_INET6, host.c_str(), &addr) != 1) {
      return bad("the part in brackets is not an IPv6 address");
    }
  } else {
    std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("expected HOST:PORT");
    host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
    if (host.find(':') != std::string::npos) {
      return bad("an IPv6 address needs brackets", "for example \"[::1]:7070\"");
    }
    if (host.empty()) host = "127.0.0.1";
    in_addr addr{};
    if (inet_pton(AF_INET, host.c_str(), &addr) != 1) {
      return bad("the host is not an IP address",
                 "give an address, not a name: 127.0.0.1 (this host only), 0.0.0.0 (every "
                 "interface) or [::1]");
    }
  }
  std::uint32_t port = 0;
  bool digits =
      !port_text.empty() && port_text.size() <= 5 &&
      std::all_of(port_text.begin(), port_text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits) {
    std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  }
  if (!digits || port > 65535) return bad("the port is not a number from 0 to 65535");
  return std::pair<std::string, std::uint16_t>(std::move(host), static_cast<std::uint16_t>(port));
}

std::string describe(const DaemonConfig& c) {
  auto size_or = [](std::uint64_t bytes, std::string_view zero) {
    return bytes == 0 ? std::string(zero) : readable_size(bytes);
  };
  const bool v6 = c.listen_host.find(':') != std::string::npos;
  std::string out = "listen ";
  out.append(v6 ? "[" + c.listen_host + "]" : c.listen_host)
      .append(":")
      .append(std::to_string(c.listen_port));
  out.append(", socket ").append(c.socket_path);
  out.append(", data_dir ").append(c.data_dir);
  out.append(", api keys: ");
  if (c.api_key_sha256.empty() && c.api_key_files.empty()) out.append("none");
  if (!c.api_key_sha256.empty()) {
    out.append(std::to_string(c.api_key_sha256.size()))
        .append(c.api_key_sha256.size() == 1 ? " digest" : " digests");
  }
  for (std::size_t i = 0; i < c.api_key_files.size(); ++i) {
    if (i > 0 || !c.api_key_sha256.empty()) out.append(" + ");
    out.append("file ").append(c.api_key_files[i]);
  }
  out.append("; capacity: ")
      .append(std::to_string(c.max_sandboxes))
      .append(" sandboxes, memory ")
      .append(size_or(c.max_memory_bytes, "auto (75% of RAM)"))
      .append(", disk ")
      .append(size_or(c.max_disk_bytes, "auto (50% of RAM)"));
  out.append("; request timeout ").append(format_ms(c.request_timeout_ms));
  out.append(", exec output ").append(readable_size(c.max_exec_output_bytes));
  out.append(", upload ").append(size_or(c.max_upload_bytes, "up to the sandbox's disk limit"));
  const SandboxSpec& s = c.default_spec;
  char cpus[32];
  std::snprintf(cpus, sizeof cpus, "%g", s.limits.cpus);
  out.append("; default sandbox: cpus ").append(cpus);
  out.append(", memory ").append(readable_size(s.limits.memory_bytes));
  out.append(", disk ").append(readable_size(s.limits.disk_bytes));
  out.append(", pids ").append(std::to_string(s.limits.pids));
  out.append(", timeout ").append(format_ms(s.limits.timeout.count()));
  out.append(", lifetime ").append(format_ms(c.default_max_lifetime_ms));
  out.append(", network ").append(s.network.mode);
  out.append(", image ").append(s.image.empty() ? "host base" : s.image);
  return out;
}

}  // namespace corral
