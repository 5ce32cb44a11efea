// Default-deny egress (issue 4, ADR 0005), attacked from inside real
// sandboxes (`corral run` with the network engine in-process) against the
// test internet of tests/support/net_world.h, and checked from outside:
// what the upstream servers saw, the firewall's counters, what is left.
// Every probe is harmless: traffic goes only to the world's own servers.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "egress/firewall.h"
#include "support/net_client.h"
#include "support/net_world.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

struct World {
  std::unique_ptr<NetWorld> world;
  std::string ca;
};

World make_world() {
  World w;
  auto world = NetWorld::create();
  if (!world) {
    ADD_FAILURE() << "the test internet could not be made: " << world.error().message;
    return w;
  }
  w.world = std::move(*world);
  std::ifstream in(w.world->ca_pem_path());
  std::stringstream ss;
  ss << in.rdbuf();
  w.ca = ss.str();
  return w;
}

// Runs `script` (after the client helpers) in a sandbox with `opts`.
RunOutcome run_client(World& w, std::vector<std::string> opts, const std::string& script) {
  std::vector<std::string> all = {"--dns", w.world->dns_endpoint(), "--env", "WORLD_CA=" + w.ca};
  all.insert(all.end(), opts.begin(), opts.end());
  return run_sandbox(all, {"/usr/bin/python3", "-c", std::string(kNetClientPy) + script});
}

#define REQUIRE_WORLD(w)                                                \
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("network tests run as root"); \
  World w = make_world();                                               \
  if (!w.world) return

TEST(Egress, AllowedNameWorksThroughTheProxyVariablesAndTransparently) {
  REQUIRE_WORLD(w);
  RunOutcome r = run_client(w, {"--allow", "allowed.test"}, R"PY(
out("proxied", proxied_http("http://allowed.test/"))
for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
    os.environ.pop(k, None)
out("transparent", transparent_http("allowed.test"))
out("tls", tls_get("allowed.test"))
out("denied", transparent_http("denied.test"))
)PY");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(value_of(r.out, "proxied"), "OK hello from allowed.test") << r.out << r.err;
  EXPECT_EQ(value_of(r.out, "transparent"), "OK hello from allowed.test") << r.out << r.err;
  EXPECT_EQ(value_of(r.out, "tls"), "OK hello from allowed.test") << r.out << r.err;
  EXPECT_EQ(value_of(r.out, "denied").find("hello from"), std::string::npos) << r.out;
  EXPECT_EQ(w.world->http_requests("allowed.test"), 2);
  EXPECT_EQ(w.world->http_requests("denied.test"), 0) << "a denied name reached its server";
  EXPECT_EQ(w.world->dns().queries_for("denied.test"), 0) << "a denied name reached upstream DNS";
  EXPECT_NE(r.err.find("refused"), std::string::npos) << "the refusal is not reported: " << r.err;
}

TEST(Egress, MismatchesPortsLiteralsAndRebindingAreRefused) {
  REQUIRE_WORLD(w);
  RunOutcome r = run_client(w, {"--allow", "*.test", "--allow", "allowed.test"}, R"PY(
s, status = connect_via_proxy("allowed.test:443")
out("connect_status", status)
out("sni_mismatch", tls_get("allowed.test", sni="denied.test", sock=s))
out("host_mismatch", transparent_http("denied.test", connect_to="allowed.test"))
out("port", tcp_echo("allowed.test"))
out("literal", transparent_http("198.51.100.10"))
out("loopback", transparent_http("loopback.test"))
out("private", transparent_http("private.test"))
out("metadata", transparent_http("metadata.test"))
)PY");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(value_of(r.out, "connect_status").find("200"), std::string::npos) << r.out << r.err;
  for (const char* refused : {"sni_mismatch", "port", "literal", "loopback", "private", "metadata"})
    EXPECT_EQ(value_of(r.out, refused).find("hello from"), std::string::npos)
        << refused << " reached an upstream: " << r.out << r.err;
  // The Host names denied.test but the sandbox dialled allowed.test's
  // address: the proxy goes where the name says (denied.test is allowed by
  // *.test), never to the address the sandbox chose.
  EXPECT_EQ(value_of(r.out, "host_mismatch"), "OK hello from denied.test") << r.out << r.err;
  EXPECT_EQ(w.world->tls_handshakes("denied.test"), 0) << "a CONNECT/SNI mismatch went through";
  EXPECT_EQ(w.world->tcp_connections(NetWorld::kAllowedAddress), 0) << "raw TCP without a tcp rule";
}

TEST(Egress, RawTcpNeedsATcpRuleForANameCorralsDnsAnswered) {
  REQUIRE_WORLD(w);
  RunOutcome r = run_client(w, {"--allow", "tcp://allowed.test:5432"}, R"PY(
out("echo", tcp_echo("allowed.test"))
out("other", tcp_echo("198.51.100.11"))
)PY");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(value_of(r.out, "echo"), "OK ping") << r.out << r.err;
  EXPECT_NE(value_of(r.out, "other"), "OK ping") << r.out;
  EXPECT_EQ(w.world->tcp_connections(NetWorld::kAllowedAddress), 1);
  EXPECT_EQ(w.world->tcp_connections(NetWorld::kDeniedAddress), 0);
}

TEST(Egress, DnsRefusesExfiltrationAndOtherTypes) {
  REQUIRE_WORLD(w);
  RunOutcome r = run_client(w, {"--allow", "allowed.test"}, R"PY(
import struct, random
def query(name, qtype):
    q = struct.pack(">HHHHHH", random.randint(0, 65535), 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack(">HH", qtype, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.sendto(q, ("1.1.1.1", 53))   # any address: the firewall sends it to corral's DNS
    try:
        return s.recv(4096)[3] & 0xf
    except Exception as e:
        return err(e)
out("a", query("allowed.test", 1))
out("txt", query("txt.test", 16))
out("txt_allowed", query("allowed.test", 16))
out("exfil", query("aGVsbG8gd29ybGQgdGhpcyBpcyBzZWNyZXQ.c2VjcmV0IGRhdGE.exfil.denied.test", 1))
out("any", query("allowed.test", 255))
)PY");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(value_of(r.out, "a"), "0") << r.out << r.err;
  EXPECT_EQ(value_of(r.out, "txt"), "5") << "TXT must be REFUSED: " << r.out;
  EXPECT_EQ(value_of(r.out, "txt_allowed"), "5") << r.out;
  EXPECT_EQ(value_of(r.out, "exfil"), "3") << "NXDOMAIN expected: " << r.out;
  EXPECT_EQ(value_of(r.out, "any"), "5") << r.out;
  EXPECT_EQ(w.world->dns().queries_for("txt.test"), 0);
  for (const auto& n : w.world->dns().names_seen())
    EXPECT_EQ(n.find("exfil"), std::string::npos) << "exfiltration query reached upstream: " << n;
}

TEST(Egress, UdpIcmpIpv6AndHostLoopbackServicesAreUnreachable) {
  REQUIRE_WORLD(w);
  // A service on the host, on every address: the sandbox must not reach it.
  UniqueFd host_service(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  ::bind(host_service.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  ::listen(host_service.get(), 8);
  socklen_t len = sizeof sa;
  ::getsockname(host_service.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  const int port = ntohs(sa.sin_port);
  net::FirewallConfig fw;
  auto before = net::read_firewall_counters(fw);

  RunOutcome r = run_client(w, {"--allow", "allowed.test"}, "PORT = " + std::to_string(port) + R"PY(
gw = os.environ["HTTP_PROXY"].split("//")[1].split(":")[0]
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(2)
    u.sendto(b"x", ("198.51.100.10", 9999))
    out("udp", "SENT " + str(u.recvfrom(16)))
except Exception as e:
    out("udp", err(e))
try:
    i = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
    out("icmp", "OPENED")
except Exception as e:
    out("icmp", err(e))
try:
    s6 = socket.create_connection(("2001:db8::1", 80), timeout=3)
    out("ipv6", "CONNECTED")
except Exception as e:
    out("ipv6", err(e))
out("host_service", transparent_http("x", port=PORT, connect_to=gw))
)PY");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(value_of(r.out, "udp").rfind("SENT", 0), 0u) << r.out;
  EXPECT_NE(value_of(r.out, "icmp"), "OPENED") << r.out;
  EXPECT_NE(value_of(r.out, "ipv6"), "CONNECTED") << r.out;
  // From the host: the service never saw a connection.
  UniqueFd got(::accept4(host_service.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
  EXPECT_FALSE(got) << "a sandbox reached a service of the host";
  if (before) {
    auto after = net::read_firewall_counters(fw);
    ASSERT_TRUE(after.has_value());
    EXPECT_GT(after->get("drop_udp").packets, before->get("drop_udp").packets)
        << "UDP to a port other than 53 was not dropped by the firewall";
  }
}

TEST(Egress, TheSandboxCannotTouchTheFirewallEvenAsRoot) {
  REQUIRE_WORLD(w);
  net::FirewallConfig fw;
  RunOutcome r = run_client(w, {"--root", "--allow", "allowed.test"}, R"PY(
try:
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)  # NETLINK_NETFILTER
    out("netlink", "OPENED")
except Exception as e:
    out("netlink", err(e))
import subprocess
try:
    p = subprocess.run(["/usr/sbin/nft", "add", "table", "inet", "corral_sandbox_probe"], capture_output=True, timeout=5)
    out("nft", "EXIT " + str(p.returncode))
except Exception as e:
    out("nft", err(e))
)PY");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(value_of(r.out, "netlink"), "OPENED") << r.out;
  EXPECT_NE(value_of(r.out, "nft"), "EXIT 0") << r.out;
  EXPECT_EQ(host_sh("nft list tables | grep -c corral_sandbox_probe || true"), "0\n");
  auto installed = net::firewall_installed(fw);
  ASSERT_TRUE(installed.has_value());
  EXPECT_TRUE(*installed);
}

// --network-rate: connections beyond the sandbox's rate are refused before
// any reaches the upstream; --network none with rules is a usage error.
TEST(Egress, TheRateLimitBitesAndContradictionsAreRefused) {
  REQUIRE_WORLD(w);
  RunOutcome r = run_client(w, {"--allow", "allowed.test", "--network-rate", "1/s,burst=2"}, R"PY(
ok = 0
for i in range(8):
    if transparent_http("allowed.test").startswith("OK hello"):
        ok += 1
out("ok", ok)
)PY");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const int ok = std::atoi(value_of(r.out, "ok").c_str());
  EXPECT_GE(ok, 2) << r.out << r.err;
  EXPECT_LE(ok, 4) << "the rate limit did not bite: " << r.out;
  EXPECT_EQ(w.world->http_requests("allowed.test"), ok)
      << "a refused connection reached the upstream";
  EXPECT_NE(r.err.find("rate"), std::string::npos) << r.err;

  RunOutcome bad = run_sandbox({"--network", "none", "--allow", "allowed.test"}, {"/bin/true"});
  EXPECT_EQ(bad.exit_code, 125);
  EXPECT_NE(bad.err.find("contradicts"), std::string::npos) << bad.err;
}

// Issue 12.8: in open mode a tcp decision allows any public address, so a
// client that has started an HTTP request line or a TLS ClientHello and then
// pauses must stay HTTP or TLS (and meet the name deny), never be taken for
// a quiet raw-TCP client that reaches the denied host's address. Every place
// a head can pause is tried; a client that sends nothing is still tcp.
TEST(Egress, AClientThatPausesInsideItsHeadStaysHttpOrTls) {
  REQUIRE_WORLD(w);
  RunOutcome r = run_client(w, {"--network", "open", "--deny", "denied.test"}, R"PY(
import time
ADDR = ")PY" + std::string(NetWorld::kDeniedAddress) + R"PY("
def paused_http(first, rest, pause=0.8):
    try:
        s = socket.create_connection((ADDR, 80), timeout=15)
        s.sendall(first)
        time.sleep(pause)
        s.sendall(rest)
        d = read_all(s).decode(errors="replace")
        return "OK " + d.splitlines()[-1] if d else "EMPTY"
    except Exception as e:
        return err(e)
req = b"GET / HTTP/1.1\r\nHost: denied.test\r\nConnection: close\r\n\r\n"
for cut in (1, 4, 16, req.index(b"Host:") + 6, req.index(b"Connection:"), len(req) - 2):
    out(f"http{cut}", paused_http(req[:cut], req[cut:]))
def tls_hello(sni):
    ctx = ssl.create_default_context(cadata=CA)
    inc, outg = ssl.MemoryBIO(), ssl.MemoryBIO()
    o = ctx.wrap_bio(inc, outg, server_hostname=sni)
    try:
        o.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outg.read()
hello = tls_hello("denied.test")
for cut in (1, 5, len(hello) // 2, len(hello) - 1):
    try:
        s = socket.create_connection((ADDR, 443), timeout=15)
        s.sendall(hello[:cut])
        time.sleep(0.8)
        s.sendall(hello[cut:])
        d = read_all(s)
        out(f"tls{cut}", "BYTES %d" % len(d))
    except Exception as e:
        out(f"tls{cut}", err(e))
# A client that says nothing first is still judged as tcp: its raw bytes
# reach the address (open mode allows it), as before.
try:
    s = socket.create_connection((ADDR, 5432), timeout=15)
    time.sleep(0.8)
    s.sendall(b"ping")
    out("quiet", "OK " + s.recv(16).decode())
except Exception as e:
    out("quiet", err(e))
)PY");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  int http_cases = 0, tls_cases = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("http", 0) == 0) {
      ++http_cases;
      EXPECT_EQ(line.find("hello from"), std::string::npos) << "a paused head got through: " << line;
    } else if (line.rfind("tls", 0) == 0) {
      ++tls_cases;
      EXPECT_EQ(line.find("=BYTES 0"), line.find('=')) << "a paused ClientHello got an answer: " << line;
    }
  }
  EXPECT_EQ(http_cases, 6) << r.out << r.err;
  EXPECT_EQ(tls_cases, 4) << r.out << r.err;
  EXPECT_EQ(w.world->http_requests("denied.test"), 0) << "a denied name reached its server";
  EXPECT_EQ(w.world->tls_handshakes("denied.test"), 0) << "a denied SNI reached its server";
  EXPECT_EQ(value_of(r.out, "quiet"), "OK ping") << r.out << r.err;
}

TEST(Egress, NothingIsLeftAfterTheSandbox) {
  REQUIRE_WORLD(w);
  RunOutcome r = run_client(w, {"--allow", "allowed.test"}, R"PY(
out("proxied", proxied_http("http://allowed.test/"))
print(os.environ["HTTP_PROXY"])
)PY");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(value_of(r.out, "proxied"), "OK hello from allowed.test");
  // Its host end (from the proxy URL it was given): no interface, no
  // listener left on it.
  std::string url = r.out.substr(r.out.find("http://") + 7);
  std::string host_end = url.substr(0, url.find(':'));
  in_addr a{};
  ASSERT_EQ(inet_pton(AF_INET, host_end.c_str(), &a), 1) << r.out;
  const std::uint32_t slot = (ntohl(a.s_addr) - 0x0ad30000u) / 4;
  const std::string ifname = "crl" + std::to_string(slot);
  EXPECT_NE(access(("/sys/class/net/" + ifname).c_str(), F_OK), 0) << ifname << " left behind";
  EXPECT_EQ(host_sh("ss -Htlnu | grep -c '" + host_end + ":' || true"), "0\n")
      << host_sh("ss -Htlnu");
  expect_sandbox_cleaned_up(r.report, "networked sandbox");
}

}  // namespace
}  // namespace corral::testing
