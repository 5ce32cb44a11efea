// The streaming redactor (src/secrets/redactor.h): every encoded form,
// the known key formats, matches split across chunks at every offset, the
// hold-back (only what could still be a secret), overlapping values, and a
// differential check against a naive reference on random chunkings.
#include "secrets/redactor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "secrets/key_formats.h"
#include "secrets/secret_encodings.h"

namespace corral::secrets {
namespace {

std::mt19937_64& rng() {
  static std::mt19937_64 engine{std::random_device{}()};
  return engine;
}

std::string random_string(std::size_t n, std::string_view alphabet) {
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s.push_back(alphabet[pick(rng())]);
  return s;
}

constexpr std::string_view kAlnum =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
constexpr std::string_view kUpperDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

std::string random_bytes(std::size_t n) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s.push_back(static_cast<char>(byte(rng())));
  return s;
}

std::string random_printable(std::size_t n) {
  std::uniform_int_distribution<int> c(0x20, 0x7e);
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    s.push_back(i % 61 == 60 ? '\n' : static_cast<char>(c(rng())));
  }
  return s;
}

// Independent encoders (the classic 3-byte-group ones), to check the
// redactor's own forms against.
std::string b64(std::string_view in, bool url = false) {
  const char* t = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                      : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                       (static_cast<unsigned char>(in[i + 1]) << 8) |
                       static_cast<unsigned char>(in[i + 2]);
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], t[v & 63]};
  }
  if (i + 1 == in.size()) {
    const unsigned v = static_cast<unsigned char>(in[i]) << 16;
    out += {t[v >> 18], t[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    const unsigned v =
        (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8);
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], '='};
  }
  return out;
}

std::string hex(std::string_view in, bool upper) {
  const char* d = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  for (char c : in) {
    out.push_back(d[static_cast<unsigned char>(c) >> 4]);
    out.push_back(d[static_cast<unsigned char>(c) & 15]);
  }
  return out;
}

std::string percent(std::string_view in, bool upper, bool plus_for_space) {
  const char* d = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  for (char c : in) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(c);
    } else if (c == ' ' && plus_for_space) {
      out.push_back('+');
    } else {
      out += {'%', d[u >> 4], d[u & 15]};
    }
  }
  return out;
}

std::shared_ptr<const RedactionSet> build_set(const std::vector<NamedValue>& secrets,
                                              RedactorOptions options = {}) {
  auto set = RedactionSet::build(secrets, options);
  EXPECT_TRUE(set.has_value()) << (set ? "" : set.error().to_string());
  return set ? *set : nullptr;
}

// Feeds `text` in chunks of the given sizes (cycled), then finishes.
std::string stream_redact(const std::shared_ptr<const RedactionSet>& set, std::string_view text,
                          const std::vector<std::size_t>& sizes) {
  RedactStream stream(set);
  std::string out;
  std::size_t k = 0;
  while (!text.empty()) {
    const std::size_t n = std::min(text.size(), sizes[k++ % sizes.size()]);
    stream.feed(text.substr(0, n), out);
    EXPECT_LE(stream.held(), set->max_hold() + 0);
    text.remove_prefix(n);
  }
  stream.finish(out);
  EXPECT_EQ(stream.held(), 0u);
  return out;
}

bool contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}

std::size_t count(std::string_view hay, std::string_view needle) {
  std::size_t n = 0;
  for (auto at = hay.find(needle); at != std::string_view::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

TEST(Redactor, RefusesValuesTooShortToRedactAndNamesTheSecretOnly) {
  const std::string value = random_string(kMinRedactedValue - 1, kAlnum);
  auto set = RedactionSet::build({{"SHORT_KEY", value}});
  ASSERT_FALSE(set.has_value());
  EXPECT_EQ(set.error().code, ErrorCode::kInvalidArgument);
  const std::string text = set.error().to_string();
  EXPECT_TRUE(contains(text, "SHORT_KEY")) << text;
  EXPECT_TRUE(contains(text, "at least 8")) << text;
  EXPECT_FALSE(contains(text, value)) << text;
  EXPECT_TRUE(RedactionSet::build({{"OK_KEY", random_string(kMinRedactedValue, kAlnum)}}));
  EXPECT_FALSE(RedactionSet::build({{"bad name", random_string(16, kAlnum)}}));
  EXPECT_FALSE(RedactionSet::build({{"", random_string(16, kAlnum)}}));
  EXPECT_FALSE(RedactionSet::build({{"BIG", std::string(kMaxRedactedValue + 1, 'x')}}));
}

TEST(Redactor, ReplacesTheValueByItsName) {
  const std::string value = random_string(24, kAlnum);
  auto set = build_set({{"OPENAI_KEY", value}});
  EXPECT_EQ(redact(*set, "key=" + value + "\n"), "key=[REDACTED:OPENAI_KEY]\n");
  EXPECT_EQ(redact(*set, value), "[REDACTED:OPENAI_KEY]");
  EXPECT_EQ(redact(*set, value + value), "[REDACTED:OPENAI_KEY][REDACTED:OPENAI_KEY]");
  EXPECT_EQ(redact(*set, "no secret here\n"), "no secret here\n");
  // One byte off is another string.
  std::string near = value;
  near[5] ^= 1;
  EXPECT_EQ(redact(*set, near), near);
}

// The value inside a larger base64 blob at offsets 0..5 (all alignments),
// both alphabets: the output keeps the blob's other characters and at most
// the one character on each side that mixes the value's bits with its
// neighbours'.
TEST(Redactor, FindsBase64InEveryAlignmentAndBothAlphabets) {
  const std::string value = random_bytes(40);
  auto set = build_set({{"B64", value}});
  for (bool url : {false, true}) {
    for (std::size_t before = 0; before < 6; ++before) {
      for (std::size_t after = 0; after < 4; ++after) {
        const std::string blob = random_bytes(before) + value + random_bytes(after);
        const std::string encoded = b64(blob, url);
        const std::string out = redact(*set, "data: " + encoded + "\n");
        const auto at = out.find("[REDACTED:B64]");
        ASSERT_NE(at, std::string::npos) << "url=" << url << " before=" << before << " " << out;
        ASSERT_EQ(count(out, "[REDACTED:"), 1u) << out;
        const std::string left = out.substr(6, at - 6);
        const std::string right = out.substr(at + 14, out.size() - at - 14 - 1);
        EXPECT_EQ(encoded.substr(0, left.size()), left);
        EXPECT_EQ(encoded.substr(encoded.size() - right.size()), right);
        const std::size_t removed = encoded.size() - left.size() - right.size();
        // 40 bytes are 53.3 characters of 6 bits; at most one partial
        // character stays on each side.
        EXPECT_GE(removed, 52u) << "url=" << url << " before=" << before << " after=" << after;
        // The value's own characters are gone.
        const std::size_t first_bit = before * 8, last_bit = (before + value.size()) * 8;
        EXPECT_LE(left.size() * 6, first_bit + 5);
        EXPECT_GE(encoded.size() - right.size(), (last_bit - 5) / 6);
      }
    }
  }
}

// `echo "$KEY" | base64` and `printf %s "$KEY" | base64`: the value ends the
// blob, so its last characters and the padding go too; nothing is left.
TEST(Redactor, Base64OfTheWholeValueLeavesNothing) {
  for (std::size_t n : {8, 9, 10, 31, 32, 33}) {
    const std::string value = random_string(n, kAlnum);
    auto set = build_set({{"K", value}});
    for (bool url : {false, true}) {
      EXPECT_EQ(redact(*set, b64(value, url) + "\n"), "[REDACTED:K]\n") << n;
      EXPECT_EQ(redact(*set, b64(value + "\n", url) + "\n"), "[REDACTED:K]\n") << n;
      for (std::size_t before = 1; before < 3; ++before) {
        const std::string blob = random_bytes(before) + value;
        const std::string out = redact(*set, b64(blob, url));
        EXPECT_EQ(out.substr(out.size() - 12), "[REDACTED:K]") << n << " " << before;
        EXPECT_LE(out.size(), 12 + 3);  // the characters of the other bytes
      }
    }
  }
}

// GNU base64 wraps at 76 characters: a long value printed by
// `echo "$KEY" | base64` spans lines.
TEST(Redactor, Base64WrappedAt76ColumnsOfALongValue) {
  const std::string value = random_string(120, kAlnum);
  auto set = build_set({{"LONG_KEY", value}});
  for (const std::string& plain : {value, value + "\n"}) {
    const std::string encoded = b64(plain);
    std::string wrapped;
    for (std::size_t i = 0; i < encoded.size(); i += 76) wrapped += encoded.substr(i, 76) + "\n";
    ASSERT_GT(count(wrapped, "\n"), 1u);
    EXPECT_EQ(redact(*set, "$ echo \"$KEY\" | base64\n" + wrapped + "$ "),
              "$ echo \"$KEY\" | base64\n[REDACTED:LONG_KEY]\n$ ");
    EXPECT_EQ(stream_redact(set, wrapped, {7}), "[REDACTED:LONG_KEY]\n");
  }
}

TEST(Redactor, Base64FormsMatchAnIndependentEncoder) {
  const std::string value = random_bytes(17);
  for (int a = 0; a < 3; ++a) {
    const std::string encoded = b64(std::string(static_cast<std::size_t>(a), '\0') + value);
    const std::string form = base64_aligned(value, a, Base64Alphabet::kStandard);
    EXPECT_TRUE(contains(encoded, form)) << a;
    EXPECT_GE(form.size(), value.size() * 4 / 3 - 2);
  }
  EXPECT_EQ(base64_aligned("foobar", 0, Base64Alphabet::kStandard), "Zm9vYmFy");
  EXPECT_EQ(base64_aligned("fooba", 0, Base64Alphabet::kStandard), "Zm9vYm");
}

TEST(Redactor, FindsPercentEncodingsInBothCasesAndPlusForSpace) {
  const std::string value = random_string(8, kAlnum) + "/+= &?%:" + random_string(8, kAlnum);
  auto set = build_set({{"URLKEY", value}});
  for (const std::string& form :
       {percent(value, true, false), percent(value, false, false), percent(value, true, true)}) {
    ASSERT_NE(form, value);
    const std::string out = redact(*set, "GET /cb?token=" + form + "&x=1");
    EXPECT_EQ(out, "GET /cb?token=[REDACTED:URLKEY]&x=1") << form;
  }
  EXPECT_TRUE(contains(percent(value, false, false), "%2f"));
  EXPECT_TRUE(contains(percent(value, true, false), "%2F"));
}

TEST(Redactor, FindsHexInBothCases) {
  const std::string value = random_bytes(20);
  auto set = build_set({{"HEXKEY", value}});
  for (bool upper : {false, true}) {
    const std::string out = redact(*set, "0x" + hex(value, upper) + " done");
    EXPECT_EQ(out, "0x[REDACTED:HEXKEY] done") << upper;
  }
}

TEST(Redactor, EncodedFormsCanBeSwitchedOff) {
  const std::string value = random_string(20, kAlnum);
  auto set = build_set({{"K", value}}, {.key_formats = false, .encoded_forms = false});
  EXPECT_EQ(redact(*set, hex(value, false)), hex(value, false));
  EXPECT_EQ(redact(*set, value), "[REDACTED:K]");
}

struct FormatCase {
  std::string token;
  std::string_view format;
};

std::string jwt() {
  const std::string header = b64(R"({"alg":"HS256","typ":"JWT"})", true);
  const std::string payload =
      b64(R"({"sub":")" + random_string(10, kAlnum) + R"(","iat":1516239022})", true);
  auto strip = [](std::string s) {
    while (!s.empty() && s.back() == '=') s.pop_back();
    return s;
  };
  return strip(header) + "." + strip(payload) + "." +
         random_string(43, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_");
}

std::string pem(std::string_view label) {
  std::string body;
  for (int i = 0; i < 20; ++i) body += b64(random_bytes(48)) + "\n";
  return "-----BEGIN " + std::string(label) + "-----\n" + body + "-----END " + std::string(label) +
         "-----";
}

std::vector<FormatCase> format_cases() {
  return {
      {"AKIA" + random_string(16, kUpperDigits), "aws-access-key-id"},
      {"ASIA" + random_string(16, kUpperDigits), "aws-access-key-id"},
      {"ghp_" + random_string(36, kAlnum), "github-token"},
      {"gho_" + random_string(36, kAlnum), "github-token"},
      {"ghs_" + random_string(36, kAlnum), "github-token"},
      {"github_pat_" + random_string(22, kAlnum) + "_" + random_string(59, kAlnum), "github-token"},
      {"xoxb-" + random_string(12, "0123456789") + "-" + random_string(24, kAlnum), "slack-token"},
      {"xoxp-" + random_string(30, kAlnum), "slack-token"},
      {"sk-" + random_string(48, kAlnum), "sk-api-key"},
      {"sk-proj-" + random_string(40, kAlnum) + "_" + random_string(40, kAlnum), "sk-api-key"},
      {"sk-ant-api03-" + random_string(80, kAlnum) + "-" + random_string(10, kAlnum) + "AA",
       "sk-api-key"},
      {pem("PRIVATE KEY"), "private-key"},
      {pem("RSA PRIVATE KEY"), "private-key"},
      {pem("OPENSSH PRIVATE KEY"), "private-key"},
      {pem("PGP PRIVATE KEY BLOCK"), "private-key"},
      {jwt(), "jwt"},
  };
}

TEST(Redactor, FindsKnownKeyFormatsWithoutBeingTold) {
  auto set = build_set({});
  ASSERT_FALSE(set->empty());
  for (const auto& c : format_cases()) {
    const std::string expected = "export X=[REDACTED:" + std::string(c.format) + "]\n";
    EXPECT_EQ(redact(*set, "export X=" + c.token + "\n"), expected) << c.token;
    // Split in two everywhere, and one byte at a time.
    const std::string text = "export X=" + c.token + "\n";
    EXPECT_EQ(stream_redact(set, text, {1}), expected) << c.token;
    for (std::size_t cut = 1; cut < text.size(); cut += 1 + text.size() / 97) {
      EXPECT_EQ(stream_redact(set, text, {cut, text.size()}), expected) << c.token << " @" << cut;
    }
    // At the very end of the stream too.
    EXPECT_EQ(redact(*set, c.token), "[REDACTED:" + std::string(c.format) + "]");
  }
}

TEST(Redactor, KeyFormatsCanBeSwitchedOff) {
  auto set = build_set({}, {.key_formats = false});
  EXPECT_TRUE(set->empty());
  for (const auto& c : format_cases()) EXPECT_EQ(redact(*set, c.token), c.token);
}

// What ordinary output looks like: none of it may be touched.
const char* const kOrdinaryText[] = {
    "$ ls -la\ntotal 48\ndrwxr-xr-x  5 agent agent 4096 Nov 29 20:01 .\n"
    "-rw-r--r--  1 agent agent  220 Nov 29 20:01 .bash_logout\n",
    "The task-force met; pip install scikit-learn (import sklearn; sk-learn is not a package).\n",
    "risk-free, desk-top, mask-rcnn, ask-me, task-12345678901234567890123456789012345\n",
    R"({"id": 42, "name": "eyJ", "token_type": "bearer", "expires_in": 3600, "scope": "read"})"
    "\n",
    "header eyJhbGciOiJIUzI1NiJ9 without dots, and eyJ alone, and eyJabc.def\n",
    "int main(int argc, char** argv) {\n  std::vector<int> v{1, 2, 3};\n  return v.size();\n}\n",
    "def f(x):\n    return {'sk': x, 'ghp': None}  # sk- and ghp_ in prose\n",
    "AKIA is a prefix; AKIAIOSFODNN7EXAMPLE1234 is too long; akiaiosfodnn7example is lower\n",
    "xoxb-short and xoxq-0123456789abcdef are no Slack tokens\n",
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ==\n-----END CERTIFICATE-----\n",
    "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----\n",
    "commit 3f9a1c2e4b5d6f708192a3b4c5d6e7f809182736\nAuthor: A <a@example.com>\n",
    "Enter value: ",
    "$ ",
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n",
};

TEST(Redactor, LeavesOrdinaryTextAlone) {
  std::vector<std::string> values;
  std::vector<NamedValue> secrets;
  values.reserve(1000);
  for (int i = 0; i < 1000; ++i) values.push_back(random_string(32, kAlnum));
  for (int i = 0; i < 1000; ++i) secrets.push_back({"S" + std::to_string(i), values[i]});
  for (const auto& set : {build_set({}), build_set(secrets)}) {
    for (const char* text : kOrdinaryText) {
      EXPECT_EQ(redact(*set, text), text);
      EXPECT_EQ(stream_redact(set, text, {1}), text);
    }
  }
}

TEST(Redactor, PromptsAreNotHeldBack) {
  std::vector<std::string> values;
  std::vector<NamedValue> secrets;
  for (int i = 0; i < 1000; ++i) values.push_back(random_string(32, kAlnum));
  for (int i = 0; i < 1000; ++i) secrets.push_back({"S" + std::to_string(i), values[i]});
  auto set = build_set(secrets);
  RedactStream stream(set);
  std::string out;
  stream.feed("$ ", out);
  EXPECT_EQ(out, "$ ");
  stream.feed("echo hi\nhi\n$ ", out);
  EXPECT_EQ(out, "$ echo hi\nhi\n$ ");
  stream.feed("Enter value: ", out);
  EXPECT_EQ(out, "$ echo hi\nhi\n$ Enter value: ");
  EXPECT_EQ(stream.held(), 0u);
  // ...but a prefix of a secret is.
  stream.feed(values[7].substr(0, 10), out);
  EXPECT_EQ(out, "$ echo hi\nhi\n$ Enter value: ");
  EXPECT_EQ(stream.held(), 10u);
  // ...and an anchor of a key format, until the token is decided.
  RedactStream keys(build_set({}));
  std::string k;
  keys.feed("id: AKIA", k);
  EXPECT_EQ(k, "id: ");
  keys.feed("1234", k);
  EXPECT_EQ(k, "id: ");
  keys.feed(" is short\n", k);
  EXPECT_EQ(k, "id: AKIA1234 is short\n");
}

TEST(Redactor, ValueSplitAtEveryOffsetAlsoItsBase64) {
  const std::string value = random_string(40, kAlnum);
  auto set = build_set({{"API_KEY", value}});
  const std::string encoded = b64("{\"k\":\"" + value + "\"}");
  const std::string text = "start " + value + " middle " + encoded + " end\n";
  const std::string whole = redact(*set, text);
  EXPECT_EQ(count(whole, "[REDACTED:API_KEY]"), 2u) << whole;
  EXPECT_FALSE(contains(whole, value));
  for (std::size_t cut = 0; cut <= text.size(); ++cut) {
    RedactStream stream(set);
    std::string out;
    stream.feed(std::string_view(text).substr(0, cut), out);
    // Nothing written so far holds a piece of the value longer than 3.
    for (std::size_t i = 0; i + 4 <= value.size(); ++i) {
      ASSERT_FALSE(contains(out, value.substr(i, 4))) << cut;
    }
    stream.feed(std::string_view(text).substr(cut), out);
    stream.finish(out);
    ASSERT_EQ(out, whole) << "cut at " << cut;
  }
}

// Forms longer than the hold-back scan window (64 bytes): hex of 48 bytes
// is 96 characters, its percent-encoding 144.
TEST(Redactor, LongFormsSplitAtEveryOffset) {
  const std::string value = random_bytes(48);
  auto set = build_set({{"LONG", value}});
  for (const std::string& form :
       {hex(value, false), hex(value, true), percent(value, true, false)}) {
    const std::string text = "<" + form + ">";
    ASSERT_EQ(redact(*set, text), "<[REDACTED:LONG]>");
    for (std::size_t cut = 0; cut <= text.size(); ++cut) {
      RedactStream stream(set);
      std::string out;
      stream.feed(std::string_view(text).substr(0, cut), out);
      // Until the form is complete, only "<" may come out.
      if (cut <= form.size()) {
        ASSERT_LE(out.size(), 1u) << cut;
      }
      stream.feed(std::string_view(text).substr(cut), out);
      stream.finish(out);
      ASSERT_EQ(out, "<[REDACTED:LONG]>") << "cut at " << cut;
    }
    ASSERT_EQ(stream_redact(set, text, {1}), "<[REDACTED:LONG]>");
    ASSERT_EQ(stream_redact(set, text, {70, 1, 30}), "<[REDACTED:LONG]>");
  }
}

TEST(Redactor, OneByteChunksGiveTheSameOutput) {
  const std::string a = random_string(32, kAlnum), b = random_bytes(24);
  auto set = build_set({{"A", a}, {"B", b}});
  std::string text = random_printable(300) + a + random_printable(50) + b64(b) + "\n" +
                     hex(b, true) + " ghp_" + random_string(36, kAlnum) + " " + jwt() + "\n" +
                     pem("EC PRIVATE KEY") + "\n" + a;
  const std::string whole = redact(*set, text);
  EXPECT_EQ(count(whole, "[REDACTED:A]"), 2u);
  EXPECT_EQ(count(whole, "[REDACTED:B]"), 2u);
  EXPECT_EQ(count(whole, "[REDACTED:github-token]"), 1u);
  EXPECT_EQ(count(whole, "[REDACTED:jwt]"), 1u);
  EXPECT_EQ(count(whole, "[REDACTED:private-key]"), 1u);
  EXPECT_EQ(stream_redact(set, text, {1}), whole);
  EXPECT_EQ(stream_redact(set, text, {3, 1, 7, 2}), whole);
  EXPECT_EQ(stream_redact(set, text, {4096}), whole);
}

TEST(Redactor, HalfAPauseThenTheOtherHalf) {
  const std::string value = random_string(32, kAlnum);
  auto set = build_set({{"DB_PASSWORD", value}});
  RedactStream stream(set);
  std::string out;
  stream.feed("password: " + value.substr(0, 16), out);
  EXPECT_EQ(out, "password: ");
  EXPECT_FALSE(contains(out, value.substr(0, 4)));
  EXPECT_EQ(stream.held(), 16u);
  // A pause: nothing more arrives, nothing more comes out.
  stream.feed("", out);
  EXPECT_EQ(out, "password: ");
  stream.feed(value.substr(16) + "\n", out);
  EXPECT_EQ(out, "password: [REDACTED:DB_PASSWORD]\n");
  EXPECT_EQ(stream.redactions(), 1u);
}

TEST(Redactor, AValueContainingAnotherLeaksNeither) {
  const std::string inner = random_string(12, kAlnum);
  const std::string outer = random_string(6, kAlnum) + inner + random_string(6, kAlnum);
  auto set = build_set({{"INNER", inner}, {"OUTER", outer}});
  EXPECT_EQ(redact(*set, "<" + outer + ">"), "<[REDACTED:OUTER]>");
  EXPECT_EQ(redact(*set, "<" + inner + ">"), "<[REDACTED:INNER]>");
  // A value that is a prefix of another.
  const std::string longer = inner + random_string(10, kAlnum);
  auto prefixes = build_set({{"SHORT", inner}, {"LONG", longer}});
  EXPECT_EQ(redact(*prefixes, longer + "!"), "[REDACTED:LONG]!");
  EXPECT_EQ(redact(*prefixes, inner + "!"), "[REDACTED:SHORT]!");
  EXPECT_EQ(stream_redact(prefixes, longer + "!", {1}), "[REDACTED:LONG]!");
  // Overlapping values: one placeholder, named after the leftmost.
  const std::string x = random_string(8, kAlnum), y = random_string(8, kAlnum),
                    z = random_string(8, kAlnum);
  auto overlap = build_set({{"XY", x + y}, {"YZ", y + z}});
  EXPECT_EQ(redact(*overlap, "[" + x + y + z + "]"), "[[REDACTED:XY]]");
  EXPECT_EQ(stream_redact(overlap, "[" + x + y + z + "]", {1}), "[[REDACTED:XY]]");
  // Touching values: one each.
  EXPECT_EQ(redact(*overlap, x + y + y + z), "[REDACTED:XY][REDACTED:YZ]");
}

TEST(Redactor, AThousandSecretsWithAllTheirForms) {
  std::vector<std::string> values;
  std::vector<NamedValue> secrets;
  for (int i = 0; i < 1000; ++i) values.push_back(random_string(16 + i % 48, kAlnum) + "+/");
  for (int i = 0; i < 1000; ++i) secrets.push_back({"S" + std::to_string(i), values[i]});
  auto set = build_set(secrets);
  ASSERT_GE(set->literal_count(), 9000u);  // 9 to 12 forms each
  std::string text;
  std::vector<int> used;
  std::uniform_int_distribution<int> pick(0, 999);
  for (int k = 0; k < 60; ++k) {
    const int i = pick(rng());
    used.push_back(i);
    text += random_printable(200) + " ";
    switch (k % 5) {
      case 0:
        text += values[i];
        break;
      case 1:
        text += b64(random_bytes(k % 3) + values[i]);
        break;
      case 2:
        text += b64(values[i], true);
        break;
      case 3:
        text += hex(values[i], k % 2);
        break;
      case 4:
        text += percent(values[i], k % 2, false);
        break;
    }
    text += " ";
  }
  const std::string out = stream_redact(set, text, {4096, 13, 1000});
  EXPECT_EQ(out, redact(*set, text));
  for (std::size_t k = 0; k < used.size(); ++k) {
    EXPECT_TRUE(contains(out, "[REDACTED:S" + std::to_string(used[k]) + "]")) << k;
  }
  for (const auto& v : values) ASSERT_FALSE(contains(out, v));
}

TEST(Redactor, BinaryDataWithNuls) {
  std::string value = random_bytes(16);
  value[0] = '\0';  // Vectorscan's literal API refuses a leading NUL: not used
  value[9] = '\0';
  auto set = build_set({{"BIN", value}});
  const std::string text =
      std::string("\0\0\xff", 3) + value + std::string(5, '\0') + hex(value, false);
  const std::string out = stream_redact(set, text, {1, 2});
  EXPECT_EQ(
      out, std::string("\0\0\xff", 3) + "[REDACTED:BIN]" + std::string(5, '\0') + "[REDACTED:BIN]");
  EXPECT_FALSE(contains(out, value));
}

TEST(Redactor, FinishFlushesAHeldPrefixThatWasNoSecret) {
  const std::string value = random_string(20, kAlnum);
  auto set = build_set({{"K", value}});
  RedactStream stream(set);
  std::string out;
  stream.feed("tail " + value.substr(0, 12), out);
  EXPECT_EQ(out, "tail ");
  EXPECT_EQ(stream.held(), 12u);
  stream.finish(out);
  EXPECT_EQ(out, "tail " + value.substr(0, 12));
  EXPECT_EQ(stream.held(), 0u);
  // The stream takes a new one after finish().
  out.clear();
  stream.feed(value, out);
  stream.finish(out);
  EXPECT_EQ(out, "[REDACTED:K]");
}

TEST(Redactor, AnEmptySetPassesEverythingThrough) {
  auto set = build_set({}, {.key_formats = false});
  ASSERT_TRUE(set->empty());
  RedactStream stream(set);
  std::string out;
  const std::string data = random_bytes(1000);
  stream.feed(data, out);
  EXPECT_EQ(out, data);
  EXPECT_EQ(stream.held(), 0u);
}

TEST(Redactor, HoldsBackLittleOnOrdinaryText) {
  std::vector<std::string> values;
  std::vector<NamedValue> secrets;
  for (int i = 0; i < 1000; ++i) values.push_back(random_string(40, kAlnum));
  for (int i = 0; i < 1000; ++i) secrets.push_back({"S" + std::to_string(i), values[i]});
  auto set = build_set(secrets);
  RedactStream stream(set);
  std::string out;
  std::size_t fed = 0, most = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string chunk = random_printable(4096);
    stream.feed(chunk, out);
    fed += chunk.size();
    most = std::max(most, stream.held());
    EXPECT_EQ(out.size() + stream.held(), fed);
  }
  // A random tail is a prefix of some base64/hex form for a few bytes.
  EXPECT_LE(most, 16u);
}

// A run of overlapping matches longer than kMaxHeldRun is written out in
// pieces instead of being held without bound, and leaks nothing.
TEST(Redactor, AnEndlessRunOfOverlappingMatchesIsBounded) {
  const std::string x = random_string(8, kAlnum), y = random_string(8, kAlnum);
  auto set = build_set({{"XY", x + y}, {"YX", y + x}});
  RedactStream stream(set);
  std::string out;
  std::size_t most = 0;
  for (int i = 0; i < 20000; ++i) {
    stream.feed(x + y, out);
    most = std::max(most, stream.held());
  }
  stream.finish(out);
  EXPECT_LE(most, set->max_hold());
  EXPECT_GT(count(out, "[REDACTED:"), 1u);
  EXPECT_FALSE(contains(out, x));
  EXPECT_FALSE(contains(out, y));
  for (std::size_t i = 0; i < out.size();) {
    ASSERT_EQ(out[i], '[') << "raw byte at " << i;
    const auto close = out.find(']', i);
    ASSERT_NE(close, std::string::npos);
    i = close + 1;
  }
}

// A naive reference: every occurrence of every form, merged; the result must
// equal the stream's whatever the chunking.
std::string reference_redact(const std::vector<NamedValue>& secrets, std::string_view text) {
  struct Iv {
    std::size_t start, end, secret;
  };
  std::vector<Iv> ivs;
  for (std::size_t s = 0; s < secrets.size(); ++s) {
    std::vector<std::string> forms = redaction_forms(secrets[s].value);
    for (const auto& f : forms) {
      for (auto at = text.find(f); at != std::string_view::npos; at = text.find(f, at + 1)) {
        ivs.push_back({at, at + f.size(), s});
      }
    }
  }
  std::sort(ivs.begin(), ivs.end(), [](const Iv& a, const Iv& b) {
    if (a.start != b.start) return a.start < b.start;
    if (a.end != b.end) return a.end > b.end;
    return a.secret < b.secret;
  });
  std::string out;
  std::size_t cursor = 0;
  for (std::size_t i = 0; i < ivs.size();) {
    std::size_t stop = ivs[i].end, j = i + 1;
    while (j < ivs.size() && ivs[j].start < stop) stop = std::max(stop, ivs[j++].end);
    out.append(text.substr(cursor, ivs[i].start - cursor));
    out += "[REDACTED:" + secrets[ivs[i].secret].name + "]";
    cursor = stop;
    i = j;
  }
  out.append(text.substr(cursor));
  return out;
}

TEST(Redactor, MatchesANaiveReferenceOnRandomChunkings) {
  std::uniform_int_distribution<int> len(8, 12), chunk(1, 40), pieces(1, 6);
  for (int round = 0; round < 40; ++round) {
    // A tiny alphabet, so that values overlap, nest and repeat.
    std::vector<std::string> values;
    std::vector<NamedValue> secrets;
    for (int i = 0; i < 6; ++i) values.push_back(random_string(len(rng()), "ab"));
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    for (std::size_t i = 0; i < values.size(); ++i) {
      secrets.push_back({"V" + std::to_string(i), values[i]});
    }
    auto set = build_set(secrets, {.key_formats = false});
    std::string text;
    for (int k = 0; k < 30; ++k) {
      text += random_string(static_cast<std::size_t>(chunk(rng())), "abc");
      if (k % 3 == 0) text += values[static_cast<std::size_t>(k) % values.size()];
    }
    const std::string expected = reference_redact(secrets, text);
    EXPECT_EQ(redact(*set, text), expected) << "round " << round;
    std::vector<std::size_t> sizes;
    for (int p = pieces(rng()); p > 0; --p) sizes.push_back(static_cast<std::size_t>(chunk(rng())));
    ASSERT_EQ(stream_redact(set, text, sizes), expected) << "round " << round;
  }
}

TEST(Redactor, StreamsOfOneSetRunOnManyThreads) {
  const std::string value = random_string(24, kAlnum);
  auto set = build_set({{"SHARED", value}});
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (stream_redact(set, "x" + value + "y", {5}) != "x[REDACTED:SHARED]y") ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace corral::secrets
