// The response side of broker mode (issue 12, point 7 "responses"): what a
// swap put into a request is written back as the token in the answer
// (secrets/reflection_guard.h), in every form the redactor knows, across
// any split of the stream, and the HTTP answer is reframed so that its
// length stays right (net/scrubbed_response.h).
#include <gtest/gtest.h>
#include <sodium.h>

#include <random>
#include <string>
#include <vector>

#include "http/http_parser.h"
#include "egress/scrubbed_response.h"
#include "secrets/broker.h"
#include "secrets/reflection_guard.h"
#include "secrets/secret_encodings.h"

namespace corral {
namespace {

using secrets::SwappedText;

std::string random_text(std::size_t n) {
  EXPECT_TRUE(secrets::sodium_ready());
  static constexpr char kChars[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  std::string v;
  for (std::size_t i = 0; i < n; ++i) v.push_back(kChars[randombytes_uniform(62)]);
  return v;
}

std::string b64(std::string_view s) {
  std::string out(sodium_base64_ENCODED_LEN(s.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(s.data()),
                    s.size(), sodium_base64_VARIANT_ORIGINAL);
  out.resize(out.size() - 1);
  return out;
}

std::shared_ptr<const secrets::RedactionSet> guard_for(const std::vector<SwappedText>& swapped) {
  auto set = secrets::reflection_set(swapped);
  EXPECT_TRUE(set) << set.error().to_string();
  return set ? *set : nullptr;
}

SwappedText value_text(const std::string& value, const std::string& token) {
  return {std::make_shared<const secrets::SecretValue>(value), token, true};
}

// Values with bytes of every kind the encodings treat differently: plain
// base62, URL-reserved characters and spaces, '/' and '+' in base64, and
// binary bytes.
std::vector<std::string> sample_values() {
  return {"sk-live-" + random_text(40), "p@ss w/rd:" + random_text(12) + "?&=+%",
          std::string("\xff\xfe\x00\x01", 4) + random_text(20), random_text(8),
          random_text(100)};  // long: its base64 wraps at 76 columns
}

TEST(ReflectionGuard, EveryFormOfTheValueComesBackAsTheSameFormOfTheToken) {
  for (const std::string& value : sample_values()) {
    const std::string token = "corral_tok_" + random_text(43);
    auto set = guard_for({value_text(value, token)});
    ASSERT_TRUE(set);
    // Every form the redactor looks for, inside ordinary text.
    for (const std::string& form : secrets::redaction_forms(value)) {
      const std::string out = secrets::redact(*set, "before <" + form + "> after");
      EXPECT_EQ(out.find(form), std::string::npos) << "a form of the value came back";
      EXPECT_EQ(out.rfind("before <", 0), 0u) << out;
    }
    // The forms a reflecting host returns whole come back exactly as the
    // token's: raw, percent-encoded (the token needs no escapes), hex and
    // the whole base64.
    EXPECT_EQ(secrets::redact(*set, "k=" + value + ";"), "k=" + token + ";");
    for (const std::string& u : secrets::url_forms(value))
      EXPECT_EQ(secrets::redact(*set, "q=" + u + "&"), "q=" + token + "&");
    const auto vh = secrets::hex_forms(value);
    const auto th = secrets::hex_forms(token);
    EXPECT_EQ(secrets::redact(*set, "[" + vh[0] + "]"), "[" + th[0] + "]");
    EXPECT_EQ(secrets::redact(*set, "\"" + b64(value) + "\""), "\"" + b64(token) + "\"");
    // Text without the value passes as it is.
    const std::string plain = "nothing secret here: " + random_text(200);
    EXPECT_EQ(secrets::redact(*set, plain), plain);
  }
}

TEST(ReflectionGuard, ABasicCredentialComesBackAsTheOneTheSandboxSent) {
  const std::string value = "ghp_" + random_text(36);
  const std::string token = "corral_tok_" + random_text(43);
  for (const std::string user : {"x-access-token", "u", "", "a longer user name"}) {
    const std::string sent = b64(user + ":" + value);
    const std::string had = b64(user + ":" + token);
    auto set = guard_for({value_text(value, token),
                          {std::make_shared<const secrets::SecretValue>(sent), had, false}});
    ASSERT_TRUE(set);
    // Reflected as sent (an echo of the Authorization field).
    EXPECT_EQ(secrets::redact(*set, "Authorization: Basic " + sent + "\r\n"),
              "Authorization: Basic " + had + "\r\n");
    // Decoded by the host and echoed: the raw value.
    EXPECT_EQ(secrets::redact(*set, "{\"user\":\"" + user + "\",\"password\":\"" + value + "\"}"),
              "{\"user\":\"" + user + "\",\"password\":\"" + token + "\"}");
  }
}

TEST(ReflectionGuard, TheBrokerSaysWhatItPutIn) {
  secrets::SecretBroker broker;
  secrets::ResolvedSecret s;
  s.name = "gh";
  s.key = "gh";
  s.mode = secrets::SecretMode::kBroker;
  s.tier = secrets::SecretTier::kHigh;
  s.env_var = "GH";
  s.hosts = {{"api.example.com", 443, true}};
  s.ttl = std::chrono::seconds(60);
  const std::string value = "ghp_" + random_text(36);
  s.value = secrets::SecretValue(value);
  auto token = broker.issue("sb-1", s);
  ASSERT_TRUE(token);
  const std::string basic = b64("git:" + *token);
  std::string head = "GET /x?key=" + *token +
                     " HTTP/1.1\r\nhost: api.example.com\r\nauthorization: Basic " + basic +
                     "\r\n\r\n";
  auto r = broker.swap({"sb-1", "api.example.com", 443, "tls-intercept"}, head);
  ASSERT_EQ(r.outcome, secrets::SwapOutcome::kSwapped);
  ASSERT_EQ(r.swapped.size(), 3u);  // the plain token, the one in Basic, the credential
  int values = 0, credentials = 0;
  for (const auto& t : r.swapped) {
    ASSERT_TRUE(t.sent);
    if (t.encodings) {
      ++values;
      EXPECT_EQ(t.sent->view(), value);
      EXPECT_EQ(t.had, *token);
    } else {
      ++credentials;
      EXPECT_EQ(t.sent->view(), b64("git:" + value));
      EXPECT_EQ(t.had, basic);
    }
  }
  EXPECT_EQ(values, 2);
  EXPECT_EQ(credentials, 1);
  // Nothing swapped, nothing to scan.
  std::string none = "GET / HTTP/1.1\r\nhost: api.example.com\r\n\r\n";
  EXPECT_TRUE(broker.swap({"sb-1", "api.example.com", 443, "http"}, none).swapped.empty());
}

TEST(ReflectionGuard, AsksForAnUncompressedAnswer) {
  struct Case {
    std::string in, out;
  };
  for (const Case& c : std::vector<Case>{
           {"GET / HTTP/1.1\r\nhost: a\r\n\r\n",
            "GET / HTTP/1.1\r\nhost: a\r\naccept-encoding: identity\r\n\r\n"},
           {"GET / HTTP/1.1\r\nAccept-Encoding: gzip, br\r\nhost: a\r\n\r\n",
            "GET / HTTP/1.1\r\nhost: a\r\naccept-encoding: identity\r\n\r\n"},
           {"GET / HTTP/1.1\r\naccept-encoding: br\r\nx: y\r\nACCEPT-ENCODING: gzip\r\n\r\n",
            "GET / HTTP/1.1\r\nx: y\r\naccept-encoding: identity\r\n\r\n"},
           {"GET / HTTP/1.1\r\naccept-encodings: x\r\n\r\n",
            "GET / HTTP/1.1\r\naccept-encodings: x\r\naccept-encoding: identity\r\n\r\n"},
       }) {
    std::string head = c.in;
    secrets::ask_identity_encoding(head);
    EXPECT_EQ(head, c.out);
  }
}

// --- The HTTP answer ------------------------------------------------------------

struct Scrubbed {
  std::string out;
  net::ScrubbedResponse::State state;
  bool started;
  std::string error;
};

// Feeds `upstream` split at the given sizes (cycled), then the end of
// stream if `close`.
Scrubbed scrub(std::shared_ptr<const secrets::RedactionSet> set, const std::string& upstream,
               net::ScrubOptions o, std::vector<std::size_t> splits = {1 << 20},
               bool close = true) {
  net::ScrubbedResponse r(std::move(set), o);
  Scrubbed s{};
  s.state = net::ScrubbedResponse::State::kMore;
  std::size_t at = 0, k = 0;
  while (at < upstream.size() && s.state == net::ScrubbedResponse::State::kMore) {
    const std::size_t n = std::min(splits[k++ % splits.size()], upstream.size() - at);
    s.state = r.feed(std::string_view(upstream).substr(at, n), s.out);
    at += n;
  }
  if (close && s.state == net::ScrubbedResponse::State::kMore) s.state = r.end_of_stream(s.out);
  s.started = r.started();
  s.error = r.error();
  return s;
}

// The body of a chunked answer (after its head), decoded; "" if malformed
// or without its last chunk.
std::string dechunk(const std::string& answer, bool* complete = nullptr) {
  const std::size_t head_end = answer.find("\r\n\r\n");
  if (head_end == std::string::npos) return "";
  http::ChunkedDecoder d;
  std::string body;
  auto n = d.decode(std::string_view(answer).substr(head_end + 4), body, 1 << 24);
  if (complete) *complete = n && d.done();
  return body;
}

class ScrubbedAnswer : public ::testing::Test {
 protected:
  void SetUp() override {
    value_ = "sk-live-" + random_text(40);
    token_ = "corral_tok_" + random_text(43);
    set_ = guard_for({value_text(value_, token_)});
    ASSERT_TRUE(set_);
  }
  std::string body_with_value() const {
    return "{\"headers\": {\"Authorization\": \"Bearer " + value_ + "\"}, \"url\": \"/x?k=" +
           value_ + "\", \"pad\": \"" + random_text(300) + "\"}\n";
  }
  std::string value_, token_;
  std::shared_ptr<const secrets::RedactionSet> set_;
};

TEST_F(ScrubbedAnswer, EveryFramingAndEverySplitGivesTheTokenAndAValidLength) {
  const std::string body = body_with_value();
  std::string expected = body;
  for (std::size_t at; (at = expected.find(value_)) != std::string::npos;)
    expected.replace(at, value_.size(), token_);
  const std::string head_fields = "HTTP/1.1 200 OK\r\nX-Echo: Bearer " + value_ + "\r\n";
  std::string chunked;
  for (std::size_t at = 0; at < body.size(); at += 7) {  // 7-byte chunks: the value spans many
    const std::string part = body.substr(at, 7);
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", part.size());
    chunked += size + part + "\r\n";
  }
  chunked += "0\r\nX-Trailer: " + value_ + "\r\n\r\n";
  const std::vector<std::string> upstreams = {
      head_fields + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body,
      head_fields + "Transfer-Encoding: chunked\r\n\r\n" + chunked,
      head_fields + "Connection: close\r\n\r\n" + body,
  };
  for (const std::string& up : upstreams) {
    for (std::vector<std::size_t> splits : std::vector<std::vector<std::size_t>>{
             {1 << 20}, {1}, {3, 11}, {value_.size() / 2}, {64}}) {
      Scrubbed s = scrub(set_, up, {false, true}, splits);
      ASSERT_EQ(s.state, net::ScrubbedResponse::State::kDone) << s.error;
      EXPECT_EQ(s.out.find(value_), std::string::npos) << "the value came back";
      const std::string head = s.out.substr(0, s.out.find("\r\n\r\n") + 4);
      EXPECT_NE(head.find("X-Echo: Bearer " + token_ + "\r\n"), std::string::npos) << head;
      EXPECT_NE(head.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << head;
      EXPECT_EQ(head.find("Content-Length"), std::string::npos) << head;
      EXPECT_NE(head.find("Connection: close\r\n"), std::string::npos) << head;
      bool complete = false;
      EXPECT_EQ(dechunk(s.out, &complete), expected);
      EXPECT_TRUE(complete);
    }
    // An HTTP/1.0 client: no chunks, the close ends the body.
    Scrubbed old = scrub(set_, up, {false, false}, {5});
    ASSERT_EQ(old.state, net::ScrubbedResponse::State::kDone) << old.error;
    const std::size_t head_end = old.out.find("\r\n\r\n") + 4;
    EXPECT_EQ(old.out.substr(0, head_end).find("Transfer-Encoding"), std::string::npos);
    EXPECT_EQ(old.out.substr(0, head_end).find("Content-Length"), std::string::npos);
    EXPECT_EQ(old.out.substr(head_end), expected);
  }
}

TEST_F(ScrubbedAnswer, InterimAnswersAndAnswersWithoutBodyAreScrubbedToo) {
  const std::string up = "HTTP/1.1 100 Continue\r\nX-Echo: " + value_ +
                         "\r\n\r\nHTTP/1.1 204 No Content\r\nX-Echo: " + value_ + "\r\n\r\n";
  Scrubbed s = scrub(set_, up, {false, true}, {9});
  ASSERT_EQ(s.state, net::ScrubbedResponse::State::kDone) << s.error;
  EXPECT_EQ(s.out.find(value_), std::string::npos);
  EXPECT_EQ(s.out, "HTTP/1.1 100 Continue\r\nX-Echo: " + token_ +
                       "\r\n\r\nHTTP/1.1 204 No Content\r\nX-Echo: " + token_ +
                       "\r\nConnection: close\r\n\r\n");
  // HEAD: the fields say what a GET would get, and no body follows.
  Scrubbed h = scrub(set_, "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", {true, true}, {1},
                     false);
  ASSERT_EQ(h.state, net::ScrubbedResponse::State::kDone) << h.error;
  EXPECT_EQ(h.out, "HTTP/1.1 200 OK\r\nContent-Length: 99\r\nConnection: close\r\n\r\n");
}

TEST_F(ScrubbedAnswer, ACompressedAnswerIsRefusedBeforeAnyByteGoesOut) {
  for (const std::string coding : {"gzip", "br", "deflate", "identity, gzip", "x-anything"}) {
    const std::string up = "HTTP/1.1 200 OK\r\nContent-Encoding: " + coding +
                           "\r\nContent-Length: " + std::to_string(value_.size()) + "\r\n\r\n" +
                           value_;
    Scrubbed s = scrub(set_, up, {false, true}, {4});
    EXPECT_EQ(s.state, net::ScrubbedResponse::State::kFailed) << coding;
    EXPECT_FALSE(s.started);
    EXPECT_TRUE(s.out.empty());
    EXPECT_NE(s.error.find("compressed"), std::string::npos) << s.error;
  }
  // A coding that is the value (reflected from somewhere): refused, and
  // the reason does not quote it.
  Scrubbed odd = scrub(set_, "HTTP/1.1 200 OK\r\nContent-Encoding: " + value_ +
                                 "\r\nContent-Length: 0\r\n\r\n",
                       {false, true});
  EXPECT_EQ(odd.state, net::ScrubbedResponse::State::kFailed);
  EXPECT_EQ(odd.error.find(value_.substr(0, 12)), std::string::npos) << odd.error;
  Scrubbed id = scrub(set_, "HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\nContent-Length: 2\r\n\r\nok",
                      {false, false});
  EXPECT_EQ(id.state, net::ScrubbedResponse::State::kDone) << id.error;
}

TEST_F(ScrubbedAnswer, ACutAnswerKeepsWhatMayBeTheStartOfTheValue) {
  // The upstream ends inside a declared body, in the middle of the value.
  const std::string body = "x=" + value_;
  const std::string up = "HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n" +
                         body.substr(0, body.size() - 5);
  Scrubbed s = scrub(set_, up, {false, true}, {3});
  EXPECT_EQ(s.state, net::ScrubbedResponse::State::kFailed);
  EXPECT_TRUE(s.started);
  EXPECT_EQ(s.out.find(value_.substr(0, value_.size() - 5)), std::string::npos) << s.out;
  bool complete = true;
  (void)dechunk(s.out, &complete);
  EXPECT_FALSE(complete) << "a cut answer must look cut";
}

TEST_F(ScrubbedAnswer, AProtocolSwitchAndMalformedHeadsAreRefused) {
  Scrubbed sw = scrub(set_, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n" + value_,
                      {false, true});
  EXPECT_EQ(sw.state, net::ScrubbedResponse::State::kFailed);
  EXPECT_EQ(sw.out.find(value_), std::string::npos);
  Scrubbed bad = scrub(set_, "HTTP/1.1 200 OK\r\nbad line " + value_ + "\r\n\r\n" + value_,
                       {false, true});
  EXPECT_EQ(bad.state, net::ScrubbedResponse::State::kFailed);
  EXPECT_TRUE(bad.out.empty());
  EXPECT_EQ(bad.error.find(value_.substr(0, 12)), std::string::npos) << bad.error;
  Scrubbed none = scrub(set_, "", {false, true});
  EXPECT_EQ(none.state, net::ScrubbedResponse::State::kFailed);
  EXPECT_FALSE(none.started);
}

TEST_F(ScrubbedAnswer, BytesAfterTheAnswerAreDropped) {
  const std::string up = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n" + value_;
  Scrubbed s = scrub(set_, up, {false, true}, {1 << 20}, false);
  EXPECT_EQ(s.state, net::ScrubbedResponse::State::kDone);
  EXPECT_EQ(dechunk(s.out), "ok");
  EXPECT_EQ(s.out.find(value_), std::string::npos);
}

}  // namespace
}  // namespace corral
