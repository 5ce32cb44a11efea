// How a create names its image (issue 18, spec/image_ref.h): a name, a
// manifest digest, or a registry reference pinned by digest; and
// serve.images, which says which registries a node pulls from.
#include "spec/image_ref.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "daemon/daemon_config.h"

namespace corral {
namespace {

const std::string kHex(64, 'a');

TEST(ImageRef, DigestReferencesAreParsedIntoTheirParts) {
  auto r = parse_digest_reference("registry.example:5000/team/tools@sha256:" + kHex);
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->registry, "registry.example:5000");
  EXPECT_EQ(r->repository, "team/tools");
  EXPECT_EQ(r->digest, "sha256:" + kHex);
  EXPECT_EQ(r->text(), "registry.example:5000/team/tools@sha256:" + kHex);
  EXPECT_TRUE(parse_digest_reference("10.0.0.9/a_b.c-d__e@sha256:" + kHex));
  EXPECT_TRUE(parse_digest_reference("[fd00::9]:5000/x@sha256:" + kHex));
}

TEST(ImageRef, AnythingElseIsRefusedWithWhy) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"reg/tools:v1", "a tag can move"},
      {"reg/tools@sha256:" + std::string(63, 'a'), "64 lowercase hex"},
      {"reg/tools@sha256:" + std::string(64, 'A'), "64 lowercase hex"},
      {"reg/tools@sha512:" + kHex, "64 lowercase hex"},
      {"tools@sha256:" + kHex, "names no registry"},
      {"-reg/tools@sha256:" + kHex, "registry host"},
      {"reg:port/tools@sha256:" + kHex, "registry host"},
      {"reg:123456/tools@sha256:" + kHex, "registry host"},
      {"reg/Tools@sha256:" + kHex, "repository path"},
      {"reg/../tools@sha256:" + kHex, "repository path"},
      {"reg/a//b@sha256:" + kHex, "repository path"},
      {"reg/a/@sha256:" + kHex, "repository path"},
      {"reg/tools:v1@sha256:" + kHex, "repository path"},
      {"reg/-x@sha256:" + kHex, "repository path"},
      {"reg/@sha256:" + kHex, "repository"},
  };
  for (const auto& [text, why] : bad) {
    auto r = parse_digest_reference(text);
    ASSERT_FALSE(r) << text;
    EXPECT_NE(r.error().message.find(why), std::string::npos) << text << ": " << r.error().message;
    EXPECT_FALSE(valid_image_ref(text)) << text;
  }
}

TEST(ImageRef, ASpecMayNameANameADigestOrAReference) {
  EXPECT_TRUE(valid_image_ref("deb"));
  EXPECT_TRUE(valid_image_ref("sha256:" + kHex));
  EXPECT_TRUE(valid_image_ref("reg/tools@sha256:" + kHex));
  for (const char* bad : {"", "Deb", ".deb", "deb/x", "sha256:abc", "../etc"})
    EXPECT_FALSE(valid_image_ref(bad)) << bad;
  EXPECT_FALSE(valid_image_name(std::string(64, 'a')));
  EXPECT_TRUE(valid_digest("sha256:" + kHex));
}

TEST(PushTarget, RegistryRepositoryAndTagAreSplitAndEachIsChecked) {
  auto t = parse_push_target("10.0.0.9:5000/team/tools:v1.2");
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(t->registry, "10.0.0.9:5000");
  EXPECT_EQ(t->repository, "team/tools");
  EXPECT_EQ(t->tag, "v1.2");
  EXPECT_EQ(t->text(), "10.0.0.9:5000/team/tools:v1.2");
  EXPECT_EQ(t->pinned("sha256:" + kHex).text(), "10.0.0.9:5000/team/tools@sha256:" + kHex);
  // No tag: "latest"; a ':' before the last '/' is a port, not a tag.
  auto bare = parse_push_target("reg.example:443/tools");
  ASSERT_TRUE(bare) << bare.error().to_string();
  EXPECT_EQ(bare->registry, "reg.example:443");
  EXPECT_EQ(bare->tag, "latest");
  for (const std::string& bad : std::vector<std::string>{
           "", "tools", "tools:v1", "reg/Tools:v1", "reg/tools:", "reg/tools:-x", "reg/tools:.x",
           "reg/tools:a b", "reg/tools@sha256:" + kHex, "-reg/tools:v", "reg:x/tools:v",
           "reg//tools:v", "reg/tools/:v", "reg/../x:v", "reg/tools:" + std::string(129, 'a')}) {
    auto r = parse_push_target(bad);
    EXPECT_FALSE(r) << bad;
    if (!r) {
      EXPECT_NE(r.error().hint.find("REGISTRY[:PORT]/REPOSITORY[:TAG]"), std::string::npos);
    }
  }
  EXPECT_TRUE(parse_push_target("reg/tools:" + std::string(128, 'a')));
}

TEST(ImageConfig, RegistriesAndTheCacheBoundAreReadAndChecked) {
  auto c = parse_daemon_config(
      "serve:\n  images:\n    registries: [\"reg.example:5000\", \"127.0.0.1:5000\"]\n"
      "    insecure_registries: [\"127.0.0.1:5000\"]\n    cache_max: 5Gi\n",
      "serve.yaml");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->images.registries, (std::vector<std::string>{"reg.example:5000", "127.0.0.1:5000"}));
  EXPECT_EQ(c->images.insecure_registries, (std::vector<std::string>{"127.0.0.1:5000"}));
  EXPECT_EQ(c->images.cache_max_bytes, 5ull << 30);
  EXPECT_TRUE(default_daemon_config().images.registries.empty()) << "no registry unless listed";
  for (const char* bad :
       {"serve:\n  images:\n    registries: [\"https://reg\"]\n",
        "serve:\n  images:\n    registries: [\"reg:x\"]\n",
        "serve:\n  images:\n    insecure_registries: [\"reg\"]\n",
        "serve:\n  images:\n    cache: 1Gi\n", "serve:\n  images:\n    cache_max: lots\n"}) {
    auto r = parse_daemon_config(bad, "serve.yaml");
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().to_string().find("serve.images"), std::string::npos)
        << r.error().to_string();
  }
}

}  // namespace
}  // namespace corral
