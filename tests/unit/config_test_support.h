// What the tests of the YAML config readers share (config_file_test.cc,
// daemon_config_test.cc, yaml_reader_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "spec/sandbox_spec.h"
#include "support/temp_dir.h"

namespace corral::config_test {

// The configuration example of the design source (section 8.1), as written
// there.
inline constexpr std::string_view kSourceExample = R"(sandbox:
  cpu_limit: "2"
  memory_limit: "2Gi"
  disk_limit: "2Gi"
  pids_limit: 256
  timeout: 300
  max_lifetime: 600
  network:
    default: deny
    allow_domains: ["pypi.org", "registry.npmjs.org"]
    dns_servers: ["10.0.0.53"]
)";

// Checks that `spec` holds every setting of kSourceExample.
inline void expect_source_example(const SandboxSpec& spec) {
  using std::chrono::milliseconds;
  EXPECT_DOUBLE_EQ(spec.limits.cpus, 2.0);
  EXPECT_EQ(spec.limits.memory_bytes, 2 * kGiB);
  EXPECT_EQ(spec.limits.disk_bytes, 2 * kGiB);
  EXPECT_EQ(spec.limits.pids, 256u);
  EXPECT_EQ(spec.limits.timeout, milliseconds(300'000));
  EXPECT_EQ(spec.limits.max_lifetime, milliseconds(600'000));
  EXPECT_EQ(spec.network.mode, "allowlist");
  EXPECT_EQ(spec.network.allow_domains,
            (std::vector<std::string>{"pypi.org", "registry.npmjs.org"}));
  EXPECT_EQ(spec.network.dns_servers, (std::vector<std::string>{"10.0.0.53"}));
}

// A fresh directory under /tmp, removed with its contents at the end of the
// scope (tests/support/temp_dir.h).
class TempDir : public ::corral::testing::TempDir {
 public:
  TempDir() : ::corral::testing::TempDir("corral-config-test") {}
};

}  // namespace corral::config_test
