// The secrets of a sandbox spec (src/secrets/secret_spec.h): defaults,
// tiers and modes, env names, file paths, hosts, S7 and TTLs, one rule per
// test; and no value in any error.
#include "secrets/secret_spec.h"

#include <gtest/gtest.h>
#include <sodium.h>

#include <string>
#include <vector>

namespace corral::secrets {
namespace {

using std::chrono::seconds;

std::string random_value() {
  EXPECT_TRUE(sodium_ready());
  static constexpr char kChars[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  std::string v = "sv-";
  for (int i = 0; i < 32; ++i) v.push_back(kChars[randombytes_uniform(62)]);
  return v;
}

class SecretSpecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* k : {"openai", "github", "anthropic", "s3", "slack"}) {
      values_[k] = random_value();
      ASSERT_TRUE(store_.add(k, SecretValue(values_[k]), "test"));
    }
    context_.lifetime = seconds(600);
  }

  Result<ResolvedSecrets> resolve(const std::vector<SecretRequest>& r) {
    return resolve_secret_requests(r, store_, context_);
  }

  // Resolves, expects an error containing every fragment and no value.
  void expect_error(const std::vector<SecretRequest>& r, std::vector<std::string> fragments) {
    auto res = resolve(r);
    ASSERT_FALSE(res) << "resolved, but expected: " << fragments[0];
    const std::string text = res.error().message + " | " + res.error().hint;
    for (const auto& f : fragments) EXPECT_NE(text.find(f), std::string::npos) << text;
    for (const auto& [k, v] : values_) EXPECT_EQ(text.find(v), std::string::npos) << text;
  }

  static SecretRequest broker(std::string name, std::string key, std::string host) {
    SecretRequest r;
    r.name = std::move(name);
    r.key = std::move(key);
    r.mode = SecretMode::kBroker;
    r.hosts = {{std::move(host), 443, false}};
    return r;
  }

  SecretStore store_;
  std::map<std::string, std::string> values_;
  ResolveContext context_;
};

TEST_F(SecretSpecTest, TierPicksTheDefaultMode) {
  SecretRequest low{"a", "openai", std::nullopt, SecretTier::kLow, "", "", {}, std::nullopt};
  SecretRequest medium{"b", "github", std::nullopt, SecretTier::kMedium, "", "", {}, std::nullopt};
  SecretRequest high{"c-d.e",
                     "anthropic",
                     std::nullopt,
                     SecretTier::kHigh,
                     "",
                     "",
                     {{"api.anthropic.com", 443, true}},
                     std::nullopt};
  auto res = resolve({low, medium, high});
  ASSERT_TRUE(res) << res.error().to_string();
  ASSERT_EQ(res->secrets.size(), 3u);
  const auto& s = res->secrets;
  EXPECT_EQ(s[0].mode, SecretMode::kEnv);
  EXPECT_EQ(s[0].env_var, "A");
  EXPECT_TRUE(s[0].value.equals(values_["openai"]));
  EXPECT_EQ(s[1].mode, SecretMode::kFile);
  EXPECT_EQ(s[1].path, "/run/secrets/b");
  EXPECT_EQ(s[1].env_var, "");
  EXPECT_TRUE(s[1].value.equals(values_["github"]));
  EXPECT_EQ(s[2].mode, SecretMode::kBroker);
  EXPECT_EQ(s[2].env_var, "C_D_E");  // upper-cased, '-' and '.' -> '_'
  EXPECT_EQ(s[2].hosts[0].host, "api.anthropic.com");
  EXPECT_TRUE(s[2].hosts[0].intercept);
  EXPECT_EQ(s[2].ttl, seconds(600));  // no expected duration: the lifetime
  EXPECT_EQ(s[0].ttl, seconds(600));
}

TEST_F(SecretSpecTest, HighTierRefusesEnvAndFile) {
  for (SecretMode m : {SecretMode::kEnv, SecretMode::kFile}) {
    SecretRequest r{"openai", "openai", m, SecretTier::kHigh, "", "", {}, std::nullopt};
    expect_error({r}, {"secret 'openai' is tier high: env and file are refused; use mode broker"});
  }
}

TEST_F(SecretSpecTest, ExplicitModeOverridesTheTierBelowHigh) {
  SecretRequest r{"gh", "github", SecretMode::kEnv, SecretTier::kMedium, "GH_TOKEN",
                  "",   {},       std::nullopt};
  auto res = resolve({r});
  ASSERT_TRUE(res) << res.error().to_string();
  EXPECT_EQ(res->secrets[0].mode, SecretMode::kEnv);
  EXPECT_EQ(res->secrets[0].env_var, "GH_TOKEN");
}

TEST_F(SecretSpecTest, BrokerNeedsAHost) {
  SecretRequest r = broker("openai", "openai", "api.openai.com");
  r.hosts.clear();
  expect_error({r}, {"secrets[0] ('openai').hosts", "at least one host"});
}

TEST_F(SecretSpecTest, EnvVariableNamesAreCheckedAndReservedOnesRefused) {
  SecretRequest r{"x", "openai", SecretMode::kEnv, SecretTier::kLow, "1BAD", "", {}, std::nullopt};
  expect_error({r}, {"secrets[0] ('x').env_var", "not a variable name"});
  for (const char* reserved :
       {"PATH", "HOME", "LD_PRELOAD", "ld_library_path", "CORRAL_TOKEN", "HTTPS_PROXY",
        "http_proxy", "NO_PROXY", "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE"}) {
    r.env_var = reserved;
    expect_error({r}, {"env_var", reserved});
  }
  // The default name can be refused too, with a hint to set one.
  SecretRequest d{"path", "openai", SecretMode::kEnv, SecretTier::kLow, "", "", {}, std::nullopt};
  expect_error({d}, {"'PATH' (the default)", "set env_var"});
  SecretRequest digit{"1password", "openai", SecretMode::kEnv, SecretTier::kLow, "",
                      "",          {},       std::nullopt};
  expect_error({digit}, {"'1PASSWORD' (the default)"});
}

TEST_F(SecretSpecTest, FilePathIsAPlainNameUnderRunSecrets) {
  SecretRequest r{"gh",    "github", SecretMode::kFile, SecretTier::kMedium, "",
                  "token", {},       std::nullopt};
  auto res = resolve({r});
  ASSERT_TRUE(res) << res.error().to_string();
  EXPECT_EQ(res->secrets[0].path, "/run/secrets/token");
  r.path = "/run/secrets/gh.pem";
  res = resolve({r});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->secrets[0].path, "/run/secrets/gh.pem");
  for (const char* bad : {"../etc/passwd", "a/b", "/etc/shadow", "..", ".", ".hidden",
                          "/run/secrets/../x", "/run/secrets/"}) {
    r.path = bad;
    expect_error({r}, {"secrets[0] ('gh').path", "plain file name under /run/secrets"});
  }
}

TEST_F(SecretSpecTest, FieldsOfAnotherModeAreRefused) {
  SecretRequest r{"gh", "github", SecretMode::kFile, SecretTier::kMedium, "GH",
                  "",   {},       std::nullopt};
  expect_error({r}, {".env_var", "is for modes env and broker"});
  r = {"gh", "github", SecretMode::kEnv, SecretTier::kLow, "", "gh", {}, std::nullopt};
  expect_error({r}, {".path", "is for mode file"});
  r = {"gh",
       "github",
       SecretMode::kEnv,
       SecretTier::kLow,
       "",
       "",
       {{"github.com", 443, false}},
       std::nullopt};
  expect_error({r}, {".hosts", "are for mode broker"});
  r = {"gh", "github", SecretMode::kFile, SecretTier::kMedium, "", "", {}, seconds(10)};
  expect_error({r}, {".ttl", "is for mode broker"});
  SecretRequest b = broker("gh", "github", "github.com");
  b.path = "x";
  expect_error({b}, {".path", "env_var"});
}

TEST_F(SecretSpecTest, KeyMustExistAndErrorNamesTheKey) {
  SecretRequest r{"x", "nope", std::nullopt, SecretTier::kMedium, "", "", {}, std::nullopt};
  expect_error({r},
               {"secrets[0] ('x').key", "store key 'nope' is not in the daemon's secret store"});
  auto res = resolve({r});
  EXPECT_EQ(res.error().code, ErrorCode::kNotFound);
  r.key = "";
  expect_error({r}, {".key: missing"});
}

TEST_F(SecretSpecTest, S7NoWildcardKey) {
  for (const char* k : {"*", "open*", "*ai"}) {
    SecretRequest r{"x", k, std::nullopt, SecretTier::kMedium, "", "", {}, std::nullopt};
    expect_error({r}, {".key: wildcards are refused", "S7"});
  }
}

TEST_F(SecretSpecTest, S7AtMost32Secrets) {
  std::vector<SecretRequest> many;
  for (int i = 0; i < 33; ++i) {
    many.push_back({"s" + std::to_string(i),
                    "k" + std::to_string(i),
                    std::nullopt,
                    SecretTier::kMedium,
                    "",
                    "",
                    {},
                    std::nullopt});
  }
  expect_error(many, {"33 entries", "at most 32", "S7"});
}

TEST_F(SecretSpecTest, S7NamesAreDistinctAndAKeyIsUsedOnce) {
  SecretRequest a{"x", "openai", std::nullopt, SecretTier::kMedium, "", "", {}, std::nullopt};
  SecretRequest b{"x", "github", std::nullopt, SecretTier::kMedium, "", "", {}, std::nullopt};
  expect_error({a, b}, {"secrets[1] ('x').name", "already the name of secrets[0]"});
  b.name = "y";
  b.key = "openai";
  expect_error({a, b}, {"secrets[1] ('y').key", "'openai' is already used by secrets[0]", "S7"});
}

TEST_F(SecretSpecTest, DistinctVariablesAndFiles) {
  SecretRequest a{"a", "openai", SecretMode::kEnv, SecretTier::kLow, "TOKEN", "", {}, std::nullopt};
  SecretRequest b{"b", "github", SecretMode::kEnv, SecretTier::kLow, "TOKEN", "", {}, std::nullopt};
  expect_error({a, b}, {"secrets[1] ('b').env_var", "already set by secrets[0]"});
  SecretRequest f1{"f1",  "openai", SecretMode::kFile, SecretTier::kMedium, "",
                   "key", {},       std::nullopt};
  SecretRequest f2{"f2",  "github", SecretMode::kFile, SecretTier::kMedium, "",
                   "key", {},       std::nullopt};
  expect_error({f1, f2}, {"secrets[1] ('f2').path", "already the file of secrets[0]"});
}

TEST_F(SecretSpecTest, S7TwoBrokerSecretsMayNotNameTheSameHost) {
  auto a = broker("a", "openai", "api.example.com");
  auto b = broker("b", "github", "API.Example.com");  // lower-cased first
  expect_error({a, b}, {"secrets[1] ('b').hosts[0]", "also a host of secrets[0] ('a'", "S7"});
  // A wildcard covering another secret's host is the same host.
  b.hosts = {{"*.example.com", 443, false}};
  expect_error({a, b}, {"also a host of secrets[0]"});
  b.hosts = {{"*.com", 443, false}};  // too broad anyway
  expect_error({a, b}, {"not a host name or a '*.' pattern"});
  auto w1 = broker("w1", "openai", "*.example.com");
  auto w2 = broker("w2", "github", "*.eu.example.com");
  expect_error({w1, w2}, {"also a host of secrets[0]"});
  // Another port is another service.
  b.hosts = {{"api.example.com", 8443, false}};
  EXPECT_TRUE(resolve({a, b}));
  // And another domain, of course.
  b.hosts = {{"example.org", 443, false}};
  EXPECT_TRUE(resolve({a, b}));
  // Within one secret, a host listed twice.
  a.hosts.push_back({"api.example.com", 443, true});
  expect_error({a}, {"listed twice"});
}

TEST_F(SecretSpecTest, HostPatternsAreValidated) {
  for (const char* bad : {"", "*", "*.", "*.com", "https://api.example.com", "api.example.com:443",
                          "api.example.com/v1", "a..b", "-a.com", "a b.com", "*.*.com"}) {
    auto r = broker("x", "openai", bad);
    expect_error({r}, {"secrets[0] ('x').hosts[0]"});
  }
  auto r = broker("x", "openai", "api.example.com");
  r.hosts[0].port = 0;
  expect_error({r}, {"hosts[0].port"});
  EXPECT_TRUE(host_matches("*.example.com", "a.example.com"));
  EXPECT_TRUE(host_matches("*.example.com", "a.b.example.com"));
  EXPECT_FALSE(host_matches("*.example.com", "example.com"));
  EXPECT_FALSE(host_matches("*.example.com", "evilexample.com"));
  EXPECT_FALSE(host_matches("*.example.com", ".example.com"));
  EXPECT_TRUE(host_matches("api.example.com", "api.example.com"));
  EXPECT_FALSE(host_matches("api.example.com", "api.example.com.evil.net"));
}

TEST_F(SecretSpecTest, TtlDefaultsToOneAndAHalfTimesTheExpectedDurationCappedAtTheLifetime) {
  auto r = broker("x", "openai", "api.example.com");
  context_.expected_duration = seconds(101);
  auto res = resolve({r});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->secrets[0].ttl, seconds(152));  // 151.5 rounded up
  context_.expected_duration = seconds(500);
  res = resolve({r});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->secrets[0].ttl, seconds(600));  // 750 capped at the lifetime
  context_.expected_duration.reset();
  res = resolve({r});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->secrets[0].ttl, seconds(600));
}

TEST_F(SecretSpecTest, TtlMustBePositiveAndWithinTheLifetime) {
  auto r = broker("x", "openai", "api.example.com");
  r.ttl = seconds(60);
  auto res = resolve({r});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->secrets[0].ttl, seconds(60));
  r.ttl = seconds(0);
  expect_error({r}, {"secrets[0] ('x').ttl", "greater than 0"});
  r.ttl = seconds(-5);
  expect_error({r}, {".ttl", "greater than 0"});
  r.ttl = seconds(601);
  expect_error({r}, {".ttl", "longer than the sandbox's lifetime (600s)"});
  context_.expected_duration = seconds(0);
  r.ttl.reset();
  expect_error({r}, {"expected_duration"});
}

TEST_F(SecretSpecTest, BadNamesAreRefusedAndModeTierNamesParse) {
  for (const char* bad : {"", "-x", ".x", "a/b", "a b", "x*"}) {
    SecretRequest r{bad, "openai", std::nullopt, SecretTier::kMedium, "", "", {}, std::nullopt};
    expect_error({r}, {"secrets[0].name"});
  }
  SecretRequest longname{
      std::string(65, 'a'), "openai", std::nullopt, SecretTier::kMedium, "", "", {}, std::nullopt};
  expect_error({longname}, {"secrets[0].name"});
  EXPECT_EQ(*parse_secret_mode("broker"), SecretMode::kBroker);
  EXPECT_EQ(*parse_secret_tier("high"), SecretTier::kHigh);
  EXPECT_FALSE(parse_secret_mode("all"));
  EXPECT_FALSE(parse_secret_tier("HIGH"));
  EXPECT_EQ(secret_mode_name(SecretMode::kFile), "file");
  EXPECT_EQ(secret_tier_name(SecretTier::kLow), "low");
}

TEST_F(SecretSpecTest, NoRequestsIsNoSecrets) {
  auto res = resolve({});
  ASSERT_TRUE(res);
  EXPECT_TRUE(res->secrets.empty());
}

}  // namespace
}  // namespace corral::secrets
