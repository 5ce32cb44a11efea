// Issue 15, point 9 (S4): a broker token used after its task ended is
// refused at the proxy. A real sandbox behind the daemon's real egress
// proxy sends its token to a test upstream (tests/support/net_world.h, a
// network namespace of the test's own) in plain HTTP: before revocation the
// upstream sees the value in place of the token; after
// `POST /v1/sandboxes/{id}/secrets/revoke` (what the task service calls at
// a task's end when the sandbox is kept), and separately after the token's
// TTL, the request is answered 403 naming the reason, the upstream counts
// no new request and never sees the value, the refusal is audited and
// counted, and a daemon restart does not give the kept sandbox a valid
// token back. The secret's value is random per test.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "support/daemon_harness.h"
#include "support/secret_file.h"
#include "support/net_world.h"
#include "support/skip.h"

namespace corral::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A store of two keys, "api" and "llm", with random values; mode 0600.
struct TwoSecretStore : SecretFile {
  TwoSecretStore() : SecretFile({"api", "llm"}, "v-", 32) {}
  const std::string api = values.at("api"), llm = values.at("llm");
};

// From inside the sandbox, after `delay` seconds, one request by each way
// out that swaps tokens: plain HTTP through the proxy (secret "api", to
// allowed.test:80), TLS interception (secret "llm", allowed.test:443) and
// the gateway (service "llm", https://allowed.test/v1, secret "llm"). Each
// path ends in the nonce. Prints "result <way> <status> <X-Corral-Refusal>
// <body>" per request.
const char* kCalls = R"(
import os, sys, time, urllib.request, urllib.error
n, delay = sys.argv[1], float(sys.argv[2])
time.sleep(delay)
def call(way, url, var, extra={}):
    h = {'Authorization': 'Bearer ' + os.environ[var]}
    h.update(extra)
    try:
        r = urllib.request.urlopen(urllib.request.Request(url, headers=h), timeout=15)
        print('result', way, r.status)
    except urllib.error.HTTPError as e:
        print('result', way, e.code, e.headers.get('X-Corral-Refusal', ''),
              e.read().decode(errors='replace').strip().replace('\n', ' '))
    except Exception as e:
        print('result', way, 'ERR', type(e).__name__, e)
call('http', 'http://allowed.test/http-' + n, 'API')
call('tls', 'https://allowed.test/tls-' + n, 'LLM')
call('gateway', 'http://gateway.corral.internal/llm/gw-' + n, 'LLM',
     {'X-Corral-Gateway-Token': os.environ['CORRAL_GATEWAY_TOKEN']})
)";

// The line of `way` in the script's output.
std::string line_of(const std::string& out, const std::string& way) {
  const std::string key = "result " + way + " ";
  std::size_t at = out.find(key);
  if (at == std::string::npos) return "<no line for " + way + "> " + out;
  return out.substr(at, out.find('\n', at) - at);
}

class SecretRevocation : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("network tests run as root");
    auto world = NetWorld::create();
    ASSERT_TRUE(world.has_value()) << world.error().message;
    world_ = std::move(*world);
    const std::string config =
        "serve:\n  secrets:\n    file: " + store_.path + "\n  network:\n    dns_servers: [\"" +
        world_->dns_endpoint() + "\"]\n    upstream_ca_file: " + world_->ca_pem_path() +
        "\n    gateway:\n      - name: llm\n        url: https://allowed.test/v1\n"
        "        methods: [GET]\n";
    daemon_ = std::make_unique<TestDaemon>(std::vector<std::string>{}, config);
    ASSERT_TRUE(daemon_->ready()) << daemon_->output();
  }

  // A sandbox with broker secret "api" for allowed.test:80 (plain HTTP) and
  // "llm" for allowed.test:443 (intercepted, and the gateway's service).
  std::string create(const std::string& ttl = "") {
    json api{{"name", "api"},
             {"tier", "high"},
             {"hosts", json::array({{{"host", "allowed.test"}, {"port", 80}}})}};
    json llm{{"name", "llm"},
             {"tier", "high"},
             {"hosts", json::array({{{"host", "allowed.test"}, {"intercept", true}}})}};
    if (!ttl.empty()) api["ttl"] = llm["ttl"] = ttl;
    json body{{"network",
               {{"mode", "allowlist"},
                {"allow", {"http://allowed.test:80", "allowed.test:443"}},
                {"gateway", {"llm"}}}},
              {"secrets", json::array({api, llm})}};
    HttpReply reply;
    std::string id = daemon_->create_sandbox(body.dump(), &reply);
    EXPECT_FALSE(id.empty()) << reply.body;
    return id;
  }
  // Runs kCalls in the sandbox; the nonce ends every path.
  std::string calls(const std::string& id, const std::string& nonce, double delay = 0) {
    json body{{"argv", {"/usr/bin/python3", "-c", kCalls, nonce, std::to_string(delay)}},
              {"timeout", 60}};
    json r = daemon_->request("POST", "/v1/sandboxes/" + id + "/exec", body.dump()).json();
    return r.value("stdout", "") + r.value("stderr", "");
  }
  HttpReply revoke(const std::string& id, const std::string& body = "") {
    return daemon_->request("POST", "/v1/sandboxes/" + id + "/secrets/revoke", body);
  }
  // Every head the upstream's HTTP :80 and TLS :443 servers read.
  std::vector<std::string> heads() const {
    auto all = world_->http_request_heads();
    for (auto& h : world_->tls_request_heads()) all.push_back(std::move(h));
    return all;
  }
  // How many heads hold `nonce`, and how many of those hold a value.
  int heads_with(const std::string& nonce) const {
    int n = 0;
    for (const auto& h : heads()) n += h.find(nonce) != std::string::npos;
    return n;
  }
  int values_with(const std::string& nonce) const {
    int n = 0;
    for (const auto& h : heads())
      if (h.find(nonce) != std::string::npos &&
          (h.find(store_.api) != std::string::npos || h.find(store_.llm) != std::string::npos))
        ++n;
    return n;
  }
  // The three ways out were each refused, naming `why` first
  // ("broker token revoked" / "broker token expired"), and nothing carrying
  // the nonce reached the upstream.
  void expect_refused_everywhere(const std::string& out, const std::string& nonce,
                                 const std::string& why) {
    EXPECT_NE(line_of(out, "http").find("403 secret_refused corral egress proxy: " + why),
              std::string::npos)
        << out;
    EXPECT_NE(line_of(out, "tls").find("403  corral egress proxy: " + why), std::string::npos)
        << out;
    EXPECT_NE(line_of(out, "gateway").find("403 secret_refused {\"error\":\"secret_refused\""),
              std::string::npos)
        << out;
    EXPECT_NE(line_of(out, "gateway").find(why), std::string::npos) << out;
    EXPECT_EQ(heads_with(nonce), 0) << "nothing was forwarded";
  }
  bool refused_with(const std::string& reason, const std::string& secret) const {
    for (const auto& ev : daemon_->wait_audit("secret.refused", 3))
      if (ev.value("reason", "") == reason && ev.value("secret", "") == secret) return true;
    return false;
  }

  TwoSecretStore store_;
  std::unique_ptr<NetWorld> world_;
  std::unique_ptr<TestDaemon> daemon_;
};

TEST_F(SecretRevocation, ARevokedTokenIsRefusedAtTheProxyAndNeverReachesTheUpstream) {
  const std::string id = create();
  ASSERT_FALSE(id.empty());

  // Before: each way out swaps, and the upstream gets the values.
  const std::string before = "before" + random_token(8);
  const std::string out = calls(id, before);
  for (const char* way : {"http", "tls", "gateway"})
    EXPECT_NE(line_of(out, way).find(std::string("result ") + way + " 200"), std::string::npos)
        << out;
  EXPECT_EQ(heads_with(before), 3);
  EXPECT_EQ(values_with(before), 3) << "the swap works before revocation";

  // The task ends; its sandbox is kept.
  HttpReply r = revoke(id);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json().value("revoked", -1), 2) << r.body;
  EXPECT_GE(daemon_->wait_audit("secret.revoked", 2).size(), 2u);

  const std::size_t heads_before = heads().size();
  const std::string after = "after" + random_token(8);
  expect_refused_everywhere(calls(id, after), after, "broker token revoked");
  EXPECT_EQ(heads().size(), heads_before) << "the upstream counted no new request";
  EXPECT_TRUE(refused_with("revoked", "api"));
  EXPECT_TRUE(refused_with("revoked", "llm"));
  auto metrics = daemon_->request("GET", "/metrics");
  EXPECT_NE(metrics.body.find("corral_secret_refusals_total{reason=\"revoked\"}"),
            std::string::npos)
      << metrics.body.substr(0, 2000);

  // Idempotent; an unknown sandbox is 404; a body is refused.
  r = revoke(id);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json().value("revoked", -1), 0);
  EXPECT_EQ(revoke("sb-does-not-exist").status, 404);
  EXPECT_EQ(revoke(id, R"({"all": true})").status, 400);

  // The sandbox lives on (keep_sandbox): it still runs commands.
  json alive = daemon_->exec(id, "echo alive");
  EXPECT_NE(alive.value("stdout", "").find("alive"), std::string::npos) << alive.dump();

  // A restarted daemon issues the sandbox new tokens, revoked at once.
  ASSERT_TRUE(daemon_->kill9());
  ASSERT_TRUE(daemon_->restart()) << daemon_->output();
  auto info = daemon_->request("GET", "/v1/sandboxes/" + id);
  ASSERT_EQ(info.json().value("state", ""), "ready") << info.body;
  const std::size_t heads_restart = heads().size();
  const std::string late = "restart" + random_token(8);
  expect_refused_everywhere(calls(id, late), late, "broker token revoked");
  EXPECT_EQ(heads().size(), heads_restart);

  // The values never reached the upstream after the revocation.
  EXPECT_EQ(values_with(after) + values_with(late), 0);
  EXPECT_EQ(daemon_->output().find(store_.api), std::string::npos);
  EXPECT_EQ(daemon_->output().find(store_.llm), std::string::npos);

  auto del = daemon_->request("DELETE", "/v1/sandboxes/" + id);
  EXPECT_EQ(del.json().value("state", ""), "cleaned") << del.body;
  EXPECT_FALSE(fs::exists(daemon_->data_dir() + "/token-limits/" + id + ".json"))
      << "the stored revocation goes with the sandbox";
}

// Tokens past their TTL: the same refusals, named "expired". The TTL is a
// real 1 s (the unit tests drive the clock); the requests wait 2 s inside.
TEST_F(SecretRevocation, AnExpiredTokenIsRefusedAtTheProxyAndNeverReachesTheUpstream) {
  const std::string id = create("1s");
  ASSERT_FALSE(id.empty());
  const std::size_t heads_before = heads().size();
  const std::string late = "expired" + random_token(8);
  expect_refused_everywhere(calls(id, late, 2.0), late, "broker token expired");
  EXPECT_EQ(heads().size(), heads_before) << "the upstream counted no new request";
  EXPECT_EQ(values_with(late), 0);
  EXPECT_TRUE(refused_with("expired", "api"));
  EXPECT_TRUE(refused_with("expired", "llm"));
  // Revoking a sandbox whose tokens expired is no error (none is active).
  HttpReply r = revoke(id);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json().value("revoked", -1), 0);
}

}  // namespace
}  // namespace corral::testing
