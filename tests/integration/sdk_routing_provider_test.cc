// RoutingProvider (REQUIREMENTS.md P3, issue 17) with two real daemons:
// "local" through corral's own API, "hosted" through the other daemon's E2B
// facade (E2bProvider). Classes go where the configuration says; when the
// hosted one is stopped mid-test, a class with a fallback goes local and
// one without fails; the choice is recorded with each sandbox and counted.
#include <gtest/gtest.h>

#include <string>

#include "sdk/e2b_provider.h"
#include "sdk/remote_provider.h"
#include "sdk/routing_provider.h"
#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

const char* kConfig =
    "serve:\n  e2b:\n    network: none\nsandbox:\n  disk_limit: 256Mi\n  memory_limit: 512Mi\n";

api::CreateSandboxRequest of_class(const std::string& cls) {
  api::CreateSandboxRequest r;
  if (!cls.empty()) r.spec.metadata["class"] = cls;
  r.spec.limits.max_lifetime = std::chrono::seconds(120);
  r.spec.network.mode = "none";
  return r;
}

std::string echo(sdk::SandboxProvider& p, const std::string& id) {
  api::ExecRequest r;
  r.argv = {"echo", "from", id};
  auto result = p.exec(id, r);
  EXPECT_TRUE(result) << result.error().to_string();
  return result ? result->stdout_data : "";
}

TEST(SdkRoutingProvider, ClassesGoWhereConfiguredAndFallBackWhenTheHostedOneIsDown) {
  TestDaemon local({}, kConfig);
  TestDaemon hosted({}, kConfig);
  ASSERT_TRUE(local.ready()) << local.output();
  ASSERT_TRUE(hosted.ready()) << hosted.output();

  const std::string yaml =
      "routing:\n"
      "  backends:\n"
      "    local: {kind: corral, url: \"" +
      local.unix_url() +
      "\"}\n"
      "    hosted: {kind: e2b, api_url: \"" +
      hosted.tcp_url() + "/e2b\", sandbox_url: \"" + hosted.tcp_url() +
      "/e2b/envd\", api_key_file: \"" + hosted.data_dir() +
      "/api-key\"}\n"
      "  classes:\n"
      "    core: {backend: local}\n"
      "    batch: {backend: hosted, when_down: local}\n"
      "    strict: {backend: hosted, when_down: fail}\n"
      "  default_class: core\n";
  auto routing = sdk::RoutingProvider::from_yaml(yaml);
  ASSERT_TRUE(routing) << routing.error().to_string();
  sdk::RoutingProvider& p = **routing;

  auto core = p.create_sandbox(of_class(""), std::nullopt);
  ASSERT_TRUE(core) << core.error().to_string();
  auto batch = p.create_sandbox(of_class("batch"), std::nullopt);
  ASSERT_TRUE(batch) << batch.error().to_string();
  EXPECT_EQ(p.backend_of(core->id), "local");
  EXPECT_EQ(p.backend_of(batch->id), "hosted");
  EXPECT_EQ(echo(p, core->id), "from " + core->id + "\n");
  EXPECT_EQ(echo(p, batch->id), "from " + batch->id + "\n");
  // Each daemon holds its own, with the choice recorded in its metadata.
  auto on_hosted = hosted.request("GET", "/v1/sandboxes/" + batch->id);
  ASSERT_EQ(on_hosted.status, 200) << on_hosted.body;
  auto j = nlohmann::json::parse(on_hosted.body);
  EXPECT_EQ(j["spec"]["metadata"]["corral.backend"], "hosted");
  EXPECT_EQ(j["spec"]["metadata"]["class"], "batch");
  EXPECT_EQ(local.request("GET", "/v1/sandboxes/" + batch->id).status, 404);
  EXPECT_EQ(local.request("GET", "/v1/sandboxes/" + core->id).status, 200);

  ASSERT_TRUE(p.destroy(batch->id));
  // The hosted service goes away mid-test.
  hosted.stop();
  auto fell_back = p.create_sandbox(of_class("batch"), std::nullopt);
  ASSERT_TRUE(fell_back) << fell_back.error().to_string();
  EXPECT_EQ(p.backend_of(fell_back->id), "local");
  auto there = local.request("GET", "/v1/sandboxes/" + fell_back->id);
  ASSERT_EQ(there.status, 200);
  EXPECT_EQ(nlohmann::json::parse(there.body)["spec"]["metadata"]["corral.backend"], "local");
  auto strict = p.create_sandbox(of_class("strict"), std::nullopt);
  ASSERT_FALSE(strict);
  EXPECT_TRUE(sdk::backend_down(strict.error())) << strict.error().to_string();
  auto unknown = p.create_sandbox(of_class("nope"), std::nullopt);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kInvalidArgument);

  std::map<std::string, std::uint64_t> counted;
  for (const auto& c : p.counts())
    counted[c.cls + "/" + c.backend + (c.fallback ? "/fallback" : "")] = c.n;
  EXPECT_EQ(counted["core/local"], 1u);
  EXPECT_EQ(counted["batch/hosted"], 1u);
  EXPECT_EQ(counted["batch/local/fallback"], 1u);
  EXPECT_NE(
      p.metrics_text().find(
          "corral_routing_creates_total{class=\"batch\",backend=\"local\",fallback=\"true\"} 1"),
      std::string::npos)
      << p.metrics_text();

  ASSERT_TRUE(p.destroy(core->id));
  ASSERT_TRUE(p.destroy(fell_back->id));
}

TEST(SdkRoutingProvider, AConfigurationNamingNoSuchBackendIsRefused) {
  auto r = sdk::RoutingProvider::from_yaml(
      "backends: {a: {kind: corral, url: \"unix:/nonexistent.sock\"}}\n"
      "classes: {core: {backend: b}}\n");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("\"b\""), std::string::npos) << r.error().message;
  auto kind = sdk::RoutingProvider::from_yaml(
      "backends: {a: {kind: ftp}}\nclasses: {core: {backend: a}}\n");
  ASSERT_FALSE(kind);
  EXPECT_NE(kind.error().message.find("kind must be"), std::string::npos);
  auto fallback = sdk::RoutingProvider::from_yaml(
      "backends: {a: {kind: corral, url: \"unix:/x.sock\"}}\n"
      "classes: {core: {backend: a, when_down: z}}\n");
  ASSERT_FALSE(fallback);
}

// A key the file does not know is an error naming it, wherever it is: a
// typo would otherwise change routing or authentication without a word.
TEST(SdkRoutingProvider, AnUnknownKeyIsRefusedByName) {
  const std::string backend = "a: {kind: corral, url: \"unix:/nonexistent.sock\"}";
  struct Case {
    std::string yaml, key;
  } cases[] = {
      {"backends: {" + backend + "}\nclasses: {core: {backend: a, when-down: fail}}\n",
       "when-down"},
      {"backends: {a: {kind: corral, url: \"unix:/x.sock\", api_key: secret}}\n"
       "classes: {core: {backend: a}}\n",
       "api_key"},
      {"backends: {a: {kind: e2b, api_url: \"http://127.0.0.1:1\", sandbox: x}}\n"
       "classes: {core: {backend: a}}\n",
       "sandbox"},
      {"backends: {" + backend + "}\nclasses: {core: {backend: a}}\ndefault: core\n", "default"},
      {"routing:\n  backends: {" + backend + "}\n  classes: {core: {backend: a}}\n  clases: {}\n",
       "clases"},
  };
  for (const auto& c : cases) {
    auto r = sdk::RoutingProvider::from_yaml(c.yaml);
    ASSERT_FALSE(r) << c.yaml;
    EXPECT_NE(r.error().message.find("unknown key \"" + c.key + "\""), std::string::npos)
        << r.error().message;
    EXPECT_FALSE(r.error().hint.empty()) << c.key;
    // The refusal never echoes a value (a key put in the file by mistake).
    EXPECT_EQ(r.error().message.find("secret"), std::string::npos) << r.error().message;
  }
  // Other sections of a larger file are not the routing's to judge.
  auto ok = sdk::RoutingProvider::from_yaml("app: {anything: 1}\nrouting:\n  backends: {" +
                                            backend + "}\n  classes: {core: {backend: a}}\n");
  EXPECT_TRUE(ok) << (ok ? "" : ok.error().message);
}

}  // namespace
}  // namespace corral::testing
