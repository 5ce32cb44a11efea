// serve.object_store of the daemon config (daemon/object_store_config_yaml.h,
// REQUIREMENTS D5): defaults, both kinds, and every mistake refused with its
// line: unknown keys, a setting of the other kind, an s3 store without what
// it needs, malformed values. Also the S3 back-end's XML readers
// (objstore/s3_xml.h) on entity-escaped and hostile bodies.
#include <gtest/gtest.h>

#include <string>

#include "daemon/daemon_config.h"
#include "objstore/s3_xml.h"

namespace corral {
namespace {

using objstore::ObjectStoreConfig;

Result<DaemonConfig> parse(const std::string& yaml) { return parse_daemon_config(yaml, "serve.yaml"); }

std::string error_of(const std::string& yaml) {
  auto r = parse(yaml);
  return r ? std::string("(accepted)") : r.error().to_string();
}

TEST(ObjectStoreConfig, DefaultIsLocalUnderTheDataDir) {
  auto c = parse("");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->object_store.kind, ObjectStoreConfig::Kind::kLocal);
  EXPECT_EQ(c->object_store.path, "");
  EXPECT_EQ(c->object_store.timeout_ms, 30'000);
  auto d = parse(std::string(default_daemon_config_yaml()));
  ASSERT_TRUE(d.has_value()) << d.error().to_string();
  EXPECT_EQ(d->object_store.kind, ObjectStoreConfig::Kind::kLocal);
  EXPECT_EQ(d->object_store.timeout_ms, 30'000);
}

TEST(ObjectStoreConfig, LocalAndS3AreRead) {
  auto local = parse("serve:\n  object_store:\n    kind: local\n    path: /srv/objects\n");
  ASSERT_TRUE(local.has_value()) << local.error().to_string();
  EXPECT_EQ(local->object_store.path, "/srv/objects");

  auto s3 = parse(
      "serve:\n  object_store:\n    kind: s3\n    endpoint: https://s3.example.com/\n"
      "    bucket: corral-data\n    prefix: prod/\n    region: eu-west-1\n"
      "    access_key_secret: s3_id\n    secret_key_secret: s3_key\n    timeout: 5s\n");
  ASSERT_TRUE(s3.has_value()) << s3.error().to_string();
  const auto& o = s3->object_store;
  EXPECT_EQ(o.kind, ObjectStoreConfig::Kind::kS3);
  EXPECT_EQ(o.endpoint, "https://s3.example.com");
  EXPECT_EQ(o.bucket, "corral-data");
  EXPECT_EQ(o.prefix, "prod/");
  EXPECT_EQ(o.region, "eu-west-1");
  EXPECT_EQ(o.access_key_secret, "s3_id");
  EXPECT_EQ(o.secret_key_secret, "s3_key");
  EXPECT_EQ(o.timeout_ms, 5000);
}

TEST(ObjectStoreConfig, MistakesAreRefusedWithTheirLine) {
  const std::string s3_head = "serve:\n  object_store:\n    kind: s3\n";
  const std::string s3_rest =
      "    endpoint: http://127.0.0.1:9000\n    bucket: bkt\n"
      "    access_key_secret: a\n    secret_key_secret: b\n";
  struct Case {
    std::string yaml;
    std::string expected;  // the start of the message
  };
  std::vector<Case> cases = {
      {"serve:\n  object_store:\n    zzz: 1\n", "serve.yaml:3: serve.object_store.zzz: unknown key"},
      {"serve:\n  object_store:\n    url: http://x\n",
       "serve.yaml:3: serve.object_store.url: unknown key (did you mean endpoint?)"},
      {"serve:\n  object_store:\n    kind: ftp\n", "serve.yaml:3: serve.object_store.kind"},
      {"serve:\n  object_store:\n    bucket: bkt\n",
       "serve.yaml:3: serve.object_store.bucket: is an s3 setting, and kind is local"},
      {"serve:\n  object_store:\n    path: relative\n", "serve.yaml:3: serve.object_store.path"},
      {s3_head + "    path: /srv\n" + s3_rest,
       "serve.yaml:4: serve.object_store.path: is a local setting, and kind is s3"},
      {s3_head + "    bucket: bkt\n    access_key_secret: a\n    secret_key_secret: b\n",
       "serve.yaml:2: serve.object_store: kind s3 needs endpoint"},
      {s3_head + "    endpoint: http://h\n    bucket: bkt\n    access_key_secret: a\n",
       "serve.yaml:2: serve.object_store: kind s3 needs secret_key_secret"},
      {s3_head + "    endpoint: s3.example.com\n", "serve.yaml:4: serve.object_store.endpoint"},
      {s3_head + "    endpoint: https://u:p@host\n", "serve.yaml:4: serve.object_store.endpoint"},
      {s3_head + "    bucket: Bad_Bucket\n", "serve.yaml:4: serve.object_store.bucket"},
      {s3_head + "    prefix: ../up/\n", "serve.yaml:4: serve.object_store.prefix"},
      {s3_head + "    region: EU WEST\n", "serve.yaml:4: serve.object_store.region"},
      // A credential's value where its name belongs.
      {s3_head + "    secret_key_secret: \"wJalrXUtnFEMI/K7MDENG+bPxRfiCY\"\n",
       "serve.yaml:4: serve.object_store.secret_key_secret"},
      {s3_head + "    secret_key: x\n",
       "serve.yaml:4: serve.object_store.secret_key: unknown key (did you mean secret_key_secret?)"},
      {s3_head + "    timeout: 10ms\n", "serve.yaml:4: serve.object_store.timeout: must be between"},
      {"serve:\n  object_store: [1]\n", "serve.yaml:2: serve.object_store"},
  };
  for (const auto& c : cases) {
    std::string msg = error_of(c.yaml);
    EXPECT_EQ(msg.rfind(c.expected, 0), 0u) << c.yaml << "\n=> " << msg;
  }
  // The value of a refused secret name is not repeated past the quoting
  // limit, and never in full when long.
  EXPECT_TRUE(parse(s3_head + s3_rest).has_value());
}

TEST(S3Xml, ListPageIsReadWithEntitiesAndTokens) {
  auto page = objstore::parse_list_page(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Name>b</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"
      "<IsTruncated>true</IsTruncated>"
      "<Contents><Key>p/a</Key><Size>5</Size></Contents>"
      "<Contents><Key>p/a&amp;b</Key><Size>0</Size></Contents>"
      "<NextContinuationToken>tok/+=&lt;</NextContinuationToken></ListBucketResult>");
  ASSERT_TRUE(page.has_value()) << page.error().to_string();
  ASSERT_EQ(page->entries.size(), 2u);
  EXPECT_EQ(page->entries[0].key, "p/a");
  EXPECT_EQ(page->entries[0].size, 5u);
  EXPECT_EQ(page->entries[1].key, "p/a&b");
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_token, "tok/+=<");
}

TEST(S3Xml, BadListBodiesAreUnavailable) {
  for (const char* body :
       {"", "not xml", "<html>proxy error</html>", "<ListBucketResult><Contents><Size>1</Size>"
                                                   "</Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>k</Key><Size>-1</Size></Contents></ListBucketResult>",
        "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>"}) {
    auto page = objstore::parse_list_page(body);
    ASSERT_FALSE(page.has_value()) << body;
    EXPECT_EQ(page.error().code, ErrorCode::kUnavailable);
  }
  auto error = objstore::parse_error_body(
      "<Error><Code>NoSuchKey</Code><Message>The key &quot;x&quot; does not exist</Message></Error>");
  EXPECT_EQ(error.code, "NoSuchKey");
  EXPECT_EQ(error.message, "The key \"x\" does not exist");
  EXPECT_TRUE(objstore::parse_error_body("<html/>").code.empty());
}

}  // namespace
}  // namespace corral
