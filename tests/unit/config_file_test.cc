#include "spec/config_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "config_test_support.h"

namespace corral {
namespace {

using config_test::kSourceExample;
using std::chrono::milliseconds;

// Applies `yaml` to a default spec and returns the error message, failing
// the test when the file was accepted.
std::string config_error(std::string_view yaml, SandboxSpec* out = nullptr) {
  SandboxSpec spec;
  Status st = apply_config_yaml(yaml, "config.yaml", spec);
  EXPECT_FALSE(st.has_value()) << "accepted:\n" << yaml;
  if (out != nullptr) *out = spec;
  if (st.has_value()) return {};
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument) << st.error().message;
  return st.error().message;
}

SandboxSpec config_ok(std::string_view yaml) {
  SandboxSpec spec;
  Status st = apply_config_yaml(yaml, "config.yaml", spec);
  EXPECT_TRUE(st.has_value()) << st.error().message << "\nin:\n" << yaml;
  return spec;
}

TEST(config_file, SourceExampleVerbatim) {
  SandboxSpec spec;
  spec.limits.cpus = 7;  // every key of the example must overwrite
  spec.limits.timeout = milliseconds(1);
  ASSERT_TRUE(apply_config_yaml(kSourceExample, "config.yaml", spec).has_value());
  config_test::expect_source_example(spec);
}

TEST(config_file, TopLevelLayout) {
  SandboxSpec spec = config_ok(R"(cpu_limit: 1.5
memory_limit: 512Mi
disk_limit: 1G
inodes_limit: 100000
pids_limit: 64
timeout: 1h30m
max_lifetime: 2h
)");
  EXPECT_DOUBLE_EQ(spec.limits.cpus, 1.5);
  EXPECT_EQ(spec.limits.memory_bytes, 512 * kMiB);
  EXPECT_EQ(spec.limits.disk_bytes, 1000'000'000u);
  EXPECT_EQ(spec.limits.inodes, 100000u);
  EXPECT_EQ(spec.limits.pids, 64u);
  EXPECT_EQ(spec.limits.timeout, milliseconds(5400'000));
  EXPECT_EQ(spec.limits.max_lifetime, milliseconds(7200'000));
}

TEST(config_file, Extensions) {
  SandboxSpec spec = config_ok(R"(sandbox:
  cpu_limit: 500m
  image: python-3.12
  hostname: worker-1
  root: true
  workdir: /workspace/project
  env:
    LANG: C.UTF-8
    EMPTY: ""
    NUMBER: 42
  mounts:
    - ./data:/data
    - ./out:/out:rw
    - {source: "/srv/a:b", target: /ab, writable: true}
    - source: ./cache
      target: /cache/
  network:
    mode: none
)");
  EXPECT_DOUBLE_EQ(spec.limits.cpus, 0.5);
  EXPECT_EQ(spec.image, "python-3.12");
  EXPECT_EQ(spec.hostname, "worker-1");
  EXPECT_TRUE(spec.root);
  EXPECT_EQ(spec.workdir, "/workspace/project");
  ASSERT_EQ(spec.env.size(), 3u);
  EXPECT_EQ(spec.env[0], (std::pair<std::string, std::string>{"LANG", "C.UTF-8"}));
  EXPECT_EQ(spec.env[1], (std::pair<std::string, std::string>{"EMPTY", ""}));
  EXPECT_EQ(spec.env[2], (std::pair<std::string, std::string>{"NUMBER", "42"}));
  ASSERT_EQ(spec.mounts.size(), 4u);
  EXPECT_EQ(spec.mounts[0].source, "./data");
  EXPECT_EQ(spec.mounts[0].target, "/data");
  EXPECT_FALSE(spec.mounts[0].writable);
  EXPECT_TRUE(spec.mounts[1].writable);
  EXPECT_EQ(spec.mounts[2].source, "/srv/a:b");
  EXPECT_EQ(spec.mounts[2].target, "/ab");
  EXPECT_TRUE(spec.mounts[2].writable);
  EXPECT_EQ(spec.mounts[3].target, "/cache");
  EXPECT_FALSE(spec.mounts[3].writable);
  EXPECT_EQ(spec.network.mode, "none");
}

TEST(config_file, AbsentKeysKeepTheirValues) {
  SandboxSpec spec;
  spec.limits.pids = 99;
  spec.image = "keep";
  ASSERT_TRUE(apply_config_yaml("memory_limit: 1Gi\n", "c.yaml", spec).has_value());
  EXPECT_EQ(spec.limits.memory_bytes, kGiB);
  EXPECT_EQ(spec.limits.pids, 99u);
  EXPECT_EQ(spec.image, "keep");
  EXPECT_EQ(spec.limits.cpus, 2.0);
}

TEST(config_file, EmptyAndCommentOnlyFilesChangeNothing) {
  SandboxSpec defaults;
  for (std::string_view text : {"", "# nothing yet\n", "---\n", "sandbox:\n  # cpu_limit: 2\n"}) {
    SandboxSpec spec = config_ok(text);
    EXPECT_EQ(spec.limits.memory_bytes, defaults.limits.memory_bytes);
    EXPECT_EQ(spec.network.mode, "none");
  }
}

TEST(config_file, AnErrorChangesNothing) {
  SandboxSpec spec;
  Status st = apply_config_yaml("memory_limit: 1Gi\npids_limit: lots\n", "c.yaml", spec);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(spec.limits.memory_bytes, 2 * kGiB);
}

TEST(config_file, NetworkModes) {
  EXPECT_EQ(config_ok("network:\n  default: deny\n").network.mode, "none");
  EXPECT_EQ(config_ok("network:\n  default: deny\n  allow_domains: []\n").network.mode, "none");
  SandboxSpec allow = config_ok("network:\n  default: deny\n  allow_domains: [pypi.org]\n");
  EXPECT_EQ(allow.network.mode, "allowlist");
  EXPECT_EQ(allow.network.allow_domains, (std::vector<std::string>{"pypi.org"}));
  EXPECT_EQ(config_ok("network:\n  default: allow\n").network.mode, "open");
  EXPECT_EQ(config_ok("network:\n  mode: open\n").network.mode, "open");
  EXPECT_EQ(config_ok("network:\n  allow_domains: ['*.example.com']\n").network.mode, "allowlist");
  EXPECT_EQ(config_ok("network:\n  mode: allowlist\n  allow_domains: [a.io]\n").network.mode,
            "allowlist");
  EXPECT_EQ(config_ok("network:\n  mode: none\n  default: deny\n").network.mode, "none");
  EXPECT_EQ(config_ok("network:\n  dns_servers: ['::1', 1.1.1.1]\n").network.dns_servers.size(),
            2u);
  // A mode that admits no list clears one from an earlier layer.
  SandboxSpec layered;
  layered.network.mode = "allowlist";
  layered.network.allow_domains = {"pypi.org"};
  ASSERT_TRUE(apply_config_yaml("network:\n  mode: none\n", "c.yaml", layered).has_value());
  EXPECT_EQ(layered.network.mode, "none");
  EXPECT_TRUE(layered.network.allow_domains.empty());
}

TEST(config_file, NetworkErrors) {
  EXPECT_EQ(config_error("network:\n  default: maybe\n"),
            "config.yaml:2: network.default: expected deny or allow, found \"maybe\"");
  EXPECT_EQ(config_error("network:\n  mode: half\n"),
            "config.yaml:2: network.mode: expected none, allowlist or open, found \"half\"");
  EXPECT_EQ(config_error("network:\n  default: allow\n  mode: none\n"),
            "config.yaml:3: network.mode: mode none contradicts default: allow on line 2");
  EXPECT_EQ(config_error("network:\n  mode: allowlist\n"),
            "config.yaml:2: network.mode: allowlist needs at least one entry in allow_domains");
  EXPECT_EQ(config_error("network:\n  mode: none\n  allow_domains: [pypi.org]\n"),
            "config.yaml:3: network.allow_domains: lists domains, but the network mode is none "
            "(no network)");
  EXPECT_EQ(config_error("network:\n  default: allow\n  allow_domains: [pypi.org]\n"),
            "config.yaml:3: network.allow_domains: lists domains, but the network mode is open "
            "(every domain is reachable)");
  EXPECT_EQ(config_error("network:\n  allow_domains:\n    - pypi.org\n    - bad_domain!\n"),
            "config.yaml:4: network.allow_domains[1]: invalid domain \"bad_domain!\": expected a "
            "name such as pypi.org or *.example.com");
  EXPECT_EQ(config_error("network:\n  dns_servers: [10.0.0.300]\n"),
            "config.yaml:2: network.dns_servers[0]: invalid DNS server \"10.0.0.300\": expected "
            "an IPv4 or IPv6 address such as 10.0.0.53");
  EXPECT_EQ(config_error("network:\n  allow_domains: pypi.org\n"),
            "config.yaml:2: network.allow_domains: expected a list of domain names (use [] for "
            "none), found the value \"pypi.org\"");
  EXPECT_EQ(config_error("network:\n  allow_domains: [[a]]\n"),
            "config.yaml:2: network.allow_domains[0]: expected domain names, found a list");
  EXPECT_EQ(config_error("network: none\n"),
            "config.yaml:1: network: expected a map (default, allow_domains, ...), found the "
            "value \"none\"");
}

TEST(config_file, UnknownKeyNamesPathLineAndSuggestion) {
  EXPECT_EQ(config_error("sandbox:\n  cpu_limit: 2\n  memroy_limit: 1Gi\n"),
            "config.yaml:3: sandbox.memroy_limit: unknown key (did you mean memory_limit?)");
  EXPECT_EQ(config_error("cpu_limit: 2\n\n\nmemory_limt: 1Gi\n"),
            "config.yaml:4: memory_limt: unknown key (did you mean memory_limit?)");
  EXPECT_EQ(config_error("memory: 1Gi\n"),
            "config.yaml:1: memory: unknown key (did you mean memory_limit?)");
  EXPECT_EQ(config_error("sandbox:\n  network:\n    defualt: deny\n"),
            "config.yaml:3: sandbox.network.defualt: unknown key (did you mean default?)");
  EXPECT_EQ(config_error("allow_domains: [pypi.org]\n"),
            "config.yaml:1: allow_domains: unknown key (did you mean network.allow_domains?)");
  EXPECT_EQ(config_error("sandbx:\n  cpu_limit: 2\n"),
            "config.yaml:1: sandbx: unknown key (did you mean sandbox?)");
  EXPECT_EQ(config_error("mounts:\n  - {src: a, target: /a}\n"),
            "config.yaml:2: mounts[0].src: unknown key (did you mean source?)");

  SandboxSpec spec;
  Status st = apply_config_yaml("zzzzzz: 1\n", "c.yaml", spec);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().message, "c.yaml:1: zzzzzz: unknown key");
  EXPECT_NE(st.error().hint.find("memory_limit"), std::string::npos);
}

TEST(config_file, SettingsBesideTheSandboxMap) {
  EXPECT_EQ(config_error("sandbox:\n  cpu_limit: 2\nmemory_limit: 1Gi\n"),
            "config.yaml:3: memory_limit: belongs inside the sandbox: map (this file uses the "
            "sandbox: layout)");
  EXPECT_EQ(config_error("sandbox:\n  cpu_limit: 2\nmemroy_limit: 1Gi\n"),
            "config.yaml:3: memroy_limit: unknown key (did you mean sandbox.memory_limit?)");
  EXPECT_EQ(config_error("sandbox: 2\n"),
            "config.yaml:1: sandbox: expected a map of settings, found the value \"2\"");
}

TEST(config_file, WrongTypesNameKeyAndLine) {
  EXPECT_EQ(config_error("sandbox:\n  memory_limit:\n    size: 2Gi\n"),
            "config.yaml:2: sandbox.memory_limit: expected a size (512Mi, 2Gi), found a map");
  EXPECT_EQ(config_error("cpu_limit: [1, 2]\n"),
            "config.yaml:1: cpu_limit: expected a number of CPUs (2, 1.5, 500m), found a list");
  EXPECT_EQ(config_error("pids_limit:\n"),
            "config.yaml:1: pids_limit: expected a number of processes, found no value");
  EXPECT_EQ(config_error("root: yes\n"),
            "config.yaml:1: root: expected true or false, found \"yes\"");
  EXPECT_EQ(config_error("env: [A=1]\n"),
            "config.yaml:1: env: expected a map of NAME: value (use {} for none), found a list");
  EXPECT_EQ(config_error("env:\n  A: [1]\n"),
            "config.yaml:2: env.A: expected a string (write \"\" for an empty value), found a "
            "list");
  EXPECT_EQ(config_error("env:\n  A:\n"),
            "config.yaml:2: env.A: expected a string (write \"\" for an empty value), found no "
            "value");
  EXPECT_EQ(config_error("mounts: ./a:/a\n"),
            "config.yaml:1: mounts: expected a list of mounts (use [] for none), found the value "
            "\"./a:/a\"");
  EXPECT_EQ(config_error("mounts:\n  - [a, b]\n"),
            "config.yaml:2: mounts[0]: expected \"SRC:DST[:ro|:rw]\" or a map {source, target, "
            "writable}, found a list");
  EXPECT_EQ(config_error("- cpu_limit: 2\n"),
            "config.yaml:1: expected a map of settings (such as memory_limit: 2Gi), found a list");
  EXPECT_EQ(config_error("just text\n"),
            "config.yaml:1: expected a map of settings (such as memory_limit: 2Gi), found the "
            "value \"just text\"");
  EXPECT_EQ(config_error("[a]: 1\n"),
            "config.yaml:1: (top level): keys must be plain names, found a list");
}

TEST(config_file, BadValuesCarryTheParserMessage) {
  EXPECT_EQ(config_error("sandbox:\n  cpu_limit: \"2\"\n  memory_limit: \"2GG\"\n"),
            "config.yaml:3: sandbox.memory_limit: invalid size \"2GG\": expected a number with "
            "an optional unit (512Mi, 2Gi, 1G)");
  EXPECT_EQ(config_error("timeout: 5x\n"),
            "config.yaml:1: timeout: invalid duration \"5x\": expected a number of seconds (300) "
            "or h/m/s/ms components (1h30m, 5m, 300s, 250ms)");
  EXPECT_EQ(config_error("\ncpu_limit: 0\n"),
            "config.yaml:2: cpu_limit: invalid CPU count \"0\": must be more than 0 and at most "
            "1024");
  EXPECT_EQ(config_error("pids_limit: -1\n"),
            "config.yaml:1: pids_limit: invalid count \"-1\": must be greater than zero");
  EXPECT_EQ(config_error("inodes_limit: 1.5\n"),
            "config.yaml:1: inodes_limit: invalid count \"1.5\": expected a whole number greater "
            "than zero");
  EXPECT_EQ(config_error("disk_limit: 1.5\n").substr(0, 47),
            "config.yaml:1: disk_limit: invalid size \"1.5\": ");
  EXPECT_EQ(config_error("hostname: bad_host\n"),
            "config.yaml:1: hostname: invalid host name \"bad_host\": expected at most 64 "
            "letters, digits, '-' and '.'");
  EXPECT_NE(config_error("hostname: " + std::string(65, 'a') + "\n").find("invalid host name"),
            std::string::npos);
  EXPECT_EQ(config_error("workdir: work\n"),
            "config.yaml:1: workdir: \"work\" is not an absolute path");
  EXPECT_EQ(config_error("workdir: /a/../b\n"),
            "config.yaml:1: workdir: \"/a/../b\" contains a \"..\" component");
  EXPECT_EQ(config_error("image: \"\"\n"), "config.yaml:1: image: invalid image name \"\"");
  EXPECT_EQ(config_error("env:\n  1BAD: x\n"),
            "config.yaml:2: env.1BAD: invalid variable name: it must start with a letter or '_' "
            "and contain only letters, digits and '_'");
}

TEST(config_file, MountErrors) {
  EXPECT_EQ(config_error("mounts:\n  - ./a:/proc/x\n"),
            "config.yaml:2: mounts[0]: invalid mount \"./a:/proc/x\": target \"/proc/x\" is "
            "inside /proc, which corral sets up itself");
  EXPECT_EQ(config_error("mounts:\n  - source: a\n    target: relative\n"),
            "config.yaml:3: mounts[0].target: target \"relative\" is not an absolute path");
  EXPECT_EQ(config_error("mounts:\n  - source: a\n"),
            "config.yaml:2: mounts[0]: missing target (a mount needs source and target)");
  EXPECT_EQ(config_error("mounts:\n  - target: /a\n"),
            "config.yaml:2: mounts[0]: missing source (a mount needs source and target)");
  EXPECT_EQ(config_error("mounts:\n  - {source: a, target: /a, writable: 1}\n"),
            "config.yaml:2: mounts[0].writable: expected true or false, found \"1\"");
  EXPECT_EQ(config_error("mounts:\n  - a:/x\n  - b:/x/\n"),
            "config.yaml:3: mounts[1]: a second mount on \"/x\"");
  EXPECT_EQ(config_error("mounts:\n  -\n"),
            "config.yaml:1: mounts[0]: expected \"SRC:DST[:ro|:rw]\" or a map {source, target, "
            "writable}, found no value");
}

TEST(config_file, DuplicateKeys) {
  EXPECT_EQ(config_error("cpu_limit: 1\nmemory_limit: 1Gi\ncpu_limit: 2\n"),
            "config.yaml:3: cpu_limit: duplicate key (each key may appear once in a map)");
  EXPECT_EQ(config_error("sandbox:\n  network:\n    default: deny\n    default: allow\n"),
            "config.yaml:4: sandbox.network.default: duplicate key (each key may appear once in "
            "a map)");
  EXPECT_EQ(config_error("env: {A: 1, A: 2}\n"),
            "config.yaml:1: env.A: duplicate key (each key may appear once in a map)");
  EXPECT_EQ(config_error("sandbox: {}\nsandbox: {}\n"),
            "config.yaml:2: sandbox: duplicate key (each key may appear once in a map)");
}

TEST(config_file, SyntaxErrorsCarryTheLine) {
  std::string msg = config_error("cpu_limit: 2\nnetwork:\n  allow_domains: [a.org\n");
  EXPECT_EQ(msg.rfind("config.yaml:", 0), 0u) << msg;
  EXPECT_NE(msg.find("invalid YAML: "), std::string::npos) << msg;
  std::string tab = config_error("a: 1\n\tb: 2\n");
  EXPECT_NE(tab.find("invalid YAML"), std::string::npos) << tab;

  std::string two_docs = config_error("cpu_limit: 1\n---\ncpu_limit: 2\n");
  EXPECT_EQ(two_docs, "config.yaml:2: a second YAML document; a config file holds one");

  // yaml-cpp 0.7 would loop forever (LoadAll) or stop silently (Load) at a
  // stray ',' between documents.
  for (std::string_view stray : {",", ",\ncpu_limit: 2\n", "cpu_limit: 2\n---\n,\n", "---\n,\n"}) {
    std::string msg = config_error(stray);
    EXPECT_NE(msg.find("invalid YAML: unexpected character"), std::string::npos) << msg;
  }
  EXPECT_EQ(config_error("\n\n  ,\n"),
            "config.yaml:3: invalid YAML: unexpected character at column 3");

  std::string deep = config_error(std::string(3000, '[') + std::string(3000, ']'));
  EXPECT_NE(deep.find("config.yaml"), std::string::npos) << deep;
}

TEST(config_file, HostileTextIsQuotedSafely) {
  std::string msg = config_error("memory_limit: \"\\e[31m2GG\"\n");
  EXPECT_EQ(msg.find('\x1b'), std::string::npos) << msg;
  EXPECT_NE(msg.find("\\x1b"), std::string::npos) << msg;

  // Keys that are not plain names are quoted in the key path.
  EXPECT_EQ(config_error("\"a\\nb\": 1\n"), "config.yaml:1: \"a\\x0ab\": unknown key");
  EXPECT_EQ(config_error("env:\n  \"my var\": 1\n"),
            "config.yaml:2: env.\"my var\": invalid variable name: it must start with a letter or "
            "'_' and contain only letters, digits and '_'");
}

// --- apply_config_file ---

class ConfigFileOnDisk : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.empty()); }
  std::string write(const std::string& name, const std::string& text) {
    return tmp_.write(name, text);
  }
  config_test::TempDir tmp_;
  const std::string dir_ = tmp_.path();
};
// Named like the file, so that `ctest -R config_file` selects these tests.
using config_file_on_disk = ConfigFileOnDisk;

TEST_F(config_file_on_disk, ReadsAndNamesTheFile) {
  SandboxSpec spec;
  std::string path = write("ok.yaml", std::string(kSourceExample));
  ASSERT_TRUE(apply_config_file(path, spec).has_value());
  EXPECT_EQ(spec.network.mode, "allowlist");

  std::string bad = write("bad.yaml", "\n\nsandbox:\n  pids: 5\n");
  Status st = apply_config_file(bad, spec);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().message, bad + ":4: sandbox.pids: unknown key (did you mean pids_limit?)");
}

TEST_F(config_file_on_disk, MissingFile) {
  SandboxSpec spec;
  std::string path = dir_ + "/absent.yaml";
  Status st = apply_config_file(path, spec);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kNotFound);
  EXPECT_NE(st.error().message.find(path), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("ENOENT"), std::string::npos) << st.error().message;
}

TEST_F(config_file_on_disk, RefusesLargeFiles) {
  SandboxSpec spec;
  std::string big = write("big.yaml", "# " + std::string(1024 * 1024, 'x') + "\n");
  Status st = apply_config_file(big, spec);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(st.error().message.find(big), std::string::npos);
  EXPECT_NE(st.error().message.find("larger than 1 MiB"), std::string::npos);

  // Exactly 1 MiB is accepted.
  std::string edge = write("edge.yaml", "#" + std::string(1024 * 1024 - 2, 'x') + "\n");
  EXPECT_TRUE(apply_config_file(edge, spec).has_value());
}

TEST_F(config_file_on_disk, RefusesNonRegularFiles) {
  SandboxSpec spec;
  Status dir = apply_config_file(dir_, spec);
  ASSERT_FALSE(dir.has_value());
  EXPECT_NE(dir.error().message.find("is not a regular file"), std::string::npos);
  EXPECT_NE(dir.error().message.find(dir_), std::string::npos);

  EXPECT_FALSE(apply_config_file("/dev/null", spec).has_value());

  std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  Status st = apply_config_file(fifo, spec);  // must not block
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message.find("is not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace corral
