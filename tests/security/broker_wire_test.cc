// Broker mode on the wire (issue 5): the egress proxy and the gateway swap
// a sandbox's broker token for the secret's value on the way out, and only
// toward the hosts the secret names. The proxy and the gateway run in
// process against the test internet of tests/support/net_world.h (TLS
// upstreams signed by the world's CA); the client is this test, speaking
// as a sandbox would (CONNECT through the proxy, then TLS that trusts
// corral's CA). The TokenSwapper is a small one of this file: the real
// broker (src/secrets) is tested on its own. Every secret value and token
// is random per test, and the checks look for them where they must (the
// upstream) and must not (the sandbox's side, refused upstreams) be.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "egress/cert_authority.h"
#include "egress/egress_proxy.h"
#include "egress/gateway.h"
#include "egress/upstream_resolver.h"
#include "secrets/broker.h"
#include "support/net_world.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using namespace std::chrono_literals;

std::string random_text(std::size_t n, std::string_view alphabet) {
  std::string raw(n, '\0');
  RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(n));
  std::string out;
  for (unsigned char c : raw) out += alphabet[c % alphabet.size()];
  return out;
}
constexpr std::string_view kBase62 =
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

// A TokenSwapper for the test: tokens of one sandbox, each for one secret
// with its hosts; plain HTTP (port 80) only where the secret says so.
class TestSwapper : public secrets::TokenSwapper {
 public:
  struct Secret {
    std::string name, value, sandbox;
    std::set<std::string> hosts;
    bool intercept = true;
    bool plain_http = false;
  };
  std::string add(Secret s) {
    std::string token = std::string(secrets::kTokenPrefix) + random_text(43, kBase62);
    std::lock_guard lock(mu_);
    tokens_[token] = std::move(s);
    return token;
  }
  secrets::SwapResult swap(const secrets::OutboundRequest& r, std::string& head) override {
    std::lock_guard lock(mu_);
    calls_.push_back({std::string(r.sandbox), std::string(r.host), r.port, std::string(r.via)});
    secrets::SwapResult out;
    std::string next = head;
    std::size_t at = 0;
    while ((at = next.find(secrets::kTokenPrefix, at)) != std::string::npos) {
      std::string token = next.substr(at, secrets::kTokenPrefix.size() + 43);
      auto it = tokens_.find(token);
      if (it == tokens_.end() || it->second.sandbox != r.sandbox) {
        out.outcome = secrets::SwapOutcome::kRefused;
        out.reason = "unknown token";
        return out;
      }
      const Secret& s = it->second;
      out.secrets.push_back(s.name);
      if (!s.hosts.count(std::string(r.host)) || (r.port == 80 && !s.plain_http)) {
        out.outcome = secrets::SwapOutcome::kRefused;
        out.reason =
            s.hosts.count(std::string(r.host)) ? "plain HTTP not allowed" : "host not allowed";
        return out;
      }
      next.replace(at, token.size(), s.value);
      at += s.value.size();
      out.swapped.push_back({std::make_shared<const secrets::SecretValue>(s.value), token, true});
    }
    if (!out.secrets.empty()) {
      out.outcome = secrets::SwapOutcome::kSwapped;
      head = std::move(next);
    }
    return out;
  }
  bool intercepts(std::string_view sandbox, std::string_view host,
                  std::uint16_t port) const override {
    std::lock_guard lock(mu_);
    for (const auto& [t, s] : tokens_)
      if (s.sandbox == sandbox && s.intercept && s.hosts.count(std::string(host)) && port == 443)
        return true;
    return false;
  }
  struct Call {
    std::string sandbox, host;
    std::uint16_t port;
    std::string via;
  };
  std::vector<Call> calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, Secret> tokens_;
  std::vector<Call> calls_;
};

class Audit {
 public:
  net::EgressAuditSink sink() {
    return [this](const net::EgressEvent& e) {
      std::lock_guard lock(mu_);
      events_.push_back(e);
      cv_.notify_all();
    };
  }
  net::EgressEvent wait_next() {
    std::unique_lock lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, 10s, [&] { return events_.size() > seen_; }))
        << "no audit event";
    if (events_.size() <= seen_) return {};
    return events_[seen_++];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<net::EgressEvent> events_;
  std::size_t seen_ = 0;
};

UniqueFd dial(const std::string& ip, std::uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  timeval tv{10, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return UniqueFd();
  return fd;
}

std::string read_all(int fd) {
  std::string out;
  char buf[8192];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<std::size_t>(n));
  return out;
}

std::string read_head(int fd) {
  std::string out;
  char c;
  while (out.size() < 65536 && out.find("\r\n\r\n") == std::string::npos) {
    if (::recv(fd, &c, 1, 0) != 1) break;
    out.push_back(c);
  }
  return out;
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// What a TLS client inside the sandbox got: the handshake's outcome, the
// issuer of the certificate it was shown, and the plaintext answer.
struct TlsExchange {
  bool handshake = false;
  std::string issuer_cn;
  std::string response;
  std::string error;
};

// TLS over the connected `fd` trusting only `trust_pem`, then `request`;
// reads the answer to the end.
TlsExchange tls_over(int fd, const std::string& host, const std::string& trust_pem,
                     const std::string& request) {
  TlsExchange x;
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  BIO* b = BIO_new_mem_buf(trust_pem.data(), static_cast<int>(trust_pem.size()));
  while (X509* c = PEM_read_bio_X509(b, nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), c);
    X509_free(c);
  }
  BIO_free(b);
  ERR_clear_error();
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  SSL_set_tlsext_host_name(ssl, host.c_str());
  SSL_set1_host(ssl, host.c_str());
  if (SSL_connect(ssl) == 1) {
    x.handshake = true;
    if (X509* peer = SSL_get1_peer_certificate(ssl)) {
      char cn[256] = {};
      X509_NAME_get_text_by_NID(X509_get_issuer_name(peer), NID_commonName, cn, sizeof cn - 1);
      x.issuer_cn = cn;
      X509_free(peer);
    }
    SSL_write(ssl, request.data(), static_cast<int>(request.size()));
    char buf[4096];
    int n;
    while ((n = SSL_read(ssl, buf, sizeof buf)) > 0)
      x.response.append(buf, static_cast<std::size_t>(n));
  } else {
    x.error = "handshake: " + std::string(ERR_error_string(ERR_get_error(), nullptr));
  }
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  ERR_clear_error();
  return x;
}

// HTTPS through the proxy: CONNECT host:443, then TLS trusting only
// `trust_pem`, then `request`; reads the answer to the end.
TlsExchange https_via_proxy(std::uint16_t proxy_port, const std::string& host,
                            const std::string& trust_pem, const std::string& request) {
  TlsExchange x;
  UniqueFd fd = dial("127.0.0.1", proxy_port);
  if (!fd) {
    x.error = "cannot reach the proxy";
    return x;
  }
  std::string connect = "CONNECT " + host + ":443 HTTP/1.1\r\nHost: " + host + ":443\r\n\r\n";
  (void)!::send(fd.get(), connect.data(), connect.size(), MSG_NOSIGNAL);
  std::string head = read_head(fd.get());
  if (head.rfind("HTTP/1.1 200", 0) != 0) {
    x.error = "CONNECT: " + head;
    return x;
  }
  return tls_over(fd.get(), host, trust_pem, request);
}

std::shared_ptr<const net::NetworkPolicy> allow(const std::vector<std::string>& names) {
  auto p = std::make_shared<net::NetworkPolicy>();
  p->mode = net::NetworkMode::kAllowlist;
  for (const auto& n : names) {
    auto r = net::parse_rule(n, false);
    EXPECT_TRUE(r) << n;
    if (r) p->rules.push_back(*r);
  }
  p->request_timeout = 10s;
  return p;
}

bool any_contains(const std::vector<std::string>& v, const std::string& needle) {
  for (const auto& s : v)
    if (s.find(needle) != std::string::npos) return true;
  return false;
}

class BrokerWire : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) CORRAL_SKIP_OR_FAIL("network tests run as root");
    auto world = NetWorld::create();
    ASSERT_TRUE(world) << world.error().to_string();
    world_ = std::move(*world);
    world_->dns().add_a("mismatch.test", NetWorld::kAllowedAddress, 300);
    char tmpl[] = "/tmp/corral-broker-wire-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto ca = net::CertAuthority::load_or_create(dir_ + "/ca");
    ASSERT_TRUE(ca) << ca.error().to_string();
    ca_ = *ca;
    swapper_ = std::make_shared<TestSwapper>();
    resolver_ =
        std::make_shared<net::UpstreamResolver>(std::vector<std::string>{world_->dns_endpoint()});
    value_ = "sk-live-" + random_text(40, kBase62);
    token_ = swapper_->add({"openai", value_, "sb-1", {"allowed.test", "mismatch.test"}});
  }
  void TearDown() override {
    proxy_.reset();
    world_.reset();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  // A proxy for sandbox sb-1 trusting `upstream_ca` (besides the system).
  std::uint16_t start_proxy(const std::string& upstream_ca,
                           std::shared_ptr<secrets::TokenSwapper> swapper = nullptr) {
    net::EgressProxyOptions o;
    o.swapper = swapper ? swapper : swapper_;
    o.ca = ca_;
    o.upstream_ca_file = upstream_ca;
    auto p = net::EgressProxy::start(resolver_, nullptr, audit_.sink(), o);
    EXPECT_TRUE(p) << p.error().to_string();
    if (!p) return 0;
    proxy_ = std::move(*p);
    auto port = proxy_->add_sandbox("sb-1", "127.0.0.1", 0,
                                    allow({"allowed.test", "denied.test", "mismatch.test"}));
    EXPECT_TRUE(port) << port.error().to_string();
    return port ? *port : 0;
  }

  std::string request(const std::string& host, const std::string& token) {
    return "GET /v1/models HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + token +
           "\r\nUser-Agent: broker-test\r\n\r\n";
  }

  std::unique_ptr<NetWorld> world_;
  std::string dir_;
  std::shared_ptr<net::CertAuthority> ca_;
  std::shared_ptr<TestSwapper> swapper_;
  std::shared_ptr<net::Resolver> resolver_;
  std::unique_ptr<net::EgressProxy> proxy_;
  Audit audit_;
  std::string value_, token_;
};

TEST_F(BrokerWire, InterceptedHttpsCarriesTheValueUpstreamAndOnlyThere) {
  const std::uint16_t port = start_proxy(world_->ca_pem_path());
  ASSERT_NE(port, 0);
  TlsExchange x =
      https_via_proxy(port, "allowed.test", ca_->ca_pem(), request("allowed.test", token_));
  ASSERT_TRUE(x.handshake) << x.error;
  EXPECT_EQ(x.issuer_cn, ca_->common_name()) << "the sandbox was not shown corral's leaf";
  EXPECT_EQ(x.response.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << x.response;
  EXPECT_NE(x.response.find("hello from allowed.test"), std::string::npos) << x.response;
  EXPECT_NE(x.response.find("Connection: close\r\n"), std::string::npos) << x.response;
  EXPECT_EQ(x.response.find(value_), std::string::npos) << "the value reached the sandbox";

  // The upstream got the value, never the token.
  auto heads = world_->tls_request_heads();
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_NE(heads[0].find("authorization: Bearer " + value_ + "\r\n"), std::string::npos)
      << heads[0];
  EXPECT_EQ(heads[0].find(token_), std::string::npos) << heads[0];
  EXPECT_NE(heads[0].find("connection: close"), std::string::npos) << heads[0];
  EXPECT_EQ(world_->tls_handshakes("allowed.test"), 1) << "SNI upstream must be the host";

  auto calls = swapper_->calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].sandbox, "sb-1");
  EXPECT_EQ(calls[0].host, "allowed.test");
  EXPECT_EQ(calls[0].port, 443);
  EXPECT_EQ(calls[0].via, "tls-intercept");

  net::EgressEvent ev = audit_.wait_next();
  EXPECT_TRUE(ev.allowed) << ev.reason;
  EXPECT_TRUE(ev.intercepted);
  EXPECT_EQ(ev.protocol, "tls");
  EXPECT_EQ(ev.secrets, std::vector<std::string>{"openai"});
  EXPECT_EQ(ev.end, "closed");
  EXPECT_GT(ev.bytes_up, 0u);
  EXPECT_GT(ev.bytes_down, 0u);
  EXPECT_EQ(ev.reason.find(value_), std::string::npos);
  EXPECT_EQ(ca_->cached_leaves(), 1u);

  // A request without a token passes unchanged through the same path.
  TlsExchange plain = https_via_proxy(port, "allowed.test", ca_->ca_pem(),
                                      "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n");
  EXPECT_NE(plain.response.find("hello from allowed.test"), std::string::npos) << plain.error;
  EXPECT_EQ(world_->tls_request_heads().size(), 2u);
  EXPECT_EQ(ca_->leaves_minted(), 1u) << "the leaf was not reused";
}

TEST_F(BrokerWire, TheTokenElsewhereIsRefusedAndAudited) {
  const std::uint16_t port = start_proxy(world_->ca_pem_path());
  ASSERT_NE(port, 0);
  // Plain HTTP to another allowed host (absolute URL, as HTTP_PROXY sends).
  {
    UniqueFd fd = dial("127.0.0.1", port);
    ASSERT_TRUE(fd);
    std::string req =
        "GET http://denied.test/steal HTTP/1.1\r\nHost: denied.test\r\n"
        "Authorization: Bearer " +
        token_ + "\r\n\r\n";
    ASSERT_EQ(::send(fd.get(), req.data(), req.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(req.size()));
    std::string resp = read_all(fd.get());
    EXPECT_EQ(resp.rfind("HTTP/1.1 403 ", 0), 0u) << resp;
    EXPECT_NE(resp.find("may not be sent to denied.test"), std::string::npos) << resp;
    EXPECT_NE(resp.find("X-Corral-Refusal: secret_refused"), std::string::npos) << resp;
    EXPECT_EQ(resp.find(value_), std::string::npos);
    net::EgressEvent ev = audit_.wait_next();
    EXPECT_FALSE(ev.allowed);
    EXPECT_EQ(ev.refusal, net::EgressRefusal::kSecretRefused);
    EXPECT_EQ(net::egress_refusal_name(ev.refusal), "secret_refused");
    EXPECT_EQ(ev.secrets, std::vector<std::string>{"openai"});
    EXPECT_EQ(ev.bytes_up, 0u);
  }
  // Plain HTTP to the secret's own host: its secret does not allow port 80.
  {
    UniqueFd fd = dial("127.0.0.1", port);
    ASSERT_TRUE(fd);
    std::string req =
        "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n"
        "Authorization: Bearer " +
        token_ + "\r\n\r\n";
    (void)!::send(fd.get(), req.data(), req.size(), MSG_NOSIGNAL);
    std::string resp = read_all(fd.get());
    EXPECT_EQ(resp.rfind("HTTP/1.1 403 ", 0), 0u) << resp;
    EXPECT_EQ(audit_.wait_next().refusal, net::EgressRefusal::kSecretRefused);
  }
  EXPECT_EQ(world_->http_requests("denied.test"), 0) << "a refused request was forwarded";
  EXPECT_EQ(world_->http_requests("allowed.test"), 0) << "a refused request was forwarded";
  EXPECT_FALSE(any_contains(world_->http_request_heads(), token_));
  EXPECT_FALSE(any_contains(world_->http_request_heads(), value_));
  auto calls = swapper_->calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].via, "http");
  EXPECT_EQ(calls[0].host, "denied.test");
  EXPECT_EQ(calls[0].port, 80);
  EXPECT_EQ(proxy_->metrics().count(net::EgressRefusal::kSecretRefused), 2u);

  // HTTPS to a host no secret intercepts: a blind tunnel, as before; the
  // token goes through as the sandbox wrote it (the documented limit).
  TlsExchange blind = https_via_proxy(port, "denied.test", file_text(world_->ca_pem_path()),
                                      request("denied.test", token_));
  ASSERT_TRUE(blind.handshake) << blind.error;
  EXPECT_EQ(blind.issuer_cn, "corral-test-ca") << "a host without a broker secret was intercepted";
  EXPECT_TRUE(any_contains(world_->tls_request_heads(), token_));
  EXPECT_FALSE(any_contains(world_->tls_request_heads(), value_));
  net::EgressEvent ev = audit_.wait_next();
  EXPECT_TRUE(ev.allowed);
  EXPECT_FALSE(ev.intercepted);
}

TEST_F(BrokerWire, PlainHttpIsSwappedWhereTheSecretAllowsIt) {
  const std::string plain_value = "plain-" + random_text(32, kBase62);
  const std::string plain_token =
      swapper_->add({"legacy", plain_value, "sb-1", {"allowed.test"}, false, true});
  const std::uint16_t port = start_proxy(world_->ca_pem_path());
  ASSERT_NE(port, 0);
  UniqueFd fd = dial("127.0.0.1", port);
  ASSERT_TRUE(fd);
  std::string req =
      "GET http://allowed.test/x HTTP/1.1\r\nHost: allowed.test\r\n"
      "X-Api-Key: " +
      plain_token + "\r\n\r\n";
  (void)!::send(fd.get(), req.data(), req.size(), MSG_NOSIGNAL);
  std::string resp = read_all(fd.get());
  EXPECT_NE(resp.find("hello from allowed.test"), std::string::npos) << resp;
  EXPECT_EQ(resp.find(plain_value), std::string::npos);
  auto heads = world_->http_request_heads();
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_NE(heads[0].find("x-api-key: " + plain_value), std::string::npos) << heads[0];
  EXPECT_EQ(heads[0].find(plain_token), std::string::npos);
  net::EgressEvent ev = audit_.wait_next();
  EXPECT_TRUE(ev.allowed) << ev.reason;
  EXPECT_EQ(ev.secrets, std::vector<std::string>{"legacy"});
  EXPECT_EQ(ev.bytes_up, heads[0].size()) << "the head sent apart is counted";
}

TEST_F(BrokerWire, AnUpstreamThatDoesNotProveItsNameIsRefused) {
  // Trusting another CA than the world's: allowed.test's certificate fails.
  auto other = net::CertAuthority::load_or_create(dir_ + "/other-ca");
  ASSERT_TRUE(other);
  std::uint16_t port = start_proxy((*other)->ca_cert_path());
  ASSERT_NE(port, 0);
  TlsExchange x =
      https_via_proxy(port, "allowed.test", ca_->ca_pem(), request("allowed.test", token_));
  ASSERT_TRUE(x.handshake) << x.error;
  EXPECT_EQ(x.response.rfind("HTTP/1.1 502 ", 0), 0u) << x.response;
  EXPECT_NE(x.response.find("certificate verification failed"), std::string::npos) << x.response;
  net::EgressEvent ev = audit_.wait_next();
  EXPECT_FALSE(ev.allowed);
  EXPECT_EQ(ev.refusal, net::EgressRefusal::kUpstreamTls);
  EXPECT_TRUE(swapper_->calls().empty()) << "a head was swapped for an unverified upstream";
  EXPECT_TRUE(world_->tls_request_heads().empty());

  // Trusted CA, wrong name: mismatch.test resolves to allowed.test's
  // server, whose certificate does not name it.
  proxy_.reset();
  port = start_proxy(world_->ca_pem_path());
  ASSERT_NE(port, 0);
  TlsExchange m =
      https_via_proxy(port, "mismatch.test", ca_->ca_pem(), request("mismatch.test", token_));
  ASSERT_TRUE(m.handshake) << m.error;
  EXPECT_EQ(m.response.rfind("HTTP/1.1 502 ", 0), 0u) << m.response;
  EXPECT_EQ(audit_.wait_next().refusal, net::EgressRefusal::kUpstreamTls);
  EXPECT_TRUE(world_->tls_request_heads().empty());
  EXPECT_FALSE(any_contains({m.response, x.response}, value_));
}

TEST_F(BrokerWire, TheHostInsideTheTunnelMustBeTheTlsHost) {
  const std::uint16_t port = start_proxy(world_->ca_pem_path());
  ASSERT_NE(port, 0);
  TlsExchange x =
      https_via_proxy(port, "allowed.test", ca_->ca_pem(), request("denied.test", token_));
  ASSERT_TRUE(x.handshake) << x.error;
  EXPECT_EQ(x.response.rfind("HTTP/1.1 403 ", 0), 0u) << x.response;
  EXPECT_EQ(audit_.wait_next().refusal, net::EgressRefusal::kMismatch);
  EXPECT_TRUE(world_->tls_request_heads().empty());
  EXPECT_TRUE(swapper_->calls().empty());
}

// A client in a network namespace whose TCP the host redirects to the
// proxy (as the real firewall does for a sandbox's interface): a TLS
// client that dials any address with SNI allowed.test is intercepted.
TEST_F(BrokerWire, TransparentTlsFromANamespaceIsIntercepted) {
  for (const char* tool : {"ip", "nft"}) {
    int status = 0;
    host_sh(std::string("command -v ") + tool + " >/dev/null", &status);
    if (status != 0) CORRAL_SKIP_OR_FAIL(std::string(tool) + " is not installed");
  }
  const std::string pid = std::to_string(::getpid());
  const std::string ns = "cbw" + pid, hif = "cbw" + pid + "h", pif = "cbw" + pid + "p",
                    table = "corral_bwtest_" + pid;
  auto sh = [](const std::string& cmd) {
    int status = 0;
    std::string out = host_sh(cmd + " 2>&1", &status);
    return status == 0 ? std::string() : cmd + ": " + out;
  };
  struct Cleanup {
    std::function<void()> fn;
    ~Cleanup() { fn(); }
  } cleanup{[&] {
    proxy_.reset();
    sh("nft delete table inet " + table);
    sh("ip link del " + hif);
    sh("ip netns del " + ns);
  }};
  for (const std::string& cmd :
       {"ip netns add " + ns, "ip link add " + hif + " type veth peer name " + pif + " netns " + ns,
        "ip addr add 10.216.0.1/30 dev " + hif, "ip link set " + hif + " up",
        "ip -n " + ns + " addr add 10.216.0.2/30 dev " + pif,
        "ip -n " + ns + " link set " + pif + " up",
        "ip -n " + ns + " route add default via 10.216.0.1"}) {
    if (std::string err = sh(cmd); !err.empty()) CORRAL_SKIP_OR_FAIL("test network: " + err);
  }
  net::EgressProxyOptions o;
  o.swapper = swapper_;
  o.ca = ca_;
  o.upstream_ca_file = world_->ca_pem_path();
  auto p = net::EgressProxy::start(resolver_, nullptr, audit_.sink(), o);
  ASSERT_TRUE(p) << p.error().to_string();
  proxy_ = std::move(*p);
  auto port = proxy_->add_sandbox("sb-1", "10.216.0.1", 0, allow({"allowed.test"}));
  ASSERT_TRUE(port) << port.error().to_string();
  if (std::string err = sh("printf '%s\\n' 'table inet " + table +
                           " { chain prerouting { type nat hook prerouting priority dstnat; "
                           "iifname \"" +
                           hif + "\" meta l4proto tcp redirect to :" + std::to_string(*port) +
                           "; }; }' | nft -f -");
      !err.empty())
    CORRAL_SKIP_OR_FAIL("nftables redirect: " + err);

  TlsExchange x;
  std::thread([&] {
    UniqueFd nsfd(::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC));
    if (!nsfd || ::setns(nsfd.get(), CLONE_NEWNET) != 0) return;
    // The address is the sandbox's choice; the proxy goes where the SNI says.
    UniqueFd fd = dial(NetWorld::kDeniedAddress, 443);
    if (!fd) return;
    x = tls_over(fd.get(), "allowed.test", ca_->ca_pem(), request("allowed.test", token_));
    OPENSSL_thread_stop();
  }).join();
  ASSERT_TRUE(x.handshake) << x.error;
  EXPECT_EQ(x.issuer_cn, ca_->common_name());
  EXPECT_NE(x.response.find("hello from allowed.test"), std::string::npos) << x.response;
  EXPECT_EQ(x.response.find(value_), std::string::npos);
  auto heads = world_->tls_request_heads();
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_NE(heads[0].find("Bearer " + value_ + "\r\n"), std::string::npos) << heads[0];
  net::EgressEvent ev = audit_.wait_next();
  EXPECT_TRUE(ev.allowed) << ev.reason;
  EXPECT_FALSE(ev.explicit_proxy);
  EXPECT_TRUE(ev.intercepted);
  EXPECT_EQ(ev.sni, "allowed.test");
  EXPECT_EQ(ev.original_address, NetWorld::kDeniedAddress);
  EXPECT_EQ(ev.address, NetWorld::kAllowedAddress);
  auto calls = swapper_->calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].via, "tls-intercept");
}

// --- The gateway ---------------------------------------------------------------

struct GatewayRun {
  std::string response;
  std::vector<net::GatewayEvent> events;
};

GatewayRun through_gateway(net::Gateway& gw, std::vector<net::GatewayEvent>& events,
                           const std::string& request) {
  int sv[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd ours(sv[0]), theirs(sv[1]);
  ::fcntl(theirs.get(), F_SETFL, O_NONBLOCK);
  (void)!::write(ours.get(), request.data(), request.size());
  auto policy = std::make_shared<net::NetworkPolicy>();
  policy->gateway_services = {"llm"};
  events.clear();
  // The answer is read while the gateway writes it: an answer in many small
  // pieces would fill the socket pair's buffer otherwise.
  GatewayRun out;
  std::thread reader([&] { out.response = read_all(ours.get()); });
  gw.serve(net::GatewayConnection{"sb-1", theirs.get(), "", policy});
  ::shutdown(theirs.get(), SHUT_RDWR);
  theirs.reset();
  reader.join();
  out.events = events;
  return out;
}

TEST_F(BrokerWire, TheGatewaySwapsTowardAnHttpsService) {
  auto svc = net::parse_gateway_service_flag("llm=https://allowed.test/api;methods=GET,POST");
  ASSERT_TRUE(svc) << svc.error().to_string();
  std::vector<net::GatewayEvent> events;
  net::GatewayOptions o;
  o.ca_file = world_->ca_pem_path();
  o.swapper = swapper_;
  auto gw = net::Gateway::create(
      {*svc}, std::string(32, 'k'), resolver_,
      [&](const net::GatewayEvent& e) { events.push_back(e); }, o);
  ASSERT_TRUE(gw) << gw.error().to_string();
  const std::string gw_token = (*gw)->token("sb-1", std::time(nullptr) + 60);
  auto req = [&](const std::string& token) {
    return "GET /llm/v1/models HTTP/1.1\r\nHost: gateway.corral.internal\r\n"
           "X-Corral-Gateway-Token: " +
           gw_token + "\r\nAuthorization: Bearer " + token + "\r\n\r\n";
  };
  GatewayRun ok = through_gateway(**gw, events, req(token_));
  EXPECT_NE(ok.response.find("hello from allowed.test"), std::string::npos) << ok.response;
  EXPECT_EQ(ok.response.find(value_), std::string::npos);
  auto heads = world_->tls_request_heads();
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_EQ(heads[0].rfind("GET /api/v1/models HTTP/1.1\r\nHost: allowed.test\r\n", 0), 0u)
      << heads[0];
  EXPECT_NE(heads[0].find("authorization: Bearer " + value_ + "\r\n"), std::string::npos)
      << heads[0];
  EXPECT_EQ(heads[0].find(token_), std::string::npos);
  EXPECT_EQ(heads[0].find(gw_token), std::string::npos) << "the gateway token went upstream";
  ASSERT_EQ(ok.events.size(), 1u);
  EXPECT_TRUE(ok.events[0].allowed) << ok.events[0].reason;
  EXPECT_EQ(ok.events[0].secrets, std::vector<std::string>{"openai"});
  auto calls = swapper_->calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].via, "gateway");
  EXPECT_EQ(calls[0].host, "allowed.test");
  EXPECT_EQ(calls[0].port, 443);

  // A token whose secret does not name the service's host: refused.
  const std::string other_value = "other-" + random_text(30, kBase62);
  const std::string other = swapper_->add({"github", other_value, "sb-1", {"github.test"}});
  GatewayRun refused = through_gateway(**gw, events, req(other));
  EXPECT_EQ(refused.response.rfind("HTTP/1.1 403 ", 0), 0u) << refused.response;
  EXPECT_NE(refused.response.find("secret_refused"), std::string::npos) << refused.response;
  ASSERT_EQ(refused.events.size(), 1u);
  EXPECT_EQ(refused.events[0].refusal, net::GatewayRefusal::kSecretRefused);
  EXPECT_EQ(world_->tls_request_heads().size(), 1u) << "a refused request reached the service";
  EXPECT_FALSE(any_contains(world_->tls_request_heads(), other_value));
  EXPECT_EQ((*gw)->metrics().count(net::GatewayRefusal::kSecretRefused), 1u);
}

TEST_F(BrokerWire, TheGatewayRefusesAnHttpsServiceItCannotVerify) {
  auto svc = net::parse_gateway_service_flag("llm=https://allowed.test/");
  ASSERT_TRUE(svc);
  auto other = net::CertAuthority::load_or_create(dir_ + "/other-ca");
  ASSERT_TRUE(other);
  std::vector<net::GatewayEvent> events;
  net::GatewayOptions o;
  o.ca_file = (*other)->ca_cert_path();  // not the world's CA
  o.swapper = swapper_;
  auto gw = net::Gateway::create(
      {*svc}, std::string(32, 'k'), resolver_,
      [&](const net::GatewayEvent& e) { events.push_back(e); }, o);
  ASSERT_TRUE(gw) << gw.error().to_string();
  const std::string gw_token = (*gw)->token("sb-1", std::time(nullptr) + 60);
  GatewayRun r = through_gateway(
      **gw, events,
      "GET /llm/ HTTP/1.1\r\nHost: gateway.corral.internal\r\nX-Corral-Gateway-Token: " + gw_token +
          "\r\nAuthorization: Bearer " + token_ + "\r\n\r\n");
  EXPECT_EQ(r.response.rfind("HTTP/1.1 502 ", 0), 0u) << r.response;
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].refusal, net::GatewayRefusal::kUpstreamTls);
  EXPECT_NE(r.events[0].reason.find("certificate verification failed"), std::string::npos)
      << r.events[0].reason;
  EXPECT_TRUE(world_->tls_request_heads().empty());
  EXPECT_TRUE(swapper_->calls().empty()) << "a head was swapped for an unverified service";
}


// --- Responses to a swapped request (issue 12, point 7) ----------------------
//
// The upstream reflects the request it got (tests/support/reflector.h): the
// value the proxy or the gateway put in comes back, and must reach the
// sandbox only as the token it sent. The real broker swaps here (its Basic
// credentials included); every answer is checked as the sandbox's bytes.

std::string b64(const std::string& s) {
  std::string out(4 * ((s.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(s.data()),
                                static_cast<int>(s.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

// The body of a chunked answer, decoded; `complete` says whether its last
// chunk came.
std::string dechunk(const std::string& answer, bool* complete) {
  *complete = false;
  std::size_t at = answer.find("\r\n\r\n");
  if (at == std::string::npos) return "";
  at += 4;
  std::string body;
  for (;;) {
    const std::size_t eol = answer.find("\r\n", at);
    if (eol == std::string::npos) return body;
    const std::size_t size = std::strtoul(answer.substr(at, eol - at).c_str(), nullptr, 16);
    if (size == 0) {
      *complete = answer.compare(eol, 4, "\r\n\r\n") == 0;
      return body;
    }
    if (eol + 2 + size + 2 > answer.size()) return body;
    body += answer.substr(eol + 2, size);
    at = eol + 2 + size + 2;
  }
}

class BrokerReflection : public BrokerWire {
 protected:
  void SetUp() override {
    BrokerWire::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    broker_ = std::make_shared<secrets::SecretBroker>();
    // '/', '+' and '=': its percent forms differ from it.
    high_value_ = "sk-live-" + random_text(40, kBase62) + "/+=x";
    high_token_ = issue("openai", high_value_, {"allowed.test", 443, true});
    plain_value_ = "plain-" + random_text(40, kBase62);
    plain_token_ = issue("legacy", plain_value_, {"allowed.test", 80, false});
  }
  std::string issue(const std::string& name, const std::string& value, secrets::SecretHost host) {
    secrets::ResolvedSecret s;
    s.name = name;
    s.key = name;
    s.mode = secrets::SecretMode::kBroker;
    s.tier = secrets::SecretTier::kHigh;
    s.env_var = "TOKEN";
    s.hosts = {std::move(host)};
    s.ttl = std::chrono::seconds(300);
    s.value = secrets::SecretValue(value);
    auto token = broker_->issue("sb-1", s);
    EXPECT_TRUE(token) << token.error().to_string();
    return token ? *token : "";
  }
  // What a reflecting upstream was sent by `token`: in a field, the query
  // and Basic credentials, plus the sandbox's own Accept-Encoding.
  static std::string reflect_request(const std::string& target, const std::string& host,
                                     const std::string& token, bool basic, bool http10 = false) {
    const std::string body = "{\"note\": \"the body is not swapped: " + token + "\"}";
    return "POST " + target + (target.find('?') == std::string::npos ? "?" : "&") +
           "key=" + token + (http10 ? " HTTP/1.0" : " HTTP/1.1") + "\r\nHost: " + host +
           "\r\nAuthorization: " + (basic ? "Basic " + b64("git:" + token) : "Bearer " + token) +
           "\r\nX-Api-Key: " + token +
           "\r\nAccept-Encoding: gzip, br\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  }
  // The checks every reflected answer must pass, as the sandbox got it.
  void expect_reflected_as_token(const std::string& answer, const std::string& value,
                                 const std::string& token, bool basic, bool chunked = true) {
    SCOPED_TRACE(answer.substr(0, 2000));
    EXPECT_EQ(answer.rfind("HTTP/1.", 0), 0u);
    EXPECT_NE(answer.find(" 200 OK\r\n"), std::string::npos);
    for (const std::string& form : {value, b64(value), b64("git:" + value)})
      EXPECT_EQ(answer.find(form), std::string::npos) << "the value came back into the sandbox";
    std::string body;
    if (chunked) {
      bool complete = false;
      body = dechunk(answer, &complete);
      EXPECT_TRUE(complete) << "the answer's length is not right: ..."
                            << answer.substr(answer.size() > 300 ? answer.size() - 300 : 0);
    } else {
      body = answer.substr(answer.find("\r\n\r\n") + 4);
    }
    // The host got the value (else nothing was reflected) and the sandbox
    // sees its token there.
    EXPECT_NE(body.find("== head =="), std::string::npos);
    EXPECT_NE(body.find("key=" + token), std::string::npos);
    EXPECT_NE(body.find("x-api-key: " + token), std::string::npos);
    EXPECT_NE(answer.find("X-Seen-Accept-Encoding: identity\r\n"), std::string::npos)
        << "a swapped request must ask for an uncompressed answer";
    if (basic) {
      EXPECT_NE(answer.find("X-Echo-Authorization: Basic " + b64("git:" + token) + "\r\n"),
                std::string::npos);
      EXPECT_NE(body.find("== basic ==\ngit:" + token + "\n"), std::string::npos);
    } else {
      EXPECT_NE(answer.find("X-Echo-Authorization: Bearer " + token + "\r\n"), std::string::npos);
    }
  }
  static std::vector<std::string> shapes() {
    return {"frame=length&piece=64", "frame=chunked&piece=1", "frame=chunked&piece=7",
            "frame=close&piece=5", "frame=length&piece=4096"};
  }

  std::shared_ptr<secrets::SecretBroker> broker_;
  std::string high_value_, high_token_, plain_value_, plain_token_;
};

TEST_F(BrokerReflection, PlainHttpAnswersGiveTheTokenBack) {
  const std::uint16_t port = start_proxy(world_->ca_pem_path(), broker_);
  ASSERT_NE(port, 0);
  int requests = 0;
  for (const std::string& shape : shapes()) {
    for (bool basic : {false, true}) {
      SCOPED_TRACE(shape + (basic ? " basic" : " bearer"));
      UniqueFd fd = dial("127.0.0.1", port);
      ASSERT_TRUE(fd);
      const std::string req = reflect_request("http://allowed.test/reflect?decode=basic&" + shape,
                                              "allowed.test", plain_token_, basic);
      ASSERT_EQ(::send(fd.get(), req.data(), req.size(), MSG_NOSIGNAL),
                static_cast<ssize_t>(req.size()));
      expect_reflected_as_token(read_all(fd.get()), plain_value_, plain_token_, basic);
      ++requests;
      net::EgressEvent ev = audit_.wait_next();
      EXPECT_TRUE(ev.allowed) << ev.reason;
      EXPECT_EQ(ev.end, "closed");
      EXPECT_EQ(ev.secrets, std::vector<std::string>{"legacy"});
      EXPECT_EQ(ev.reason.find(plain_value_), std::string::npos);
    }
  }
  // The upstream did get the value each time: the scan is what kept it out.
  int with_value = 0;
  for (const auto& head : world_->http_request_heads())
    with_value += head.find(plain_value_) != std::string::npos ||
                  head.find(b64("git:" + plain_value_)) != std::string::npos;
  EXPECT_EQ(with_value, requests);

  // A client that waits for "100 Continue" before its body gets it (the
  // body goes up before the answer is read), then the scrubbed answer.
  {
    UniqueFd fd = dial("127.0.0.1", port);
    ASSERT_TRUE(fd);
    std::string req = reflect_request("http://allowed.test/reflect?frame=chunked&piece=9",
                                      "allowed.test", plain_token_, false);
    const std::size_t head_end = req.find("\r\n\r\n") + 4;
    req.insert(head_end - 2, "Expect: 100-continue\r\n");
    const std::string head = req.substr(0, head_end + 22), body = req.substr(head_end + 22);
    (void)!::send(fd.get(), head.data(), head.size(), MSG_NOSIGNAL);
    EXPECT_EQ(read_head(fd.get()), "HTTP/1.1 100 Continue\r\n\r\n");
    (void)!::send(fd.get(), body.data(), body.size(), MSG_NOSIGNAL);
    expect_reflected_as_token(read_all(fd.get()), plain_value_, plain_token_, false);
    EXPECT_TRUE(audit_.wait_next().allowed);
  }

  // HTTP/1.0 inside a CONNECT tunnel: no chunks; the close ends the body.
  UniqueFd fd = dial("127.0.0.1", port);
  ASSERT_TRUE(fd);
  const std::string connect = "CONNECT allowed.test:80 HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n";
  (void)!::send(fd.get(), connect.data(), connect.size(), MSG_NOSIGNAL);
  ASSERT_EQ(read_head(fd.get()).rfind("HTTP/1.1 200", 0), 0u);
  const std::string req =
      reflect_request("/reflect?frame=length&piece=3", "allowed.test", plain_token_, false, true);
  (void)!::send(fd.get(), req.data(), req.size(), MSG_NOSIGNAL);
  const std::string answer = read_all(fd.get());
  EXPECT_EQ(answer.find("Transfer-Encoding"), std::string::npos) << answer;
  expect_reflected_as_token(answer, plain_value_, plain_token_, false, false);
  EXPECT_TRUE(audit_.wait_next().allowed);
}

TEST_F(BrokerReflection, InterceptedHttpsAnswersGiveTheTokenBack) {
  const std::uint16_t port = start_proxy(world_->ca_pem_path(), broker_);
  ASSERT_NE(port, 0);
  for (const std::string& shape : shapes()) {
    for (bool basic : {false, true}) {
      SCOPED_TRACE(shape + (basic ? " basic" : " bearer"));
      TlsExchange x = https_via_proxy(
          port, "allowed.test", ca_->ca_pem(),
          reflect_request("/reflect?decode=basic&" + shape, "allowed.test", high_token_, basic));
      ASSERT_TRUE(x.handshake) << x.error;
      expect_reflected_as_token(x.response, high_value_, high_token_, basic);
      net::EgressEvent ev = audit_.wait_next();
      EXPECT_TRUE(ev.allowed) << ev.reason;
      EXPECT_TRUE(ev.intercepted);
      EXPECT_EQ(ev.secrets, std::vector<std::string>{"openai"});
    }
  }
  EXPECT_TRUE(any_contains(world_->tls_request_heads(), high_value_));
}

TEST_F(BrokerReflection, GatewayAnswersGiveTheTokenBack) {
  auto svc = net::parse_gateway_service_flag("llm=https://allowed.test/api;methods=GET,POST");
  ASSERT_TRUE(svc) << svc.error().to_string();
  std::vector<net::GatewayEvent> events;
  net::GatewayOptions o;
  o.ca_file = world_->ca_pem_path();
  o.swapper = broker_;
  auto gw = net::Gateway::create(
      {*svc}, std::string(32, 'k'), resolver_,
      [&](const net::GatewayEvent& e) { events.push_back(e); }, o);
  ASSERT_TRUE(gw) << gw.error().to_string();
  const std::string gw_token = (*gw)->token("sb-1", std::time(nullptr) + 60);
  for (const std::string& shape : shapes()) {
    for (bool basic : {false, true}) {
      SCOPED_TRACE(shape + (basic ? " basic" : " bearer"));
      std::string req = reflect_request("/llm/reflect?decode=basic&" + shape,
                                        "gateway.corral.internal", high_token_, basic);
      req.insert(req.find("\r\n") + 2, "X-Corral-Gateway-Token: " + gw_token + "\r\n");
      GatewayRun run = through_gateway(**gw, events, req);
      expect_reflected_as_token(run.response, high_value_, high_token_, basic);
      ASSERT_EQ(run.events.size(), 1u);
      EXPECT_TRUE(run.events[0].allowed) << run.events[0].reason;
      EXPECT_EQ(run.events[0].status, 200);
      EXPECT_EQ(run.events[0].reason.find(high_value_), std::string::npos);
    }
  }
  EXPECT_TRUE(any_contains(world_->tls_request_heads(), high_value_));
}

// A host that answers compressed although it was asked not to: the proxy
// and the gateway cannot scan the body, so nothing of it reaches the
// sandbox (the reflector's "gzip" body is the plain reflection: if it were
// relayed, the value would be in it).
TEST_F(BrokerReflection, ACompressedAnswerIsNotRelayed) {
  const std::uint16_t port = start_proxy(world_->ca_pem_path(), broker_);
  ASSERT_NE(port, 0);
  auto refused_502 = [&](const std::string& answer) {
    EXPECT_EQ(answer.rfind("HTTP/1.1 502 ", 0), 0u) << answer;
    EXPECT_NE(answer.find("compressed"), std::string::npos) << answer;
    EXPECT_EQ(answer.find(high_value_), std::string::npos);
    EXPECT_EQ(answer.find(plain_value_), std::string::npos);
    EXPECT_EQ(answer.find("== head =="), std::string::npos) << "the body was relayed";
  };
  for (const std::string coding : {"gzip", "br"}) {
    UniqueFd fd = dial("127.0.0.1", port);
    ASSERT_TRUE(fd);
    const std::string req =
        reflect_request("http://allowed.test/reflect?frame=chunked&encoding=" + coding,
                        "allowed.test", plain_token_, false);
    (void)!::send(fd.get(), req.data(), req.size(), MSG_NOSIGNAL);
    refused_502(read_all(fd.get()));
    net::EgressEvent ev = audit_.wait_next();
    EXPECT_FALSE(ev.allowed);
    EXPECT_EQ(ev.refusal, net::EgressRefusal::kSecretRefused);
    EXPECT_NE(ev.reason.find("compressed"), std::string::npos) << ev.reason;

    TlsExchange x = https_via_proxy(
        port, "allowed.test", ca_->ca_pem(),
        reflect_request("/reflect?encoding=" + coding, "allowed.test", high_token_, true));
    ASSERT_TRUE(x.handshake) << x.error;
    refused_502(x.response);
    net::EgressEvent tev = audit_.wait_next();
    EXPECT_FALSE(tev.allowed);
    EXPECT_EQ(tev.refusal, net::EgressRefusal::kSecretRefused);
  }
  // Without a swap, a compressed answer passes as before.
  UniqueFd fd = dial("127.0.0.1", port);
  ASSERT_TRUE(fd);
  const std::string plain = "GET http://allowed.test/reflect?encoding=gzip HTTP/1.1\r\n"
                            "Host: allowed.test\r\n\r\n";
  (void)!::send(fd.get(), plain.data(), plain.size(), MSG_NOSIGNAL);
  const std::string answer = read_all(fd.get());
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer;
  EXPECT_NE(answer.find("Content-Encoding: gzip\r\n"), std::string::npos) << answer;
  EXPECT_TRUE(audit_.wait_next().allowed);

  // The gateway: refused too.
  auto svc = net::parse_gateway_service_flag("llm=https://allowed.test/api;methods=GET,POST");
  ASSERT_TRUE(svc);
  std::vector<net::GatewayEvent> events;
  net::GatewayOptions o;
  o.ca_file = world_->ca_pem_path();
  o.swapper = broker_;
  auto gw = net::Gateway::create(
      {*svc}, std::string(32, 'k'), resolver_,
      [&](const net::GatewayEvent& e) { events.push_back(e); }, o);
  ASSERT_TRUE(gw);
  std::string req = reflect_request("/llm/reflect?encoding=gzip", "gateway.corral.internal",
                                    high_token_, false);
  req.insert(req.find("\r\n") + 2, "X-Corral-Gateway-Token: " +
                                       (*gw)->token("sb-1", std::time(nullptr) + 60) + "\r\n");
  GatewayRun run = through_gateway(**gw, events, req);
  refused_502(run.response);
  ASSERT_EQ(run.events.size(), 1u);
  EXPECT_FALSE(run.events[0].allowed);
}

}  // namespace
}  // namespace corral::testing
