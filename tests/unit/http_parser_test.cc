#include "http/http_parser.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <utility>
#include <vector>

namespace corral::http {
namespace {

Result<RequestHead> req(const std::string& head, const HeadLimits& limits = {}) {
  return parse_request_head(head, limits);
}

// The request with `line` added to a valid header block.
std::string with_header(const std::string& line) {
  return "POST /x HTTP/1.1\r\nHost: a\r\n" + line + "\r\n\r\n";
}

void expect_refused(const std::string& head, const std::string& words) {
  auto r = req(head);
  ASSERT_FALSE(r.has_value()) << "accepted: " << head;
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << r.error().message;
  EXPECT_NE(r.error().message.find(words), std::string::npos)
      << "message \"" << r.error().message << "\" lacks \"" << words << "\"";
}

TEST(HttpParser, ParsesARequest) {
  auto r =
      req("GET /v1/sand%20boxes?limit=10&x=%41 HTTP/1.1\r\n"
          "Host: localhost:7070\r\n"
          "X-Trace:   abc def \t\r\n"
          "Accept: */*\r\n\r\n");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->method, "GET");
  EXPECT_EQ(r->target, "/v1/sand%20boxes?limit=10&x=%41");
  EXPECT_EQ(r->path, "/v1/sand%20boxes");  // as sent: never decoded
  EXPECT_EQ(r->query, "limit=10&x=%41");   // raw: parse_query decodes
  EXPECT_EQ(r->version_minor, 1);
  ASSERT_EQ(r->headers.size(), 3u);
  EXPECT_EQ(r->headers[1].name, "x-trace");
  EXPECT_EQ(r->headers[1].value, "abc def");
  EXPECT_EQ(r->header("ACCEPT"), "*/*");
  EXPECT_FALSE(r->content_length.has_value());
  EXPECT_FALSE(r->chunked);
  EXPECT_TRUE(r->keep_alive);
  EXPECT_FALSE(r->expect_continue);
}

// Issue 14 item 4: the path is matched as sent (docs/api.md "Routes"), so
// no escape in it is ever decoded: an encoded slash cannot split a segment,
// a double encoding stays double, "%00" is three characters, not a NUL.
TEST(HttpParser, PathEscapesStayAsSent) {
  const std::pair<const char*, const char*> cases[] = {
      {"/files/a%2Fb", "/files/a%2Fb"},
      {"/files/a%2fb", "/files/a%2fb"},
      {"/files/a%252Fb", "/files/a%252Fb"},
      {"/files/a%00b", "/files/a%00b"},
      {"/files/%2e%2e/x", "/files/%2e%2e/x"},
      {"/files/%C0%AF", "/files/%C0%AF"},  // an overlong '/' in UTF-8
      {"/v1/sandboxes/sb-1%2Ffiles?path=%2Fa", "/v1/sandboxes/sb-1%2Ffiles"},
  };
  for (const auto& [target, path] : cases) {
    auto r = req(std::string("GET ") + target + " HTTP/1.1\r\nHost: a\r\n\r\n");
    ASSERT_TRUE(r.has_value()) << target << ": " << r.error().message;
    EXPECT_EQ(r->path, path) << target;
    EXPECT_EQ(r->path.find('\0'), std::string::npos);
  }
  // A malformed escape is still refused, in the path and the query.
  expect_refused("GET /a%zz HTTP/1.1\r\nHost: a\r\n\r\n", "bad percent escape");
  expect_refused("GET /a%2 HTTP/1.1\r\nHost: a\r\n\r\n", "bad percent escape");
  expect_refused("GET /a%%41 HTTP/1.1\r\nHost: a\r\n\r\n", "bad percent escape");
}

TEST(HttpParser, KeepAliveFromVersionAndConnection) {
  EXPECT_TRUE(req("GET / HTTP/1.1\r\nHost: a\r\n\r\n")->keep_alive);
  EXPECT_FALSE(req("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")->keep_alive);
  EXPECT_FALSE(req("GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, Close\r\n\r\n")->keep_alive);
  EXPECT_FALSE(req("GET / HTTP/1.0\r\n\r\n")->keep_alive);
  EXPECT_TRUE(req("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")->keep_alive);
  EXPECT_EQ(req("GET / HTTP/1.0\r\n\r\n")->version_minor, 0);
}

TEST(HttpParser, BodyFraming) {
  auto r = req(with_header("Content-Length: 42"));
  EXPECT_EQ(r->content_length, 42u);
  EXPECT_FALSE(r->chunked);
  r = req(with_header("Transfer-Encoding: Chunked"));
  EXPECT_TRUE(r->chunked);
  EXPECT_FALSE(r->content_length.has_value());
  r = req(with_header("Content-Length: 18446744073709551615"));
  EXPECT_EQ(r->content_length, UINT64_MAX);
  r = req(with_header("Content-Length: 5\r\nExpect: 100-continue"));
  EXPECT_TRUE(r->expect_continue);
  // Expect means nothing in HTTP/1.0.
  EXPECT_FALSE(req("POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n")->expect_continue);
}

// Issue 14 item 4: a field that holds one value, sent twice, is refused
// whichever copy comes first, naming the field; list fields may repeat.
TEST(HttpParser, RefusesRepeatedSingletonFields) {
  const char* singletons[] = {
      "Host",         "Authorization",     "Proxy-Authorization", "Content-Length",
      "Content-Type", "Transfer-Encoding", "Idempotency-Key",     "X-Corral-Gateway-Token"};
  for (const char* name : singletons) {
    std::string n(name);
    std::string v = n == "Content-Length" ? "0" : n == "Transfer-Encoding" ? "chunked" : "v";
    std::string w = n == "Content-Length" ? "0" : n == "Transfer-Encoding" ? "chunked" : "w";
    // Same and different values; adjacent and apart; any case.
    expect_refused(with_header(n + ": " + v + "\r\n" + n + ": " + w),
                   "more than one " + n + " header");
    expect_refused(with_header(n + ": " + v + "\r\nX-Other: 1\r\n" + n + ": " + v),
                   "more than one " + n + " header");
    std::string lower = n;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    expect_refused(with_header(n + ": " + v + "\r\n" + lower + ": " + w),
                   "more than one " + n + " header");
  }
  expect_refused(
      "GET / HTTP/1.1\r\nAuthorization: Bearer a\r\nHost: a\r\n"
      "Authorization: Bearer b\r\n\r\n",
      "more than one Authorization header");
  // Lists combine: their repeats mean the same as one comma-joined field.
  auto r = req(with_header("Accept: a/b\r\nAccept: c/d\r\nConnection: x\r\nConnection: close"));
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_FALSE(r->keep_alive);
  // Responses (from upstreams, through the egress proxy) keep RFC 9110 8.6's
  // leniency for two equal Content-Lengths.
  auto resp =
      parse_response_head("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n");
  ASSERT_TRUE(resp.has_value()) << resp.error().message;
  EXPECT_EQ(resp->content_length, 3u);
}

TEST(HttpParser, RefusesAmbiguousFraming) {
  expect_refused(with_header("Content-Length: 5\r\nTransfer-Encoding: chunked"),
                 "both Content-Length and Transfer-Encoding");
  expect_refused(with_header("Content-Length: 5\r\nContent-Length: 6"),
                 "more than one Content-Length header");
  // Even two equal ones (RFC 9110 8.6 allows either answer; one rule is simpler).
  expect_refused(with_header("Content-Length: 7\r\nContent-Length: 7"),
                 "more than one Content-Length header");
  expect_refused(with_header("Transfer-Encoding: gzip, chunked"), "unsupported Transfer-Encoding");
  expect_refused(with_header("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked"),
                 "more than one Transfer-Encoding header");
  expect_refused(with_header("Transfer-Encoding: identity"), "unsupported Transfer-Encoding");
  expect_refused(with_header("Content-Length: +5"), "not a number");
  expect_refused(with_header("Content-Length: 5, 5"), "not a number");
  expect_refused(with_header("Content-Length: -1"), "not a number");
  expect_refused(with_header("Content-Length: 0x10"), "not a number");
  expect_refused(with_header("Content-Length:"), "empty Content-Length");
  expect_refused(with_header("Content-Length: 18446744073709551616"), "overflows");
  expect_refused(with_header("Content-Length: 99999999999999999999999"), "overflows");
  expect_refused("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", "HTTP/1.0");
}

TEST(HttpParser, RefusesBadBytesAndLines) {
  expect_refused("GET / HTTP/1.1\nHost: a\r\n\r\n", "bare LF");
  expect_refused("GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", "bare CR");
  expect_refused(std::string("GET / HTTP/1.1\r\nHost: a\0\r\n\r\n", 28), "NUL");
  expect_refused("GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n 2\r\n\r\n", "obsolete line folding");
  expect_refused("GET / HTTP/1.1\r\nHost: a\r\n\tX: 2\r\n\r\n", "obsolete line folding");
  expect_refused("GET / HTTP/1.1\r\nHost : a\r\n\r\n", "whitespace between header name");
  expect_refused("GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n", "without ':'");
  expect_refused("GET / HTTP/1.1\r\nHost: a\r\n: v\r\n\r\n", "empty header name");
  expect_refused("GET / HTTP/1.1\r\nHost: a\r\nX(y): v\r\n\r\n", "invalid header name");
  expect_refused("GET / HTTP/1.1\r\nHost: a\r\nX: a\x01z\r\n\r\n", "control character");
  expect_refused("GET / HTTP/1.1\r\nHost: a\r\nX: a\x7fz\r\n\r\n", "control character");
  expect_refused("\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", "empty request line");
  expect_refused("GET / HTTP/1.1\r\nHost: a\r\n", "does not end with an empty line");
}

TEST(HttpParser, RefusesBadRequestLines) {
  expect_refused("get / HTTP/1.1\r\nHost: a\r\n\r\n", "invalid method");
  expect_refused("G(T / HTTP/1.1\r\nHost: a\r\n\r\n", "invalid method");
  expect_refused(std::string(33, 'A') + " / HTTP/1.1\r\nHost: a\r\n\r\n", "invalid method");
  expect_refused("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", "malformed request line");
  expect_refused("GET / HTTP/1.1 \r\nHost: a\r\n\r\n", "malformed request line");
  expect_refused("GET /\r\nHost: a\r\n\r\n", "malformed request line");
  expect_refused("GET http://h/ HTTP/1.1\r\nHost: a\r\n\r\n", "not an absolute path");
  expect_refused("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", "not an absolute path");
  expect_refused("GET /a#frag HTTP/1.1\r\nHost: a\r\n\r\n", "invalid character");
  expect_refused("GET /a\"b HTTP/1.1\r\nHost: a\r\n\r\n", "invalid character");
  expect_refused("GET /\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", "invalid character");
  expect_refused("GET /a%zz HTTP/1.1\r\nHost: a\r\n\r\n", "bad percent escape");
  expect_refused("GET /a?q=%2 HTTP/1.1\r\nHost: a\r\n\r\n", "bad percent escape");
  expect_refused("GET / HTTP/2.0\r\nHost: a\r\n\r\n", "unsupported HTTP version");
  expect_refused("GET / HTTP/1.2\r\nHost: a\r\n\r\n", "unsupported HTTP version");
  expect_refused("GET / http/1.1\r\nHost: a\r\n\r\n", "malformed HTTP version");
  expect_refused("GET / HTTP/1.1\r\n\r\n", "without Host");
  expect_refused("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "more than one Host");
}

TEST(HttpParser, ErrorMessagesArePrintable) {
  auto r = req("GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \x80\x01\xff\r\n\r\n");
  ASSERT_FALSE(r.has_value());
  for (char c : r.error().message) {
    EXPECT_TRUE(c >= 0x20 && c < 0x7f) << r.error().message;
  }
}

TEST(HttpParser, Limits) {
  HeadLimits limits;
  limits.max_head_bytes = 64;
  limits.max_headers = 2;
  limits.max_target_bytes = 10;
  EXPECT_TRUE(req("GET /012345678 HTTP/1.1\r\nHost: a\r\nX: 1\r\n\r\n", limits).has_value());
  // A target over its limit is a head over its limits: 431, not 400
  // (docs/api.md "Limits").
  auto r = req("GET /0123456789 HTTP/1.1\r\nHost: a\r\n\r\n", limits);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(r.error().message.find("request target longer than 10 bytes"), std::string::npos)
      << r.error().message;
  r = req("GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\nY: 2\r\n\r\n", limits);
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
  r = req("GET / HTTP/1.1\r\nHost: a\r\nX: " + std::string(40, 'v') + "\r\n\r\n", limits);
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
}

TEST(HttpParser, ParsesResponses) {
  auto r = parse_response_head("HTTP/1.1 201 Created\r\nContent-Length: 3\r\nX: y\r\n\r\n");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->reason, "Created");
  EXPECT_EQ(r->content_length, 3u);
  EXPECT_TRUE(r->keep_alive);
  EXPECT_EQ(r->header("x"), "y");

  r = parse_response_head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
  EXPECT_TRUE(r->chunked);
  // No framing: the body runs to the end of the connection.
  r = parse_response_head("HTTP/1.1 200 OK\r\n\r\n");
  EXPECT_FALSE(r->content_length.has_value());
  EXPECT_FALSE(r->chunked);
  EXPECT_FALSE(r->keep_alive);
  // These never have a body.
  EXPECT_EQ(parse_response_head("HTTP/1.1 204 No Content\r\n\r\n")->content_length, 0u);
  EXPECT_EQ(parse_response_head("HTTP/1.1 304 x\r\nContent-Length: 9\r\n\r\n")->content_length, 0u);
  EXPECT_EQ(parse_response_head("HTTP/1.1 100 Continue\r\n\r\n")->content_length, 0u);
  // An empty reason, with or without its space.
  EXPECT_EQ(parse_response_head("HTTP/1.1 503 \r\nContent-Length: 0\r\n\r\n")->status, 503);
  EXPECT_EQ(parse_response_head("HTTP/1.1 503\r\nContent-Length: 0\r\n\r\n")->reason, "");
  EXPECT_FALSE(parse_response_head("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")->keep_alive);
}

TEST(HttpParser, RefusesBadResponses) {
  for (std::string bad : {
           "HTTP/1.1 20 OK\r\n\r\n",
           "HTTP/1.1 2000 OK\r\n\r\n",
           "HTTP/1.1 600 Nope\r\n\r\n",
           "HTTP/1.1  200 OK\r\n\r\n",
           "HTTP/2 200 OK\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
           "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n",
           "HTTP/1.1 200 O\x01K\r\n\r\n",
       }) {
    EXPECT_FALSE(parse_response_head(bad).has_value()) << bad;
  }
}

TEST(HttpHeadBuffer, FindsTheHeadAcrossFeeds) {
  HeadBuffer hb(1024);
  std::string head = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
  std::string all = head + "body";
  for (std::size_t i = 0; i + 1 < all.size(); ++i) {
    auto r = hb.feed(all.substr(i, 1));
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(*r, i + 1 >= head.size()) << i;
  }
  EXPECT_EQ(hb.feed("y").value(), true);
  EXPECT_EQ(hb.head(), head);
  EXPECT_EQ(hb.leftover(), "body");
  hb.clear();
  EXPECT_TRUE(hb.head().empty());
  EXPECT_FALSE(hb.feed("GET").value());
  EXPECT_TRUE(hb.leftover().empty());
}

TEST(HttpHeadBuffer, RefusesHeadsOverTheLimit) {
  std::string head = "GET /" + std::string(14, 'a') + " HTTP/1.1\r\n\r\n";  // 32 bytes
  ASSERT_EQ(head.size(), 32u);
  HeadBuffer exact(32);
  EXPECT_TRUE(exact.feed(head + std::string(1000, 'b')).value());
  EXPECT_EQ(exact.head(), head);
  EXPECT_EQ(exact.leftover().size(), 1000u);

  HeadBuffer small(31);
  auto r = small.feed(head);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);

  HeadBuffer pieces(31);
  EXPECT_FALSE(pieces.feed(head.substr(0, 20)).value());
  EXPECT_FALSE(pieces.feed(head.substr(20)).has_value());
}

// Decodes in pieces of `step` input bytes with an output cap per call.
Result<std::string> decode_all(const std::string& in, std::size_t step, std::size_t cap,
                               std::size_t* consumed = nullptr) {
  ChunkedDecoder d;
  std::string out;
  std::size_t pos = 0;
  while (pos < in.size() && !d.done()) {
    auto n = d.decode(std::string_view(in).substr(pos, step), out, cap);
    if (!n) return tl::unexpected(n.error());
    pos += *n;
  }
  if (consumed) *consumed = pos;
  if (!d.done()) return make_error(ErrorCode::kInvalidArgument, "incomplete");
  return out;
}

TEST(HttpChunkedDecoder, DecodesHoweverTheInputIsSplit) {
  std::string body =
      "5\r\nhello\r\n1A;ext=1;q=\"x\"\r\nabcdefghijklmnopqrstuvwxyz\r\n"
      "0\r\nTrailer: v\r\nOther: w\r\n\r\nNEXT";
  for (std::size_t step : {1, 2, 3, 7, 100}) {
    for (std::size_t cap : {1, 4, 1000}) {
      std::size_t used = 0;
      auto out = decode_all(body, step, cap, &used);
      ASSERT_TRUE(out.has_value()) << out.error().message;
      EXPECT_EQ(*out, "helloabcdefghijklmnopqrstuvwxyz");
      EXPECT_EQ(used, body.size() - 4) << "stops after the body";
    }
  }
}

TEST(HttpChunkedDecoder, IntoACallersBuffer) {
  ChunkedDecoder d;
  std::string in = "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
  char out[4];
  std::size_t produced = 0;
  auto n = d.decode(in, out, sizeof(out), produced);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(produced, 4u);
  EXPECT_EQ(std::string(out, 4), "abcd");
  n = d.decode(std::string_view(in).substr(*n), out, sizeof(out), produced);
  EXPECT_EQ(produced, 1u);
  EXPECT_EQ(out[0], 'e');
  EXPECT_TRUE(d.done());
}

TEST(HttpChunkedDecoder, RefusesMalformedBodies) {
  for (std::string bad : {
           "x\r\n",                      // not hex
           "\r\n",                       // no size
           "5\nhello\r\n0\r\n\r\n",      // bare LF after size
           "5\rhello\r\n0\r\n\r\n",      // bare CR
           "3\r\nabcd\r\n0\r\n\r\n",     // data longer than size
           "3\r\nabc\n0\r\n\r\n",        // no CR after data
           "12345678901234567\r\n",      // 17 hex digits
           "5 x\r\nhello\r\n",           // garbage, no ';'
           "5;a\x01\r\nhello\r\n",       // control char in an extension
           "0\r\nbad\ntrailer\r\n\r\n",  // bare LF in trailer
           "0\r\n folded\r\n\r\n",       // obs-fold in trailer
       }) {
    auto r = decode_all(bad, 1000, 1000);
    ASSERT_FALSE(r.has_value()) << bad;
    if (r.error().message != "incomplete") {
      EXPECT_EQ(r.error().message.rfind("chunked body: ", 0), 0u) << r.error().message;
    }
  }
  // Bounded extension and trailer lines.
  EXPECT_FALSE(decode_all("1;" + std::string(5000, 'e') + "\r\na\r\n0\r\n\r\n", 64, 64));
  std::string trailers = "0\r\n";
  for (int i = 0; i < 1000; ++i) trailers += "X-Trailer: 0123456789012345678\r\n";
  EXPECT_FALSE(decode_all(trailers + "\r\n", 64, 64));
}

TEST(HttpChunkedDecoder, LargestSizeDoesNotOverflow) {
  ChunkedDecoder d;
  std::string out;
  auto n = d.decode("ffffffffffffffff\r\nabc", out, 100);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(out, "abc");
  EXPECT_FALSE(d.done());
}

}  // namespace
}  // namespace corral::http
