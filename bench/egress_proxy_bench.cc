// The cost of the egress proxy (src/net/egress_proxy.h) against direct
// connections to the same local upstream on loopback, in one process and
// one run (issue 4's targets: >= 80% of direct throughput for a 1 GiB
// transfer, <= 100 us added median latency per small request).
//
//   bulk     the upstream sends --bulk-mib MiB (default 1024) on a fresh
//            connection; the client reads to the end. Direct, then through
//            a CONNECT tunnel (raw TCP: a tcp rule), --bulk-runs times each
//            (interleaved); the best and the median rate of each.
//   small    --requests (default 10,000) HTTP requests, each on a new
//            connection, answered by a 2-byte body and a close:
//              direct    client -> upstream
//              absolute  client -> proxy, "GET http://small.test:P/" (HTTP_PROXY
//                        style; one round trip, like the transparent path)
//              connect   client -> proxy, CONNECT, then the GET (HTTPS_PROXY
//                        style; one more round trip, inherent to CONNECT)
//            timed from connect() to the end of the answer; p50/p95/p99 in
//            microseconds and the added median against direct.
// Names resolve through an in-memory table (a real resolver's time is the
// DNS server's, measured by corral_bench_dns). The last line is one JSON
// object ("bench":"egress_proxy").
// Usage: corral_bench_egress_proxy [--bulk-mib N] [--bulk-runs N] [--requests N]
//                                  [--pipe-kib N]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "net/egress_proxy.h"
#include "net/network_policy.h"

using Clock = std::chrono::steady_clock;
using corral::UniqueFd;
namespace net = corral::net;

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

class TableResolver : public net::Resolver {
 public:
  corral::Result<std::vector<net::IpAddress>> resolve(const std::string&,
                                                      std::chrono::milliseconds) override {
    return std::vector<net::IpAddress>{*net::IpAddress::parse("127.0.0.1")};
  }
};

UniqueFd listen_on(const char* ip, std::uint16_t& port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, ip, &a.sin_addr);
  socklen_t len = sizeof a;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(fd.get(), 4096) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    std::perror("upstream listen");
    std::exit(1);
  }
  port = ntohs(a.sin_port);
  return fd;
}

UniqueFd dial(std::uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return UniqueFd();
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool send_all(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    s.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Reads to the end of stream; the byte count, or -1 on error.
long long drain(int fd, char* buf, std::size_t cap) {
  long long total = 0;
  for (;;) {
    ssize_t n = ::recv(fd, buf, cap, 0);
    if (n == 0) return total;
    if (n < 0) return -1;
    total += n;
  }
}

bool read_head(int fd) {
  std::string h;
  char c;
  while (!h.ends_with("\r\n\r\n")) {
    if (::recv(fd, &c, 1, 0) != 1) return false;
    h.push_back(c);
  }
  return h.rfind("HTTP/1.1 200", 0) == 0;
}

double cpu_seconds(clockid_t clock = CLOCK_PROCESS_CPUTIME_ID) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// CPU time of the bulk upstream's thread for its last connection, in ns.
std::atomic<long long> g_upstream_cpu_ns{0};

// The bulk upstream: per connection, waits for one byte, sends `bytes`,
// closes.
void bulk_server(int listen_fd, std::uint64_t bytes, std::atomic<bool>& stop) {
  std::vector<char> block(1 << 20, 'x');
  while (!stop) {
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    char c;
    const double t0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    if (::recv(fd, &c, 1, 0) == 1) {
      std::uint64_t left = bytes;
      while (left > 0) {
        ssize_t n =
            ::send(fd, block.data(), std::min<std::uint64_t>(left, block.size()), MSG_NOSIGNAL);
        if (n <= 0) break;
        left -= static_cast<std::uint64_t>(n);
      }
    }
    g_upstream_cpu_ns = static_cast<long long>((cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - t0) * 1e9);
    ::close(fd);
  }
}

constexpr std::string_view kSmallResponse =
    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";

// The small upstream: per connection, reads a head, answers 2 bytes, closes.
void small_server(int listen_fd, std::atomic<bool>& stop) {
  char buf[4096];
  while (!stop) {
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::string in;
    while (in.find("\r\n\r\n") == std::string::npos) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      in.append(buf, static_cast<std::size_t>(n));
    }
    send_all(fd, kSmallResponse);
    ::close(fd);
  }
}

// CPU seconds of a transfer: the client's thread, the upstream's thread,
// and the rest of the process (the proxy's threads; nothing else runs).
struct Cpu {
  double client = 0, upstream = 0, rest = 0;
};

// MiB/s of one transfer; adds its CPU time to *cpu.
double bulk_once(std::uint16_t port, const std::string& connect_target, std::uint64_t expect,
                 std::vector<char>& buf, Cpu* cpu) {
  const double c0 = cpu_seconds(), t0c = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
  auto t0 = Clock::now();
  UniqueFd fd = dial(port);
  if (!fd) return 0;
  if (!connect_target.empty()) {
    send_all(fd.get(),
             "CONNECT " + connect_target + " HTTP/1.1\r\nHost: " + connect_target + "\r\n\r\n");
    if (!read_head(fd.get())) return 0;
  }
  send_all(fd.get(), "g");  // lower case: at once "not HTTP", so tcp
  long long got = drain(fd.get(), buf.data(), buf.size());
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  const double all = cpu_seconds() - c0, client = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - t0c;
  const double upstream = static_cast<double>(g_upstream_cpu_ns.load()) / 1e9;
  cpu->client += client;
  cpu->upstream += upstream;
  cpu->rest += std::max(0.0, all - client - upstream);
  if (got != static_cast<long long>(expect)) {
    std::fprintf(stderr, "bulk: got %lld of %llu bytes\n", got,
                 static_cast<unsigned long long>(expect));
    return 0;
  }
  return static_cast<double>(expect) / s / (1024.0 * 1024.0);  // MiB/s
}

enum class Mode { kDirect, kAbsolute, kConnect };

bool small_once(Mode mode, std::uint16_t upstream, std::uint16_t proxy, char* buf,
                std::size_t cap) {
  const std::string target = "small.test:" + std::to_string(upstream);
  UniqueFd fd = dial(mode == Mode::kDirect ? upstream : proxy);
  if (!fd) return false;
  bool ok = true;
  if (mode == Mode::kDirect) {
    ok = send_all(fd.get(), "GET / HTTP/1.1\r\nHost: small.test\r\n\r\n");
  } else if (mode == Mode::kAbsolute) {
    ok = send_all(fd.get(), "GET http://" + target + "/ HTTP/1.1\r\nHost: " + target + "\r\n\r\n");
  } else {
    ok = send_all(fd.get(), "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n") &&
         read_head(fd.get()) && send_all(fd.get(), "GET / HTTP/1.1\r\nHost: small.test\r\n\r\n");
  }
  return ok && drain(fd.get(), buf, cap) == static_cast<long long>(kSmallResponse.size());
}

double arg(int argc, char** argv, const char* name, double def) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atof(argv[i + 1]);
  }
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  const auto bulk_mib = static_cast<std::uint64_t>(arg(argc, argv, "--bulk-mib", 1024));
  const int bulk_runs = static_cast<int>(arg(argc, argv, "--bulk-runs", 5));
  const int requests = static_cast<int>(arg(argc, argv, "--requests", 10000));
  const auto pipe_kib = static_cast<std::size_t>(arg(argc, argv, "--pipe-kib", 1024));
  const std::uint64_t bulk_bytes = bulk_mib << 20;

  std::atomic<bool> stop{false};
  std::uint16_t bulk_port = 0, small_port = 0;
  UniqueFd bulk_listen = listen_on("127.0.0.1", bulk_port);
  UniqueFd small_listen = listen_on("127.0.0.1", small_port);
  std::thread bulk([&] { bulk_server(bulk_listen.get(), bulk_bytes, stop); });
  std::thread small([&] { small_server(small_listen.get(), stop); });

  net::EgressProxyOptions options;
  options.pipe_bytes = pipe_kib * 1024;
  std::atomic<std::uint64_t> events{0};
  auto proxy = net::EgressProxy::start(
      std::make_shared<TableResolver>(), nullptr,
      [&](const net::EgressEvent& ev) {
        if (!ev.allowed) std::fprintf(stderr, "refused: %s\n", ev.reason.c_str());
        ++events;
      },
      options);
  if (!proxy) {
    std::fprintf(stderr, "%s\n", proxy.error().to_string().c_str());
    return 1;
  }
  auto policy = std::make_shared<net::NetworkPolicy>();
  policy->mode = net::NetworkMode::kAllowlist;
  for (std::string r : {"tcp://bulk.test:" + std::to_string(bulk_port),
                        "small.test:" + std::to_string(small_port), std::string("127.0.0.0/8:9")})
    policy->rules.push_back(*net::parse_rule(r, false));
  policy->rate = {0, 0};
  auto proxy_port = (*proxy)->add_sandbox("bench", "127.0.0.1", 0, policy);
  if (!proxy_port) {
    std::fprintf(stderr, "%s\n", proxy_port.error().to_string().c_str());
    return 1;
  }

  // --- bulk ---
  std::vector<char> buf(1 << 20);
  std::vector<double> direct_rates, proxy_rates;
  Cpu direct_cpu, proxy_cpu;
  const std::string bulk_target = "bulk.test:" + std::to_string(bulk_port);
  for (int i = 0; i < bulk_runs; ++i) {
    direct_rates.push_back(bulk_once(bulk_port, "", bulk_bytes, buf, &direct_cpu));
    proxy_rates.push_back(bulk_once(*proxy_port, bulk_target, bulk_bytes, buf, &proxy_cpu));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
  };
  auto best = [](const std::vector<double>& v) {
    return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
  };
  double d_med = median(direct_rates), p_med = median(proxy_rates);
  double d_best = best(direct_rates), p_best = best(proxy_rates);
  std::printf("bulk: %llu MiB x %d runs (pipe %zu KiB)\n",
              static_cast<unsigned long long>(bulk_mib), bulk_runs, pipe_kib);
  std::printf("  %-8s median %8.0f MiB/s  best %8.0f MiB/s\n", "direct", d_med, d_best);
  std::printf("  %-8s median %8.0f MiB/s  best %8.0f MiB/s\n", "proxy", p_med, p_best);
  std::printf("  ratio    median %8.2f        best %8.2f   (target >= 0.80)\n",
              d_med > 0 ? p_med / d_med : 0, d_best > 0 ? p_best / d_best : 0);
  // CPU per GiB moved, all threads of the process: what the proxy costs,
  // whatever else the machine is doing.
  const double gib = static_cast<double>(bulk_bytes) * bulk_runs / (1024.0 * 1024 * 1024);
  auto total = [](const Cpu& c) { return c.client + c.upstream + c.rest; };
  std::printf("  cpu s/GiB (client + upstream + proxy threads), %u CPUs online:\n",
              std::thread::hardware_concurrency());
  std::printf("    direct   %.3f + %.3f          = %.3f\n", direct_cpu.client / gib,
              direct_cpu.upstream / gib, total(direct_cpu) / gib);
  std::printf("    proxy    %.3f + %.3f + %.3f  = %.3f (x%.2f)\n", proxy_cpu.client / gib,
              proxy_cpu.upstream / gib, proxy_cpu.rest / gib, total(proxy_cpu) / gib,
              total(direct_cpu) > 0 ? total(proxy_cpu) / total(direct_cpu) : 0);

  // --- small requests ---
  Stats st[3];
  const char* names[3] = {"direct", "absolute", "connect"};
  char small_buf[4096];
  for (int m = 0; m < 3; ++m) {  // warm-up
    for (int i = 0; i < 300; ++i)
      small_once(static_cast<Mode>(m), small_port, *proxy_port, small_buf, sizeof small_buf);
  }
  // Rounds of 100 per variant, rotating, so that load drifts hit all alike.
  for (int done = 0; done < requests; done += 100) {
    for (int m = 0; m < 3; ++m) {
      for (int i = 0; i < 100 && done + i < requests; ++i) {
        auto t0 = Clock::now();
        bool ok =
            small_once(static_cast<Mode>(m), small_port, *proxy_port, small_buf, sizeof small_buf);
        double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        if (ok)
          st[m].us.push_back(us);
        else
          ++st[m].failures;
      }
    }
  }
  std::printf("small: %d requests each, new connection per request (us)\n", requests);
  std::printf("  %-9s %8s %8s %8s %8s %9s\n", "variant", "p50", "p95", "p99", "failed",
              "added p50");
  double base = st[0].pct(50);
  for (int m = 0; m < 3; ++m) {
    std::printf("  %-9s %8.1f %8.1f %8.1f %8d %9.1f\n", names[m], st[m].pct(50), st[m].pct(95),
                st[m].pct(99), st[m].failures, st[m].pct(50) - base);
  }
  std::printf("  (target: added p50 <= 100 us)\n");
  std::printf(
      "{\"bench\":\"egress_proxy\",\"bulk_mib\":%llu,\"direct_mib_s\":%.0f,\"proxy_mib_s\":%.0f,"
      "\"throughput_ratio\":%.3f,\"direct_cpu_s_per_gib\":%.3f,\"proxy_cpu_s_per_gib\":%.3f,"
      "\"proxy_thread_cpu_s_per_gib\":%.3f,"
      "\"requests\":%d,\"direct_p50_us\":%.1f,\"direct_p95_us\":%.1f,"
      "\"absolute_p50_us\":%.1f,\"absolute_p95_us\":%.1f,\"connect_p50_us\":%.1f,"
      "\"connect_p95_us\":%.1f,\"added_p50_absolute_us\":%.1f,\"added_p50_connect_us\":%.1f}\n",
      static_cast<unsigned long long>(bulk_mib), d_med, p_med, d_med > 0 ? p_med / d_med : 0,
      total(direct_cpu) / gib, total(proxy_cpu) / gib, proxy_cpu.rest / gib, requests,
      st[0].pct(50), st[0].pct(95), st[1].pct(50), st[1].pct(95), st[2].pct(50), st[2].pct(95),
      st[1].pct(50) - base, st[2].pct(50) - base);

  proxy->reset();
  stop = true;
  ::shutdown(bulk_listen.get(), SHUT_RDWR);
  ::shutdown(small_listen.get(), SHUT_RDWR);
  bulk.join();
  small.join();
  return 0;
}
