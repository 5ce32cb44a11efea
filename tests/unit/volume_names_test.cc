// The lexical half of volumes (D2, F4; docs/volumes.md): volume and
// namespace names, sub-path normalization (the ".." and absolute class),
// quotas, API keys' namespaces and their config (serve.api_keys.namespaces,
// serve.volumes).
#include <gtest/gtest.h>

#include "base/sha256.h"
#include "daemon/api_keys.h"
#include "daemon/daemon_config.h"
#include "spec/volume_ref.h"
#include "volume/volume_store.h"

namespace corral {
namespace {

TEST(VolumeNames, Grammar) {
  for (const char* ok : {"a", "v1", "team-a", "x.y_z", "0abc"})
    EXPECT_TRUE(is_valid_volume_name(ok)) << ok;
  for (const char* bad : {"", "-a", ".a", "_a", "A", "a/b", "a b", "..", "a\n"})
    EXPECT_FALSE(is_valid_volume_name(bad)) << bad;
  EXPECT_TRUE(is_valid_volume_name(std::string(63, 'a')));
  EXPECT_FALSE(is_valid_volume_name(std::string(64, 'a')));
}

TEST(VolumeSubpath, NormalizesAndRefusesEscapes) {
  EXPECT_EQ(*normalize_volume_subpath(""), "");
  EXPECT_EQ(*normalize_volume_subpath("."), "");
  EXPECT_EQ(*normalize_volume_subpath("a//b/./c/"), "a/b/c");
  for (const char* bad : {"..", "../x", "a/..", "a/../../x", "a/b/../c", "/", "/abs", "//x"})
    EXPECT_FALSE(normalize_volume_subpath(bad)) << bad;
  EXPECT_FALSE(normalize_volume_subpath(std::string("a\0b", 3)));
  EXPECT_FALSE(normalize_volume_subpath(std::string(4096, 'a')));
}

TEST(VolumeQuota, UnitsAndBounds) {
  EXPECT_EQ(*volume::parse_quota("1GiB", 0), 1ull << 30);
  EXPECT_EQ(*volume::parse_quota("16Mi", 64ull << 20), 16ull << 20);
  EXPECT_FALSE(volume::parse_quota("15Mi", 0));
  EXPECT_FALSE(volume::parse_quota("65Mi", 64ull << 20));
  EXPECT_FALSE(volume::parse_quota("lots", 0));
}

TEST(ApiKeyNamespaces, KeyFindsItsNamespace) {
  const std::string a = "key-of-default-0123456789";
  const std::string b = "key-of-team-b-0123456789";
  auto keys = ApiKeys::load({sha256_hex(a)}, {});
  ASSERT_TRUE(keys) << keys.error().message;
  ASSERT_TRUE(keys->add_namespace("team-b", {sha256_hex(b)}, {}));
  EXPECT_EQ(keys->namespace_of(a), "default");
  EXPECT_EQ(keys->namespace_of(b), "team-b");
  EXPECT_EQ(keys->namespace_of("key-of-nobody-0123456789"), std::nullopt);
  EXPECT_TRUE(keys->verify(b));
  // One key in two namespaces is ambiguous: refused.
  EXPECT_FALSE(keys->add_namespace("team-c", {sha256_hex(a)}, {}));
  // Listed twice for one namespace: harmless.
  EXPECT_TRUE(keys->add_namespace("team-b", {sha256_hex(b)}, {}));
  EXPECT_EQ(keys->namespace_of(b), "team-b");
}

TEST(ApiKeyNamespaces, Config) {
  const std::string digest(64, 'a');
  auto c = parse_daemon_config("serve:\n  api_keys:\n    namespaces:\n      - name: team-a\n"
                               "        sha256: [" + digest + "]\n  volumes:\n    max_quota: 1Gi\n"
                               "    max_total: 10Gi\n",
                               "test.yaml");
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_EQ(c->api_key_namespaces.size(), 1u);
  EXPECT_EQ(c->api_key_namespaces[0].name, "team-a");
  EXPECT_EQ(c->api_key_namespaces[0].sha256, std::vector<std::string>{digest});
  EXPECT_EQ(c->volumes.max_quota, 1ull << 30);
  EXPECT_EQ(c->volumes.max_total, 10ull << 30);
  for (const char* bad :
       {"serve:\n  api_keys:\n    namespaces:\n      - name: Team\n        sha256: []\n",
        "serve:\n  api_keys:\n    namespaces:\n      - name: t\n",
        "serve:\n  api_keys:\n    namespaces:\n      - sha256: []\n",
        "serve:\n  volumes:\n    quota_max: 1Gi\n"}) {
    EXPECT_FALSE(parse_daemon_config(bad, "test.yaml")) << bad;
  }
}

}  // namespace
}  // namespace corral
