// AuditRedactor (issue 12, item 7): every string of every audit record
// passes it. Values are found in any letter case (host names reach the
// records lower-cased), with their encoded forms; broker tokens by shape,
// in any case, plain, hex and base64 at every alignment.
#include "secrets/audit_redactor.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/base64.h"

namespace corral::secrets {
namespace {

constexpr std::string_view kToken = "corral_tok_3kV9qN0bW7cXhT2yLmZ8aR4sD1fG6jK5pE0uI9oA7wB";
constexpr std::string_view kValue = "AbCdEf-GhIjKl-12345";

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string swapped(std::string s) {
  for (char& c : s)
    c = std::isupper(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c))
                                                    : static_cast<char>(std::toupper(c));
  return s;
}
std::string hex(std::string_view s, bool up) {
  const char* d = up ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += d[c >> 4];
    out += d[c & 0xf];
  }
  return out;
}
std::string url_safe(std::string b) {
  for (char& c : b) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return b;
}

// `secret` is gone from `out` in any case, or only one edge character of
// it (base64 inside a blob) is left.
void expect_gone(const std::string& out, std::string_view secret, const std::string& in) {
  EXPECT_EQ(lower(out).find(lower(std::string(secret.substr(1, secret.size() - 2)))),
            std::string::npos)
      << in << " -> " << out;
}

std::shared_ptr<const AuditRedactor> make() {
  auto exact = RedactionSet::build({{"api", kValue}});
  EXPECT_TRUE(exact.has_value());
  auto r = AuditRedactor::build(*exact, {{"api", kValue}});
  EXPECT_TRUE(r.has_value()) << r.error().message;
  return *r;
}

TEST(AuditRedactor, TokensInAnyCaseAndEncodingAreReplaced) {
  const std::string t(kToken);
  std::vector<std::string> forms = {
      t, lower(t), upper(t), swapped(t), hex(t, false), hex(t, true), swapped(hex(t, false))};
  for (const std::string pad : {"", "x", "xy"}) {
    std::string b = api::base64_encode(pad + t);
    forms.push_back(b);
    forms.push_back(url_safe(b));
    forms.push_back(lower(b));
    forms.push_back(upper(url_safe(b)));
  }
  for (const auto& form : forms) {
    const std::string in = "GET /llm/" + form + "?q=1 Host: " + form + ".evil.test";
    const std::string out = redact_token_shapes(in);
    EXPECT_EQ(lower(out).find(lower(t.substr(11, 30))), std::string::npos) << in << " -> " << out;
    expect_gone(out, form, in);
    EXPECT_NE(out.find(kTokenPlaceholder), std::string::npos) << out;
    EXPECT_EQ(out.rfind("GET /llm/", 0), 0u) << "the rest keeps its case: " << out;
  }
  // A mention of the prefix alone is no token.
  EXPECT_EQ(redact_token_shapes("tokens look like corral_tok_..."),
            "tokens look like corral_tok_...");
  EXPECT_EQ(redact_token_shapes("Host: A.Example"), "Host: A.Example");
}

TEST(AuditRedactor, ValuesInAnyCaseAndEncodingAreReplaced) {
  auto r = make();
  const std::string v(kValue);
  std::vector<std::string> forms = {
      v, lower(v), upper(v), swapped(v), hex(v, false), hex(v, true), swapped(hex(v, false))};
  for (const std::string pad : {"", "x", "xy"}) {
    std::string b = api::base64_encode(pad + v + "!!");
    forms.push_back(lower(b));
    forms.push_back(upper(url_safe(b)));
  }
  for (const auto& form : forms) {
    const std::string in = "name " + form + ".evil.test";
    const std::string out = r->redact(in);
    EXPECT_EQ(lower(out).find(lower(v)), std::string::npos) << in << " -> " << out;
    EXPECT_EQ(lower(out).find(lower(hex(v, false))), std::string::npos) << in << " -> " << out;
    EXPECT_NE(out.find("[REDACTED:api]"), std::string::npos) << in << " -> " << out;
  }
  // Found exactly: the rest of the string keeps its case. Found only in
  // another case: the string is lower-cased around the placeholder.
  EXPECT_EQ(r->redact("Host: " + v + " OK"), "Host: [REDACTED:api] OK");
  EXPECT_EQ(r->redact("Host: " + upper(v) + " OK"), "host: [REDACTED:api] ok");
  // Tokens and key formats through the same call.
  EXPECT_EQ(r->redact("k=" + upper(std::string(kToken))), "k=" + std::string(kTokenPlaceholder));
  EXPECT_EQ(r->redact("id AKIAIOSFODNN7EXAMPLE"), "id [REDACTED:aws-access-key-id]");
  // Ordinary text passes unchanged.
  EXPECT_EQ(r->redact("network.dns Allowed.Test"), "network.dns Allowed.Test");
}

TEST(AuditRedactor, AnEmptyStoreStillReplacesTokens) {
  auto r = AuditRedactor::build(nullptr, {});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ((*r)->redact("x " + lower(std::string(kToken))), "x " + std::string(kTokenPlaceholder));
  EXPECT_EQ((*r)->redact("plain"), "plain");
}

}  // namespace
}  // namespace corral::secrets
