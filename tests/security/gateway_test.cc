// The internal-service gateway (issue 4, N5), attacked from inside real
// sandboxes (`corral run --gateway-service ... --gateway ...`) against the
// "internal service" of tests/support/net_world.h (198.51.100.20:8080),
// and checked from outside: what that service saw. Every probe is
// harmless: traffic goes only to the test world's own servers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "egress/gateway_token.h"
#include "support/net_client.h"
#include "support/net_world.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

struct Fixture {
  std::unique_ptr<NetWorld> world;
  std::string dir;
  std::string key_path;
  std::string secret;
  ~Fixture() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};

bool make_fixture(Fixture& f) {
  auto world = NetWorld::create();
  if (!world) {
    ADD_FAILURE() << "the test internet could not be made: " << world.error().message;
    return false;
  }
  f.world = std::move(*world);
  char tmpl[] = "/tmp/corral-gwtest-XXXXXX";
  if (!mkdtemp(tmpl)) {
    ADD_FAILURE() << "mkdtemp";
    return false;
  }
  f.dir = tmpl;
  f.key_path = f.dir + "/gateway.key";
  auto secret = net::load_or_create_gateway_secret(f.key_path);
  if (!secret) {
    ADD_FAILURE() << secret.error().to_string();
    return false;
  }
  f.secret = *secret;
  return true;
}

const std::string kInternal = std::string("http://") + NetWorld::kInternalAddress + ":" +
                              std::to_string(NetWorld::kInternalPort);

RunOutcome run_client(Fixture& f, std::vector<std::string> opts, const std::string& script) {
  std::vector<std::string> all = {"--dns", f.world->dns_endpoint(), "--gateway-secret-file",
                                  f.key_path};
  all.insert(all.end(), opts.begin(), opts.end());
  return run_sandbox(all, {"/usr/bin/python3", "-c", std::string(kNetClientPy) + script});
}

#define REQUIRE_FIXTURE(f)                                              \
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("network tests run as root"); \
  Fixture f;                                                            \
  if (!make_fixture(f)) return

TEST(Gateway, GrantedServiceWorksAndEverythingElseIsRefused) {
  REQUIRE_FIXTURE(f);
  const std::int64_t now = std::time(nullptr);
  const std::string other = net::mint_gateway_token(f.secret, "sb-000000000000", now + 600);
  const std::string expired = net::mint_gateway_token(f.secret, "sb-000000000000", now - 10);
  RunOutcome r = run_client(
      f,
      {"--gateway-service", "svc=" + kInternal + "/base;methods=GET,POST;paths=/v1/,/health",
       "--gateway-service", "other=" + kInternal + "/other", "--gateway", "svc", "--env",
       "OTHER_TOKEN=" + other, "--env", "EXPIRED_TOKEN=" + expired},
      R"PY(
out("has_token", "yes" if TOK.startswith("cgw1.") else "no")
out("granted", gw("GET", "/svc/v1/items?x=1"))
out("granted_proxy", gw("GET", "/svc/health", header="x", via_proxy=True))
out("post", gw("POST", "/svc/v1/items", body=b"abc"))
out("ungranted", gw("GET", "/other/v1/x"))
out("unknown", gw("GET", "/nope/v1/x"))
out("no_token", gw("GET", "/svc/v1/x", token=""))
out("bad_token", gw("GET", "/svc/v1/x", token="cgw1.forged"))
out("other_sandbox", gw("GET", "/svc/v1/x", token=os.environ["OTHER_TOKEN"]))
out("expired", gw("GET", "/svc/v1/x", token=os.environ["EXPIRED_TOKEN"]))
out("method", gw("DELETE", "/svc/v1/x"))
out("path", gw("GET", "/svc/admin"))
out("dotdot", gw("GET", "/svc/v1/../admin"))
out("dotdot_encoded", gw("GET", "/svc/v1/%2e%2e/admin"))
out("dotdot_proxy", gw("GET", "/svc/v1/%2E%2E/%2E%2E/other/x", via_proxy=True))
out("double_slash", gw("GET", "/svc//v1/x"))
out("encoded_slash", gw("GET", "/svc/v1%2f..%2fadmin"))
out("raw", raw_get("198.51.100.20", 8080, "/base/v1/x"))
out("raw_proxy", raw_get("198.51.100.20", 8080, "/base/v1/x", via_proxy=True))
)PY");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(value_of(r.out, "has_token"), "yes") << r.out;
  EXPECT_EQ(value_of(r.out, "granted"), "200 internal GET /base/v1/items?x=1 auth=no")
      << r.out << r.err;
  EXPECT_EQ(value_of(r.out, "granted_proxy"), "200 internal GET /base/health auth=no")
      << r.out << r.err;
  EXPECT_EQ(value_of(r.out, "post"), "200 internal POST /base/v1/items auth=no") << r.out << r.err;
  struct Want {
    const char* name;
    const char* status;
    const char* says;
  } wants[] = {{"ungranted", "403", "not_granted"},
               {"unknown", "404", "unknown_service"},
               {"no_token", "401", "no_token"},
               {"bad_token", "401", "malformed"},
               {"other_sandbox", "401", "another sandbox"},
               {"expired", "401", "expired"},
               {"method", "403", "method"},
               {"path", "403", "path_not_allowed"},
               {"dotdot", "400", "'..'"},
               {"dotdot_encoded", "400", "'..'"},
               {"dotdot_proxy", "400", "'..'"},
               {"double_slash", "400", "empty segment"},
               {"encoded_slash", "400", "encoded '/'"}};
  for (const Want& w : wants) {
    const std::string v = value_of(r.out, w.name);
    EXPECT_EQ(v.substr(0, 4), std::string(w.status) + " ") << w.name << ": " << v;
    EXPECT_NE(v.find(w.says), std::string::npos) << w.name << ": " << v;
  }
  EXPECT_EQ(value_of(r.out, "raw").find("internal"), std::string::npos) << r.out;
  EXPECT_EQ(value_of(r.out, "raw_proxy").find("internal"), std::string::npos) << r.out;

  // Outside: the internal service saw exactly the three granted requests,
  // each with the sandbox named by the gateway and without the token.
  const auto seen = f.world->internal_requests();
  ASSERT_EQ(seen.size(), 3u) << ::testing::PrintToString(seen);
  EXPECT_EQ(seen[0].rfind("GET /base/v1/items?x=1 auth=no token=no sandbox=sb-", 0), 0u) << seen[0];
  EXPECT_EQ(seen[1].rfind("GET /base/health auth=no token=no sandbox=sb-", 0), 0u) << seen[1];
  EXPECT_EQ(seen[2].rfind("POST /base/v1/items auth=no token=no sandbox=sb-", 0), 0u) << seen[2];
  const std::string sandbox = r.report.value("sandbox_id", std::string());
  EXPECT_NE(seen[0].find("sandbox=" + sandbox), std::string::npos) << seen[0] << " vs " << sandbox;
  // And every refusal is reported.
  EXPECT_NE(r.err.find("gateway refused DELETE /svc/v1/x (403 method)"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("refused"), std::string::npos) << r.err;
  expect_sandbox_cleaned_up(r.report, "gateway sandbox");
}

TEST(Gateway, TheRateLimitBites) {
  REQUIRE_FIXTURE(f);
  RunOutcome r = run_client(
      f, {"--gateway-service", "svc=" + kInternal + ";rate=2/s,burst=3", "--gateway", "svc"},
      R"PY(
codes = [gw("GET", "/svc/x").split(" ")[0] for _ in range(12)]
out("ok", codes.count("200"))
out("limited", codes.count("429"))
)PY");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const int ok = std::stoi(value_of(r.out, "ok"));
  const int limited = std::stoi(value_of(r.out, "limited"));
  EXPECT_EQ(ok + limited, 12) << r.out << r.err;
  EXPECT_GE(ok, 3) << r.out;
  EXPECT_GE(limited, 4) << "12 requests at once with 2/s and a burst of 3: " << r.out;
  EXPECT_EQ(static_cast<int>(f.world->internal_requests().size()), ok)
      << "the service saw a different number of requests than were let through";
}

TEST(Gateway, WithoutAGrantTheNameDoesNotResolveAndNothingIsServed) {
  REQUIRE_FIXTURE(f);
  const std::string forged =
      net::mint_gateway_token(f.secret, "sb-000000000000", std::time(nullptr) + 600);
  RunOutcome r = run_client(f,
                            {"--gateway-service", "svc=" + kInternal, "--allow", "allowed.test",
                             "--env", "FORGED=" + forged},
                            R"PY(
try:
    socket.getaddrinfo("gateway.corral.internal", 80)
    out("resolve", "RESOLVED")
except Exception as e:
    out("resolve", err(e))
out("token_env", "yes" if TOK else "no")
host_end = os.environ["HTTP_PROXY"].split("//")[1].split(":")[0]
try:
    s = socket.create_connection((host_end, 80), timeout=5)
    s.sendall(f"GET /svc/x HTTP/1.1\r\nHost: gateway.corral.internal\r\nAuthorization: Bearer {os.environ['FORGED']}\r\n\r\n".encode())
    d = read_all(s).decode(errors="replace")
    out("direct", d.split(" ")[1] if d else "EMPTY")
except Exception as e:
    out("direct", err(e))
)PY");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(value_of(r.out, "resolve"), "RESOLVED") << r.out;
  EXPECT_EQ(value_of(r.out, "token_env"), "no") << r.out;
  EXPECT_EQ(value_of(r.out, "direct"), "401") << r.out << r.err;
  EXPECT_TRUE(f.world->internal_requests().empty());
}

TEST(Gateway, UndeclaredGrantIsAUsageError) {
  RunOutcome r = run_sandbox({"--gateway", "svc"}, {"/bin/true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("--gateway-service svc="), std::string::npos) << r.err;
}

}  // namespace
}  // namespace corral::testing
