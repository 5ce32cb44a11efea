// serve.e2b of the daemon config (issue 17, docs/config.md "e2b").
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "daemon/daemon_config.h"
#include "daemon/e2b_config_yaml.h"

namespace corral {
namespace {

TEST(E2bConfig, DefaultsAreOnUnderE2bWithOpenNetwork) {
  auto c = parse_daemon_config("serve: {}\n", "serve.yaml");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_TRUE(c->e2b.enabled);
  EXPECT_EQ(c->e2b.prefix, "/e2b");
  EXPECT_EQ(c->e2b.network, "open");
  EXPECT_TRUE(c->e2b.templates.empty());
}

TEST(E2bConfig, TemplatesAreImagesPoolsOrCreateBodies) {
  auto c = parse_daemon_config(
      "serve:\n  e2b:\n    enabled: false\n    prefix: /compat/e2b\n    network: code-exec\n"
      "    templates:\n      python: pool:py\n      node: node20\n"
      "      keyed: {image: python, secrets: [{name: openai, mode: broker}], limits: {cpus: 1}}\n",
      "serve.yaml");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_FALSE(c->e2b.enabled);
  EXPECT_EQ(c->e2b.prefix, "/compat/e2b");
  EXPECT_EQ(c->e2b.network, "code-exec");
  EXPECT_EQ(c->e2b.templates.at("python").target, "pool:py");
  EXPECT_EQ(c->e2b.templates.at("node").target, "node20");
  auto body = nlohmann::json::parse(c->e2b.templates.at("keyed").create_json);
  EXPECT_EQ(body["image"], "python");
  EXPECT_EQ(body["secrets"][0]["mode"], "broker");
  EXPECT_EQ(body["limits"]["cpus"], 1);
}

TEST(E2bConfig, BadValuesNameTheKeyAndLine) {
  struct Case {
    const char* yaml;
    const char* want;
  } cases[] = {
      {"serve:\n  e2b:\n    prefix: /v1\n", "serve.yaml:3: serve.e2b.prefix"},
      {"serve:\n  e2b:\n    prefix: e2b\n", "serve.e2b.prefix"},
      {"serve:\n  e2b:\n    prefix: /e2b/\n", "serve.e2b.prefix"},
      {"serve:\n  e2b:\n    prefix: /E2B\n", "serve.e2b.prefix"},
      {"serve:\n  e2b:\n    templates:\n      x: \"Not An Image\"\n", "serve.e2b.templates.x"},
      {"serve:\n  e2b:\n    templates: [a]\n", "serve.e2b.templates"},
      {"serve:\n  e2b:\n    color: blue\n", "serve.e2b.color: unknown key"},
      {"serve:\n  e2b:\n    enabled: maybe\n", "serve.e2b.enabled"},
  };
  for (const Case& k : cases) {
    auto c = parse_daemon_config(k.yaml, "serve.yaml");
    ASSERT_FALSE(c) << k.yaml;
    EXPECT_NE(c.error().to_string().find(k.want), std::string::npos)
        << k.yaml << " -> " << c.error().to_string();
  }
}

TEST(E2bConfig, PrefixesThatWouldShadowCorralsRoutesAreRefused) {
  EXPECT_TRUE(valid_e2b_prefix("/e2b"));
  EXPECT_TRUE(valid_e2b_prefix("/compat/e2b-v2"));
  for (const char* p : {"/", "", "/v1", "/v1/x", "/healthz", "/metrics", "//e2b", "/e2b//x", "/e2b/"})
    EXPECT_FALSE(valid_e2b_prefix(p)) << p;
}

}  // namespace
}  // namespace corral
