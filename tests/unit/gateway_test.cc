// The gateway's declarations, path checks and request handling
// (src/egress/gateway.h), in process: the client is a socketpair and the
// internal service a loopback listener.
#include "egress/gateway.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <thread>

#include "base/unique_fd.h"
#include "egress/gateway_token.h"

namespace corral::net {
namespace {

TEST(GatewayUrl, ParsesHostPortAndBase) {
  auto u = parse_gateway_url("http://10.0.0.5:8080/api/v2/");
  ASSERT_TRUE(u) << u.error().to_string();
  EXPECT_EQ(u->host, "10.0.0.5");
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->base_path, "/api/v2");
  auto d = parse_gateway_url("HTTP://Metrics.Internal");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->host, "metrics.internal");
  EXPECT_EQ(d->port, 80);
  EXPECT_EQ(d->base_path, "");
  auto v6 = parse_gateway_url("http://[fd00::1]:81/");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "fd00::1");
  EXPECT_EQ(v6->base_path, "");
  EXPECT_FALSE(v6->tls);
  // https (issue 5): TLS to the service, port 443 unless named.
  auto s = parse_gateway_url("HTTPS://Api.Example.Internal/v1");
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_TRUE(s->tls);
  EXPECT_EQ(s->host, "api.example.internal");
  EXPECT_EQ(s->port, 443);
  EXPECT_EQ(s->base_path, "/v1");
  auto sp = parse_gateway_url("https://10.0.0.7:8443");
  ASSERT_TRUE(sp);
  EXPECT_TRUE(sp->tls);
  EXPECT_EQ(sp->port, 8443);
  auto svc = parse_gateway_service_flag("llm=https://api.example.internal/;methods=POST");
  ASSERT_TRUE(svc) << svc.error().to_string();
  EXPECT_TRUE(svc->tls);
  EXPECT_EQ(svc->port, 443);
}

TEST(GatewayUrl, RefusesWithAClearReason) {
  struct Case {
    const char* url;
    const char* says;
  } cases[] = {{"https://u:p@x:443/", "user information"},
               {"ftp://x/", "not an http:// or https:// URL"},
               {"https://", "no host"},
               {"http://", "no host"},
               {"http://u:p@x/", "user information"},
               {"http://x/a?b=1", "query or fragment"},
               {"http://x:0/", "bad host or port"},
               {"http://x:99999/", "bad host or port"},
               {"http://x/a/../b", "not normalised"},
               {"http://x/a//b", "not normalised"},
               {"http://x/a%2fb", "plain characters"}};
  for (const auto& c : cases) {
    auto u = parse_gateway_url(c.url);
    ASSERT_FALSE(u) << c.url;
    EXPECT_NE(u.error().message.find(c.says), std::string::npos)
        << c.url << ": " << u.error().message;
  }
}

TEST(GatewayService, FlagFormWithDefaults) {
  auto s = parse_gateway_service_flag("billing=http://10.1.2.3:8080/internal");
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_EQ(s->name, "billing");
  EXPECT_EQ(s->host, "10.1.2.3");
  EXPECT_EQ(s->port, 8080);
  EXPECT_EQ(s->base_path, "/internal");
  EXPECT_EQ(s->methods, (std::vector<std::string>{"GET", "HEAD"}));
  EXPECT_EQ(s->path_prefixes, (std::vector<std::string>{"/"}));
  EXPECT_EQ(s->rate, (RateLimit{10, 20}));

  auto f = parse_gateway_service_flag(
      "db-api=http://h:1/;methods=get,Post;paths=/v1/,/health;rate=600/min,burst=3");
  ASSERT_TRUE(f) << f.error().to_string();
  EXPECT_EQ(f->methods, (std::vector<std::string>{"GET", "POST"}));
  EXPECT_EQ(f->path_prefixes, (std::vector<std::string>{"/v1/", "/health"}));
  EXPECT_DOUBLE_EQ(f->rate.per_second, 10);
  EXPECT_DOUBLE_EQ(f->rate.burst, 3);
}

TEST(GatewayService, BadDeclarationsSayWhatToFix) {
  struct Case {
    const char* text;
    const char* says;
  } cases[] = {{"billing", "no =URL"},
               {"Bad_Name=http://h/", "not a valid name"},
               {"a=http://h/;methods=G3T", "not a method"},
               {"a=http://h/;methods=CONNECT", "not a method"},
               {"a=http://h/;paths=v1", "not a normalised path"},
               {"a=http://h/;paths=/a/../b", "not a normalised path"},
               {"a=http://h/;rate=fast", "no unit"},
               {"a=http://h/;rate=5/hour", "unknown unit"},
               {"a=http://h/;color=red", "unknown option"},
               {"a=http://h/;rate", "has no value"},
               {"a=htps://h/", "not an http:// or https:// URL"}};
  for (const auto& c : cases) {
    auto s = parse_gateway_service_flag(c.text);
    ASSERT_FALSE(s) << c.text;
    EXPECT_NE(s.error().to_string().find(c.says), std::string::npos)
        << c.text << ": " << s.error().to_string();
  }
  auto r = parse_gateway_rate("unlimited");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->per_second, 0);
}

TEST(GatewayTarget, SplitsServiceRestAndQuery) {
  auto t = split_gateway_target("/billing/v1/invoices%20x?id=3");
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(t->service, "billing");
  EXPECT_EQ(t->rest, "/v1/invoices%20x");
  EXPECT_EQ(t->decoded_rest, "/v1/invoices x");
  EXPECT_EQ(t->query, "id=3");
  auto bare = split_gateway_target("/billing");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->rest, "/");
  auto slash = split_gateway_target("/billing/");
  ASSERT_TRUE(slash);
  EXPECT_EQ(slash->rest, "/");
}

TEST(GatewayTarget, RefusesPathTricks) {
  for (const char* bad :
       {"/billing/../admin", "/billing/v1/..", "/billing/%2e%2e/admin", "/billing/%2E%2e/x",
        "/billing/.%2e/x", "/billing/./x", "/billing/%2e/x", "/billing//etc", "//billing/x",
        "/billing/a%2fb", "/billing/a%2F..%2Fb", "/billing/a%5cb", "/billing/a\\b", "/billing/%00",
        "/billing/%zz", "/billing/%2", "/", "/billing/a/b//", "relative"}) {
    auto t = split_gateway_target(bad);
    EXPECT_FALSE(t) << bad << " was accepted";
  }
}

TEST(GatewayTarget, PrefixesMatchWholeSegmentsUnlessTheyEndInASlash) {
  GatewayService s;
  s.path_prefixes = {"/v1/", "/health"};
  EXPECT_TRUE(gateway_path_allowed(s, "/v1/x"));
  EXPECT_TRUE(gateway_path_allowed(s, "/v1/"));
  EXPECT_FALSE(gateway_path_allowed(s, "/v1"));
  EXPECT_TRUE(gateway_path_allowed(s, "/health"));
  EXPECT_TRUE(gateway_path_allowed(s, "/health/deep"));
  EXPECT_FALSE(gateway_path_allowed(s, "/healthz"));
  EXPECT_FALSE(gateway_path_allowed(s, "/admin"));
  s.path_prefixes = {"/"};
  EXPECT_TRUE(gateway_path_allowed(s, "/anything"));
}

// --- Serving, in process -------------------------------------------------------

struct Upstream {
  UniqueFd listener;
  std::uint16_t port = 0;
  std::thread thread;
  std::string seen;  // the request head it received
  std::string answer = "HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello";

  void start() {
    listener.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    ASSERT_EQ(::listen(listener.get(), 8), 0);
    socklen_t len = sizeof sa;
    ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&sa), &len);
    port = ntohs(sa.sin_port);
    thread = std::thread([this] {
      pollfd p{listener.get(), POLLIN, 0};
      if (::poll(&p, 1, 3000) != 1) return;
      UniqueFd c(::accept(listener.get(), nullptr, nullptr));
      char buf[4096];
      auto complete = [&] {
        std::size_t end = seen.find("\r\n\r\n");
        if (end == std::string::npos) return false;
        std::size_t cl = seen.find("content-length: ");
        std::size_t want = cl == std::string::npos ? 0 : std::stoul(seen.substr(cl + 16));
        return seen.size() >= end + 4 + want;
      };
      while (!complete()) {
        ssize_t n = ::read(c.get(), buf, sizeof buf);
        if (n <= 0) break;
        seen.append(buf, static_cast<std::size_t>(n));
      }
      (void)!::write(c.get(), answer.data(), answer.size());
    });
  }
  void join() {
    if (thread.joinable()) thread.join();
  }
};

struct Served {
  std::string response;
  std::vector<GatewayEvent> events;
};

Served serve_one(Gateway& gw, std::vector<GatewayEvent>& events, const std::string& request,
                 const std::string& sandbox, std::vector<std::string> grants) {
  int sv[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd ours(sv[0]), theirs(sv[1]);
  ::fcntl(theirs.get(), F_SETFL, O_NONBLOCK);
  EXPECT_EQ(::write(ours.get(), request.data(), request.size()),
            static_cast<ssize_t>(request.size()));
  auto policy = std::make_shared<NetworkPolicy>();
  policy->gateway_services = std::move(grants);
  GatewayConnection c{sandbox, theirs.get(), "", policy};
  events.clear();
  gw.serve(c);
  theirs.reset();
  Served out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(ours.get(), buf, sizeof buf)) > 0)
    out.response.append(buf, static_cast<std::size_t>(n));
  out.events = events;
  return out;
}

class GatewayServe : public ::testing::Test {
 protected:
  void SetUp() override {
    up_.start();
    auto svc = parse_gateway_service_flag("svc=http://127.0.0.1:" + std::to_string(up_.port) +
                                          "/base;methods=GET,POST;paths=/v1/;rate=1/s,burst=2");
    ASSERT_TRUE(svc) << svc.error().to_string();
    auto other = parse_gateway_service_flag("other=http://127.0.0.1:1/");
    ASSERT_TRUE(other);
    auto limited = parse_gateway_service_flag("limited=http://127.0.0.1:1/;rate=1/s,burst=2");
    ASSERT_TRUE(limited);
    auto gw = Gateway::create({*svc, *other, *limited}, secret_, nullptr,
                              [this](const GatewayEvent& e) { events_.push_back(e); });
    ASSERT_TRUE(gw) << gw.error().to_string();
    gw_ = std::move(*gw);
    token_ = gw_->token("sb-one", std::time(nullptr) + 60);
  }
  void TearDown() override {
    if (up_.listener) ::shutdown(up_.listener.get(), SHUT_RDWR);
    up_.join();
  }
  std::string req(const std::string& method, const std::string& path, const std::string& extra) {
    return method + " " + path + " HTTP/1.1\r\nHost: gateway.corral.internal\r\n" + extra + "\r\n";
  }

  std::string secret_ = std::string(32, 's');
  Upstream up_;
  std::unique_ptr<Gateway> gw_;
  std::vector<GatewayEvent> events_;
  std::string token_;
};

TEST_F(GatewayServe, ForwardsRewrittenAndStripsTheToken) {
  Served s = serve_one(*gw_, events_,
                       req("POST", "/svc/v1/items?x=1",
                           "Authorization: Bearer " + token_ +
                               "\r\nConnection: keep-alive, x-hop\r\nX-Hop: 1\r\nX-Keep: yes\r\n"
                               "X-Corral-Sandbox: forged\r\nContent-Length: 4\r\n") +
                           "body",
                       "sb-one", {"svc"});
  up_.join();
  EXPECT_EQ(s.response, up_.answer);
  EXPECT_EQ(up_.seen.rfind("POST /base/v1/items?x=1 HTTP/1.1\r\n", 0), 0u) << up_.seen;
  EXPECT_NE(up_.seen.find("Host: 127.0.0.1:" + std::to_string(up_.port) + "\r\n"),
            std::string::npos)
      << up_.seen;
  EXPECT_EQ(up_.seen.find(token_), std::string::npos) << "the token reached the service";
  EXPECT_EQ(up_.seen.find("authorization"), std::string::npos) << up_.seen;
  EXPECT_EQ(up_.seen.find("x-hop"), std::string::npos) << up_.seen;
  EXPECT_EQ(up_.seen.find("forged"), std::string::npos) << up_.seen;
  EXPECT_NE(up_.seen.find("x-keep: yes"), std::string::npos) << up_.seen;
  EXPECT_NE(up_.seen.find("X-Corral-Sandbox: sb-one"), std::string::npos) << up_.seen;
  EXPECT_NE(up_.seen.find("Connection: close"), std::string::npos) << up_.seen;
  EXPECT_NE(up_.seen.find("\r\n\r\nbody"), std::string::npos) << up_.seen;
  ASSERT_EQ(s.events.size(), 1u);
  EXPECT_TRUE(s.events[0].allowed);
  EXPECT_EQ(s.events[0].status, 201);
  EXPECT_EQ(s.events[0].service, "svc");
  EXPECT_EQ(s.events[0].method, "POST");
  EXPECT_EQ(s.events[0].path, "/svc/v1/items?x=1");
  EXPECT_EQ(s.events[0].bytes_down, up_.answer.size());
  EXPECT_GT(s.events[0].bytes_up, 4u);
  EXPECT_EQ(gw_->metrics().forwarded, 1u);
}

TEST_F(GatewayServe, RefusalsHaveTheirStatusAndAJsonBody) {
  const std::string auth = "X-Corral-Gateway-Token: " + token_ + "\r\n";
  struct Case {
    std::string request;
    std::vector<std::string> grants;
    int status;
    GatewayRefusal why;
  } cases[] = {
      {req("GET", "/svc/v1/x", ""), {"svc"}, 401, GatewayRefusal::kNoToken},
      {req("GET", "/svc/v1/x", "Authorization: Basic Zm9vOmJhcg==\r\n"),
       {"svc"},
       401,
       GatewayRefusal::kNoToken},
      {req("GET", "/svc/v1/x", "Authorization: Bearer nope\r\n"),
       {"svc"},
       401,
       GatewayRefusal::kBadToken},
      {req("GET", "/svc/v1/x",
           "X-Corral-Gateway-Token: " + gw_->token("sb-two", std::time(nullptr) + 60) + "\r\n"),
       {"svc"},
       401,
       GatewayRefusal::kBadToken},
      {req("GET", "/svc/v1/x",
           "X-Corral-Gateway-Token: " + gw_->token("sb-one", std::time(nullptr) - 1) + "\r\n"),
       {"svc"},
       401,
       GatewayRefusal::kBadToken},
      {req("GET", "/nope/v1/x", auth), {"svc"}, 404, GatewayRefusal::kUnknownService},
      {req("GET", "/other/v1/x", auth), {"svc"}, 403, GatewayRefusal::kNotGranted},
      {req("DELETE", "/svc/v1/x", auth), {"svc"}, 403, GatewayRefusal::kMethod},
      {req("GET", "/svc/admin", auth), {"svc"}, 403, GatewayRefusal::kPathNotAllowed},
      {req("GET", "/svc/v1/../admin", auth), {"svc"}, 400, GatewayRefusal::kPath},
      {req("GET", "/svc/v1/%2e%2e/admin", auth), {"svc"}, 400, GatewayRefusal::kPath},
      {req("POST", "/svc/v1/x", auth + "Transfer-Encoding: chunked\r\n"),
       {"svc"},
       411,
       GatewayRefusal::kLengthRequired},
      {"GET /svc/v1/x HTTP/1.1\r\nHost: allowed.test\r\n" + auth + "\r\n",
       {"svc"},
       400,
       GatewayRefusal::kMalformed},
      {"\x16\x03\x01 not http\r\n\r\n", {"svc"}, 400, GatewayRefusal::kMalformed},
  };
  for (const auto& c : cases) {
    Served s = serve_one(*gw_, events_, c.request, "sb-one", c.grants);
    EXPECT_EQ(s.response.rfind("HTTP/1.1 " + std::to_string(c.status) + " ", 0), 0u)
        << c.request << "\n-> " << s.response;
    EXPECT_NE(s.response.find("{\"error\":\"" + std::string(gateway_refusal_name(c.why)) + "\""),
              std::string::npos)
        << s.response;
    EXPECT_NE(s.response.find("\"fix\":"), std::string::npos) << s.response;
    ASSERT_EQ(s.events.size(), 1u) << c.request;
    EXPECT_FALSE(s.events[0].allowed);
    EXPECT_EQ(s.events[0].refusal, c.why) << c.request << ": " << s.events[0].reason;
    EXPECT_EQ(s.events[0].status, c.status);
  }
  EXPECT_TRUE(up_.seen.empty()) << "a refused request reached the service: " << up_.seen;
  EXPECT_EQ(gw_->metrics().count(GatewayRefusal::kBadToken), 3u);
  EXPECT_EQ(gw_->metrics().forwarded, 0u);
}

// A broker token (issue 5) in Authorization is for the secret broker,
// never read as the gateway token: alone it is no token at all, and next
// to X-Corral-Gateway-Token it is forwarded (no swapper here: unchanged).
TEST_F(GatewayServe, ABrokerTokenIsNotAGatewayToken) {
  const std::string broker = "corral_tok_" + std::string(43, 'x');
  Served alone =
      serve_one(*gw_, events_, req("GET", "/svc/v1/x", "Authorization: Bearer " + broker + "\r\n"),
                "sb-one", {"svc"});
  EXPECT_EQ(alone.response.rfind("HTTP/1.1 401 ", 0), 0u) << alone.response;
  ASSERT_EQ(alone.events.size(), 1u);
  EXPECT_EQ(alone.events[0].refusal, GatewayRefusal::kNoToken);
  Served both = serve_one(
      *gw_, events_,
      req("GET", "/svc/v1/x",
          "X-Corral-Gateway-Token: " + token_ + "\r\nAuthorization: Bearer " + broker + "\r\n"),
      "sb-one", {"svc"});
  up_.join();
  EXPECT_EQ(both.response, up_.answer);
  EXPECT_NE(up_.seen.find("authorization: Bearer " + broker), std::string::npos) << up_.seen;
  EXPECT_EQ(up_.seen.find(token_), std::string::npos);
}

TEST_F(GatewayServe, RateLimitPerSandboxAndService) {
  const std::string auth = "X-Corral-Gateway-Token: " + token_ + "\r\n";
  // Burst 2 to a closed port: allowed requests get a 502 at once.
  int limited = 0, failed = 0;
  for (int i = 0; i < 5; ++i) {
    Served s = serve_one(*gw_, events_, req("GET", "/limited/x", auth), "sb-one", {"limited"});
    if (s.response.rfind("HTTP/1.1 429 ", 0) == 0) ++limited;
    if (s.response.rfind("HTTP/1.1 502 ", 0) == 0) ++failed;
  }
  EXPECT_GE(limited, 2);
  EXPECT_GE(failed, 2);
  // Per sandbox: another sandbox has its own bucket.
  Served two = serve_one(
      *gw_, events_,
      req("GET", "/limited/x",
          "X-Corral-Gateway-Token: " + gw_->token("sb-two", std::time(nullptr) + 60) + "\r\n"),
      "sb-two", {"limited"});
  EXPECT_EQ(two.response.rfind("HTTP/1.1 502 ", 0), 0u) << two.response;
  gw_->forget("sb-one");
  Served again = serve_one(*gw_, events_, req("GET", "/limited/x", auth), "sb-one", {"limited"});
  EXPECT_EQ(again.response.rfind("HTTP/1.1 502 ", 0), 0u) << again.response;
}

TEST_F(GatewayServe, UnreachableServiceIs502) {
  const std::string auth =
      "X-Corral-Gateway-Token: " + gw_->token("sb-one", std::time(nullptr) + 60) + "\r\n";
  Served s = serve_one(*gw_, events_, req("GET", "/other/x", auth), "sb-one", {"other"});
  EXPECT_EQ(s.response.rfind("HTTP/1.1 502 ", 0), 0u) << s.response;
  ASSERT_EQ(s.events.size(), 1u);
  EXPECT_EQ(s.events[0].refusal, GatewayRefusal::kUpstreamFailed);
}

// Every answer and audit event byte for byte, as the gateway gave them
// before Gateway::serve was split into steps (issue 13): refusals of each
// step, a forwarded request and the head the service got.
std::string printed(std::string text, std::uint16_t port) {
  for (std::size_t p; (p = text.find(":" + std::to_string(port))) != std::string::npos;)
    text.replace(p, 1 + std::to_string(port).size(), ":PORT");
  for (std::size_t p; (p = text.find("\r\n")) != std::string::npos;) text.replace(p, 2, "\\r\\n");
  return text;
}

std::string printed(const Served& s, std::uint16_t port) {
  std::string out;
  for (const auto& e : s.events)
    out += "status=" + std::to_string(e.status) + " allowed=" + std::to_string(e.allowed) +
           " refusal=" + std::string(gateway_refusal_name(e.refusal)) + " service=" + e.service +
           " method=" + e.method + " path=" + e.path + " upstream=" + e.upstream +
           " down=" + std::to_string(e.bytes_down) + " up=" + std::to_string(e.bytes_up) +
           " reason=" + e.reason + "\n";
  return printed(out + s.response, port) + "\n";
}

TEST_F(GatewayServe, AnswersAndEventsAreByteForByteAsBefore) {
  const std::string auth = "X-Corral-Gateway-Token: " + token_ + "\r\n";
  const std::string requests[] = {
      // First: the service's listener waits 3 s only, and each refusal lingers.
      req("POST", "/svc/v1/items?x=1&y=%41",
          "Authorization: Bearer " + token_ +
              "\r\nConnection: x-hop\r\nX-Hop: 1\r\nTE: trailers\r\nContent-Length: 4\r\n") +
          "bodyEXTRA",
      req("GET", "/svc/v1/x", ""),
      req("GET", "/svc/v1/x", "Authorization: Bearer nope\r\n"),
      req("GET", "/svc/v1/x",
          "X-Corral-Gateway-Token: " + gw_->token("sb-two", std::time(nullptr) + 60) + "\r\n"),
      req("GET", "/nope/v1/x", auth),
      req("GET", "/other/v1/x", auth),
      req("GET", "/limited/x", auth),
      req("DELETE", "/svc/v1/x", auth),
      req("GET", "/svc/admin", auth),
      req("GET", "/svc/v1/%2e%2e/admin", auth),
      req("POST", "/svc/v1/x", auth + "Transfer-Encoding: chunked\r\n"),
      "GET /svc/v1/x HTTP/1.1\r\nHost: allowed.test\r\n" + auth + "\r\n",
      "GET http://gateway.corral.internal:8080/svc/v1/x HTTP/1.1\r\nHost: "
      "gateway.corral.internal:8080\r\n" +
          auth + "\r\n",
      "CONNECT gateway.corral.internal:80 HTTP/1.1\r\nHost: gateway.corral.internal\r\n\r\n",
      "\x16\x03\x01 not http\r\n\r\n",
      "GET /svc/v1/x HTTP/1.1\r\nHost: gateway.corral.internal\r\nHost: b\r\n\r\n",
      req("GET", "/_secret", "Authorization: Bearer corral_tok_x\r\n"),
      req("GET", "/other/x", auth),
  };
  std::string got;
  for (const auto& r : requests)
    got += printed(serve_one(*gw_, events_, r, "sb-one", {"svc", "other"}), up_.port);
  up_.join();
  got += "seen by the service:\n" + printed(up_.seen, up_.port) + "\n";
  const std::string expected = R"golden(status=201 allowed=1 refusal=none service=svc method=POST path=/svc/v1/items?x=1&y=%41 upstream=127.0.0.1:PORT down=48 up=133 reason=forwarded to 127.0.0.1:PORT
HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello
status=401 allowed=0 refusal=no_token service= method=GET path=/svc/v1/x upstream= down=328 up=0 reason=no gateway token in the request
HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: 150\r\nX-Corral-Refusal: no_token\r\nWWW-Authenticate: Bearer realm="corral-gateway"\r\nConnection: close\r\n\r\n{"error":"no_token","message":"no gateway token in the request","fix":"send Authorization: Bearer $CORRAL_GATEWAY_TOKEN (or X-Corral-Gateway-Token)"}

status=401 allowed=0 refusal=bad_token service= method=GET path=/svc/v1/x upstream= down=350 up=0 reason=the gateway token is malformed (expected cgw1.<sandbox>.<expiry>.<mac>) (malformed)
HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: 171\r\nX-Corral-Refusal: bad_token\r\nWWW-Authenticate: Bearer realm="corral-gateway"\r\nConnection: close\r\n\r\n{"error":"bad_token","message":"the gateway token is malformed (expected cgw1.<sandbox>.<expiry>.<mac>) (malformed)","fix":"send this sandbox's own CORRAL_GATEWAY_TOKEN"}

status=401 allowed=0 refusal=bad_token service= method=GET path=/svc/v1/x upstream= down=368 up=0 reason=the gateway token belongs to another sandbox: use this sandbox's CORRAL_GATEWAY_TOKEN (other_sandbox)
HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: 189\r\nX-Corral-Refusal: bad_token\r\nWWW-Authenticate: Bearer realm="corral-gateway"\r\nConnection: close\r\n\r\n{"error":"bad_token","message":"the gateway token belongs to another sandbox: use this sandbox's CORRAL_GATEWAY_TOKEN (other_sandbox)","fix":"send this sandbox's own CORRAL_GATEWAY_TOKEN"}

status=404 allowed=0 refusal=unknown_service service=nope method=GET path=/nope/v1/x upstream= down=290 up=0 reason=no gateway service named "nope"
HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 157\r\nX-Corral-Refusal: unknown_service\r\nConnection: close\r\n\r\n{"error":"unknown_service","message":"no gateway service named \"nope\"","fix":"the first path segment names the service; ask the owner which are declared"}

status=502 allowed=0 refusal=upstream_failed service=other method=GET path=/other/v1/x upstream=127.0.0.1:1 down=272 up=0 reason=connect to 127.0.0.1:1: ECONNREFUSED
HTTP/1.1 502 Bad Gateway\r\nContent-Type: application/json\r\nContent-Length: 137\r\nX-Corral-Refusal: upstream_failed\r\nConnection: close\r\n\r\n{"error":"upstream_failed","message":"connect to 127.0.0.1:1: ECONNREFUSED","fix":"the internal service is unavailable: tell the owner"}

status=403 allowed=0 refusal=not_granted service=limited method=GET path=/limited/x upstream= down=314 up=0 reason=this sandbox's policy does not grant gateway service "limited"
HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: 185\r\nX-Corral-Refusal: not_granted\r\nConnection: close\r\n\r\n{"error":"not_granted","message":"this sandbox's policy does not grant gateway service \"limited\"","fix":"grant it in the spec (network.gateway) or with corral run --gateway limited"}

status=403 allowed=0 refusal=method service=svc method=DELETE path=/svc/v1/x upstream= down=242 up=0 reason=method DELETE is not allowed for gateway service "svc"
HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: 118\r\nX-Corral-Refusal: method\r\nConnection: close\r\n\r\n{"error":"method","message":"method DELETE is not allowed for gateway service \"svc\"","fix":"use one of: GET, POST"}

status=403 allowed=0 refusal=path_not_allowed service=svc method=GET path=/svc/admin upstream= down=273 up=0 reason=path /admin is not allowed for gateway service "svc"
HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: 139\r\nX-Corral-Refusal: path_not_allowed\r\nConnection: close\r\n\r\n{"error":"path_not_allowed","message":"path /admin is not allowed for gateway service \"svc\"","fix":"paths must start with one of: /v1/"}

status=400 allowed=0 refusal=path service= method=GET path=/svc/v1/%2e%2e/admin upstream= down=323 up=0 reason=the path has a '..' segment
HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 199\r\nX-Corral-Refusal: path\r\nConnection: close\r\n\r\n{"error":"path","message":"the path has a '..' segment","fix":"send the normalised path: http://gateway.corral.internal/<service>/<path>, without '.' or '..' segments, '//', or encoded '/' or '\\'"}

status=411 allowed=0 refusal=length_required service=svc method=POST path=/svc/v1/x upstream= down=263 up=0 reason=a chunked request body is not forwarded
HTTP/1.1 411 Length Required\r\nContent-Type: application/json\r\nContent-Length: 124\r\nX-Corral-Refusal: length_required\r\nConnection: close\r\n\r\n{"error":"length_required","message":"a chunked request body is not forwarded","fix":"send the body with a Content-Length"}

status=400 allowed=0 refusal=malformed service= method=GET path=/svc/v1/x upstream= down=291 up=0 reason=the request is for "allowed.test", not gateway.corral.internal:80
HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 162\r\nX-Corral-Refusal: malformed\r\nConnection: close\r\n\r\n{"error":"malformed","message":"the request is for \"allowed.test\", not gateway.corral.internal:80","fix":"use http://gateway.corral.internal/<service>/<path>"}

status=400 allowed=0 refusal=malformed service= method=GET path=/svc/v1/x upstream= down=302 up=0 reason=the request is for "gateway.corral.internal", not gateway.corral.internal:80
HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 173\r\nX-Corral-Refusal: malformed\r\nConnection: close\r\n\r\n{"error":"malformed","message":"the request is for \"gateway.corral.internal\", not gateway.corral.internal:80","fix":"use http://gateway.corral.internal/<service>/<path>"}

status=400 allowed=0 refusal=malformed service= method=CONNECT path=/ upstream= down=273 up=0 reason=CONNECT is not served by the gateway
HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 144\r\nX-Corral-Refusal: malformed\r\nConnection: close\r\n\r\n{"error":"malformed","message":"CONNECT is not served by the gateway","fix":"send plain requests to http://gateway.corral.internal/<service>/"}

status=400 allowed=0 refusal=malformed service= method= path= upstream= down=293 up=0 reason=request target "not" is neither a path, an http:// URL nor (with CONNECT) host:port
HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 164\r\nX-Corral-Refusal: malformed\r\nConnection: close\r\n\r\n{"error":"malformed","message":"request target \"not\" is neither a path, an http:// URL nor (with CONNECT) host:port","fix":"send a well-formed HTTP/1.1 request"}

status=400 allowed=0 refusal=malformed service= method= path= upstream= down=233 up=0 reason=more than one Host header
HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 104\r\nX-Corral-Refusal: malformed\r\nConnection: close\r\n\r\n{"error":"malformed","message":"more than one Host header","fix":"send a well-formed HTTP/1.1 request"}

status=404 allowed=0 refusal=unknown_service service=_secret method=GET path=/_secret upstream= down=264 up=0 reason=this gateway serves no secrets
HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 131\r\nX-Corral-Refusal: unknown_service\r\nConnection: close\r\n\r\n{"error":"unknown_service","message":"this gateway serves no secrets","fix":"ask the owner to run the daemon with a secret store"}

status=502 allowed=0 refusal=upstream_failed service=other method=GET path=/other/x upstream=127.0.0.1:1 down=272 up=0 reason=connect to 127.0.0.1:1: ECONNREFUSED
HTTP/1.1 502 Bad Gateway\r\nContent-Type: application/json\r\nContent-Length: 137\r\nX-Corral-Refusal: upstream_failed\r\nConnection: close\r\n\r\n{"error":"upstream_failed","message":"connect to 127.0.0.1:1: ECONNREFUSED","fix":"the internal service is unavailable: tell the owner"}

seen by the service:
POST /base/v1/items?x=1&y=%41 HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\ncontent-length: 4\r\nX-Corral-Sandbox: sb-one\r\nConnection: close\r\n\r\nbody
)golden";
  EXPECT_EQ(got, expected);
  if (got != expected) std::printf("----- got\n%s-----\n", got.c_str());
}

TEST(GatewayCreate, RefusesDuplicatesAndNoSecret) {
  auto a = parse_gateway_service_flag("a=http://h/");
  ASSERT_TRUE(a);
  EXPECT_FALSE(Gateway::create({*a, *a}, "k", nullptr, nullptr));
  EXPECT_FALSE(Gateway::create({*a}, "", nullptr, nullptr));
  EXPECT_TRUE(Gateway::create({*a}, "k", nullptr, nullptr));
}

}  // namespace
}  // namespace corral::net
