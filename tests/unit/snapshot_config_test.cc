// serve.snapshots of the daemon config (src/daemon/snapshot_config_yaml.h,
// D4): the defaults, every key read, and bad values refused with the key
// and its line.
#include <gtest/gtest.h>

#include "daemon/daemon_config.h"

namespace corral {
namespace {

std::string error_of(std::string_view yaml) {
  auto config = parse_daemon_config(yaml, "serve.yaml");
  return config ? std::string() : config.error().to_string();
}

TEST(SnapshotConfig, DefaultsAreSevenDaysAndTenGibibytes) {
  auto config = parse_daemon_config("", "serve.yaml");
  ASSERT_TRUE(config.has_value());
  EXPECT_EQ(config->snapshots.retention_ms, 7LL * 24 * 3600 * 1000);
  EXPECT_EQ(config->snapshots.quota_bytes, 10ULL << 30);
  EXPECT_EQ(config->snapshots.sweep_interval_ms, 60000);
  EXPECT_EQ(config->snapshots.limits.max_files, 100000u);
  EXPECT_EQ(config->snapshots.limits.max_depth, 64u);
  EXPECT_EQ(config->snapshots.limits.max_total_bytes, 1ULL << 30);
  auto shipped = parse_daemon_config(default_daemon_config_yaml(), "default.yaml");
  ASSERT_TRUE(shipped.has_value()) << shipped.error().to_string();
  EXPECT_EQ(shipped->snapshots.retention_ms, config->snapshots.retention_ms);
  EXPECT_EQ(shipped->snapshots.quota_bytes, config->snapshots.quota_bytes);
  EXPECT_EQ(shipped->snapshots.limits.max_total_bytes, config->snapshots.limits.max_total_bytes);
}

TEST(SnapshotConfig, EveryKeyIsRead) {
  auto config = parse_daemon_config(
      "serve:\n  snapshots:\n    retention: 72h\n    quota: 50Gi\n    sweep_interval: 10m\n"
      "    max_files: 5000\n    max_depth: 16\n    max_bytes: 2Gi\n",
      "serve.yaml");
  ASSERT_TRUE(config.has_value()) << config.error().to_string();
  EXPECT_EQ(config->snapshots.retention_ms, 72LL * 3600 * 1000);
  EXPECT_EQ(config->snapshots.quota_bytes, 50ULL << 30);
  EXPECT_EQ(config->snapshots.sweep_interval_ms, 600000);
  EXPECT_EQ(config->snapshots.limits.max_files, 5000u);
  EXPECT_EQ(config->snapshots.limits.max_depth, 16u);
  EXPECT_EQ(config->snapshots.limits.max_total_bytes, 2ULL << 30);
}

TEST(SnapshotConfig, BadValuesNameTheKeyAndLine) {
  std::string e = error_of("serve:\n  snapshots:\n    retention: 0s\n");
  EXPECT_NE(e.find("serve.yaml:3"), std::string::npos) << e;
  EXPECT_NE(e.find("snapshots.retention"), std::string::npos) << e;
  e = error_of("serve:\n  snapshots:\n    quota: lots\n");
  EXPECT_NE(e.find("snapshots.quota"), std::string::npos) << e;
  e = error_of("serve:\n  snapshots:\n    retension: 1h\n");
  EXPECT_NE(e.find("unknown key"), std::string::npos) << e;
  EXPECT_NE(e.find("retention"), std::string::npos) << e;
  e = error_of("serve:\n  snapshots: 7d\n");
  EXPECT_FALSE(e.empty());
}

}  // namespace
}  // namespace corral
