// Dry-run's network and secret record (X2, daemon/dry_run_record.h) and
// its synthetic DNS addresses (egress/dry_run_addresses.h), from events in
// the form the audit log gets them.
#include "daemon/dry_run_record.h"

#include <gtest/gtest.h>

#include "egress/dry_run_addresses.h"

namespace corral::daemon {
namespace {

using nlohmann::json;

json connection(const std::string& name, int port, const std::string& protocol,
                const std::string& reason, const std::string& method = {},
                const std::string& path = {}) {
  json ev{{"type", "network.connection"}, {"sandbox", "sb-1"}, {"name", name},
          {"port", port},                  {"protocol", protocol}, {"refusal", "dry_run"},
          {"reason", reason}};
  if (!method.empty()) ev["method"] = method;
  if (!path.empty()) ev["path"] = path;
  return ev;
}

const char* const kRelay = "dry run: nothing was sent; a real run would relay it";
const char* const kRefuse = "dry run: nothing was sent; a real run would refuse it: no rule";

TEST(DryRunRecord, GroupsConnectionsAndSaysWhatARealRunWouldDo) {
  DryRunRecord r;
  r.observe(connection("pypi.org", 443, "tls", kRelay));
  r.observe(connection("pypi.org", 443, "tls", kRelay));
  r.observe(connection("example.com", 80, "http", kRefuse, "POST", "/upload"));
  r.observe(json{{"type", "network.dns"}, {"name", "pypi.org"}, {"qtype", "A"},
                 {"outcome", "answered"}, {"addresses", {"198.18.0.1"}}});
  r.observe(json{{"type", "secret.read"}, {"secret", "openai"}, {"path", "/run/secrets/openai"},
                 {"mode", "file"}});
  r.observe(json{{"type", "sandbox.create"}});  // not the record's
  json net = r.network_json();
  ASSERT_EQ(net["connections"].size(), 2u) << net.dump();
  EXPECT_EQ(net["connections"][0]["count"], 2);
  EXPECT_EQ(net["connections"][0]["real_run"], "allow");
  EXPECT_EQ(net["connections"][1]["real_run"], "deny");
  EXPECT_EQ(net["connections"][1]["requests"][0]["method"], "POST");
  EXPECT_EQ(net["connections"][1]["requests"][0]["path"], "/upload");
  EXPECT_EQ(net["dns"][0]["answer"], "198.18.0.1");
  EXPECT_EQ(r.secrets_json()["reads"][0]["secret"], "openai");
  DryRunWrites writes;
  EXPECT_EQ(summarize_dry_run(writes, r),
            "would write nothing, would connect to pypi.org:443 twice, would connect to "
            "example.com:80 once (refused in a real run), would read secret openai");
}

TEST(DryRunRecord, GatewayCallsAndTheBook) {
  DryRunBook book;
  auto state = std::make_shared<DryRunSandbox>();
  book.add("sb-1", state);
  book.observe(json{{"type", "network.gateway"}, {"sandbox", "sb-1"}, {"service", "search"},
                    {"method", "GET"}, {"path", "/search/q"},
                    {"reason", "dry run: nothing was sent; a real run would forward it to x:80"}});
  book.observe(json{{"type", "network.gateway"}, {"sandbox", "sb-2"}, {"service", "other"}});
  json net = state->record.network_json();
  ASSERT_EQ(net["gateway"].size(), 1u) << net.dump();
  EXPECT_EQ(net["gateway"][0]["real_run"], "allow");
  book.remove("sb-1");
  EXPECT_EQ(book.find("sb-1"), nullptr);
}

TEST(DryRunAddresses, OnePerNameFromTheBenchmarkingRange) {
  net::DryRunAddresses a;
  EXPECT_EQ(a.address_for("pypi.org"), "198.18.0.1");
  EXPECT_EQ(a.address_for("example.com"), "198.18.0.2");
  EXPECT_EQ(a.address_for("pypi.org"), "198.18.0.1");
  for (int i = 0; i < 300; ++i) a.address_for("n" + std::to_string(i) + ".test");
  EXPECT_EQ(a.address_for("last.test"), "198.18.1.47");
}

}  // namespace
}  // namespace corral::daemon
