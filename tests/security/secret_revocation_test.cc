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
#include "support/net_world.h"
#include "support/skip.h"

namespace corral::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string random_text(std::size_t n) {
  static const char kAlphabet[] = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
  std::random_device rd;
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += kAlphabet[rd() % (sizeof kAlphabet - 1)];
  return s;
}

// A store of one key, "api", with a random value; mode 0600.
struct OneSecretStore {
  std::string dir, path, value = "v-" + random_text(32);
  OneSecretStore() {
    char t[] = "/tmp/corral-revoke-test-XXXXXX";
    dir = ::mkdtemp(t);
    path = dir + "/secrets";
    std::ofstream(path) << "api=" << value << "\n";
    ::chmod(path.c_str(), 0600);
  }
  ~OneSecretStore() { fs::remove_all(dir); }
};

// From inside the sandbox: one plain-HTTP request to allowed.test with the
// token as the bearer, after `delay` seconds. Prints "result <status>
// <X-Corral-Refusal> <body>".
const char* kCall = R"(
import os, sys, time, urllib.request, urllib.error
time.sleep(float(sys.argv[2]))
req = urllib.request.Request('http://allowed.test' + sys.argv[1],
                             headers={'Authorization': 'Bearer ' + os.environ['API']})
try:
    r = urllib.request.urlopen(req, timeout=15)
    print('result', r.status)
except urllib.error.HTTPError as e:
    print('result', e.code, e.headers.get('X-Corral-Refusal', ''), e.read().decode(errors='replace').strip())
except Exception as e:
    print('result ERR', type(e).__name__, e)
)";

class SecretRevocation : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("network tests run as root");
    auto world = NetWorld::create();
    ASSERT_TRUE(world.has_value()) << world.error().message;
    world_ = std::move(*world);
    const std::string config = "serve:\n  secrets:\n    file: " + store_.path +
                               "\n  network:\n    dns_servers: [\"" + world_->dns_endpoint() +
                               "\"]\n    upstream_ca_file: " + world_->ca_pem_path() + "\n";
    daemon_ = std::make_unique<TestDaemon>(std::vector<std::string>{}, config);
    ASSERT_TRUE(daemon_->ready()) << daemon_->output();
  }

  // A sandbox whose broker secret "api" may go to allowed.test:80.
  std::string create(const std::string& ttl = "") {
    json secret{{"name", "api"},
                {"tier", "high"},
                {"hosts", json::array({{{"host", "allowed.test"}, {"port", 80}}})}};
    if (!ttl.empty()) secret["ttl"] = ttl;
    json body{{"network", {{"mode", "allowlist"}, {"allow", {"http://allowed.test:80"}}}},
              {"secrets", json::array({secret})}};
    HttpReply reply;
    std::string id = daemon_->create_sandbox(body.dump(), &reply);
    EXPECT_FALSE(id.empty()) << reply.body;
    return id;
  }
  std::string call(const std::string& id, const std::string& path, double delay = 0) {
    json body{{"argv", {"/usr/bin/python3", "-c", kCall, path, std::to_string(delay)}},
              {"timeout", 60}};
    json r = daemon_->request("POST", "/v1/sandboxes/" + id + "/exec", body.dump()).json();
    return r.value("stdout", "") + r.value("stderr", "");
  }
  HttpReply revoke(const std::string& id, const std::string& body = "") {
    return daemon_->request("POST", "/v1/sandboxes/" + id + "/secrets/revoke", body);
  }
  // Heads the upstream read whose request line names `path`.
  int heads_for(const std::string& path) const {
    int n = 0;
    for (const auto& h : world_->http_request_heads())
      if (h.find(path) != std::string::npos) ++n;
    return n;
  }
  bool value_reached_upstream_in(const std::string& path) const {
    for (const auto& h : world_->http_request_heads())
      if (h.find(path) != std::string::npos &&
          h.find(store_.value) != std::string::npos)
        return true;
    return false;
  }
  bool refused_with(const std::string& reason) const {
    for (const auto& ev : daemon_->wait_audit("secret.refused", 1))
      if (ev.value("reason", "") == reason && ev.value("secret", "") == "api") return true;
    return false;
  }

  OneSecretStore store_;
  std::unique_ptr<NetWorld> world_;
  std::unique_ptr<TestDaemon> daemon_;
};

TEST_F(SecretRevocation, ARevokedTokenIsRefusedAtTheProxyAndNeverReachesTheUpstream) {
  const std::string id = create();
  ASSERT_FALSE(id.empty());

  // Before: the upstream gets the value in place of the token.
  const std::string before = "/before-" + random_text(8);
  EXPECT_NE(call(id, before).find("result 200"), std::string::npos);
  EXPECT_EQ(heads_for(before), 1);
  EXPECT_TRUE(value_reached_upstream_in(before)) << "the swap works before revocation";

  // The task ends; its sandbox is kept.
  HttpReply r = revoke(id);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json().value("revoked", -1), 1) << r.body;
  EXPECT_GE(daemon_->wait_audit("secret.revoked", 1).size(), 1u);

  const std::size_t heads_before = world_->http_request_heads().size();
  const std::string after = "/after-" + random_text(8);
  const std::string out = call(id, after);
  EXPECT_NE(out.find("result 403 secret_refused corral egress proxy: broker token revoked"),
            std::string::npos)
      << out;
  EXPECT_EQ(world_->http_request_heads().size(), heads_before) << "nothing was forwarded";
  EXPECT_EQ(heads_for(after), 0);
  EXPECT_TRUE(refused_with("revoked"));
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

  // A restarted daemon issues the sandbox a new token, revoked at once.
  ASSERT_TRUE(daemon_->kill9());
  ASSERT_TRUE(daemon_->restart()) << daemon_->output();
  auto info = daemon_->request("GET", "/v1/sandboxes/" + id);
  ASSERT_EQ(info.json().value("state", ""), "ready") << info.body;
  const std::size_t heads_restart = world_->http_request_heads().size();
  const std::string late = "/after-restart-" + random_text(8);
  const std::string late_out = call(id, late);
  EXPECT_NE(late_out.find("result 403 secret_refused corral egress proxy: broker token revoked"),
            std::string::npos)
      << late_out;
  EXPECT_EQ(world_->http_request_heads().size(), heads_restart);

  // The value never reached the upstream after the revocation, in any head.
  for (const std::string& path : {after, late}) EXPECT_FALSE(value_reached_upstream_in(path));
  EXPECT_EQ(daemon_->output().find(store_.value), std::string::npos);

  auto del = daemon_->request("DELETE", "/v1/sandboxes/" + id);
  EXPECT_EQ(del.json().value("state", ""), "cleaned") << del.body;
  EXPECT_FALSE(fs::exists(daemon_->data_dir() + "/token-limits/" + id + ".json"))
      << "the stored revocation goes with the sandbox";
}

// A token past its TTL: the same refusal, named "expired". The TTL is a
// real 1 s (the unit tests drive the clock); the request waits 2 s inside.
TEST_F(SecretRevocation, AnExpiredTokenIsRefusedAtTheProxyAndNeverReachesTheUpstream) {
  const std::string id = create("1s");
  ASSERT_FALSE(id.empty());
  const std::size_t heads_before = world_->http_request_heads().size();
  const std::string late = "/expired-" + random_text(8);
  const std::string out = call(id, late, 2.0);
  EXPECT_NE(out.find("result 403 secret_refused corral egress proxy: broker token expired"),
            std::string::npos)
      << out;
  EXPECT_EQ(world_->http_request_heads().size(), heads_before) << "nothing was forwarded";
  EXPECT_FALSE(value_reached_upstream_in(late));
  EXPECT_TRUE(refused_with("expired"));
  // Revoking an expired token's sandbox is no error (nothing left active).
  HttpReply r = revoke(id);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json().value("revoked", -1), 0);
}

}  // namespace
}  // namespace corral::testing
