// The daemon's YAML file: the schema walk of `serve:` (ServeApplier) and
// parse_daemon_config. Capacity resolution is host_capacity.cc's, the
// default file's text default_daemon_config_yaml.cc's, and describe and
// parse_listen daemon_config.cc's.
//
// Reading the text and its one document, walking maps and wording the
// messages are spec/yaml_reader's, as for the sandbox config; yaml_reader
// also catches what yaml-cpp throws. The walk over the
// `serve:` map only follows keys it knows and refuses the first value of a
// wrong type, so an alias-heavy file costs no more than its size.
//
// The `sandbox:` entry goes to spec/config_file's apply_config_entry as the
// parsed nodes: they keep their marks, so its errors carry the file's lines.
#include <sys/un.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <functional>
#include <optional>

#include "base/strings.h"
#include "daemon/daemon_config.h"
#include "daemon/e2b_config_yaml.h"
#include "daemon/image_config_yaml.h"
#include "daemon/node_config_yaml.h"
#include "daemon/object_store_config_yaml.h"
#include "daemon/pool_config_yaml.h"
#include "daemon/snapshot_config_yaml.h"
#include "egress/firewall.h"
#include "egress/upstream_resolver.h"
#include "netns/net_slot.h"
#include "spec/config_file.h"
#include "spec/units.h"
#include "spec/volume_ref.h"
#include "spec/yaml_reader.h"

namespace corral {
namespace {

constexpr std::size_t kMaxApiKeyEntries = 1024;
constexpr std::size_t kMaxPathBytes = 4095;

constexpr std::array<std::string_view, 2> kTopKeys = {"serve", "sandbox"};
constexpr std::array<std::string_view, 28> kServeKeys = {"listen",
                                                         "socket",
                                                         "data_dir",
                                                         "api_keys",
                                                         "capacity",
                                                         "request_timeout",
                                                         "setup_timeout",
                                                         "max_exec_output",
                                                         "max_upload",
                                                         "mount_roots",
                                                         "durability",
                                                         "network",
                                                         "secrets",
                                                         "audit",
                                                         "connections",
                                                         "object_store",
                                                         "tasks",
                                                         "volumes",
                                                         "snapshots",
                                                         "diagnostics",
                                                         "self_check",
                                                         "pools",
                                                         "e2b",
                                                         "state",
                                                         "state_url_file",
                                                         "node",
                                                         "cluster_key_file",
                                                         "images"};
constexpr std::array<std::string_view, 2> kDiagnosticsKeys = {"retention", "keep_last"};
constexpr std::array<std::string_view, 10> kTasksKeys = {
    "workers", "default_timeout", "max_timeout",        "retention",       "max_body",
    "max_log", "max_output_size", "initialize_timeout", "collect_timeout", "prune_interval"};
constexpr std::array<std::string_view, 5> kConnectionsKeys = {
    "tcp", "unix", "unauthenticated", "unauthenticated_per_peer", "unauthenticated_head_timeout"};
constexpr std::array<std::string_view, 7> kAuditKeys = {
    "max_file_size", "keep_files",       "max_age", "sandbox_rate",
    "sandbox_burst", "summary_interval", "queue"};
constexpr std::array<std::string_view, 5> kSecretsKeys = {"file", "env", "env_prefix",
                                                          "encrypted_file", "key_file"};
constexpr std::array<std::string_view, 9> kNetworkEngineKeys = {
    "subnet",      "interface_prefix", "firewall_table", "proxy_port",      "dns_port",
    "dns_servers", "templates",        "gateway",        "upstream_ca_file"};
constexpr std::array<std::string_view, 5> kGatewayKeys = {"name", "url", "methods", "paths",
                                                          "rate"};
constexpr std::array<std::string_view, 6> kTemplateKeys = {"name",  "version", "mode",
                                                           "allow", "deny",    "description"};

Result<std::uint16_t> parse_port(std::string_view text) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535)
    return make_error(ErrorCode::kInvalidArgument,
                      quote_for_message(text) + " is not a port (1-65535)");
  return static_cast<std::uint16_t>(value);
}
constexpr std::array<std::string_view, 3> kApiKeysKeys = {"sha256", "files", "namespaces"};
constexpr std::array<std::string_view, 2> kVolumesKeys = {"max_quota", "max_total"};
constexpr std::array<std::string_view, 3> kCapacityKeys = {"max_sandboxes", "memory", "disk"};

template <std::size_t N>
bool contains(const std::array<std::string_view, N>& keys, std::string_view key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

bool is_absolute_path(std::string_view p) {
  return !p.empty() && p.front() == '/' && p.size() <= kMaxPathBytes &&
         p.find('\0') == std::string_view::npos;
}

// A size, or "auto" (0: computed).
Result<std::uint64_t> parse_size_or_auto(std::string_view text) {
  if (text == "auto") return 0;
  return parse_size(text);
}

Result<std::uint64_t> parse_size_or_zero(std::string_view text) {
  if (text == "0") return 0;
  return parse_size(text);
}

Result<std::uint32_t> parse_count_or_zero(std::string_view text) {
  if (text == "0") return 0;
  return parse_count(text);
}

// A count, or "auto" (0: computed). At most a million: beyond, descriptors
// and threads run out long before.
Result<std::uint32_t> parse_count_or_auto(std::string_view text) {
  if (text == "auto") return 0;
  auto n = parse_count(text);
  if (n && *n > 1'000'000)
    return make_error(ErrorCode::kInvalidArgument, quote_for_message(text) + " is over 1000000");
  return n;
}

// A positive rate, at most one million per second.
Result<double> parse_rate(std::string_view text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !(value > 0) || value > 1e6)
    return make_error(ErrorCode::kInvalidArgument,
                      quote_for_message(text) + " is not a positive number per second");
  return value;
}

Result<bool> parse_power_loss_durable(std::string_view text) {
  if (text == "process" || text == "power-loss") return text == "power-loss";
  return make_error(ErrorCode::kInvalidArgument,
                    quote_for_message(text) + " is not a durability level",
                    "use \"process\" (survive a kill -9) or \"power-loss\" (fsync every write)");
}

// serve.self_check (T3): YAML's on/off, also true/false.
Result<bool> parse_on_off(std::string_view text) {
  if (text == "on" || text == "true") return true;
  if (text == "off" || text == "false") return false;
  return make_error(ErrorCode::kInvalidArgument, quote_for_message(text) + " is not on or off",
                    "use on (every create is checked before it is answered) or off");
}

Result<std::string> parse_socket_path(std::string_view text) {
  constexpr std::size_t kMaxSocketPath = sizeof(sockaddr_un::sun_path) - 1;
  if (!is_absolute_path(text) || text.size() > kMaxSocketPath) {
    return make_error(ErrorCode::kInvalidArgument,
                      quote_for_message(text) + " is not an absolute path of at most " +
                          std::to_string(kMaxSocketPath) + " bytes",
                      "for example /run/corral/corral.sock");
  }
  return std::string(text);
}

Result<std::string> parse_data_dir(std::string_view text) {
  if (!is_absolute_path(text)) {
    return make_error(ErrorCode::kInvalidArgument,
                      quote_for_message(text) + " is not an absolute path",
                      "for example /var/lib/corral");
  }
  return std::string(text);
}

// Walks the top level and the `serve:` map of one parsed document. Every
// method may throw yaml-cpp exceptions; read_yaml_document catches them.
class ServeApplier : private YamlReader {
 public:
  ServeApplier(std::string_view source, DaemonConfig& config)
      : YamlReader(source), config_(config) {}

  // Applies serve: and finds sandbox: (its entry, left for
  // apply_config_entry).
  Status apply_root(const YAML::Node& root) {
    if (root.IsNull()) return ok();
    if (!root.IsMap()) {
      return fail(root.Mark().line, "",
                  "expected a map with serve: and sandbox:, found " + describe_node(root));
    }
    return for_each_entry(root, "", [&](const YamlEntry& e) -> Status {
      if (e.name == "serve") {
        if (e.value.IsNull()) return ok();
        CORRAL_TRY(expect_map(e, "a map of daemon settings"));
        return for_each_entry(e.value, e.path, [&](const YamlEntry& s) { return apply_serve(s); });
      }
      if (e.name == "sandbox") {
        sandbox_ = e;
        return ok();
      }
      if (contains(kSandboxSettingKeys, e.name)) {
        return fail(e.line, e.path, "belongs inside the sandbox: map",
                    "a daemon config keeps the defaults of every sandbox under sandbox:");
      }
      if (contains(kServeKeys, e.name)) {
        return fail(e.line, e.path, "belongs inside the serve: map", "indent it under serve:");
      }
      return unknown_key(e, kTopKeys,
                         {{"server", "serve"}, {"daemon", "serve"}, {"defaults", "sandbox"}});
    });
  }

  // The sandbox: entry, if the file has one.
  const std::optional<YamlEntry>& sandbox() const { return sandbox_; }

 private:
  Result<std::vector<std::string>> list(const YamlEntry& e, std::string_view item_expected,
                                        const YamlItemCheck& check) const {
    return scalar_list(e, item_expected, check, kMaxApiKeyEntries);
  }

  // Where a key one level off belongs ("memory" -> capacity.memory).
  static std::vector<KeySuggestion> serve_candidates() {
    std::vector<KeySuggestion> c;
    add_suggestions(c, kServeKeys);
    add_suggestions(c, kApiKeysKeys, "serve.api_keys.");
    add_suggestions(c, kCapacityKeys, "serve.capacity.");
    c.insert(c.end(), {{"address", "listen"},
                       {"bind", "listen"},
                       {"unix_socket", "socket"},
                       {"socket_path", "socket"},
                       {"keys", "api_keys"},
                       {"timeout", "request_timeout"}});
    return c;
  }

  // One entry of serve:.
  Status apply_serve(const YamlEntry& e) {
    const std::string& name = e.name;
    if (name == "listen") {
      std::pair<std::string, std::uint16_t> listen;
      CORRAL_TRY(read_into(e, "an address such as \"127.0.0.1:7070\" (quote IPv6: \"[::1]:7070\")",
                           parse_listen, listen));
      config_.listen_host = std::move(listen.first);
      config_.listen_port = listen.second;
      return ok();
    }
    if (name == "self_check") {
      return read_into(e, "on or off", parse_on_off, config_.self_check);
    }
    if (name == "durability") {
      return read_into(e, "\"process\" or \"power-loss\"", parse_power_loss_durable,
                       config_.power_loss_durable);
    }
    if (name == "mount_roots") {
      auto roots = list(e, "absolute host directories", [](std::string& dir) -> Status {
        if (is_absolute_path(dir) && dir.size() <= kMaxPathBytes) return ok();
        return make_error(ErrorCode::kInvalidArgument,
                          quote_for_message(dir) + " is not an absolute path",
                          "list host directories that sandboxes may mount, e.g. /srv/datasets");
      });
      if (!roots) return tl::unexpected<Error>(roots.error());
      config_.mount_roots = std::move(*roots);
      return ok();
    }
    if (name == "socket") {
      return read_into(e, "an absolute path", parse_socket_path, config_.socket_path);
    }
    if (name == "data_dir") {
      return read_into(e, "an absolute path", parse_data_dir, config_.data_dir);
    }
    if (name == "state") {
      return read_into(e, "an absolute path or a postgres:// URL", parse_state_location,
                       config_.state);
    }
    if (name == "state_url_file") {
      return read_into(e, "an absolute path", parse_data_dir, config_.state_url_file);
    }
    if (name == "node") return apply_node_config(*this, e, config_.node);
    if (name == "cluster_key_file") {
      return read_into(e, "an absolute path", parse_data_dir, config_.cluster_key_file);
    }
    if (name == "api_keys") {
      if (e.value.IsNull()) return ok();
      CORRAL_TRY(expect_map(e, "a map (sha256, files, namespaces)"));
      return for_each_entry(e.value, e.path, [&](const YamlEntry& k) { return apply_api_key(k); });
    }
    if (name == "volumes") {
      if (e.value.IsNull()) return ok();
      CORRAL_TRY(expect_map(e, "a map (max_quota, max_total)"));
      return for_each_entry(e.value, e.path, [&](const YamlEntry& v) { return apply_volumes(v); });
    }
    if (name == "capacity") {
      if (e.value.IsNull()) return ok();
      CORRAL_TRY(expect_map(e, "a map (max_sandboxes, memory, disk)"));
      return for_each_entry(e.value, e.path, [&](const YamlEntry& c) { return apply_capacity(c); });
    }
    if (name == "connections") {
      if (e.value.IsNull()) return ok();
      CORRAL_TRY(expect_map(e, "a map (tcp, unix, unauthenticated, ...)"));
      CORRAL_TRY(for_each_entry(e.value, e.path,
                                [&](const YamlEntry& c) { return apply_connections(c); }));
      const auto& c = config_.connections;
      if (c.tcp != 0 && c.unauthenticated > c.tcp)
        return fail(e.line, e.path, "unauthenticated is larger than tcp",
                    "unauthenticated TCP connections are part of tcp");
      if (c.unauthenticated != 0 && c.unauthenticated_per_peer > c.unauthenticated)
        return fail(e.line, e.path, "unauthenticated_per_peer is larger than unauthenticated");
      return ok();
    }
    if (name == "request_timeout") {
      std::chrono::milliseconds timeout{};
      CORRAL_TRY(read_into(e, "a duration (30s, 2m)", parse_duration, timeout));
      config_.request_timeout_ms = timeout.count();
      return ok();
    }
    if (name == "setup_timeout") {
      std::chrono::milliseconds timeout{};
      CORRAL_TRY(read_into(e, "a duration (30s, 2m)", parse_duration, timeout));
      if (timeout.count() < 100)
        return fail(e.value_line, e.path, "must be at least 100ms",
                    "a create needs a few milliseconds per stage even on a fast host");
      config_.setup_timeout_ms = timeout.count();
      return ok();
    }
    if (name == "max_exec_output") {
      return read_into(e, "a size (64Mi)", parse_size, config_.max_exec_output_bytes);
    }
    if (name == "max_upload") {
      return read_into(e, "a size (512Mi, 8Gi) or auto", parse_size_or_auto,
                       config_.max_upload_bytes);
    }
    if (name == "network") {
      if (e.value.IsNull()) return ok();
      CORRAL_TRY(expect_map(e, "a map of network engine settings (subnet, dns_servers, ...)"));
      return for_each_entry(e.value, e.path, [&](const YamlEntry& n) { return apply_network(n); });
    }
    if (name == "audit") {
      if (e.value.IsNull()) return ok();
      CORRAL_TRY(expect_map(e, "a map of audit log settings (max_file_size, keep_files, ...)"));
      return for_each_entry(e.value, e.path, [&](const YamlEntry& a) { return apply_audit(a); });
    }
    if (name == "secrets") {
      if (e.value.IsNull()) return ok();
      CORRAL_TRY(expect_map(e,
                            "a map of secret sources (file, env, env_prefix, encrypted_file, "
                            "key_file)"));
      CORRAL_TRY(
          for_each_entry(e.value, e.path, [&](const YamlEntry& s) { return apply_secrets(s); }));
      const auto& sc = config_.secrets;
      if (sc.encrypted_file.empty() != sc.key_file.empty())
        return fail(e.line, e.path, "names only one of encrypted_file and key_file",
                    "an encrypted store needs its key: give both (corral secrets keygen, "
                    "corral secrets encrypt)");
      return ok();
    }
    if (name == "tasks") {
      if (e.value.IsNull()) return ok();
      CORRAL_TRY(expect_map(e, "a map of task settings (workers, default_timeout, ...)"));
      return for_each_entry(e.value, e.path, [&](const YamlEntry& t) { return apply_tasks(t); });
    }
    if (name == "object_store") {
      return apply_object_store_config(*this, e, config_.object_store);
    }
    if (name == "snapshots") return apply_snapshot_config(*this, e, config_.snapshots);
    if (name == "images") return apply_image_config(*this, e, config_.images);
    if (name == "diagnostics") {
      if (e.value.IsNull()) return ok();
      CORRAL_TRY(expect_map(e, "a map of diagnostics settings (retention, keep_last)"));
      return for_each_entry(e.value, e.path,
                            [&](const YamlEntry& d) { return apply_diagnostics(d); });
    }
    if (name == "pools") return apply_pool_config(*this, e, config_.pools);
    if (name == "e2b") return apply_e2b_config(*this, e, config_.e2b);
    if (contains(kSandboxSettingKeys, name)) {
      return fail(e.line, e.path, "is a sandbox setting: put it in the top-level sandbox: map",
                  "serve: holds the daemon's own settings; sandbox: the defaults of every "
                  "sandbox");
    }
    return unknown_key(e.line, e.path, name, serve_candidates(), kServeKeys);
  }

  // One entry of serve.tasks (docs/tasks.md).
  Status apply_tasks(const YamlEntry& e) {
    daemon::TaskConfig& t = config_.tasks;
    if (e.name == "workers") {
      CORRAL_TRY(read_into(e, "a number of workers (4)", parse_count, t.workers));
      if (t.workers > 256) return fail(e.value_line, e.path, "must be at most 256");
      return ok();
    }
    for (auto [key, field] :
         {std::pair{"default_timeout", &t.default_timeout_ms},
          std::pair{"max_timeout", &t.max_timeout_ms}, std::pair{"retention", &t.retention_ms},
          std::pair{"initialize_timeout", &t.initialize_timeout_ms},
          std::pair{"collect_timeout", &t.collect_timeout_ms},
          std::pair{"prune_interval", &t.prune_interval_ms}}) {
      if (e.name != key) continue;
      std::chrono::milliseconds d{};
      CORRAL_TRY(read_into(e, "a duration (10m, 168h)", parse_duration, d));
      *field = d.count();
      return ok();
    }
    for (auto [key, field] : {std::pair{"max_body", &t.max_body}, std::pair{"max_log", &t.max_log},
                              std::pair{"max_output_size", &t.max_output_size}}) {
      if (e.name == key) return read_into(e, "a size (64Mi, 1Gi)", parse_size, *field);
    }
    return unknown_key(e, kTasksKeys, {{"timeout", "default_timeout"}, {"threads", "workers"}});
  }

  // One entry of serve.diagnostics (T1; docs/operations.md).
  Status apply_diagnostics(const YamlEntry& e) {
    daemon::DiagnosticsConfig& d = config_.diagnostics;
    if (e.name == "retention") {
      std::chrono::milliseconds v{};
      CORRAL_TRY(read_into(e, "a duration (24h, 30m)", parse_duration, v));
      if (v.count() < 1000)
        return fail(e.value_line, e.path, "must be at least 1s",
                    "diagnostics are read after a sandbox is destroyed: keep them a while");
      d.retention = v;
      return ok();
    }
    if (e.name == "keep_last") {
      std::uint32_t n = 0;
      CORRAL_TRY(read_into(e, "a number of entries (20)", parse_count_or_zero, n));
      if (n > 1000) return fail(e.value_line, e.path, "must be at most 1000");
      d.keep_last = n;
      return ok();
    }
    return unknown_key(e, kDiagnosticsKeys, {{"keep", "retention"}, {"max_age", "retention"}});
  }

  // One entry of serve.audit.
  Status apply_audit(const YamlEntry& e) {
    DaemonConfig::Audit& a = config_.audit;
    if (e.name == "max_file_size") {
      CORRAL_TRY(
          read_into(e, "a size (64Mi) or 0 (never rotate)", parse_size_or_zero, a.max_file_size));
      if (a.max_file_size != 0 && a.max_file_size < 64 * kKiB)
        return fail(e.value_line, e.path, "must be at least 64Ki (or 0: never rotate)",
                    "a file must hold more than a few records");
      return ok();
    }
    if (e.name == "keep_files") {
      return read_into(e, "a number of rotated files (0: keep all)", parse_count_or_zero,
                       a.keep_files);
    }
    if (e.name == "max_age" || e.name == "summary_interval") {
      std::chrono::milliseconds d{};
      CORRAL_TRY(read_into(e, "a duration (10s, 720h)", parse_duration, d));
      if (e.name == "max_age") {
        a.max_age_ms = d.count();
      } else {
        if (d.count() < 100) return fail(e.value_line, e.path, "must be at least 100ms");
        a.summary_interval_ms = d.count();
      }
      return ok();
    }
    if (e.name == "sandbox_rate") {
      return read_into(e, "KiB of records per second (20, 0.5)", parse_rate, a.sandbox_rate);
    }
    if (e.name == "sandbox_burst") {
      return read_into(e, "KiB of records (200)", parse_count, a.sandbox_burst);
    }
    if (e.name == "queue") {
      CORRAL_TRY(read_into(e, "a number of writes", parse_count, a.queue));
      if (a.queue < 64) return fail(e.value_line, e.path, "must be at least 64");
      return ok();
    }
    return unknown_key(e, kAuditKeys,
                       {{"rotate_size", "max_file_size"},
                        {"max_size", "max_file_size"},
                        {"retention", "keep_files"},
                        {"keep", "keep_files"},
                        {"rate", "sandbox_rate"},
                        {"burst", "sandbox_burst"},
                        {"queue_size", "queue"}});
  }

  // One entry of serve.secrets. Paths only: the files are read (and their
  // permissions checked) when the daemon starts.
  Status apply_secrets(const YamlEntry& e) {
    secrets::SecretStoreConfig& sc = config_.secrets;
    auto path = [this](std::string_view t) { return usable_path(t); };
    if (e.name == "file") return read_into(e, "a file path (mode 0600)", path, sc.file);
    if (e.name == "encrypted_file")
      return read_into(e, "a file path (from corral secrets encrypt)", path, sc.encrypted_file);
    if (e.name == "key_file")
      return read_into(e, "a file path (from corral secrets keygen)", path, sc.key_file);
    if (e.name == "env_prefix") {
      return read_into(
          e, "a variable name prefix such as CORRAL_SECRET_",
          [](std::string_view t) -> Result<std::string> {
            bool okay = !t.empty() && t.size() <= 64 && std::all_of(t.begin(), t.end(), [](char c) {
              return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                     c == '_';
            });
            if (!okay)
              return make_error(ErrorCode::kInvalidArgument,
                                quote_for_message(t) + " is not a variable name prefix");
            return std::string(t);
          },
          sc.env_prefix);
    }
    if (e.name == "env") {
      auto names = list(e, "names of the daemon's environment variables", [](std::string& n) {
        bool okay = !n.empty() && n.size() <= 128 && !(n[0] >= '0' && n[0] <= '9') &&
                    std::all_of(n.begin(), n.end(), [](char c) {
                      return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                             (c >= '0' && c <= '9') || c == '_';
                    });
        if (okay) return ok();
        return Status(make_error(ErrorCode::kInvalidArgument,
                                 quote_for_message(n) + " is not an environment variable name"));
      });
      if (!names) return tl::unexpected<Error>(names.error());
      sc.env = std::move(*names);
      return ok();
    }
    return unknown_key(e, kSecretsKeys,
                       {{"path", "file"}, {"encrypted", "encrypted_file"}, {"key", "key_file"}});
  }

  // One entry of serve.network.
  Status apply_network(const YamlEntry& e) {
    DaemonConfig::Network& n = config_.network;
    if (e.name == "subnet") {
      return read_into(
          e, "an IPv4 prefix such as 10.211.0.0/16",
          [](std::string_view t) -> Result<std::string> {
            CORRAL_TRY(net::NetSlotPool::make(t).map([](auto&&) {}));
            return std::string(t);
          },
          n.subnet);
    }
    if (e.name == "interface_prefix") {
      return read_into(
          e, "a short interface name prefix such as crl",
          [](std::string_view t) -> Result<std::string> {
            CORRAL_TRY(net::NetSlotPool::make("10.211.0.0/16", t).map([](auto&&) {}));
            return std::string(t);
          },
          n.interface_prefix);
    }
    if (e.name == "firewall_table") {
      return read_into(
          e, "an nftables table name",
          [](std::string_view t) -> Result<std::string> {
            net::FirewallConfig f;
            f.table = std::string(t);
            CORRAL_TRY(net::validate_firewall_config(f));
            return std::string(t);
          },
          n.firewall_table);
    }
    if (e.name == "proxy_port" || e.name == "dns_port") {
      return read_into(e, "a port (1-65535)", parse_port,
                       e.name == "proxy_port" ? n.proxy_port : n.dns_port);
    }
    if (e.name == "dns_servers") {
      auto servers = list(e, "IP addresses (optionally IP:PORT)", [](std::string& item) -> Status {
        if (net::parse_dns_endpoint(item)) return ok();
        return make_error(ErrorCode::kInvalidArgument,
                          quote_for_message(item) + " is not an IP address with an optional port");
      });
      if (!servers) return tl::unexpected<Error>(servers.error());
      n.dns_servers = std::move(*servers);
      return ok();
    }
    if (e.name == "upstream_ca_file") {
      return read_into(
          e, "a PEM file of CA certificates", [this](std::string_view t) { return usable_path(t); },
          n.upstream_ca_file);
    }
    if (e.name == "templates") return apply_templates(e);
    if (e.name == "gateway") return apply_gateway(e);
    return unknown_key(e, kNetworkEngineKeys,
                       {{"cidr", "subnet"},
                        {"prefix", "interface_prefix"},
                        {"table", "firewall_table"},
                        {"nameservers", "dns_servers"}});
  }

  // A list of maps (serve.network.templates, .gateway): `visit` sees each
  // map with its key path and line, after the shapes are checked.
  using MapItemVisit =
      std::function<Status(const YAML::Node& item, const std::string& path, int line)>;
  Status for_each_map_item(const YamlEntry& e, std::string_view list_of, std::string_view keys,
                           const std::string& hint, const MapItemVisit& visit) {
    if (e.value.IsNull()) return ok();
    if (!e.value.IsSequence())
      return fail(
          e.line, e.path,
          "expected a list of " + std::string(list_of) + ", found " + describe_node(e.value), hint);
    for (std::size_t i = 0; i < e.value.size(); ++i) {
      const YAML::Node& item = e.value[i];
      const std::string path = item_path(e.path, i);
      if (!item.IsMap())
        return fail(item.Mark().line, path,
                    "expected a map (" + std::string(keys) + "), found " + describe_node(item),
                    hint);
      CORRAL_TRY(visit(item, path, item.Mark().line));
    }
    return ok();
  }

  // serve.network.templates: the daemon's own rule sets.
  Status apply_templates(const YamlEntry& e) {
    DaemonConfig::Network& n = config_.network;
    n.templates.clear();
    return for_each_map_item(
        e, "templates", "name, version, mode, allow, deny",
        "each template: {name: NAME, version: 1, allow: [RULE, ...]}",
        [&](const YAML::Node& item, const std::string& path, int line) -> Status {
          net::NetworkTemplate t;
          t.version = 1;
          CORRAL_TRY(for_each_entry(
              item, path, [&](const YamlEntry& k) -> Status { return apply_template_key(k, t); }));
          if (t.name.empty()) return fail(line, path, "has no name");
          net::NetworkRequest probe;
          probe.template_name = t.name + "@" + std::to_string(t.version);
          std::vector<net::NetworkTemplate> one = {t};
          if (auto p = net::resolve_policy(probe, one); !p) return fail(line, path, p.error());
          for (const auto& earlier : n.templates) {
            if (earlier.name == t.name && earlier.version == t.version)
              return fail(line, path,
                          "a second template " + t.name + "@" + std::to_string(t.version));
          }
          n.templates.push_back(std::move(t));
          return ok();
        });
  }

  // serve.network.gateway: the internal services (N5).
  Status apply_gateway(const YamlEntry& e) {
    DaemonConfig::Network& n = config_.network;
    n.gateway.clear();
    return for_each_map_item(
        e, "services", "name, url, methods, paths, rate",
        "each service: {name: billing, url: \"http://10.0.0.5:8080/api\", methods: [GET], "
        "paths: [/v1/], rate: 10/s}",
        [&](const YAML::Node& item, const std::string& path, int line) -> Status {
          std::string name, url;
          std::vector<std::string> methods, paths;
          std::optional<net::RateLimit> rate;
          CORRAL_TRY(for_each_entry(item, path, [&](const YamlEntry& k) -> Status {
            auto text = [](std::string_view v) -> Result<std::string> { return std::string(v); };
            if (k.name == "name") return read_into(k, "a service name", text, name);
            if (k.name == "url") return read_into(k, "an http:// URL", text, url);
            if (k.name == "methods" || k.name == "paths") {
              auto items = list(k, k.name == "methods" ? "HTTP methods" : "path prefixes", {});
              if (!items) return tl::unexpected<Error>(items.error());
              (k.name == "methods" ? methods : paths) = std::move(*items);
              return ok();
            }
            if (k.name == "rate") {
              net::RateLimit r;
              CORRAL_TRY(
                  read_into(k, "a rate such as 10/s or 600/min", net::parse_gateway_rate, r));
              rate = r;
              return ok();
            }
            return unknown_key(k, kGatewayKeys, {{"address", "url"}, {"prefixes", "paths"}});
          }));
          auto service = net::parse_gateway_service(name, url, methods, paths, rate);
          if (!service) return fail(line, path, service.error());
          for (const auto& earlier : n.gateway) {
            if (earlier.name == service->name)
              return fail(line, path, "a second service named " + service->name);
          }
          n.gateway.push_back(std::move(*service));
          return ok();
        });
  }

  Status apply_template_key(const YamlEntry& k, net::NetworkTemplate& t) {
    if (k.name == "name") {
      return read_into(
          k, "a template name such as ci-builds",
          [](std::string_view v) -> Result<std::string> {
            bool good = !v.empty() && v.size() <= 64 && std::all_of(v.begin(), v.end(), [](char c) {
              return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
            });
            if (!good)
              return make_error(
                  ErrorCode::kInvalidArgument,
                  quote_for_message(v) + " is not a template name ([a-z0-9_-], at most 64)");
            return std::string(v);
          },
          t.name);
    }
    if (k.name == "version") {
      std::uint32_t v = 0;
      CORRAL_TRY(read_into(k, "a version number (1, 2, ...)", parse_count, v));
      if (v == 0) return fail(k.value_line, k.path, "versions start at 1");
      t.version = static_cast<int>(v);
      return ok();
    }
    if (k.name == "mode") {
      auto m = one_of(k, std::array<std::string_view, 2>{"allowlist", "open"}, "allowlist or open");
      if (!m) return tl::unexpected<Error>(m.error());
      t.mode = *m == "open" ? net::NetworkMode::kOpen : net::NetworkMode::kAllowlist;
      return ok();
    }
    if (k.name == "allow" || k.name == "deny") {
      const bool deny = k.name == "deny";
      auto rules =
          list(k, "rules ([http|tls|tcp://]host[:ports])", [deny](std::string& r) -> Status {
            auto rule = net::parse_rule(r, deny);
            if (!rule) return tl::unexpected<Error>(rule.error());
            return ok();
          });
      if (!rules) return tl::unexpected<Error>(rules.error());
      (deny ? t.deny : t.allow) = std::move(*rules);
      return ok();
    }
    if (k.name == "description")
      return read_into(
          k, "a line of text",
          [](std::string_view v) -> Result<std::string> { return std::string(v); }, t.description);
    return unknown_key(k, kTemplateKeys, {{"rules", "allow"}});
  }

  // One entry of serve.api_keys: the default namespace's keys, and
  // `namespaces`, the keys of the others (docs/config.md).
  Status apply_api_key(const YamlEntry& e) {
    if (e.name == "namespaces") {
      config_.api_key_namespaces.clear();
      return for_each_map_item(
          e, "namespaces", "name, sha256, files",
          "each namespace: {name: team-a, files: [/etc/corral/team-a.keys]}",
          [&](const YAML::Node& item, const std::string& path, int line) -> Status {
            DaemonConfig::ApiKeyNamespace ns;
            CORRAL_TRY(for_each_entry(item, path, [&](const YamlEntry& k) -> Status {
              if (k.name == "name")
                return read_into(
                    k, "a namespace name ([a-z0-9][a-z0-9._-]{0,62})",
                    [](std::string_view v) -> Result<std::string> {
                      if (is_valid_volume_name(v)) return std::string(v);
                      return make_error(ErrorCode::kInvalidArgument,
                                        quote_for_message(v) + " is not a namespace name");
                    },
                    ns.name);
              if (k.name == "namespaces") return unknown_key(k, kApiKeysKeys);
              return apply_key_list(k, ns.sha256, ns.files);
            }));
            if (ns.name.empty()) return fail(line, path, "has no name");
            if (ns.sha256.empty() && ns.files.empty())
              return fail(line, path, "has no keys (sha256 or files)");
            for (const auto& earlier : config_.api_key_namespaces) {
              if (earlier.name == ns.name) return fail(line, path, "a second namespace " + ns.name);
            }
            config_.api_key_namespaces.push_back(std::move(ns));
            return ok();
          });
    }
    return apply_key_list(e, config_.api_key_sha256, config_.api_key_files);
  }

  // sha256 or files, of the default namespace or of one in `namespaces`.
  Status apply_key_list(const YamlEntry& e, std::vector<std::string>& sha256,
                        std::vector<std::string>& key_files) {
    if (e.name == "sha256") {
      auto digests = list(e, "SHA-256 digests (64 hex digits)", [](std::string& item) -> Status {
        std::string digest = item;
        for (char& c : digest) {
          if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        }
        bool hex = digest.size() == 64 && std::all_of(digest.begin(), digest.end(), [](char c) {
                     return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                   });
        if (!hex) {
          return make_error(
              ErrorCode::kInvalidArgument,
              quote_for_message(item) + " is not a SHA-256 digest (expected 64 hex digits)",
              "make one with: printf %s \"$KEY\" | sha256sum");
        }
        item = std::move(digest);
        return ok();
      });
      if (!digests) return tl::unexpected<Error>(digests.error());
      sha256 = std::move(*digests);
      return ok();
    }
    if (e.name == "files") {
      auto files = list(e, "key file paths", [this](std::string& file) -> Status {
        auto resolved = usable_path(file);
        if (!resolved) return tl::unexpected<Error>(resolved.error());
        file = std::move(*resolved);
        return ok();
      });
      if (!files) return tl::unexpected<Error>(files.error());
      key_files = std::move(*files);
      return ok();
    }
    return unknown_key(
        e, kApiKeysKeys,
        {{"hashes", "sha256"}, {"sha256sum", "sha256"}, {"key_files", "files"}, {"keys", "files"}});
  }

  // One entry of serve.volumes (docs/volumes.md).
  Status apply_volumes(const YamlEntry& e) {
    if (e.name == "max_quota" || e.name == "max_total")
      return read_into(
          e, "a size (10Gi)", parse_size,
          e.name == "max_quota" ? config_.volumes.max_quota : config_.volumes.max_total);
    return unknown_key(e, kVolumesKeys, {{"quota", "max_quota"}, {"total", "max_total"}});
  }

  // One entry of serve.capacity.
  // One entry of serve.connections (counts, "auto", and the head timeout).
  Status apply_connections(const YamlEntry& e) {
    DaemonConfig::Connections& c = config_.connections;
    if (e.name == "unauthenticated_head_timeout") {
      std::chrono::milliseconds timeout{};
      CORRAL_TRY(read_into(e, "a duration (10s)", parse_duration, timeout));
      if (timeout.count() < 100 || timeout.count() > 600'000)
        return fail(e.value_line, e.path, "must be between 100ms and 10m",
                    "a client on the same host sends its head in microseconds; 10s allows slow "
                    "links");
      c.unauthenticated_head_timeout_ms = timeout.count();
      return ok();
    }
    std::uint32_t* field = e.name == "tcp"                        ? &c.tcp
                           : e.name == "unix"                     ? &c.unix_socket
                           : e.name == "unauthenticated"          ? &c.unauthenticated
                           : e.name == "unauthenticated_per_peer" ? &c.unauthenticated_per_peer
                                                                  : nullptr;
    if (field != nullptr)
      return read_into(e, "a number of connections or auto", parse_count_or_auto, *field);
    return unknown_key(e, kConnectionsKeys,
                       {{"max", "tcp"},
                        {"max_connections", "tcp"},
                        {"socket", "unix"},
                        {"per_peer", "unauthenticated_per_peer"},
                        {"head_timeout", "unauthenticated_head_timeout"}});
  }

  Status apply_capacity(const YamlEntry& e) {
    if (e.name == "max_sandboxes") {
      return read_into(e, "a number of sandboxes", parse_count, config_.max_sandboxes);
    }
    if (e.name == "memory" || e.name == "disk") {
      return read_into(e, "a size (512Mi, 8Gi) or auto", parse_size_or_auto,
                       e.name == "memory" ? config_.max_memory_bytes : config_.max_disk_bytes);
    }
    return unknown_key(e, kCapacityKeys,
                       {{"sandboxes", "max_sandboxes"},
                        {"max_memory", "memory"},
                        {"memory_limit", "memory"},
                        {"max_disk", "disk"},
                        {"disk_limit", "disk"}});
  }

  // A key file path relative to the config file's directory.
  // A file path of the config (key files, secret stores, CA bundles):
  // non-empty, no NUL, not too long; relative ones resolved against the
  // config file's directory.
  Result<std::string> usable_path(std::string_view text) const {
    std::string file(text);
    if (file.empty() || file.find('\0') != std::string::npos || file.size() > kMaxPathBytes)
      return make_error(ErrorCode::kInvalidArgument,
                        quote_for_message(file) + " is not a usable path");
    return resolve_relative(file);
  }

  std::string resolve_relative(const std::string& file) const {
    if (file.front() == '/') return file;
    std::size_t slash = source().rfind('/');
    if (slash == std::string_view::npos) return file;
    return std::string(source().substr(0, slash + 1)) + file;
  }

  DaemonConfig& config_;
  std::optional<YamlEntry> sandbox_;  // its nodes keep their marks (lines)
};

}  // namespace

Result<DaemonConfig> parse_daemon_config(std::string_view yaml_text, std::string_view source_name) {
  DaemonConfig config = default_daemon_config();
  ServeApplier applier(source_name, config);
  auto apply = [&](const YAML::Node& root, const std::string&) -> Status {
    CORRAL_TRY(applier.apply_root(root));
    if (!applier.sandbox()) return ok();
    return apply_config_entry(*applier.sandbox(), source_name, config.default_spec);
  };
  // `listen: [::1]:7070` unquoted is a YAML list followed by junk.
  auto syntax_hint = [](std::string_view line) -> std::string {
    if (line.find("listen: [") == std::string_view::npos) return {};
    return "quote an IPv6 listen address: listen: \"[::1]:7070\"";
  };
  CORRAL_TRY(read_yaml_document(yaml_text, source_name, apply, syntax_hint));
  config.default_max_lifetime_ms = config.default_spec.limits.max_lifetime.count();
  return config;
}

Result<DaemonConfig> load_daemon_config(const std::string& path) {
  auto text = read_config_text(path, "reading daemon config",
                               "a daemon config holds a few settings; check the path");
  if (!text) return tl::unexpected<Error>(text.error());
  return parse_daemon_config(*text, path);
}

}  // namespace corral
