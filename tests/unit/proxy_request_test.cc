#include "egress/proxy_request.h"

#include <gtest/gtest.h>

#include "netns/host_name.h"

namespace corral::net {
namespace {

TEST(HostName, Canonical) {
  EXPECT_EQ(canonical_host("PyPI.org."), "pypi.org");
  EXPECT_EQ(canonical_host("files.pythonhosted.org"), "files.pythonhosted.org");
  EXPECT_EQ(canonical_host("_srv.a-b.example"), "_srv.a-b.example");
  EXPECT_EQ(canonical_host("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(canonical_host("[::1]"), "::1");
  EXPECT_EQ(canonical_host("::FFFF:1.2.3.4"), "::ffff:1.2.3.4");
  EXPECT_TRUE(is_ip_literal("::1"));
  EXPECT_FALSE(is_ip_literal("a.example"));
  // Never a name that a lenient resolver would read as an address.
  for (const char* bad : {"127.1", "0x7f.1", "1.2.3", "2130706433", "", ".", "a..b", "a b", "a/b",
                          "[1.2.3.4]", "a.example..", "é.example"}) {
    EXPECT_EQ(canonical_host(bad), "") << bad;
  }
  EXPECT_EQ(canonical_host(std::string(63, 'a') + ".example"), std::string(63, 'a') + ".example");
  EXPECT_EQ(canonical_host(std::string(64, 'a') + ".example"), "");
}

TEST(HostName, SplitHostPort) {
  std::string host;
  std::optional<std::uint16_t> port;
  ASSERT_TRUE(split_host_port("Example.COM:443", host, port));
  EXPECT_EQ(host, "example.com");
  EXPECT_EQ(port, 443);
  ASSERT_TRUE(split_host_port("example.com", host, port));
  EXPECT_FALSE(port);
  ASSERT_TRUE(split_host_port("[2001:db8::1]:8443", host, port));
  EXPECT_EQ(host, "2001:db8::1");
  EXPECT_EQ(port, 8443);
  ASSERT_TRUE(split_host_port("[::1]", host, port));
  EXPECT_EQ(host, "::1");
  for (const char* bad : {"", ":443", "a.com:", "a.com:0", "a.com:65536", "a.com:44x", "::1",
                          "2001:db8::1:443", "[::1", "[::1]443", "a.com:443:1", "[a.com]:443"}) {
    EXPECT_FALSE(split_host_port(bad, host, port)) << bad;
  }
}

TEST(ProxyRequest, ClassifiesTheFirstLine) {
  EXPECT_EQ(classify_http_start("GET / HTTP/1.1\r\n"), HttpStart::kRequestLine);
  EXPECT_EQ(classify_http_start("CONNECT a.com:443 HTTP/1.1\r\nHost: a.com\r\n"),
            HttpStart::kRequestLine);
  for (const char* prefix : {"", "G", "GET", "GET ", "GET /x", "GET / ", "GET / HTTP/1",
                             "GET / HTTP/1.1", "GET / HTTP/1.1\r"}) {
    EXPECT_EQ(classify_http_start(prefix), HttpStart::kIncomplete) << prefix;
  }
  // A Redis inline command, a lower-case method, TLS, SSH, HTTP/2's preface.
  for (const char* other : {"GET key\r\n", "get / HTTP/1.1\r\n", "\x16\x03\x01", "SSH-2.0-x\r\n",
                            "PRI * HTTP/2.0\r\n", "GET  / HTTP/1.1\r\n", "GET / HTTP/1.1\n",
                            "GET /\x01 HTTP/1.1\r\n", " GET", "GET / HTTPS"}) {
    EXPECT_EQ(classify_http_start(other), HttpStart::kNotHttp) << other;
  }
  EXPECT_EQ(classify_http_start("GET /" + std::string(kMaxProxyHeadBytes, 'a')),
            HttpStart::kNotHttp);
}

TEST(ProxyRequest, Connect) {
  auto r = parse_proxy_request(
      "CONNECT PyPI.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\nProxy-Authorization: x\r\n\r\n");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->form, ProxyRequest::kConnect);
  EXPECT_EQ(r->method, "CONNECT");
  EXPECT_EQ(r->target_host, "pypi.org");
  EXPECT_EQ(r->target_port, 443);
  EXPECT_EQ(r->host_header, "pypi.org");
  EXPECT_EQ(r->host_header_port, 443);
  EXPECT_TRUE(r->upstream_head.empty());

  auto v6 = parse_proxy_request("CONNECT [2001:db8::1]:443 HTTP/1.1\r\nHost: x.example\r\n\r\n");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->target_host, "2001:db8::1");
  for (const char* bad : {"CONNECT pypi.org HTTP/1.1\r\nHost: a.b\r\n\r\n",
                          "CONNECT pypi.org:0 HTTP/1.1\r\nHost: a.b\r\n\r\n",
                          "CONNECT :443 HTTP/1.1\r\nHost: a.b\r\n\r\n",
                          "CONNECT 127.1:443 HTTP/1.1\r\nHost: a.b\r\n\r\n"}) {
    EXPECT_FALSE(parse_proxy_request(bad)) << bad;
  }
}

TEST(ProxyRequest, AbsoluteFormIsRewrittenToOriginForm) {
  auto r = parse_proxy_request(
      "GET http://Example.com:8080/a/b?c=d HTTP/1.1\r\nHost: example.com:8080\r\n"
      "Connection: keep-alive, X-Secret\r\nX-Secret: 1\r\nProxy-Connection: keep-alive\r\n"
      "Keep-Alive: 5\r\nUpgrade: websocket\r\nTE: trailers\r\nAccept: */*\r\n\r\n");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->form, ProxyRequest::kAbsolute);
  EXPECT_EQ(r->target_host, "example.com");
  EXPECT_EQ(r->target_port, 8080);
  EXPECT_EQ(r->host_header, "example.com");
  EXPECT_EQ(r->upstream_head,
            "GET /a/b?c=d HTTP/1.1\r\nhost: example.com:8080\r\naccept: */*\r\n"
            "connection: close\r\n\r\n");

  auto bare = parse_proxy_request("GET http://example.com HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(bare) << bare.error().message;
  EXPECT_EQ(bare->target_port, 80);
  EXPECT_FALSE(bare->host_header);
  EXPECT_EQ(bare->upstream_head,
            "GET / HTTP/1.0\r\nhost: example.com\r\nconnection: close\r\n\r\n");

  auto query =
      parse_proxy_request("GET http://example.com?x=1 HTTP/1.1\r\nHost: example.com\r\n\r\n");
  ASSERT_TRUE(query);
  EXPECT_TRUE(query->upstream_head.starts_with("GET /?x=1 HTTP/1.1\r\n"));

  for (const char* bad : {"GET https://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n",
                          "GET http://user:pw@example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n",
                          "GET ftp://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n",
                          "GET http:///x HTTP/1.1\r\nHost: example.com\r\n\r\n",
                          "OPTIONS * HTTP/1.1\r\nHost: example.com\r\n\r\n"}) {
    auto e = parse_proxy_request(bad);
    EXPECT_FALSE(e) << bad;
  }
}

TEST(ProxyRequest, FramingFieldsAndHostAreNeverDropped) {
  auto r = parse_proxy_request(
      "POST /upload HTTP/1.1\r\nHost: a.example\r\nContent-Length: 5\r\n"
      "Connection: content-length, host, transfer-encoding\r\n\r\n");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->form, ProxyRequest::kOrigin);
  EXPECT_EQ(r->head.content_length, 5u);
  EXPECT_EQ(r->upstream_head,
            "POST /upload HTTP/1.1\r\nhost: a.example\r\ncontent-length: 5\r\n"
            "connection: close\r\n\r\n");
}

TEST(ProxyRequest, SmugglingShapesAreRefused) {
  for (const char* bad : {
           "GET / HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n",
           "POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: 1\r\nTransfer-Encoding: "
           "chunked\r\n\r\n",
           "GET / HTTP/1.1\r\n\r\n",  // no Host
           "GET / HTTP/1.1\r\nHost: a.example\r\n folded\r\n\r\n",
           "GET / HTTP/1.1\r\nHost: a.example/x\r\n\r\n",
           "GET / HTTP/1.1\r\nHost: a.example:99999\r\n\r\n",
       }) {
    EXPECT_FALSE(parse_proxy_request(bad)) << bad;
  }
}

}  // namespace
}  // namespace corral::net

namespace corral::net {
namespace {

// The head sent upstream adds up to two fields (host, connection: close):
// a request is taken only when that head is still within the field limit
// of corral's own parser (found by fuzzing: 100 fields in, 101 out).
TEST(ProxyRequest, TheUpstreamHeadStaysWithinTheFieldLimit) {
  for (int fields = 90; fields <= 101; ++fields) {
    std::string head = "GET http://x.example/ HTTP/1.1\r\nHost: x.example\r\n";
    for (int i = 1; i < fields; ++i) head += "a" + std::to_string(i) + ": 1\r\n";
    head += "\r\n";
    auto r = parse_proxy_request(head);
    if (!r) {
      EXPECT_GT(fields, 99) << r.error().message;
      continue;
    }
    auto again = parse_proxy_request(r->upstream_head);
    EXPECT_TRUE(again.has_value()) << fields << ": " << again.error().message;
  }
  std::string at_limit = "GET http://x.example/ HTTP/1.1\r\nHost: x.example\r\n";
  for (int i = 1; i < 99; ++i) at_limit += "a" + std::to_string(i) + ": 1\r\n";
  EXPECT_TRUE(parse_proxy_request(at_limit + "\r\n").has_value());
}

}  // namespace
}  // namespace corral::net
