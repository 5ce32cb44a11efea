// The firewall's ruleset as text, its config checks, and how it drives nft:
// here with a fake `nft` (a shell script that records its arguments and
// stdin and answers what the test wrote for it). The real nftables and
// real traffic are in tests/integration/firewall_test.cc.
#include "egress/firewall.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace corral::net {
namespace {

FirewallConfig test_config() {
  FirewallConfig c;
  c.table = "t1";
  c.iface_prefix = "sbx";
  c.proxy_port = 2001;
  c.dns_port = 2053;
  return c;
}

std::size_t count(const std::string& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t pos = haystack.find(needle); pos != std::string::npos;
       pos = haystack.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

// The body of `chain <name> { ... }` in a rendered ruleset.
std::string chain_body(const std::string& ruleset, const std::string& name) {
  std::size_t start = ruleset.find("\tchain " + name + " {\n");
  if (start == std::string::npos) return {};
  std::size_t end = ruleset.find("\n\t}\n", start);
  return ruleset.substr(start, end - start);
}

TEST(FirewallRulesetTest, DefaultsAreTheDocumentedOnes) {
  FirewallConfig c;
  EXPECT_EQ(c.table, "corral");
  EXPECT_EQ(c.iface_prefix, "crl");
  EXPECT_EQ(c.proxy_port, 15001);
  EXPECT_EQ(c.dns_port, 15053);
  EXPECT_EQ(c.nft, "/usr/sbin/nft");
  EXPECT_TRUE(validate_firewall_config(c));
}

TEST(FirewallRulesetTest, OneTableAndNothingElse) {
  std::string r = render_ruleset(test_config());
  EXPECT_EQ(r.rfind("table inet t1 {\n", 0), 0u) << r;
  EXPECT_EQ(count(r, "table "), 1u) << r;
  EXPECT_EQ(count(r, "flush"), 0u) << r;
  EXPECT_EQ(count(r, "delete"), 0u) << r;
  EXPECT_EQ(count(r, "hook output"), 0u) << "output is left alone\n" << r;
  // No trace of the default names or ports.
  EXPECT_EQ(count(r, "crl"), 0u) << r;
  EXPECT_EQ(count(r, "15001"), 0u) << r;
  EXPECT_EQ(count(r, "15053"), 0u) << r;
}

TEST(FirewallRulesetTest, RedirectsTcpAndDnsFromSandboxes) {
  std::string nat = chain_body(render_ruleset(test_config()), "prerouting_nat");
  EXPECT_NE(nat.find("type nat hook prerouting priority dstnat - 10; policy accept;"),
            std::string::npos)
      << nat;
  EXPECT_NE(nat.find("iifname \"sbx*\" meta nfproto ipv4 meta l4proto tcp counter name "
                     "\"redirect_tcp\" redirect to :2001"),
            std::string::npos)
      << nat;
  EXPECT_NE(nat.find("iifname \"sbx*\" meta nfproto ipv4 udp dport 53 counter name "
                     "\"redirect_dns\" redirect to :2053"),
            std::string::npos)
      << nat;
}

TEST(FirewallRulesetTest, ClassifiesEverythingASandboxSendsBeforeRouting) {
  std::string r = render_ruleset(test_config());
  std::string pre = chain_body(r, "prerouting_filter");
  EXPECT_NE(pre.find("type filter hook prerouting priority mangle - 10; policy accept;"),
            std::string::npos)
      << pre;
  EXPECT_NE(pre.find("iifname \"sbx*\" jump sandbox_ingress"), std::string::npos) << pre;

  // In this order: IPv6 and spoofed sources are dropped even for known
  // connections; then known connections pass; then new TCP and DNS pass
  // (to the redirect); the rest is dropped by reason, ending in a catch-all.
  std::string in = chain_body(r, "sandbox_ingress");
  const char* order[] = {
      "meta nfproto ipv6 counter name \"drop_ipv6\" drop",
      "fib saddr . iif oif missing counter name \"drop_spoofed\" drop",
      "ct state established,related accept",
      "ct state != new counter name \"drop_other\" drop",
      "meta l4proto tcp accept",
      "udp dport 53 accept",
      "meta l4proto icmp counter name \"drop_icmp\" drop",
      "meta l4proto udp counter name \"drop_udp\" drop",
      "\t\tcounter name \"drop_other\" drop",
  };
  std::size_t at = 0;
  for (const char* rule : order) {
    std::size_t pos = in.find(rule, at);
    ASSERT_NE(pos, std::string::npos) << "missing or out of order: " << rule << "\n" << in;
    at = pos + 1;
  }
  EXPECT_EQ(count(in, "\n\t\t"), std::size(order)) << "no other rule\n" << in;
}

TEST(FirewallRulesetTest, InputTakesOnlyTheTwoPortsAndClosesThemElsewhere) {
  std::string r = render_ruleset(test_config());
  std::string sandbox = chain_body(r, "sandbox_input");
  EXPECT_NE(sandbox.find("ct state established,related accept\n\t\ttcp dport 2001 accept\n"
                         "\t\tudp dport 2053 accept\n\t\tcounter name \"drop_other\" drop"),
            std::string::npos)
      << sandbox;
  std::string input = chain_body(r, "input");
  EXPECT_NE(input.find("type filter hook input priority filter - 10; policy accept;"),
            std::string::npos)
      << input;
  // The jump comes first: a sandbox's packet never reaches the foreign rules.
  std::size_t jump = input.find("iifname \"sbx*\" jump sandbox_input");
  std::size_t tcp = input.find(
      "tcp dport 2001 ct state != { established, related } counter name \"drop_foreign\" drop");
  std::size_t udp = input.find(
      "udp dport 2053 ct state != { established, related } counter name \"drop_foreign\" drop");
  ASSERT_NE(jump, std::string::npos) << input;
  ASSERT_NE(tcp, std::string::npos) << input;
  ASSERT_NE(udp, std::string::npos) << input;
  EXPECT_LT(jump, tcp);
  EXPECT_LT(jump, udp);
}

TEST(FirewallRulesetTest, ForwardsNothingFromOrToSandboxes) {
  std::string fwd = chain_body(render_ruleset(test_config()), "forward");
  EXPECT_NE(fwd.find("type filter hook forward priority filter - 10; policy accept;"),
            std::string::npos)
      << fwd;
  EXPECT_NE(fwd.find("iifname \"sbx*\" counter name \"drop_forward\" drop"), std::string::npos);
  EXPECT_NE(fwd.find("oifname \"sbx*\" counter name \"drop_forward\" drop"), std::string::npos);
}

TEST(FirewallRulesetTest, EveryCounterIsDeclaredAndUsed) {
  std::string r = render_ruleset(test_config());
  std::set<std::string> declared, used, listed;
  for (const auto& c : kFirewallCounters) listed.insert(std::string(c.name));
  std::regex decl("\tcounter ([a-z_0-9]+) \\{");
  for (auto it = std::sregex_iterator(r.begin(), r.end(), decl); it != std::sregex_iterator();
       ++it) {
    declared.insert((*it)[1]);
  }
  std::regex use("counter name \"([a-z_0-9]+)\"");
  for (auto it = std::sregex_iterator(r.begin(), r.end(), use); it != std::sregex_iterator();
       ++it) {
    used.insert((*it)[1]);
  }
  EXPECT_EQ(declared, listed);
  EXPECT_EQ(used, listed);
  // No anonymous counters: every count can be read by name.
  EXPECT_EQ(count(r, " counter "), count(r, " counter name "));
}

TEST(FirewallConfigTest, RefusesWhatNftWouldMisparse) {
  auto refused = [](auto change) {
    FirewallConfig c = test_config();
    change(c);
    auto s = validate_firewall_config(c);
    if (s) return std::string("accepted");
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
    return s.error().message;
  };
  EXPECT_NE(refused([](FirewallConfig& c) { c.table = ""; }), "accepted");
  EXPECT_NE(refused([](FirewallConfig& c) { c.table = "1corral"; }), "accepted");
  EXPECT_NE(refused([](FirewallConfig& c) { c.table = "corral { }; flush ruleset"; }), "accepted");
  EXPECT_NE(refused([](FirewallConfig& c) { c.table = std::string(65, 'a'); }), "accepted");
  EXPECT_NE(refused([](FirewallConfig& c) { c.iface_prefix = ""; }), "accepted");
  EXPECT_NE(refused([](FirewallConfig& c) { c.iface_prefix = "crl*"; }), "accepted");
  EXPECT_NE(refused([](FirewallConfig& c) { c.iface_prefix = "a\"b"; }), "accepted");
  EXPECT_NE(refused([](FirewallConfig& c) { c.iface_prefix = "abcdefghijk"; }), "accepted");
  EXPECT_NE(refused([](FirewallConfig& c) { c.proxy_port = 0; }), "accepted");
  EXPECT_NE(refused([](FirewallConfig& c) { c.dns_port = 0; }), "accepted");
  EXPECT_NE(refused([](FirewallConfig& c) { c.dns_port = c.proxy_port; }), "accepted");
  EXPECT_NE(refused([](FirewallConfig& c) { c.nft = "nft"; }), "accepted");
  std::string m = refused([](FirewallConfig& c) { c.table = "a;b"; });
  EXPECT_NE(m.find("\"a;b\""), std::string::npos) << m;

  EXPECT_EQ(refused([](FirewallConfig& c) { c.table = "corral_test_123"; }), "accepted");
  EXPECT_EQ(refused([](FirewallConfig& c) { c.iface_prefix = "cfw-00ab_x"; }), "accepted");
}

TEST(FirewallConfigDeathTest, RenderingAnInvalidConfigIsABug) {
  FirewallConfig c = test_config();
  c.iface_prefix = "x\" accept";
  EXPECT_DEATH(render_ruleset(c), "invalid config");
}

// ---- driving nft, with a fake one ------------------------------------------

class FakeNftTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "corral-fw-unit-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    // Records its arguments (one call a line) and, for `-f -`, its stdin;
    // then answers from <key>.err, <key>.out and <key>.rc, where key is the
    // argument list with everything but letters and digits made '_'.
    std::ofstream script(dir_ / "nft");
    script << "#!/bin/sh\n"
           << "D='" << dir_.string() << "'\n"
           << "printf '%s\\n' \"$*\" >> \"$D/calls\"\n"
           << "if [ \"$1\" = -f ]; then cat > \"$D/stdin\"; fi\n"
           << "key=$(printf '%s' \"$*\" | tr -c 'a-zA-Z0-9' '_')\n"
           << "[ -f \"$D/$key.err\" ] && cat \"$D/$key.err\" >&2\n"
           << "[ -f \"$D/$key.out\" ] && cat \"$D/$key.out\"\n"
           << "[ -f \"$D/$key.rc\" ] && exit \"$(cat \"$D/$key.rc\")\"\n"
           << "exit 0\n";
    script.close();
    ASSERT_EQ(chmod((dir_ / "nft").c_str(), 0755), 0);
    config_ = test_config();
    config_.nft = (dir_ / "nft").string();
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  // What the fake answers to `nft <args>`.
  void answer(const std::string& args, const std::string& out, int rc = 0,
              const std::string& err = {}) {
    std::string key;
    for (char c : args) key += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    std::ofstream(dir_ / (key + ".out")) << out;
    std::ofstream(dir_ / (key + ".err")) << err;
    std::ofstream(dir_ / (key + ".rc")) << rc;
  }
  std::string file(const char* name) {
    std::ifstream in(dir_ / name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::filesystem::path dir_;
  FirewallConfig config_;
};

TEST_F(FakeNftTest, InstallReplacesTheTableInOneScriptOnStdin) {
  ASSERT_TRUE(install_firewall(config_));
  EXPECT_EQ(file("calls"), "-f -\n");
  EXPECT_EQ(file("stdin"), "table inet t1 {}\ndelete table inet t1\n" + render_ruleset(config_));
}

TEST_F(FakeNftTest, InstallFailureCarriesNftsStderr) {
  answer("-f -", "", 1, "Error: Could not process rule: No such file or directory\n");
  auto s = install_firewall(config_);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kSystem);
  const std::string& m = s.error().message;
  EXPECT_NE(m.find("installing firewall table inet t1"), std::string::npos) << m;
  EXPECT_NE(m.find("exit status 1"), std::string::npos) << m;
  EXPECT_NE(m.find("Could not process rule: No such file or directory"), std::string::npos) << m;
  EXPECT_FALSE(s.error().hint.empty());
}

TEST_F(FakeNftTest, MissingNftIsNamedWithAHint) {
  config_.nft = (dir_ / "no-such-nft").string();
  auto s = install_firewall(config_);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("exec " + config_.nft), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("ENOENT"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().hint.find("nftables"), std::string::npos) << s.error().hint;
}

TEST_F(FakeNftTest, UnknownExitStatusIsAFailure) {
  // With SIGCHLD ignored the kernel reaps nft itself: its status is lost,
  // and that must not read as success (fail closed).
  answer("-f -", "", 1, "Error: refused\n");
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGCHLD, &ignore, &old), 0);
  auto s = install_firewall(config_);
  sigaction(SIGCHLD, &old, nullptr);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("waitpid"), std::string::npos) << s.error().message;
}

TEST_F(FakeNftTest, RemoveDeletesOnlyOurTableAndToleratesItsAbsence) {
  ASSERT_TRUE(remove_firewall(config_));
  EXPECT_EQ(file("stdin"), "table inet t1 {}\ndelete table inet t1\n");
}

TEST_F(FakeNftTest, MissingTableIsNotInstalledAndHasNoCounters) {
  answer("-j list table inet t1", "", 1, "Error: No such file or directory\n");
  answer("-j list tables inet",
         R"({"nftables": [{"metainfo": {"version": "1.0.6"}},
                          {"table": {"family": "inet", "name": "other", "handle": 3}}]})");
  auto installed = firewall_installed(config_);
  ASSERT_TRUE(installed) << installed.error().to_string();
  EXPECT_FALSE(*installed);
  auto counters = read_firewall_counters(config_);
  ASSERT_FALSE(counters);
  EXPECT_EQ(counters.error().code, ErrorCode::kNotFound);
}

TEST_F(FakeNftTest, ListingErrorOfAnExistingTableIsAnError) {
  answer("-j list table inet t1", "", 1, "Error: Operation not permitted\n");
  answer("-j list tables inet",
         R"({"nftables": [{"table": {"family": "inet", "name": "t1", "handle": 3}}]})");
  auto installed = firewall_installed(config_);
  ASSERT_FALSE(installed);
  EXPECT_NE(installed.error().message.find("Operation not permitted"), std::string::npos)
      << installed.error().message;
}

TEST_F(FakeNftTest, IncompleteTableIsNotInstalled) {
  answer("-j list table inet t1", R"({"nftables": [
    {"table": {"family": "inet", "name": "t1", "handle": 3}},
    {"chain": {"family": "inet", "table": "t1", "name": "input", "handle": 1,
               "type": "filter", "hook": "input", "prio": -10, "policy": "accept"}},
    {"counter": {"family": "inet", "name": "drop_udp", "table": "t1", "packets": 3, "bytes": 84}}
  ]})");
  auto installed = firewall_installed(config_);
  ASSERT_TRUE(installed) << installed.error().to_string();
  EXPECT_FALSE(*installed);
}

TEST_F(FakeNftTest, CountersAreReadByName) {
  answer("-j list table inet t1", R"({"nftables": [
    {"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}},
    {"table": {"family": "inet", "name": "t1", "handle": 3}},
    {"counter": {"family": "inet", "name": "drop_udp", "table": "t1", "handle": 7,
                 "packets": 3, "bytes": 84}},
    {"counter": {"family": "inet", "name": "drop_icmp", "table": "t1", "handle": 8,
                 "packets": 18446744073709551615, "bytes": 0}},
    {"counter": {"family": "inet", "name": "drop_other", "table": "t1", "handle": 9,
                 "packets": "garbage", "bytes": -1}}
  ]})");
  auto counters = read_firewall_counters(config_);
  ASSERT_TRUE(counters) << counters.error().to_string();
  EXPECT_EQ(counters->get("drop_udp").packets, 3u);
  EXPECT_EQ(counters->get("drop_udp").bytes, 84u);
  EXPECT_EQ(counters->get("drop_icmp").packets, 18446744073709551615u);
  EXPECT_EQ(counters->get("drop_other").packets, 0u);  // wrong types read as 0, no throw
  EXPECT_EQ(counters->get("drop_other").bytes, 0u);
  EXPECT_EQ(counters->get("no_such").packets, 0u);
  EXPECT_EQ(counters->by_name.size(), 3u);
}

TEST_F(FakeNftTest, GarbageOutputIsAnError) {
  answer("-j list table inet t1", "this is not json");
  auto counters = read_firewall_counters(config_);
  ASSERT_FALSE(counters);
  EXPECT_NE(counters.error().message.find("not nft's JSON"), std::string::npos)
      << counters.error().message;
}

}  // namespace
}  // namespace corral::net
