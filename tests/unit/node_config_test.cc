// serve.state, serve.state_url_file and serve.node (issue 18, docs/config.md
// "state and node"): what is accepted, what is refused with the key named,
// and what a daemon takes from them at start (daemon/node_setup.h).
#include <gtest/gtest.h>

#include <fstream>

#include "daemon/daemon_config.h"
#include "daemon/node_config_yaml.h"
#include "daemon/node_setup.h"
#include "support/temp_dir.h"

namespace corral {
namespace {

DaemonConfig config_ok(std::string_view yaml) {
  auto config = parse_daemon_config(yaml, "serve.yaml");
  EXPECT_TRUE(config.has_value()) << config.error().to_string() << "\nin:\n" << yaml;
  return config.has_value() ? *config : DaemonConfig{};
}

std::string config_error(std::string_view yaml) {
  auto config = parse_daemon_config(yaml, "serve.yaml");
  EXPECT_FALSE(config.has_value()) << "accepted:\n" << yaml;
  return config.has_value() ? std::string() : config.error().to_string();
}

TEST(NodeConfig, DefaultsAreAFleetOfOneOnTheDataDirsSqliteFile) {
  const DaemonConfig d = default_daemon_config();
  EXPECT_TRUE(d.state.empty());
  EXPECT_TRUE(d.node.id.empty());
  EXPECT_EQ(d.node.heartbeat_interval_ms, 2'000);
  EXPECT_EQ(d.node.lost_after_ms, 15'000);
  DaemonConfig c = d;
  c.data_dir = "/srv/corral";
  EXPECT_EQ(*daemon::state_location(c), "/srv/corral/state.db");
}

TEST(NodeConfig, StateIsAnAbsolutePathOrAPostgresUrl) {
  EXPECT_EQ(config_ok("serve:\n  state: /var/lib/x/state.db\n").state, "/var/lib/x/state.db");
  EXPECT_EQ(config_ok("serve:\n  state: postgres://corral@db:5432/corral\n").state,
            "postgres://corral@db:5432/corral");
  EXPECT_EQ(config_ok("serve:\n  state: \"postgresql://db/corral?sslmode=require\"\n").state,
            "postgresql://db/corral?sslmode=require");
  for (const char* bad : {"state.db", "mysql://db/corral", "/var/lib/", "\"\""}) {
    const std::string msg = config_error(std::string("serve:\n  state: ") + bad + "\n");
    EXPECT_NE(msg.find("serve.state"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find("postgres://"), std::string::npos) << msg;
  }
}

TEST(NodeConfig, NodeSettingsAreReadAndCheckedTogether) {
  DaemonConfig c = config_ok(
      "serve:\n  node:\n    id: node-a\n    address: 10.0.0.5:7070\n"
      "    labels: {zone: eu-1, gpu: \"no\"}\n    heartbeat_interval: 500ms\n"
      "    lost_after: 5s\n");
  EXPECT_EQ(c.node.id, "node-a");
  EXPECT_EQ(c.node.address, "10.0.0.5:7070");
  EXPECT_EQ(c.node.labels.at("zone"), "eu-1");
  EXPECT_EQ(c.node.labels.at("gpu"), "no");
  EXPECT_EQ(c.node.heartbeat_interval_ms, 500);
  EXPECT_EQ(c.node.lost_after_ms, 5'000);
  EXPECT_EQ(config_ok("serve:\n  node:\n    address: \"[fd00::5]:7070\"\n").node.address,
            "[fd00::5]:7070");

  EXPECT_NE(config_error("serve:\n  node:\n    id: Node_A\n").find("serve.node.id"),
            std::string::npos);
  EXPECT_NE(config_error("serve:\n  node:\n    address: node-b.fleet:7070\n").find("IP address"),
            std::string::npos);
  EXPECT_NE(config_error("serve:\n  node:\n    address: 10.0.0.5\n").find("serve.node.address"),
            std::string::npos);
  EXPECT_NE(config_error("serve:\n  node:\n    address: \"h:70/x\"\n").find("serve.node.address"),
            std::string::npos);
  EXPECT_NE(config_error("serve:\n  node:\n    address: \"fd00::5:7070\"\n").find("in brackets"),
            std::string::npos)
      << "an IPv6 address without brackets would reach nobody";
  EXPECT_NE(config_error("serve:\n  node:\n    heartbeat_interval: 10ms\n").find("100ms"),
            std::string::npos);
  EXPECT_NE(config_error("serve:\n  node:\n    heartbeat_interval: 2s\n    lost_after: 5s\n")
                .find("three heartbeat intervals"),
            std::string::npos);
  EXPECT_NE(config_error("serve:\n  node:\n    labels: [a]\n").find("serve.node.labels"),
            std::string::npos);
  EXPECT_NE(config_error("serve:\n  node:\n    name: a\n").find("did you mean id"),
            std::string::npos);
}

TEST(NodeConfig, TheDefaultIdIsTheHostNameWhenItIsADnsLabel) {
  EXPECT_EQ(default_node_id("Worker-7.example.com"), "worker-7");
  EXPECT_EQ(default_node_id("db_host"), "local");
  EXPECT_EQ(default_node_id(""), "local");
  EXPECT_EQ(default_node_id(std::string(70, 'a')), "local");
}

TEST(NodeConfig, TheStateUrlFileIsReadTrimmedAndChecked) {
  testing::TempDir dir("corral-node-config");
  DaemonConfig c = default_daemon_config();
  c.state_url_file = dir.file("url");
  std::ofstream(dir.file("url")) << "  postgres://corral:s3cret@db/corral\n";
  EXPECT_EQ(*daemon::state_location(c), "postgres://corral:s3cret@db/corral");
  std::ofstream(dir.file("url")) << "sqlite:nope\n";
  auto bad = daemon::state_location(c);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("serve.state_url_file"), std::string::npos);
  c.state_url_file = dir.file("missing");
  EXPECT_FALSE(daemon::state_location(c));
  c.state = "/x/state.db";
  c.state_url_file = dir.file("url");
  auto both = daemon::state_location(c);
  ASSERT_FALSE(both);
  EXPECT_NE(both.error().message.find("both set"), std::string::npos);
}

TEST(NodeConfig, TheRegistrationSaysWhereAndHowMuch) {
  DaemonConfig c = default_daemon_config();
  c.node.id = "n1";
  c.listen_host = "10.1.2.3";
  c.max_sandboxes = 7;
  c.node.labels["zone"] = "z";
  auto r = daemon::node_registration(c, 7071, "0123abcd");
  EXPECT_EQ(r.id, "n1");
  EXPECT_EQ(r.instance, "0123abcd");
  EXPECT_EQ(r.live_within_ms, c.node.lost_after_ms) << "another daemon is live within lost_after";
  EXPECT_EQ(r.address, "10.1.2.3:7071");
  EXPECT_NE(r.capacity_json.find("\"sandboxes\":7"), std::string::npos) << r.capacity_json;
  EXPECT_EQ(r.labels_json, R"({"zone":"z"})");
  EXPECT_EQ(r.pools_json, "[]");
  c.listen_host = "::1";
  EXPECT_EQ(daemon::node_registration(c, 9, "").address, "[::1]:9");
  c.node.address = "10.9.9.9:7070";
  EXPECT_EQ(daemon::node_registration(c, 9, "").address, "10.9.9.9:7070");
}

}  // namespace
}  // namespace corral
