#include "daemon/daemon_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "base/paths.h"
#include "config_test_support.h"

namespace corral {
namespace {

using config_test::kSourceExample;
using std::chrono::milliseconds;

DaemonConfig config_ok(std::string_view yaml, std::string_view source = "serve.yaml") {
  auto config = parse_daemon_config(yaml, source);
  EXPECT_TRUE(config.has_value()) << config.error().to_string() << "\nin:\n" << yaml;
  return config.has_value() ? *config : DaemonConfig{};
}

// The message of the error (with the hint after " (hint: "), failing the
// test when the text was accepted.
std::string config_error(std::string_view yaml) {
  auto config = parse_daemon_config(yaml, "serve.yaml");
  EXPECT_FALSE(config.has_value()) << "accepted:\n" << yaml;
  if (config.has_value()) return {};
  EXPECT_EQ(config.error().code, ErrorCode::kInvalidArgument) << config.error().message;
  return config.error().to_string();
}

// Messages are checked by their start where the rest comes from units.h.
void expect_prefix(const std::string& text, std::string_view prefix) {
  EXPECT_TRUE(text.starts_with(prefix)) << text << "\nexpected to start with: " << prefix;
}

void expect_default_spec(const SandboxSpec& spec) {
  const SandboxSpec d;
  EXPECT_DOUBLE_EQ(spec.limits.cpus, d.limits.cpus);
  EXPECT_EQ(spec.limits.memory_bytes, d.limits.memory_bytes);
  EXPECT_EQ(spec.limits.disk_bytes, d.limits.disk_bytes);
  EXPECT_EQ(spec.limits.pids, d.limits.pids);
  EXPECT_EQ(spec.limits.timeout, d.limits.timeout);
  EXPECT_EQ(spec.limits.max_lifetime, d.limits.max_lifetime);
  EXPECT_EQ(spec.network.mode, d.network.mode);
  EXPECT_TRUE(spec.network.allow_domains.empty());
  EXPECT_EQ(spec.image, d.image);
  EXPECT_EQ(spec.hostname, d.hostname);
}

void expect_defaults(const DaemonConfig& c) {
  EXPECT_EQ(c.listen_host, "127.0.0.1");
  EXPECT_EQ(c.listen_port, 7070);
  EXPECT_EQ(c.socket_path, run_dir() + "/corral.sock");
  EXPECT_EQ(c.data_dir, data_dir());
  EXPECT_TRUE(c.api_key_sha256.empty());
  EXPECT_TRUE(c.api_key_files.empty());
  EXPECT_EQ(c.max_sandboxes, 256u);
  EXPECT_EQ(c.max_memory_bytes, 0u);
  EXPECT_EQ(c.max_disk_bytes, 0u);
  EXPECT_EQ(c.request_timeout_ms, 30'000);
  EXPECT_EQ(c.default_max_lifetime_ms, 600'000);
  EXPECT_EQ(c.max_exec_output_bytes, 64 * kMiB);
  EXPECT_EQ(c.max_upload_bytes, 0u);
  expect_default_spec(c.default_spec);
}

TEST(DaemonConfig, Defaults) { expect_defaults(default_daemon_config()); }

TEST(DaemonConfig, EmbeddedDefaultFileLoadsToTheDefaults) {
  expect_defaults(config_ok(default_daemon_config_yaml()));
}

TEST(DaemonConfig, EmptyFilesAndEmptySections) {
  for (std::string_view yaml : {"", "# nothing\n", "---\n", "serve:\n", "sandbox:\n",
                                "serve:\nsandbox:\n", "serve: {}\nsandbox: {}\n"}) {
    SCOPED_TRACE(yaml);
    expect_defaults(config_ok(yaml));
  }
}

TEST(DaemonConfig, EveryServeKey) {
  const std::string digest(64, 'A');
  DaemonConfig c = config_ok(R"(serve:
  listen: "[::1]:8080"
  socket: /run/c/c.sock
  data_dir: /srv/corral
  api_keys:
    sha256: [")" + digest + R"("]
    files: [keys, /etc/corral/more-keys, sub/dir/k]
  capacity:
    max_sandboxes: 10
    memory: 8Gi
    disk: 4G
  request_timeout: 1m30s
  max_exec_output: 1Mi
  max_upload: 100Mi
)",
                             "/etc/corral/serve.yaml");
  EXPECT_EQ(c.listen_host, "::1");
  EXPECT_EQ(c.listen_port, 8080);
  EXPECT_EQ(c.socket_path, "/run/c/c.sock");
  EXPECT_EQ(c.data_dir, "/srv/corral");
  EXPECT_EQ(c.api_key_sha256, std::vector<std::string>{std::string(64, 'a')});
  EXPECT_EQ(c.api_key_files, (std::vector<std::string>{"/etc/corral/keys", "/etc/corral/more-keys",
                                                       "/etc/corral/sub/dir/k"}));
  EXPECT_EQ(c.max_sandboxes, 10u);
  EXPECT_EQ(c.max_memory_bytes, 8 * kGiB);
  EXPECT_EQ(c.max_disk_bytes, 4'000'000'000u);
  EXPECT_EQ(c.request_timeout_ms, 90'000);
  EXPECT_EQ(c.max_exec_output_bytes, kMiB);
  EXPECT_EQ(c.max_upload_bytes, 100 * kMiB);
  expect_default_spec(c.default_spec);

  // A relative source: relative key files stay relative to it.
  c = config_ok("serve:\n  api_keys:\n    files: [k]\n", "conf/serve.yaml");
  EXPECT_EQ(c.api_key_files, std::vector<std::string>{"conf/k"});
  c = config_ok("serve:\n  api_keys:\n    files: [k]\n", "serve.yaml");
  EXPECT_EQ(c.api_key_files, std::vector<std::string>{"k"});
}

TEST(DaemonConfig, ListenShorthandAndAuto) {
  DaemonConfig c = config_ok(
      "serve:\n  listen: :9090\n  capacity: {memory: auto, disk: auto}\n"
      "  max_upload: auto\n");
  EXPECT_EQ(c.listen_host, "127.0.0.1");
  EXPECT_EQ(c.listen_port, 9090);
  EXPECT_EQ(c.max_memory_bytes, 0u);
  EXPECT_EQ(c.max_disk_bytes, 0u);
  EXPECT_EQ(c.max_upload_bytes, 0u);
  c = config_ok("serve:\n  listen: 0.0.0.0:7070\n");
  EXPECT_EQ(c.listen_host, "0.0.0.0");
}

TEST(DaemonConfig, SourceSandboxExampleIsTheDefaultSpec) {
  DaemonConfig c = config_ok(kSourceExample);
  config_test::expect_source_example(c.default_spec);
  EXPECT_EQ(c.default_max_lifetime_ms, 600'000);
  EXPECT_EQ(c.listen_port, 7070);

  // With serve: before or after it, and max_lifetime carried over.
  std::string before = "serve:\n  listen: \":7071\"\n" + std::string(kSourceExample);
  std::string after = std::string(kSourceExample) + "serve:\n  listen: \":7071\"\n";
  for (const std::string& yaml : {before, after}) {
    DaemonConfig both = config_ok(yaml);
    EXPECT_EQ(both.listen_port, 7071);
    EXPECT_EQ(both.default_spec.network.mode, "allowlist");
    EXPECT_EQ(both.default_spec.limits.memory_bytes, 2 * kGiB);
  }
  c = config_ok("sandbox:\n  max_lifetime: 20m\n  memory_limit: 512Mi\n");
  EXPECT_EQ(c.default_max_lifetime_ms, 1'200'000);
  EXPECT_EQ(c.default_spec.limits.memory_bytes, 512 * kMiB);
}

TEST(DaemonConfig, SandboxErrorsKeepTheirLines) {
  // The sandbox: entry goes to apply_config_entry as parsed nodes, which
  // keep their marks, so its messages point at the file's own lines.
  expect_prefix(config_error("serve:\n  listen: \":7070\"\n\nsandbox:\n  memory_limit: 2GG\n"),
                "serve.yaml:5: sandbox.memory_limit: invalid size \"");
  EXPECT_EQ(config_error("# c\nsandbox:\n  memroy_limit: 2Gi\nserve:\n  listen: \":7070\"\n"),
            "serve.yaml:3: sandbox.memroy_limit: unknown key (did you mean memory_limit?)");
  std::string msg = config_error(
      "sandbox:\n  network:\n    mode: open\n    default: deny\n"
      "serve:\n  max_exec_output: 1Mi\n");
  expect_prefix(msg, "serve.yaml:3: sandbox.network.mode");
}

TEST(DaemonConfig, FlowStyleRoot) {
  DaemonConfig c =
      config_ok("{serve: {listen: \":8081\"}, sandbox: {memory_limit: 1Gi, pids_limit: 64}}\n");
  EXPECT_EQ(c.listen_port, 8081);
  EXPECT_EQ(c.default_spec.limits.memory_bytes, kGiB);
  EXPECT_EQ(c.default_spec.limits.pids, 64u);
  c = config_ok("{sandbox: {memory_limit: 1Gi}, serve: {listen: \":8082\"}}\n");
  EXPECT_EQ(c.listen_port, 8082);
  EXPECT_EQ(c.default_spec.limits.memory_bytes, kGiB);
  c = config_ok("&root\n{sandbox: {pids_limit: 7}, serve: {}}\n");
  EXPECT_EQ(c.default_spec.limits.pids, 7u);
  std::string msg = config_error("{serve: {},\n sandbox: {pids_limit: x}}\n");
  EXPECT_NE(msg.find("sandbox.pids_limit"), std::string::npos) << msg;
}

TEST(DaemonConfig, AnchorsAcrossSections) {
  // An alias in sandbox: to an anchor under serve:.
  DaemonConfig c = config_ok("serve:\n  request_timeout: &t 45s\nsandbox:\n  timeout: *t\n");
  EXPECT_EQ(c.request_timeout_ms, 45'000);
  EXPECT_EQ(c.default_spec.limits.timeout, milliseconds(45'000));
  // An error next to such an alias names the file's own line too.
  expect_prefix(config_error("serve:\n  request_timeout: &t 45s\nsandbox:\n  timeout: *t\n"
                             "  memory_limit: 2GG\n"),
                "serve.yaml:5: sandbox.memory_limit: invalid size \"");
}

// serve.self_check (T3): on by default, on/off (or true/false), nothing else.
TEST(DaemonConfig, SelfCheckIsOnByDefaultAndTakesOnOrOff) {
  auto def = parse_daemon_config("serve:\n  request_timeout: 30s\n", "serve.yaml");
  ASSERT_TRUE(def.has_value()) << def.error().message;
  EXPECT_TRUE(def->self_check);
  auto off = parse_daemon_config("serve:\n  self_check: off\n", "serve.yaml");
  ASSERT_TRUE(off.has_value()) << off.error().message;
  EXPECT_FALSE(off->self_check);
  expect_prefix(config_error("serve:\n  self_check: sometimes\n"),
                "serve.yaml:2: serve.self_check: ");
}

TEST(DaemonConfig, UnknownKeysNameKeyAndLine) {
  EXPECT_EQ(config_error("serve:\n  listen: \":1\"\n  lisen: \":2\"\n"),
            "serve.yaml:3: serve.lisen: unknown key (did you mean listen?)");
  EXPECT_EQ(config_error("serve:\n  capacity:\n    memroy: 1Gi\n"),
            "serve.yaml:3: serve.capacity.memroy: unknown key (did you mean memory?)");
  EXPECT_EQ(config_error("serve:\n  memory: 1Gi\n"),
            "serve.yaml:2: serve.memory: unknown key (did you mean serve.capacity.memory?)");
  EXPECT_EQ(config_error("serve:\n  api_keys:\n    hashes: []\n"),
            "serve.yaml:3: serve.api_keys.hashes: unknown key (did you mean sha256?)");
  EXPECT_EQ(
      config_error("serve:\n  zzz: 1\n"),
      "serve.yaml:2: serve.zzz: unknown key (hint: the keys allowed here are: listen, "
      "socket, data_dir, api_keys, capacity, request_timeout, setup_timeout, max_exec_output, "
      "max_upload, mount_roots, durability, network, secrets, audit, connections, object_store, "
      "tasks, volumes, snapshots, diagnostics, self_check, pools, e2b, state, state_url_file, "
      "node, cluster_key_file, images)");
  std::string msg = config_error("serve:\n  memory_limit: 1Gi\n");
  expect_prefix(msg, "serve.yaml:2: serve.memory_limit: is a sandbox setting: put it in the top");
  EXPECT_EQ(config_error("server:\n  listen: \":1\"\n"),
            "serve.yaml:1: server: unknown key (did you mean serve?)");
  EXPECT_EQ(config_error("serve: {}\nfoo: 1\n"),
            "serve.yaml:2: foo: unknown key (hint: the keys allowed here are: serve, sandbox)");
  msg = config_error("memory_limit: 1Gi\n");
  expect_prefix(msg, "serve.yaml:1: memory_limit: belongs inside the san");
  msg = config_error("listen: \":1\"\n");
  expect_prefix(msg, "serve.yaml:1: listen: belongs inside the serve");
  EXPECT_EQ(config_error("serve:\n  listen: \":1\"\n  listen: \":2\"\n"),
            "serve.yaml:3: serve.listen: duplicate key (each key may appear once in a map)");
  EXPECT_EQ(config_error("serve: {}\nserve: {}\n"),
            "serve.yaml:2: serve: duplicate key (each key may appear once in a map)");
  msg = config_error("serve:\n  \"\\e[31m\": 1\n");
  EXPECT_EQ(msg.find('\x1b'), std::string::npos) << msg;
}

TEST(DaemonConfig, WrongTypesNameKeyAndLine) {
  EXPECT_EQ(config_error("- a\n"),
            "serve.yaml:1: expected a map with serve: and sandbox:, found a list");
  EXPECT_EQ(config_error("serve: [1]\n"),
            "serve.yaml:1: serve: expected a map of daemon settings, found a list");
  EXPECT_NE(config_error("serve:\n  listen: [::1]:7070\n").find("quote an IPv6 listen address"),
            std::string::npos);
  expect_prefix(config_error("serve:\n  listen: [\"::1\"]:7070\n"),
                "serve.yaml:2: invalid YAML: end of map n");
  EXPECT_EQ(config_error("serve:\n  listen: [1, 2]\n"),
            "serve.yaml:2: serve.listen: expected an address such as \"127.0.0.1:7070\" (quote "
            "IPv6: \"[::1]:7070\"), found a list");
  EXPECT_EQ(config_error("serve:\n  capacity: 5\n"),
            "serve.yaml:2: serve.capacity: expected a map (max_sandboxes, memory, disk), found "
            "the value \"5\"");
  EXPECT_EQ(config_error("serve:\n  request_timeout: {a: 1}\n"),
            "serve.yaml:2: serve.request_timeout: expected a duration (30s, 2m), found a map");
  EXPECT_EQ(config_error("serve:\n  api_keys:\n    sha256: abc\n"),
            "serve.yaml:3: serve.api_keys.sha256: expected a list of SHA-256 digests (64 hex "
            "digits) (use [] for none), found the value \"abc\"");
  EXPECT_EQ(config_error("serve:\n  api_keys:\n    files:\n      - [a]\n"),
            "serve.yaml:4: serve.api_keys.files[0]: expected key file paths, found a list");
  EXPECT_EQ(config_error("serve:\n  capacity:\n    memory:\n"),
            "serve.yaml:3: serve.capacity.memory: expected a size (512Mi, 8Gi) or auto, found "
            "no value");
  EXPECT_EQ(
      config_error("serve:\n  api_keys: [a]\n"),
      "serve.yaml:2: serve.api_keys: expected a map (sha256, files, namespaces), found a list");
}

TEST(DaemonConfig, BadValuesNameKeyAndLine) {
  std::string msg = config_error("serve:\n  listen: localhost:7070\n");
  expect_prefix(msg,
                "serve.yaml:2: serve.listen: invalid listen address \"localhost:7070\": the h");
  msg = config_error("serve:\n  capacity:\n    max_sandboxes: 0\n");
  expect_prefix(msg, "serve.yaml:3: serve.capacity.max_sandboxes:");
  msg = config_error("serve:\n  capacity:\n    disk: 12XB\n");
  expect_prefix(msg, "serve.yaml:3: serve.capacity.disk: invalid size \"12XB\"");
  msg = config_error("serve:\n  request_timeout: -1\n");
  expect_prefix(msg, "serve.yaml:2: serve.request_timeout: ");
  msg = config_error("serve:\n  max_exec_output: 0\n");
  expect_prefix(msg, "serve.yaml:2: serve.max_exec_output: ");
  msg = config_error("serve:\n  socket: corral.sock\n");
  EXPECT_NE(msg.find("serve.yaml:2: serve.socket: \"corral.sock\" is not an absolute path"),
            std::string::npos)
      << msg;
  msg = config_error("serve:\n  socket: /" + std::string(120, 's') + "\n");
  EXPECT_NE(msg.find("at most 107 bytes"), std::string::npos) << msg;
  msg = config_error("serve:\n  data_dir: var/lib\n");
  expect_prefix(msg, "serve.yaml:2: serve.data_dir: \"var/lib\" is not an absol");
  msg = config_error("serve:\n  api_keys:\n    sha256:\n      - " + std::string(64, 'a') +
                     "\n      - xyz\n");
  expect_prefix(msg, "serve.yaml:5: serve.api_keys.sha256[1]: \"xyz\" is not a SHA-256");
  msg = config_error("serve:\n  api_keys:\n    files: [\"\"]\n");
  expect_prefix(msg, "serve.yaml:3: serve.api_keys.files[0]: \"");
}

TEST(DaemonConfig, HostileYamlIsRefusedQuickly) {
  EXPECT_NE(config_error("serve: {}\n---\nsandbox: {}\n").find("a second YAML document"),
            std::string::npos);
  for (std::string_view stray : {",", ",\nserve: {}\n", "serve: {}\n---\n,\n"}) {
    std::string msg = config_error(stray);
    EXPECT_NE(msg.find("invalid YAML: unexpected character"), std::string::npos) << msg;
  }
  std::string deep = config_error(std::string(3000, '[') + std::string(3000, ']'));
  EXPECT_NE(deep.find("serve.yaml"), std::string::npos) << deep;

  // A billion laughs: every walk stops at the first value of a wrong type.
  std::string bomb = "serve:\n  api_keys:\n    files:\n      - &a [x, x, x, x, x, x, x, x, x]\n";
  std::string prev = "a";
  for (char name = 'b'; name <= 'j'; ++name) {
    bomb += "      - &" + std::string(1, name) + " [";
    for (int i = 0; i < 9; ++i) bomb += (i ? ", *" : "*") + prev;
    bomb += "]\n";
    prev = std::string(1, name);
  }
  EXPECT_NE(config_error(bomb).find("serve.api_keys.files[0]: expected key file paths, found a "
                                    "list"),
            std::string::npos);
  std::string laughs = "laughs:\n  a: &a [x, x, x, x, x, x, x, x, x]\n";
  prev = "a";
  for (char name = 'b'; name <= 'j'; ++name) {
    laughs += "  " + std::string(1, name) + ": &" + std::string(1, name) + " [";
    for (int i = 0; i < 9; ++i) laughs += (i ? ", *" : "*") + prev;
    laughs += "]\n";
    prev = std::string(1, name);
  }
  std::string msg = config_error(laughs + "sandbox:\n  env: *j\n");
  EXPECT_NE(msg.find("serve.yaml:1: laughs: unknown key"), std::string::npos) << msg;
  std::string nested = "serve:\n  zz:\n";
  for (std::size_t at = 0; at < laughs.size();) {
    std::size_t nl = laughs.find('\n', at);
    nested += "    " + laughs.substr(at, nl + 1 - at);
    at = nl + 1;
  }
  msg = config_error(nested + "sandbox:\n  env: *j\n");
  EXPECT_NE(msg.find("serve.yaml:2: serve.zz: unknown key"), std::string::npos) << msg;
}

TEST(DaemonConfig, ParseListen) {
  struct Ok {
    std::string_view text;
    std::string_view host;
    std::uint16_t port;
  };
  for (const Ok& ok : {Ok{"127.0.0.1:7070", "127.0.0.1", 7070}, Ok{":7070", "127.0.0.1", 7070},
                       Ok{"[::1]:7070", "::1", 7070}, Ok{"0.0.0.0:80", "0.0.0.0", 80},
                       Ok{"[::]:65535", "::", 65535}, Ok{"10.1.2.3:0", "10.1.2.3", 0},
                       Ok{"[fe80::1:2]:1", "fe80::1:2", 1}}) {
    auto parsed = parse_listen(ok.text);
    ASSERT_TRUE(parsed.has_value()) << ok.text << ": " << parsed.error().message;
    EXPECT_EQ(parsed->first, ok.host);
    EXPECT_EQ(parsed->second, ok.port);
  }
  for (std::string_view bad : {"",
                               "7070",
                               ":",
                               "127.0.0.1",
                               "127.0.0.1:",
                               "127.0.0.1:65536",
                               "127.0.0.1:99999999",
                               "127.0.0.1:-1",
                               "127.0.0.1:+80",
                               "127.0.0.1:80 ",
                               " 127.0.0.1:80",
                               "::1:7070",
                               "[::1]",
                               "[::1]7070",
                               "[::1:7070",
                               "[127.0.0.1]:80",
                               "localhost:80",
                               "1.2.3:80",
                               "1.2.3.4.5:80",
                               "[::1%lo]:80",
                               "example.com:443"}) {
    auto parsed = parse_listen(bad);
    EXPECT_FALSE(parsed.has_value()) << bad;
    if (!parsed) {
      EXPECT_EQ(parsed.error().code, ErrorCode::kInvalidArgument);
      EXPECT_NE(parsed.error().message.find("invalid listen address"), std::string::npos);
    }
  }
  EXPECT_NE(parse_listen("::1:7070").error().hint.find("[::1]:7070"), std::string::npos);
}

TEST(DaemonConfig, MeminfoAndCapacity) {
  constexpr std::string_view kMeminfo =
      "MemTotal:       16777216 kB\nMemFree:         1000 kB\nSwapTotal: 0 kB\n";
  auto total = parse_meminfo_total(kMeminfo);
  ASSERT_TRUE(total.has_value());
  EXPECT_EQ(*total, 16 * kGiB);
  EXPECT_FALSE(parse_meminfo_total("MemFree: 1 kB\n").has_value());
  EXPECT_FALSE(parse_meminfo_total("MemTotal: x kB\n").has_value());
  EXPECT_FALSE(parse_meminfo_total("MemTotal: 12 MB\n").has_value());
  EXPECT_FALSE(parse_meminfo_total("MemTotal: 0 kB\n").has_value());
  EXPECT_FALSE(parse_meminfo_total("MemTotal: 99999999999999999999 kB\n").has_value());

  DaemonConfig c = default_daemon_config();
  ASSERT_TRUE(resolve_capacity(c, 16 * kGiB).has_value());
  EXPECT_EQ(c.max_memory_bytes, 12 * kGiB);
  EXPECT_EQ(c.max_disk_bytes, 8 * kGiB);
  // Computed values are only the defaults.
  c = default_daemon_config();
  c.max_memory_bytes = 5 * kGiB;
  ASSERT_TRUE(resolve_capacity(c, 16 * kGiB).has_value());
  EXPECT_EQ(c.max_memory_bytes, 5 * kGiB);
  EXPECT_EQ(c.max_disk_bytes, 8 * kGiB);
  // An odd total: 75% rounded down, no overflow near the top.
  c = default_daemon_config();
  c.default_spec.limits.memory_bytes = 1;
  c.default_spec.limits.disk_bytes = 1;
  ASSERT_TRUE(resolve_capacity(c, UINT64_MAX).has_value());
  EXPECT_EQ(c.max_memory_bytes, UINT64_MAX / 4 * 3 + 2);
  EXPECT_EQ(c.max_disk_bytes, UINT64_MAX / 2);

  // One default sandbox must fit.
  c = default_daemon_config();
  auto st = resolve_capacity(c, 2 * kGiB);  // 1.5Gi of memory for 2Gi sandboxes
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message.find("memory_limit (2Gi)"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().hint.find("serve.capacity.memory"), std::string::npos);
  c = default_daemon_config();
  c.max_memory_bytes = 4 * kGiB;
  st = resolve_capacity(c, 2 * kGiB);  // 1Gi of disk for 2Gi layers
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message.find("disk_limit (2Gi)"), std::string::npos);
  c = default_daemon_config();
  EXPECT_FALSE(resolve_capacity(c, 0).has_value());
  c.max_memory_bytes = 4 * kGiB;
  c.max_disk_bytes = 4 * kGiB;
  EXPECT_TRUE(resolve_capacity(c, 0).has_value());

  // This host's /proc/meminfo.
  c = default_daemon_config();
  c.default_spec.limits.memory_bytes = 1;
  c.default_spec.limits.disk_bytes = 1;
  auto host = resolve_capacity(c);
  ASSERT_TRUE(host.has_value()) << host.error().to_string();
  EXPECT_GT(c.max_memory_bytes, c.max_disk_bytes);
  EXPECT_GT(c.max_disk_bytes, 0u);
}

TEST(DaemonConfig, LoadFromFile) {
  config_test::TempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  const std::string dir = tmp.path();
  const std::string path = dir + "/serve.yaml";
  {
    std::ofstream out(path);
    out << "serve:\n  listen: \":7272\"\n  api_keys:\n    files: [keys]\n" << kSourceExample;
  }
  auto c = load_daemon_config(path);
  ASSERT_TRUE(c.has_value()) << c.error().to_string();
  EXPECT_EQ(c->listen_port, 7272);
  EXPECT_EQ(c->api_key_files, std::vector<std::string>{dir + "/keys"});
  EXPECT_EQ(c->default_spec.network.mode, "allowlist");
  {
    std::ofstream out(path);
    out << "serve:\n  capacity:\n    memory: lots\n";
  }
  c = load_daemon_config(path);
  ASSERT_FALSE(c.has_value());
  expect_prefix(c.error().message, path + ":3: serve.capacity.memory: invalid size");

  c = load_daemon_config(dir + "/missing.yaml");
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code, ErrorCode::kNotFound);
  EXPECT_NE(c.error().message.find("reading daemon config: open("), std::string::npos);
  c = load_daemon_config(dir);
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().message.find("is not a regular file"), std::string::npos);
  {
    std::ofstream out(path);
    out << "# " << std::string(kMiB, 'x') << "\n";
  }
  c = load_daemon_config(path);
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().message.find("larger than 1 MiB"), std::string::npos);
}

TEST(DaemonConfig, DescribeIsOneLineWithoutSecrets) {
  DaemonConfig c = config_ok("serve:\n  listen: \"[::1]:7070\"\n  api_keys:\n    sha256: [\"" +
                             std::string(64, 'e') +
                             "\"]\n    files: [/etc/corral/api-keys]\n  capacity: {memory: 8Gi}\n");
  std::string line = describe(c);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_NE(line.find("listen [::1]:7070"), std::string::npos) << line;
  EXPECT_NE(line.find("1 digest + file /etc/corral/api-keys"), std::string::npos) << line;
  EXPECT_NE(line.find("memory 8Gi"), std::string::npos) << line;
  EXPECT_NE(line.find("disk auto (50% of RAM)"), std::string::npos) << line;
  EXPECT_NE(line.find("request timeout 30s"), std::string::npos) << line;
  EXPECT_NE(line.find("default sandbox: cpus 2, memory 2Gi"), std::string::npos) << line;
  EXPECT_NE(line.find("lifetime 600s"), std::string::npos) << line;
  EXPECT_EQ(line.find(std::string(64, 'e')), std::string::npos) << "no digests in the log";
}

}  // namespace
}  // namespace corral

namespace corral {
namespace {

TEST(DaemonConfig, MountRootsAndDurability) {
  auto c = parse_daemon_config(
      "serve:\n  mount_roots: [/srv/data, /opt/x]\n  durability: power-loss\n", "serve.yaml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->mount_roots, (std::vector<std::string>{"/srv/data", "/opt/x"}));
  EXPECT_TRUE(c->power_loss_durable);
  EXPECT_FALSE(default_daemon_config().power_loss_durable);
  EXPECT_TRUE(default_daemon_config().mount_roots.empty());
  auto bad = parse_daemon_config("serve:\n  mount_roots: [relative/dir]\n", "serve.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("serve.mount_roots[0]"), std::string::npos)
      << bad.error().message;
  auto bad2 = parse_daemon_config("serve:\n  durability: sometimes\n", "serve.yaml");
  ASSERT_FALSE(bad2);
  EXPECT_NE(bad2.error().message.find("durability"), std::string::npos) << bad2.error().message;
}

// serve.network: the engine's settings and the daemon's own templates.
TEST(DaemonConfig, NetworkSectionSetsTheEngineAndTemplates) {
  auto c = parse_daemon_config(
      "serve:\n"
      "  network:\n"
      "    subnet: 172.30.0.0/20\n"
      "    interface_prefix: sbx\n"
      "    proxy_port: 3129\n"
      "    dns_port: 5353\n"
      "    dns_servers: [10.0.0.2, \"192.168.1.1:5353\"]\n"
      "    templates:\n"
      "      - name: ci-builds\n"
      "        version: 2\n"
      "        allow: [registry.npmjs.org, \"tcp://git.example.com:22\"]\n"
      "        description: npm and git\n",
      "serve.yaml");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->network.subnet, "172.30.0.0/20");
  EXPECT_EQ(c->network.interface_prefix, "sbx");
  EXPECT_EQ(c->network.proxy_port, 3129);
  EXPECT_EQ(c->network.dns_port, 5353);
  EXPECT_EQ(c->network.dns_servers, (std::vector<std::string>{"10.0.0.2", "192.168.1.1:5353"}));
  ASSERT_EQ(c->network.templates.size(), 1u);
  EXPECT_EQ(c->network.templates[0].name, "ci-builds");
  EXPECT_EQ(c->network.templates[0].version, 2);
  EXPECT_EQ(c->network.templates[0].allow.size(), 2u);
  // The default file says what the defaults are.
  auto d = parse_daemon_config(default_daemon_config_yaml(), "default.yaml");
  ASSERT_TRUE(d.has_value()) << d.error().message;
  EXPECT_EQ(d->network.subnet, DaemonConfig{}.network.subnet);
  EXPECT_EQ(d->network.proxy_port, DaemonConfig{}.network.proxy_port);
}

TEST(DaemonConfig, NetworkMistakesNameTheKeyAndLine) {
  EXPECT_NE(config_error("serve:\n  network:\n    subnet: 10.211.0.1/16\n")
                .find("serve.yaml:3: serve.network.subnet"),
            std::string::npos);
  EXPECT_NE(config_error("serve:\n  network:\n    proxy_port: 0\n")
                .find("serve.yaml:3: serve.network.proxy_port"),
            std::string::npos);
  EXPECT_NE(config_error("serve:\n  network:\n    dns_servers: [dns.google]\n")
                .find("serve.network.dns_servers"),
            std::string::npos);
  const std::string bad_rule = config_error(
      "serve:\n  network:\n    templates:\n      - name: x\n        allow: [\"ftp://a.test\"]\n");
  EXPECT_NE(bad_rule.find("serve.network.templates[0].allow"), std::string::npos) << bad_rule;
  EXPECT_NE(bad_rule.find("unknown protocol"), std::string::npos) << bad_rule;
  EXPECT_NE(
      config_error("serve:\n  network:\n    templates:\n      - version: 1\n").find("has no name"),
      std::string::npos);
  EXPECT_NE(config_error("serve:\n  network:\n    cidr: 10.0.0.0/8\n").find("subnet"),
            std::string::npos);
}

TEST(DaemonConfig, AuditSectionSetsRotationRetentionBudgetAndQueue) {
  const DaemonConfig d = default_daemon_config();
  EXPECT_EQ(d.audit.max_file_size, 64 * kMiB);
  EXPECT_EQ(d.audit.keep_files, 16u);
  EXPECT_EQ(d.audit.max_age_ms, 0);
  EXPECT_DOUBLE_EQ(d.audit.sandbox_rate, 20);
  EXPECT_EQ(d.audit.sandbox_burst, 200u);
  EXPECT_EQ(d.audit.summary_interval_ms, 10'000);
  EXPECT_EQ(d.audit.queue, 8192u);
  DaemonConfig c = config_ok(
      "serve:\n  audit:\n    max_file_size: 1Mi\n    keep_files: 0\n    max_age: 720h\n"
      "    sandbox_rate: 0.5\n    sandbox_burst: 10\n    summary_interval: 2s\n"
      "    queue: 100\n");
  EXPECT_EQ(c.audit.max_file_size, kMiB);
  EXPECT_EQ(c.audit.keep_files, 0u);
  EXPECT_EQ(c.audit.max_age_ms, 720LL * 3600 * 1000);
  EXPECT_DOUBLE_EQ(c.audit.sandbox_rate, 0.5);
  EXPECT_EQ(c.audit.sandbox_burst, 10u);
  EXPECT_EQ(c.audit.summary_interval_ms, 2000);
  EXPECT_EQ(c.audit.queue, 100u);
  EXPECT_EQ(config_ok("serve:\n  audit:\n    max_file_size: 0\n").audit.max_file_size, 0u);

  EXPECT_NE(
      config_error("serve:\n  audit:\n    sandbox_rate: 0\n").find("serve.audit.sandbox_rate"),
      std::string::npos);
  EXPECT_NE(config_error("serve:\n  audit:\n    sandbox_rate: -3\n").find("sandbox_rate"),
            std::string::npos);
  EXPECT_NE(config_error("serve:\n  audit:\n    max_file_size: 1Ki\n").find("at least 64Ki"),
            std::string::npos);
  EXPECT_NE(config_error("serve:\n  audit:\n    queue: 3\n").find("at least 64"),
            std::string::npos);
  EXPECT_NE(config_error("serve:\n  audit:\n    rate: 3\n").find("sandbox_rate"),
            std::string::npos);
  EXPECT_NE(config_error("serve:\n  audit: 5\n").find("serve.audit"), std::string::npos);
}

}  // namespace
}  // namespace corral

TEST(DaemonConfig, SecretSourcesAreReadAsPathsAndNames) {
  using corral::parse_daemon_config;
  auto c = parse_daemon_config(
      "serve:\n  secrets:\n    file: /etc/corral/secrets\n    env: [OPENAI_API_KEY]\n"
      "    env_prefix: CORRAL_SECRET_\n    encrypted_file: enc\n    key_file: /k\n",
      "/etc/corral/serve.yaml");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->secrets.file, "/etc/corral/secrets");
  EXPECT_EQ(c->secrets.env, std::vector<std::string>{"OPENAI_API_KEY"});
  EXPECT_EQ(c->secrets.env_prefix, "CORRAL_SECRET_");
  EXPECT_EQ(c->secrets.encrypted_file, "/etc/corral/enc") << "relative to the config file";
  EXPECT_FALSE(parse_daemon_config("serve:\n  secrets:\n    encrypted_file: /e\n", "s.yaml"))
      << "an encrypted file needs its key file";
  EXPECT_FALSE(parse_daemon_config("serve:\n  secrets:\n    env: [\"A-B\"]\n", "s.yaml"));
  EXPECT_FALSE(parse_daemon_config("serve:\n  secrets:\n    values: {a: b}\n", "s.yaml"));
}
