// serve.tasks in the daemon's config file (docs/config.md, docs/tasks.md).
#include <gtest/gtest.h>

#include <string>

#include "daemon/daemon_config.h"

namespace corral {
namespace {

TEST(TaskConfig, DefaultsAreTheDocumentedOnes) {
  const daemon::TaskConfig t = default_daemon_config().tasks;
  EXPECT_EQ(t.workers, 4u);
  EXPECT_EQ(t.default_timeout_ms, 600'000);
  EXPECT_EQ(t.max_timeout_ms, 86'400'000);
  EXPECT_EQ(t.retention_ms, 7 * 86'400'000LL);
  EXPECT_EQ(t.max_body, 64ull << 20);
  EXPECT_EQ(t.max_output_size, 1ull << 30);
  EXPECT_EQ(t.max_log, 16ull << 20);
}

TEST(TaskConfig, EveryKeyIsRead) {
  auto c = parse_daemon_config(
      "serve:\n  tasks:\n    workers: 2\n    default_timeout: 1m\n    max_timeout: 2h\n"
      "    retention: 48h\n    max_body: 8Mi\n    max_output_size: 100Mi\n    max_log: 1Mi\n"
      "    initialize_timeout: 30s\n    collect_timeout: 45s\n    prune_interval: 1h\n",
      "serve.yaml");
  ASSERT_TRUE(c) << c.error().to_string();
  const daemon::TaskConfig& t = c->tasks;
  EXPECT_EQ(t.workers, 2u);
  EXPECT_EQ(t.default_timeout_ms, 60'000);
  EXPECT_EQ(t.max_timeout_ms, 7'200'000);
  EXPECT_EQ(t.retention_ms, 48 * 3'600'000LL);
  EXPECT_EQ(t.max_body, 8ull << 20);
  EXPECT_EQ(t.max_output_size, 100ull << 20);
  EXPECT_EQ(t.max_log, 1ull << 20);
  EXPECT_EQ(t.initialize_timeout_ms, 30'000);
  EXPECT_EQ(t.collect_timeout_ms, 45'000);
  EXPECT_EQ(t.prune_interval_ms, 3'600'000);
}

TEST(TaskConfig, BadValuesNameTheKey) {
  for (const char* yaml : {"serve:\n  tasks:\n    workers: 0\n",
                           "serve:\n  tasks:\n    workers: 1000\n",
                           "serve:\n  tasks:\n    retention: forever\n",
                           "serve:\n  tasks:\n    max_body: lots\n",
                           "serve:\n  tasks:\n    retries: 3\n", "serve:\n  tasks: 4\n"}) {
    auto c = parse_daemon_config(yaml, "serve.yaml");
    ASSERT_FALSE(c) << yaml;
    EXPECT_NE(c.error().to_string().find("serve.tasks"), std::string::npos)
        << c.error().to_string();
  }
}

}  // namespace
}  // namespace corral
