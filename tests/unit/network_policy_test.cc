// The egress policy (src/netns/network_policy.h, ADR 0005): the rule grammar,
// decisions for names, literals and resolved addresses, DNS names,
// templates, and the address classes behind the rebinding defence.
#include "netns/network_policy.h"

#include <gtest/gtest.h>

namespace corral::net {
namespace {

NetworkRule rule(std::string_view text, bool deny = false) {
  auto r = parse_rule(text, deny);
  EXPECT_TRUE(r.has_value()) << text << ": " << (r ? "" : r.error().message);
  return r ? *r : NetworkRule{};
}

NetworkPolicy allowlist(std::vector<std::string> allow, std::vector<std::string> deny = {}) {
  NetworkRequest req;
  req.mode = "allowlist";
  req.allow = std::move(allow);
  req.deny = std::move(deny);
  auto p = resolve_policy(req, default_network_templates());
  EXPECT_TRUE(p.has_value()) << (p ? "" : p.error().message);
  return p ? *p : NetworkPolicy{};
}

EgressQuery q(std::string name, std::uint16_t port, Protocol proto = kTls,
              std::optional<std::string> ip = std::nullopt) {
  EgressQuery e;
  e.name = std::move(name);
  e.port = port;
  e.protocol = proto;
  if (ip) e.address = IpAddress::parse(*ip);
  return e;
}

TEST(IpAddress, ParsesOnlyCanonicalForms) {
  EXPECT_TRUE(IpAddress::parse("203.0.113.7"));
  EXPECT_TRUE(IpAddress::parse("::1"));
  EXPECT_TRUE(IpAddress::parse("[2001:db8::1]"));
  // Shorthand and octal/hex forms that some resolvers accept are refused.
  for (const char* bad : {"127.1", "0x7f.0.0.1", "017.0.0.1x", "1.2.3", "", "[1.2.3.4]", "a::g"})
    EXPECT_FALSE(IpAddress::parse(bad)) << bad;
  EXPECT_EQ(IpAddress::parse("::ffff:127.0.0.1")->unmapped().str(), "127.0.0.1");
}

TEST(IpAddress, PrefixesContainTheirAddressesOnly) {
  auto p = IpPrefix::parse("10.1.2.3/8");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->str(), "10.0.0.0/8");
  EXPECT_TRUE(p->contains(*IpAddress::parse("10.255.0.1")));
  EXPECT_FALSE(p->contains(*IpAddress::parse("11.0.0.1")));
  EXPECT_TRUE(p->contains(*IpAddress::parse("::ffff:10.0.0.1")));  // mapped form too
  EXPECT_FALSE(IpPrefix::parse("10.0.0.0/33"));
  EXPECT_FALSE(IpPrefix::parse("10.0.0.0/"));
}

// An IPv4-mapped prefix is the IPv4 prefix it maps: addresses are judged
// unmapped, so ::ffff:10.0.0.0/104 must match 10.1.2.3 as 10.0.0.0/8 does.
TEST(IpAddress, AMappedPrefixIsItsIpv4Prefix) {
  auto p = IpPrefix::parse("::ffff:10.0.0.0/104");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->str(), "10.0.0.0/8");
  EXPECT_TRUE(p->contains(*IpAddress::parse("10.1.2.3")));
  EXPECT_TRUE(p->contains(*IpAddress::parse("::ffff:10.1.2.3")));
  EXPECT_FALSE(p->contains(*IpAddress::parse("11.1.2.3")));
  EXPECT_TRUE(IpPrefix::parse("::ffff:0:0/95")->address.v6) << "shorter than /96: stays IPv6";
  EXPECT_EQ(IpPrefix::parse("::ffff:0:0/96")->str(), "0.0.0.0/0");
}

TEST(IpAddress, ClassifiesTheAddressesARebindingAttackUses) {
  auto cls = [](const char* a) { return classify(*IpAddress::parse(a)); };
  EXPECT_EQ(cls("127.0.0.1"), AddressClass::kLoopback);
  EXPECT_EQ(cls("::1"), AddressClass::kLoopback);
  EXPECT_EQ(cls("::ffff:127.0.0.1"), AddressClass::kLoopback);
  EXPECT_EQ(cls("10.1.2.3"), AddressClass::kPrivate);
  EXPECT_EQ(cls("172.31.255.255"), AddressClass::kPrivate);
  EXPECT_EQ(cls("172.32.0.1"), AddressClass::kPublic);
  EXPECT_EQ(cls("192.168.1.1"), AddressClass::kPrivate);
  EXPECT_EQ(cls("169.254.169.254"), AddressClass::kMetadata);
  EXPECT_EQ(cls("169.254.1.1"), AddressClass::kLinkLocal);
  EXPECT_EQ(cls("100.64.0.1"), AddressClass::kCarrierNat);
  EXPECT_EQ(cls("0.0.0.0"), AddressClass::kUnspecified);
  EXPECT_EQ(cls("255.255.255.255"), AddressClass::kReserved);
  EXPECT_EQ(cls("224.0.0.1"), AddressClass::kMulticast);
  EXPECT_EQ(cls("fd00:ec2::254"), AddressClass::kMetadata);
  EXPECT_EQ(cls("fe80::1"), AddressClass::kLinkLocal);
  EXPECT_EQ(cls("fc00::1"), AddressClass::kPrivate);
  EXPECT_EQ(cls("64:ff9b::7f00:1"), AddressClass::kReserved);  // NAT64 of 127.0.0.1
  EXPECT_EQ(cls("151.101.0.223"), AddressClass::kPublic);
  EXPECT_EQ(cls("2a04:4e42::223"), AddressClass::kPublic);
}

TEST(NetworkRule, GrammarAndDefaults) {
  NetworkRule r = rule("pypi.org");
  EXPECT_EQ(r.text, "pypi.org:80,443");
  EXPECT_EQ(r.protocols, kHttp | kTls);
  EXPECT_EQ(rule("https://PyPI.org.").text, "tls://pypi.org:443");
  EXPECT_EQ(rule("http://example.com").text, "http://example.com:80");
  EXPECT_EQ(rule("tcp://db.example.com:5432").text, "tcp://db.example.com:5432");
  EXPECT_EQ(rule("*.pythonhosted.org:443").text, "*.pythonhosted.org:443");
  EXPECT_EQ(rule("203.0.113.9/24:8000-8100,9000").text, "203.0.113.0/24:8000-8100,9000");
  EXPECT_EQ(rule("[2001:db8::/32]:443").text, "[2001:db8::/32]:443");
  EXPECT_EQ(rule("203.0.113.9:*").text, "203.0.113.9:*");
  EXPECT_EQ(rule("evil.com", /*deny=*/true).text, "evil.com:*");
}

TEST(NetworkRule, BadRulesSayWhatIsWrong) {
  struct Case {
    const char* text;
    const char* says;
  } cases[] = {
      {"", "empty"},
      {"ftp://x.org", "unknown protocol"},
      {"tcp://db.example.com", "must name its ports"},
      {"x.org:0", "bad port"},
      {"x.org:70000", "bad port"},
      {"x.org:9-3", "bad port"},
      {"x.*.org", "first label"},
      {"ex ample.org", "not a valid domain"},
      {"localhost", "single label"},
      {"2001:db8::1:443", "brackets"},
      {"300.1.2.3", "not a valid IP"},
      {"10.0.0.0/40", "not a valid IP"},
  };
  for (const auto& c : cases) {
    auto r = parse_rule(c.text, false);
    ASSERT_FALSE(r.has_value()) << c.text;
    EXPECT_NE(r.error().message.find(c.says), std::string::npos)
        << c.text << ": " << r.error().message;
    EXPECT_FALSE(r.error().hint.empty());
  }
}

TEST(NetworkPolicy, AllowlistMatchesNamePortAndProtocol) {
  NetworkPolicy p = allowlist({"pypi.org:443", "*.pythonhosted.org", "tcp://db.example.com:5432"});
  EXPECT_TRUE(decide(p, q("pypi.org", 443)).allowed);
  EXPECT_EQ(decide(p, q("pypi.org", 443)).rule, "pypi.org:443");
  EXPECT_FALSE(decide(p, q("pypi.org", 80, kHttp)).allowed) << "port not granted";
  EXPECT_FALSE(decide(p, q("pypi.org", 443, kTcp)).allowed) << "raw tcp not granted";
  EXPECT_TRUE(decide(p, q("files.pythonhosted.org", 443)).allowed);
  EXPECT_FALSE(decide(p, q("pythonhosted.org", 443)).allowed) << "glob is subdomains only";
  EXPECT_FALSE(decide(p, q("evilpythonhosted.org", 443)).allowed);
  EXPECT_TRUE(decide(p, q("db.example.com", 5432, kTcp)).allowed);
  EXPECT_TRUE(decide(p, q("db.example.com", 5432, kTls)).allowed) << "tcp rules pass any bytes";
  EXPECT_FALSE(decide(p, q("other.example.com", 443)).allowed);
  // An IP literal is not a name: only an address rule allows it.
  EXPECT_FALSE(decide(p, q("", 443, kTls, "151.101.0.223")).allowed);
}

TEST(NetworkPolicy, DenyWinsAndEmptyAllowlistIsNoNetwork) {
  NetworkPolicy p = allowlist({"*.example.com"}, {"secret.example.com"});
  EXPECT_TRUE(decide(p, q("www.example.com", 443)).allowed);
  Decision d = decide(p, q("secret.example.com", 443));
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, "secret.example.com:*");

  NetworkRequest empty;
  empty.mode = "allowlist";
  auto none = resolve_policy(empty, default_network_templates());
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_network());
  EXPECT_FALSE(decide(*none, q("example.com", 443)).allowed);
  EXPECT_FALSE(check_dns_name(*none, "example.com").allowed);
}

TEST(NetworkPolicy, OpenModeStillRefusesPrivateAddressesAndDenials) {
  NetworkRequest req;
  req.mode = "open";
  req.deny = {"tracker.example.com"};
  auto p = resolve_policy(req, default_network_templates());
  ASSERT_TRUE(p);
  EXPECT_TRUE(decide(*p, q("anything.org", 8443, kTcp)).allowed);
  EXPECT_FALSE(decide(*p, q("tracker.example.com", 443)).allowed);
  EXPECT_FALSE(check_address(*p, *IpAddress::parse("127.0.0.1"), 443, kTls).allowed);
  EXPECT_FALSE(check_address(*p, *IpAddress::parse("169.254.169.254"), 80, kHttp).allowed);
  EXPECT_TRUE(check_address(*p, *IpAddress::parse("151.101.0.223"), 443, kTls).allowed);
}

TEST(NetworkPolicy, OnlyARuleNamingAPrivateAddressAllowsIt) {
  NetworkPolicy p = allowlist({"internal.example.com", "10.20.0.0/16:443"});
  const IpAddress inside = *IpAddress::parse("10.20.1.2");
  const IpAddress other = *IpAddress::parse("10.30.1.2");
  EXPECT_TRUE(check_address(p, inside, 443, kTls).allowed);
  Decision d = check_address(p, other, 443, kTls);
  EXPECT_FALSE(d.allowed);
  EXPECT_NE(d.reason.find("private"), std::string::npos) << d.reason;
  EXPECT_FALSE(check_address(p, *IpAddress::parse("169.254.169.254"), 443, kTls).allowed);
  NetworkPolicy deny = allowlist({"0.0.0.0/0:443"}, {"203.0.113.0/24"});
  EXPECT_FALSE(check_address(deny, *IpAddress::parse("203.0.113.5"), 443, kTls).allowed);
}

// An address rule names a non-public address for its own ports and
// protocols only: a name allowed on 80/443 that resolves into a range
// allowed for the database port gets nothing.
TEST(NetworkPolicy, AnAddressRuleNamesItsRangeForItsPortsAndProtocolsOnly) {
  NetworkPolicy p = allowlist({"db.example.com", "tcp://10.20.0.0/16:5432"});
  const IpAddress db = *IpAddress::parse("10.20.1.2");
  EXPECT_TRUE(check_address(p, db, 5432, kTcp).allowed);
  EXPECT_TRUE(check_address(p, db, 5432, kTls).allowed) << "a tcp rule covers all bytes";
  Decision web = check_address(p, db, 443, kTls);
  EXPECT_FALSE(web.allowed) << "port 443 was let into a range named for 5432";
  EXPECT_NE(web.reason.find("port 443"), std::string::npos) << web.reason;
  NetworkPolicy https_only = allowlist({"tls://10.20.0.0/16:8443"});
  EXPECT_TRUE(check_address(https_only, db, 8443, kTls).allowed);
  EXPECT_FALSE(check_address(https_only, db, 8443, kHttp).allowed);
  // A deny for one port leaves the others to the allow rules.
  NetworkPolicy ssh = allowlist({"10.20.0.0/16:22,443"}, {"10.20.1.2:22"});
  EXPECT_FALSE(check_address(ssh, db, 22, kTcp).allowed);
  EXPECT_TRUE(check_address(ssh, db, 443, kTls).allowed);
}

// A wide prefix does not name the special ranges inside it: 0.0.0.0/0 is
// "any public address", not loopback, private or metadata; metadata needs
// a rule for exactly its address.
TEST(NetworkPolicy, AWidePrefixNamesNoSpecialRangeAndMetadataNeedsItsOwnRule) {
  NetworkPolicy any = allowlist({"0.0.0.0/0:80,443", "[::/0]:80,443"});
  for (const char* a : {"169.254.169.254", "127.0.0.1", "10.1.2.3", "192.168.1.1", "::1",
                        "fd00:ec2::254", "fe80::1"}) {
    EXPECT_FALSE(check_address(any, *IpAddress::parse(a), 80, kHttp).allowed) << a;
    EXPECT_FALSE(check_address(any, *IpAddress::parse(a), 443, kTls).allowed) << a;
  }
  EXPECT_TRUE(check_address(any, *IpAddress::parse("93.184.216.34"), 443, kTls).allowed);
  NetworkPolicy link = allowlist({"169.254.0.0/16:80"});
  EXPECT_TRUE(check_address(link, *IpAddress::parse("169.254.1.1"), 80, kHttp).allowed);
  EXPECT_FALSE(check_address(link, *IpAddress::parse("169.254.169.254"), 80, kHttp).allowed)
      << "metadata named by a link-local range";
  NetworkPolicy meta = allowlist({"169.254.169.254:80"});
  EXPECT_TRUE(check_address(meta, *IpAddress::parse("169.254.169.254"), 80, kHttp).allowed);
  NetworkPolicy wide_private = allowlist({"10.0.0.0/7:443"});  // 10/8 and public 11/8
  EXPECT_FALSE(check_address(wide_private, *IpAddress::parse("10.1.2.3"), 443, kTls).allowed);
  NetworkPolicy private8 = allowlist({"10.0.0.0/8:443"});
  EXPECT_TRUE(check_address(private8, *IpAddress::parse("10.1.2.3"), 443, kTls).allowed);
}

// A deny of one protocol leaves the name resolvable: `http://x` refuses
// plain HTTP to x, while TLS to x stays as the allow rules say.
TEST(NetworkPolicy, ADenyOfOneProtocolDoesNotHideTheName) {
  NetworkPolicy p = allowlist({"*.example.com"}, {"http://plain.example.com", "gone.example.com"});
  EXPECT_TRUE(check_dns_name(p, "plain.example.com").allowed);
  EXPECT_FALSE(decide(p, q("plain.example.com", 80, kHttp)).allowed);
  EXPECT_TRUE(decide(p, q("plain.example.com", 443, kTls)).allowed);
  EXPECT_FALSE(check_dns_name(p, "gone.example.com").allowed) << "http+tls, all ports: the name";
  NetworkPolicy tcp = allowlist({"*.example.com"}, {"tcp://db.example.com"});
  EXPECT_FALSE(check_dns_name(tcp, "db.example.com").allowed);
}

TEST(NetworkPolicy, DnsNamesFollowTheRules) {
  NetworkPolicy p =
      allowlist({"pypi.org:443", "*.example.com"}, {"bad.example.com", "x.example.com:25"});
  EXPECT_TRUE(check_dns_name(p, "pypi.org").allowed);
  EXPECT_TRUE(check_dns_name(p, "PyPI.org.").allowed);
  EXPECT_TRUE(check_dns_name(p, "a.example.com").allowed);
  EXPECT_FALSE(check_dns_name(p, "bad.example.com").allowed);
  EXPECT_TRUE(check_dns_name(p, "x.example.com").allowed) << "a deny on one port keeps the name";
  EXPECT_FALSE(check_dns_name(p, "aGVsbG8gd29ybGQ.exfil.attacker.net").allowed);
}

TEST(NetworkPolicy, TemplatesAddAndRemoveRules) {
  NetworkRequest req;
  req.template_name = "code-exec";
  req.remove = {"registry.npmjs.org"};
  req.allow = {"crates.io:443"};
  auto p = resolve_policy(req, default_network_templates());
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->mode, NetworkMode::kAllowlist);
  EXPECT_EQ(p->template_name, "code-exec@1");
  EXPECT_TRUE(decide(*p, q("pypi.org", 443)).allowed);
  EXPECT_TRUE(decide(*p, q("files.pythonhosted.org", 443)).allowed);
  EXPECT_TRUE(decide(*p, q("deb.debian.org", 80, kHttp)).allowed);
  EXPECT_FALSE(decide(*p, q("registry.npmjs.org", 443)).allowed);
  EXPECT_TRUE(decide(*p, q("crates.io", 443)).allowed);

  req.remove = {"not-in-template.org"};
  auto bad = resolve_policy(req, default_network_templates());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("not a rule of template code-exec@1"), std::string::npos);

  NetworkRequest unknown;
  unknown.template_name = "nope@3";
  auto u = resolve_policy(unknown, default_network_templates());
  ASSERT_FALSE(u);
  EXPECT_NE(u.error().hint.find("code-exec@1"), std::string::npos) << u.error().hint;
}

TEST(NetworkPolicy, RequestsAreValidated) {
  NetworkRequest r;
  r.mode = "sometimes";
  EXPECT_FALSE(resolve_policy(r, default_network_templates()));
  r = {};
  r.mode = "none";
  r.allow = {"pypi.org"};
  EXPECT_FALSE(resolve_policy(r, default_network_templates()));
  r = {};
  r.allow = {"pypi.org"};  // no mode: rules mean allowlist
  auto p = resolve_policy(r, default_network_templates());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->mode, NetworkMode::kAllowlist);
  r.dns_servers = {"resolver.example.com"};
  EXPECT_FALSE(resolve_policy(r, default_network_templates()));
  r.dns_servers = {"9.9.9.9", "10.0.0.2:5353"};
  EXPECT_TRUE(resolve_policy(r, default_network_templates()));
  r.rate = RateLimit{10, 0};
  EXPECT_FALSE(resolve_policy(r, default_network_templates()));
  r.rate = RateLimit{};
  r.gateway = {"billing", "../etc"};
  EXPECT_FALSE(resolve_policy(r, default_network_templates()));
}

}  // namespace
}  // namespace corral::net
