// The cluster key that signs forwarded calls (issue 18, daemon/cluster_key.h):
// a signature verifies only for the same key, method, target, namespace,
// sending node and a time within the window; the key file's rules.
#include "daemon/cluster_key.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "support/temp_dir.h"

namespace corral::daemon {
namespace {

TEST(ClusterKey, ASignatureVerifiesForExactlyWhatItSigned) {
  const ClusterKey key = ClusterKey::of_bytes(std::string(32, 'k'));
  const std::int64_t t = 1'800'000'000;
  const std::string sig = key.sign("POST", "/v1/sandboxes/sb-1/exec?x=1", "team", "node-a", t);
  EXPECT_TRUE(key.verify(sig, "POST", "/v1/sandboxes/sb-1/exec?x=1", "team", "node-a", t));
  EXPECT_TRUE(key.verify(sig, "POST", "/v1/sandboxes/sb-1/exec?x=1", "team", "node-a", t + 59));
  EXPECT_FALSE(key.verify(sig, "POST", "/v1/sandboxes/sb-1/exec?x=1", "team", "node-a", t + 61));
  EXPECT_FALSE(key.verify(sig, "POST", "/v1/sandboxes/sb-1/exec?x=1", "team", "node-a", t - 61));
  EXPECT_FALSE(key.verify(sig, "GET", "/v1/sandboxes/sb-1/exec?x=1", "team", "node-a", t));
  EXPECT_FALSE(key.verify(sig, "POST", "/v1/sandboxes/sb-2/exec?x=1", "team", "node-a", t));
  EXPECT_FALSE(key.verify(sig, "POST", "/v1/sandboxes/sb-1/exec?x=2", "team", "node-a", t));
  EXPECT_FALSE(key.verify(sig, "POST", "/v1/sandboxes/sb-1/exec?x=1", "default", "node-a", t));
  EXPECT_FALSE(key.verify(sig, "POST", "/v1/sandboxes/sb-1/exec?x=1", "team", "node-b", t));
  EXPECT_FALSE(ClusterKey::of_bytes(std::string(32, 'j'))
                   .verify(sig, "POST", "/v1/sandboxes/sb-1/exec?x=1", "team", "node-a", t));
  // Parts cannot be shifted across the separators.
  const std::string shifted = key.sign("POST", "/a\nteam", "x", "node-a", t);
  EXPECT_FALSE(key.verify(shifted, "POST", "/a\nteam", "x", "node-a", t));
  for (const char* bad : {"", ".", "abc", "1800000000", "1800000000.", "x.abc",
                          "18000000000000000000000.00", "-1.00"})
    EXPECT_FALSE(key.verify(bad, "POST", "/", "team", "node-a", t)) << bad;
  // A truncated or altered MAC.
  EXPECT_FALSE(key.verify(sig.substr(0, sig.size() - 1), "POST", "/v1/sandboxes/sb-1/exec?x=1",
                          "team", "node-a", t));
  std::string flipped = sig;
  flipped.back() = flipped.back() == '0' ? '1' : '0';
  EXPECT_FALSE(key.verify(flipped, "POST", "/v1/sandboxes/sb-1/exec?x=1", "team", "node-a", t));
}

// derive(): the same secret on every node with the key (the fleet's E2B
// token key), a different one per label and per key, never the key itself.
TEST(ClusterKey, ADerivedSecretIsTheFleetsAndDiffersByLabelAndKey) {
  const ClusterKey a = ClusterKey::of_bytes(std::string(32, 'a'));
  const ClusterKey a_again = ClusterKey::of_bytes(std::string(32, 'a'));
  const ClusterKey b = ClusterKey::of_bytes(std::string(32, 'b'));
  const std::string tokens = a.derive("e2b-access-token");
  EXPECT_EQ(tokens.size(), 32u);
  EXPECT_EQ(tokens, a_again.derive("e2b-access-token"));
  EXPECT_NE(tokens, a.derive("another-use"));
  EXPECT_NE(tokens, b.derive("e2b-access-token"));
  EXPECT_NE(tokens, std::string(32, 'a'));
}

TEST(ClusterKey, TheKeyFileMustBePrivateAndLongEnough) {
  corral::testing::TempDir dir("corral-cluster-key");
  const std::string path = dir.file("k");
  std::ofstream(path) << std::string(64, 'a') << "\n";
  chmod(path.c_str(), 0600);
  auto ok = ClusterKey::load(path);
  ASSERT_TRUE(ok) << ok.error().to_string();
  EXPECT_TRUE(ok->verify(ClusterKey::of_bytes(std::string(32, static_cast<char>(0xaa)))
                             .sign("GET", "/", "default", "n", 5),
                         "GET", "/", "default", "n", 5))
      << "the file's hex digits are the key's bytes";
  chmod(path.c_str(), 0640);
  auto open_to_group = ClusterKey::load(path);
  ASSERT_FALSE(open_to_group);
  EXPECT_EQ(open_to_group.error().code, ErrorCode::kPermissionDenied);
  chmod(path.c_str(), 0600);
  for (const std::string& bad :
       {std::string(62, 'a'), std::string(63, 'a'), std::string(64, 'g'), std::string("")}) {
    std::ofstream(path, std::ios::trunc) << bad << "\n";
    auto r = ClusterKey::load(path);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(ClusterKey::load(dir.file("missing")));
  symlink(path.c_str(), dir.file("link").c_str());
  EXPECT_FALSE(ClusterKey::load(dir.file("link"))) << "a symlink is not followed";
}

}  // namespace
}  // namespace corral::daemon
