// DNS answer latency of corral's filtering resolver (src/egress/dns_server.h),
// against a local test upstream (tests/support/test_dns_server.h) on
// loopback, in one process. Variants, --queries sequential queries each
// (one client socket, a new random id per query):
//   direct     client -> upstream (the baseline)
//   forwarded  client -> resolver -> upstream, cache off (every query
//              goes upstream: policy, forwarding, filtering, remembering)
//   cached     client -> resolver, answer from the sandbox's cache
//   denied     client -> resolver, NXDOMAIN by policy (never upstream)
//   px-miss    the egress proxy's own resolution of a name it has not seen
//              (src/egress/upstream_resolver.h: A and AAAA, a new name each)
//   px-repeat  the proxy's resolution of the same name again (kept for its
//              TTL); what a sandbox's second connection to a host pays
// Prints p50/p95/p99 in microseconds and the added median against direct;
// the last line is one JSON object ("bench":"dns").
// Usage: corral_bench_dns [--queries N]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "egress/dns_message.h"
#include "egress/dns_server.h"
#include "egress/upstream_resolver.h"
#include "support/test_dns_server.h"

using Clock = std::chrono::steady_clock;
namespace dns = corral::net::dns;
using corral::net::DnsAction;
using corral::net::DnsQuestionContext;
using corral::net::DnsServer;
using corral::net::DnsServerConfig;
using corral::net::DnsVerdict;

namespace {

struct Stats {
  std::vector<double> us;
  int failures = 0;
  double pct(double p) {
    if (us.empty()) return 0;
    std::sort(us.begin(), us.end());
    auto i = static_cast<std::size_t>(p / 100.0 * static_cast<double>(us.size() - 1) + 0.5);
    return us[std::min(i, us.size() - 1)];
  }
};

// Sends `n` queries for `name` to ip:port one after the other and times
// each from send to the parsed, matching answer.
Stats run(const std::string& ip, std::uint16_t port, const std::string& name, int n,
          unsigned expect_rcode) {
  Stats s;
  corral::UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  ::inet_pton(AF_INET, ip.c_str(), &to.sin_addr);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    std::perror("connect");
    std::exit(1);
  }
  std::uint8_t buf[4096];
  for (int i = 0; i < n; ++i) {
    std::uint16_t id = dns::random_query_id();
    auto q = dns::build_query(id, name, dns::kTypeA);
    auto t0 = Clock::now();
    if (::send(fd.get(), q->data(), q->size(), 0) < 0) {
      ++s.failures;
      continue;
    }
    bool ok = false;
    while (true) {
      pollfd p{fd.get(), POLLIN, 0};
      if (::poll(&p, 1, 2000) != 1) break;
      ssize_t len = ::recv(fd.get(), buf, sizeof buf, 0);
      if (len < 0) break;
      auto r = dns::parse_response({buf, static_cast<std::size_t>(len)});
      if (!r || r->id != id) continue;  // a late answer to an earlier query
      ok = r->rcode() == expect_rcode;
      break;
    }
    auto us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (ok) {
      s.us.push_back(us);
    } else {
      ++s.failures;
    }
  }
  return s;
}

// `n` resolutions through the proxy's resolver, of name(i), timed each.
template <typename NameOf>
Stats run_resolver(corral::net::UpstreamResolver& r, int n, NameOf name) {
  Stats s;
  for (int i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    auto got = r.resolve(name(i), std::chrono::seconds(2));
    auto us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (got && !got->empty()) {
      s.us.push_back(us);
    } else {
      ++s.failures;
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int queries = 10000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--queries") == 0 && i + 1 < argc) {
      queries = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--queries N]\n", argv[0]);
      return 2;
    }
  }
  auto upstream = corral::testing::TestDnsServer::start("127.0.0.1");
  if (!upstream) {
    std::fprintf(stderr, "%s\n", upstream.error().to_string().c_str());
    return 1;
  }
  (*upstream)->add_a("pypi.org", "192.0.2.10", 300);
  // Names for the proxy resolver's misses: each asked once.
  auto miss_name = [](int i) { return "n" + std::to_string(i) + ".files.example"; };
  for (int i = 0; i < queries + 200; ++i) (*upstream)->add_a(miss_name(i), "192.0.2.11", 300);
  auto policy = [](const DnsQuestionContext& q) {
    if (q.name == "pypi.org") return DnsVerdict{DnsAction::kResolve, "allow pypi.org", {}};
    return DnsVerdict{DnsAction::kNxDomain, "no rule", {}};
  };
  std::atomic<std::uint64_t> logged{0};
  auto sink = [&logged](const corral::net::DnsLogEntry&) { logged.fetch_add(1); };

  DnsServerConfig nocache;
  nocache.upstreams = {(*upstream)->endpoint()};
  nocache.cache_entries = 0;
  DnsServerConfig cache = nocache;
  cache.cache_entries = 1024;
  auto s1 = DnsServer::start(nocache, sink);
  auto s2 = DnsServer::start(cache, sink);
  if (!s1 || !s2) {
    std::fprintf(stderr, "starting the resolver failed\n");
    return 1;
  }
  auto p1 = (*s1)->add_sandbox("bench", "127.0.0.2", 0, policy);
  auto p2 = (*s2)->add_sandbox("bench", "127.0.0.3", 0, policy);
  if (!p1 || !p2) {
    std::fprintf(stderr, "binding 127.0.0.2/127.0.0.3 failed\n");
    return 1;
  }

  // Warm-up, untimed.
  run((*upstream)->address(), (*upstream)->port(), "pypi.org", 200, 0);
  run("127.0.0.2", *p1, "pypi.org", 200, 0);
  run("127.0.0.3", *p2, "pypi.org", 200, 0);

  struct Variant {
    const char* name;
    Stats s;
  };
  std::vector<Variant> v;
  v.push_back({"direct", run((*upstream)->address(), (*upstream)->port(), "pypi.org", queries, 0)});
  v.push_back({"forwarded", run("127.0.0.2", *p1, "pypi.org", queries, 0)});
  v.push_back({"cached", run("127.0.0.3", *p2, "pypi.org", queries, 0)});
  v.push_back({"denied", run("127.0.0.2", *p1, "exfil.example", queries, 3)});
  corral::net::UpstreamResolver proxy_resolver({(*upstream)->endpoint()});
  (void)run_resolver(proxy_resolver, 200, [&](int i) { return miss_name(queries + i); });
  v.push_back({"px-miss", run_resolver(proxy_resolver, queries, miss_name)});
  v.push_back({"px-repeat", run_resolver(proxy_resolver, queries, [](int) { return "pypi.org"; })});

  double direct50 = v[0].s.pct(50);
  std::printf("%-10s %9s %9s %9s %12s %8s\n", "variant", "p50 us", "p95 us", "p99 us",
              "added p50 us", "failed");
  std::string json = "{\"bench\":\"dns\",\"queries\":" + std::to_string(queries);
  for (auto& x : v) {
    double p50 = x.s.pct(50), p95 = x.s.pct(95), p99 = x.s.pct(99);
    std::printf("%-10s %9.1f %9.1f %9.1f %12.1f %8d\n", x.name, p50, p95, p99, p50 - direct50,
                x.s.failures);
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  ",\"%s\":{\"p50_us\":%.1f,\"p95_us\":%.1f,\"p99_us\":%.1f,\"failed\":%d}", x.name,
                  p50, p95, p99, x.s.failures);
    json += buf;
  }
  auto m1 = (*s1)->metrics();
  auto m2 = (*s2)->metrics();
  std::printf("resolver: %llu queries forwarded upstream (cache off), %llu cache hits (cache on)\n",
              static_cast<unsigned long long>(m1.upstream_queries),
              static_cast<unsigned long long>(m2.cache_hits));
  json += "}";
  std::printf("%s\n", json.c_str());
  return 0;
}
