// Gateway tokens (src/egress/gateway_token.h): minting, every refusal reason,
// and the secret file.
#include "egress/gateway_token.h"

#include <gtest/gtest.h>

#include <cctype>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace corral::net {
namespace {

const std::string kSecret(32, 'k');
constexpr std::int64_t kNow = 1'800'000'000;

TEST(GatewayToken, MintedTokenVerifiesForItsSandboxUntilItsExpiry) {
  std::string t = mint_gateway_token(kSecret, "sb-0123456789ab", kNow + 60);
  EXPECT_EQ(t.rfind("cgw1.", 0), 0u) << t;
  EXPECT_TRUE(verify_gateway_token(kSecret, t, "sb-0123456789ab", kNow).ok());
  EXPECT_TRUE(verify_gateway_token(kSecret, t, "sb-0123456789ab", kNow + 59).ok());
  TokenCheck late = verify_gateway_token(kSecret, t, "sb-0123456789ab", kNow + 60);
  EXPECT_EQ(late.error, TokenError::kExpired);
  EXPECT_NE(late.reason.find("expired"), std::string::npos) << late.reason;
}

TEST(GatewayToken, AnotherSandboxIsRefused) {
  std::string t = mint_gateway_token(kSecret, "sb-aaaaaaaaaaaa", kNow + 60);
  TokenCheck c = verify_gateway_token(kSecret, t, "sb-bbbbbbbbbbbb", kNow);
  EXPECT_EQ(c.error, TokenError::kOtherSandbox);
  EXPECT_NE(c.reason.find("another sandbox"), std::string::npos) << c.reason;
}

TEST(GatewayToken, AnExpiredTokenIsExpiredWhoeverAsks) {
  std::string t = mint_gateway_token(kSecret, "sb-aaaaaaaaaaaa", kNow - 1);
  EXPECT_EQ(verify_gateway_token(kSecret, t, "sb-bbbbbbbbbbbb", kNow).error, TokenError::kExpired);
}

TEST(GatewayToken, AnotherSecretOrAnyAlterationIsABadSignature) {
  std::string t = mint_gateway_token(kSecret, "sb-aaaaaaaaaaaa", kNow + 60);
  EXPECT_EQ(verify_gateway_token(std::string(32, 'x'), t, "sb-aaaaaaaaaaaa", kNow).error,
            TokenError::kBadSignature);
  // Change the expiry (a later one), the sandbox, or one MAC character.
  std::string later = t;
  auto p = later.find(std::to_string(kNow + 60));
  later.replace(p, std::to_string(kNow + 60).size(), std::to_string(kNow + 6000));
  EXPECT_EQ(verify_gateway_token(kSecret, later, "sb-aaaaaaaaaaaa", kNow).error,
            TokenError::kBadSignature);
  std::string other = mint_gateway_token(kSecret, "sb-bbbbbbbbbbbb", kNow + 60);
  std::string swapped = other.substr(0, other.rfind('.')) + t.substr(t.rfind('.'));
  EXPECT_EQ(verify_gateway_token(kSecret, swapped, "sb-bbbbbbbbbbbb", kNow).error,
            TokenError::kBadSignature);
  std::string flipped = t;
  flipped[flipped.size() - 3] = flipped[flipped.size() - 3] == 'A' ? 'B' : 'A';
  EXPECT_EQ(verify_gateway_token(kSecret, flipped, "sb-aaaaaaaaaaaa", kNow).error,
            TokenError::kBadSignature);
}

TEST(GatewayToken, MalformedShapesAreRefused) {
  std::string t = mint_gateway_token(kSecret, "sb-aaaaaaaaaaaa", kNow + 60);
  for (std::string bad :
       {std::string(""), std::string("Bearer"), std::string("cgw1."), std::string("cgw1.a.b"),
        std::string("cgw2") + t.substr(4), t + ".x", t.substr(0, t.rfind('.')),
        std::string("cgw1.c2ItYQ.-5.") + t.substr(t.rfind('.') + 1),
        std::string("cgw1.c2ItYQ.0123.") + t.substr(t.rfind('.') + 1),
        std::string("cgw1.c2I=YQ.12.") + t.substr(t.rfind('.') + 1),
        std::string("cgw1..12.") + t.substr(t.rfind('.') + 1), std::string(2000, 'a')}) {
    TokenCheck c = verify_gateway_token(kSecret, bad, "sb-aaaaaaaaaaaa", kNow);
    EXPECT_EQ(c.error, TokenError::kMalformed) << bad;
  }
  EXPECT_EQ(token_error_name(TokenError::kMalformed), "malformed");
  EXPECT_EQ(token_error_name(TokenError::kOtherSandbox), "other_sandbox");
}

TEST(GatewayToken, SandboxIdsOfAnyBytesRoundTrip) {
  for (std::string id : {std::string("a"), std::string("ab"), std::string("abc"),
                         std::string("x.y.z"), std::string("\xff\x00\x01", 3)}) {
    std::string t = mint_gateway_token(kSecret, id, kNow + 1);
    EXPECT_TRUE(verify_gateway_token(kSecret, t, id, kNow).ok()) << t;
    EXPECT_EQ(std::count(t.begin(), t.end(), '.'), 3) << t;
  }
}

// Known answers, computed before the move to libsodium (the hand-written
// base64url and OpenSSL HMAC()) and checked against Python's hmac and
// base64.urlsafe_b64encode: tokens already given out stay valid.
TEST(GatewayToken, KnownTokensAreMintedByteForByte) {
  std::string k32;
  for (int i = 0; i < 32; ++i) k32 += static_cast<char>(i);
  std::string k100;
  for (int i = 0; i < 100; ++i) k100 += static_cast<char>(i);  // longer than a SHA-256 block
  struct Known {
    std::string secret, sandbox;
    std::int64_t expiry;
    std::string token;
  };
  const Known known[] = {
      {k32, "sb-0123456789ab", 1'800'000'060,
       "cgw1.c2ItMDEyMzQ1Njc4OWFi.1800000060.Fd585Yj31h_cjMtgyvXpZZfk79qZfXursLBtUt1hlG4"},
      {"k", "a", 1'800'000'001, "cgw1.YQ.1800000001.8Yr_ydNxvcEHdKZpQuYscLAZemBUwp7GG-ptyvILSQI"},
      {k100, std::string("\xff\x00\x01", 3), 1'800'000'001,
       "cgw1._wAB.1800000001.-F0wqeNDLv-xouR1W8p1zZ6Sj2O3Ra0tFZdz-JmMaCc"},
      {k32, "ab", 0, "cgw1.YWI.0.8OPBweXDqZk6S2cDqE1-z5kpnPSEfpUPnBG-IRDz0yo"},
  };
  for (const Known& k : known) {
    EXPECT_EQ(mint_gateway_token(k.secret, k.sandbox, k.expiry), k.token);
    EXPECT_TRUE(verify_gateway_token(k.secret, k.token, k.sandbox, k.expiry - 1).ok()) << k.token;
  }
}

// One encoding per value: base64url without padding, only its alphabet,
// no impossible length, zero unused bits, nothing after it.
TEST(GatewayToken, NonCanonicalBase64IsMalformed) {
  const std::string k32(32, 'k');
  const std::string t = mint_gateway_token(k32, "a", kNow + 60);  // cgw1.YQ.<expiry>.<mac>
  const std::string exp_mac = t.substr(t.find('.', 5));
  const std::string mac = t.substr(t.rfind('.') + 1);
  const std::string head = t.substr(0, t.rfind('.') + 1);
  ASSERT_TRUE(verify_gateway_token(k32, t, "a", kNow).ok());
  for (std::string bad :
       {"cgw1.YR" + exp_mac, "cgw1.YQ==" + exp_mac, "cgw1.YQ=" + exp_mac, "cgw1.YWJjZ" + exp_mac,
        "cgw1.YQ " + exp_mac, "cgw1. YQ" + exp_mac, "cgw1.Y+" + exp_mac, "cgw1.Y/" + exp_mac,
        head + mac + "=", head + mac + " ", head + mac + std::string(1, '\0'),
        head + "+" + mac.substr(1), head + mac.substr(0, mac.size() - 1) + "B"}) {
    TokenCheck c = verify_gateway_token(k32, bad, "a", kNow);
    EXPECT_EQ(c.error, TokenError::kMalformed) << bad;
  }
  // Well-formed base64url of the wrong length is a bad signature, as before.
  EXPECT_EQ(verify_gateway_token(k32, head + mac + "AAAA", "a", kNow).error,
            TokenError::kBadSignature);
}

// Every byte value in place of one character of a valid token's id and of
// its signature: only the original character verifies, and every byte
// outside the base64url alphabet (bytes above 0x7f included: libsodium
// 1.0.18 decodes them as digits) is malformed. Found by the gateway fuzz
// target (tests/fuzz/corpus/gateway/crash-high-byte-in-signature).
TEST(GatewayToken, EveryByteOutsideTheAlphabetIsMalformed) {
  const std::string k32(32, 'k');
  const std::string t = mint_gateway_token(k32, "sb", kNow + 60);
  const std::size_t positions[] = {5, t.rfind('.') + 3, t.size() - 2};
  for (std::size_t at : positions) {
    for (int b = 0; b < 256; ++b) {
      std::string edited = t;
      edited[at] = static_cast<char>(b);
      const TokenCheck c = verify_gateway_token(k32, edited, "sb", kNow);
      const bool alphabet = std::isalnum(b) || b == '-' || b == '_';
      if (edited == t) {
        EXPECT_TRUE(c.ok());
      } else if (!alphabet && b != '.') {
        EXPECT_EQ(c.error, TokenError::kMalformed) << "byte " << b << " at " << at;
      } else {
        EXPECT_FALSE(c.ok()) << "byte " << b << " at " << at;
      }
    }
  }
}

class SecretFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/corral-gwsecret-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(SecretFile, CreatedOnceWithMode0600AndReadBackTheSame) {
  const std::string path = dir_ + "/gateway.key";
  auto a = load_or_create_gateway_secret(path);
  ASSERT_TRUE(a) << a.error().to_string();
  EXPECT_EQ(a->size(), kGatewaySecretBytes);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  auto b = load_or_create_gateway_secret(path);
  ASSERT_TRUE(b) << b.error().to_string();
  EXPECT_EQ(*a, *b) << "a restarted owner must keep its tokens valid";
  auto r = random_gateway_secret();
  ASSERT_TRUE(r);
  EXPECT_NE(*r, *a);
}

TEST_F(SecretFile, WrongModeSizeOrSymlinkIsRefused) {
  const std::string path = dir_ + "/gateway.key";
  ASSERT_TRUE(load_or_create_gateway_secret(path));
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto wide = load_or_create_gateway_secret(path);
  ASSERT_FALSE(wide);
  EXPECT_NE(wide.error().message.find("0600"), std::string::npos) << wide.error().message;
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  {
    std::ofstream out(path, std::ios::app);
    out << "x";
  }
  auto longer = load_or_create_gateway_secret(path);
  ASSERT_FALSE(longer);
  EXPECT_NE(longer.error().message.find("33 bytes"), std::string::npos) << longer.error().message;
  const std::string link = dir_ + "/link.key";
  ASSERT_EQ(::symlink(path.c_str(), link.c_str()), 0);
  EXPECT_FALSE(load_or_create_gateway_secret(link));
  EXPECT_FALSE(load_or_create_gateway_secret(dir_)) << "a directory is no secret";
}

}  // namespace
}  // namespace corral::net
