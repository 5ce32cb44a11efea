// The cost of the egress proxy (src/egress/egress_proxy.h) against direct
// connections to the same upstream, in one process and one run (issue 4's
// targets: >= 80% of direct throughput for a 1 GiB transfer, <= 100 us
// added median latency per small request). Two worlds, each with its own
// upstream and its own proxy:
//
//   loopback  client, proxy and upstream on 127.0.0.1 in the host namespace
//             (its conntrack and nftables included); no sandbox reaches the
//             proxy this way.
//   netns     the relay as a sandbox's bytes meet it (root only; not the
//             whole real path: no firewall, conntrack or sandbox around the
//             client, see docs/performance.md): the client in a network
//             namespace behind a veth (setup_sandbox_link, as corral makes
//             it), the upstream in another namespace behind a second veth,
//             both host ends in a third namespace that forwards between them.
//             direct = routed through the host namespace; proxy = CONNECT to
//             the proxy listening on the client's host end. All three
//             namespaces are anonymous (held by fds) and vanish at exit.
//
// In each world:
//   bulk     the upstream sends --bulk-mib MiB (default 1024) on a fresh
//            connection; the client reads to the end. Direct, then through
//            a CONNECT tunnel (raw TCP: a tcp rule), --bulk-runs times each
//            (interleaved); the best and the median rate of each, CPU
//            seconds and context switches per GiB of each party.
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
// object ("bench":"egress_proxy") with both worlds.
// Usage: corral_bench_egress_proxy [--bulk-mib N] [--bulk-runs N] [--requests N]
//                                  [--pipe-kib N] [--batch-kib N (0: off)]
//                                  [--unsent-kib N (0: off)] [--client-sndbuf-kib N (0: off)]
//                                  [--upstream-mtu N (netns world; 0: corral's 65535)]
//                                  [--world loopback|netns|both]
//                                  [--only direct|proxy]   (bulk only; for profiling)
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "egress/egress_proxy.h"
#include "netns/net_slot.h"
#include "netns/netlink.h"
#include "netns/network_policy.h"
#include "netns/sandbox_link.h"

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
  explicit TableResolver(std::string ip) : ip_(std::move(ip)) {}
  corral::Result<std::vector<net::IpAddress>> resolve(const std::string&,
                                                      std::chrono::milliseconds) override {
    return std::vector<net::IpAddress>{*net::IpAddress::parse(ip_)};
  }

 private:
  std::string ip_;
};

// Runs `fn` on a thread that has entered network namespace `ns_fd` (-1:
// this one): sockets it creates, and threads it starts, live there.
void in_netns(int ns_fd, const std::function<void()>& fn) {
  if (ns_fd < 0) return fn();
  std::thread t([&] {
    if (::setns(ns_fd, CLONE_NEWNET) != 0) {
      std::perror("setns");
      std::exit(1);
    }
    fn();
  });
  t.join();
}

UniqueFd listen_on(const std::string& ip, std::uint16_t& port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
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

UniqueFd dial(const std::string& ip, std::uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
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

// Reads a response head of at most 4 KiB (as a client does: in chunks, not
// byte by byte). The peer sends nothing after it until asked, so the head
// ends the bytes read.
bool read_head(int fd) {
  std::string h;
  char buf[4096];
  while (h.find("\r\n\r\n") == std::string::npos && h.size() < sizeof buf) {
    ssize_t n = ::recv(fd, buf, sizeof buf - h.size(), 0);
    if (n <= 0) return false;
    h.append(buf, static_cast<std::size_t>(n));
  }
  return h.ends_with("\r\n\r\n") && h.rfind("HTTP/1.1 200", 0) == 0;
}

double cpu_seconds(clockid_t clock = CLOCK_PROCESS_CPUTIME_ID) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// Voluntary + involuntary context switches of the thread or process.
long long switches(int who) {
  rusage ru{};
  ::getrusage(who, &ru);
  return ru.ru_nvcsw + ru.ru_nivcsw;
}

// CPU time and context switches of the bulk upstream's thread for its last
// connection.
std::atomic<long long> g_upstream_cpu_ns{0};
std::atomic<long long> g_upstream_switches{0};

// The bulk upstream: per connection, waits for one byte, sends `bytes`,
// closes.
void bulk_server(int listen_fd, std::uint64_t bytes, std::atomic<bool>& stop) {
  std::vector<char> block(1 << 20, 'x');
  while (!stop) {
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    char c;
    const double t0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    const long long s0 = switches(RUSAGE_THREAD);
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
    g_upstream_switches = switches(RUSAGE_THREAD) - s0;
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

// CPU seconds and context switches of transfers: the client's thread, the
// upstream's thread, and the rest of the process (the proxy's threads;
// nothing else runs).
struct Cpu {
  double client = 0, upstream = 0, rest = 0;
  long long sw_client = 0, sw_upstream = 0, sw_rest = 0;
};

// MiB/s of one transfer; adds its CPU time to *cpu.
double bulk_once(const std::string& ip, std::uint16_t port, const std::string& connect_target,
                 std::uint64_t expect, std::vector<char>& buf, Cpu* cpu) {
  const double c0 = cpu_seconds(), t0c = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
  const long long s0 = switches(RUSAGE_SELF), s0c = switches(RUSAGE_THREAD);
  auto t0 = Clock::now();
  UniqueFd fd = dial(ip, port);
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
  const long long sw_all = switches(RUSAGE_SELF) - s0, sw_client = switches(RUSAGE_THREAD) - s0c;
  // The upstream thread publishes its figures before it closes, and the
  // client sees the close: they are in.
  const double upstream = static_cast<double>(g_upstream_cpu_ns.load()) / 1e9;
  const long long sw_upstream = g_upstream_switches.load();
  cpu->client += client;
  cpu->upstream += upstream;
  cpu->rest += std::max(0.0, all - client - upstream);
  cpu->sw_client += sw_client;
  cpu->sw_upstream += sw_upstream;
  cpu->sw_rest += std::max(0LL, sw_all - sw_client - sw_upstream);
  if (got != static_cast<long long>(expect)) {
    std::fprintf(stderr, "bulk: got %lld of %llu bytes\n", got,
                 static_cast<unsigned long long>(expect));
    return 0;
  }
  return static_cast<double>(expect) / s / (1024.0 * 1024.0);  // MiB/s
}

enum class Mode { kDirect, kAbsolute, kConnect };

// Where the parties of one world are.
struct World {
  std::string name;
  std::string upstream_ip = "127.0.0.1";               // the upstream listens here
  std::string proxy_ip = "127.0.0.1";                  // the proxy's listener (the host end)
  int client_ns = -1, host_ns = -1, upstream_ns = -1;  // -1: this namespace
};

bool small_once(const World& w, Mode mode, std::uint16_t upstream, std::uint16_t proxy, char* buf,
                std::size_t cap) {
  const std::string target = "small.test:" + std::to_string(upstream);
  UniqueFd fd = mode == Mode::kDirect ? dial(w.upstream_ip, upstream) : dial(w.proxy_ip, proxy);
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

std::string sarg(int argc, char** argv, const char* name, const char* def) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return def;
}

struct Options {
  std::uint64_t bulk_mib = 1024;
  int bulk_runs = 5;
  int requests = 10000;
  std::size_t pipe_kib = 1024;
  std::size_t batch_kib = 256;
  std::size_t unsent_kib = 32;
  std::size_t client_sndbuf_kib = 256;
  std::uint32_t upstream_mtu = 1500;
  std::string only;  // "", "direct", "proxy"
};

// The figures of one world, printed and put into the JSON line.
struct Figures {
  double d_med = 0, p_med = 0, d_best = 0, p_best = 0;
  Cpu direct_cpu, proxy_cpu;
  double gib = 0;
  double small[3][3] = {};  // variant x {p50, p95, p99}
  int failed[3] = {};
};

double total(const Cpu& c) { return c.client + c.upstream + c.rest; }

// Runs bulk and small in world `w` (its namespaces made by the caller).
bool run_world(const World& w, const Options& o, Figures& f) {
  const std::uint64_t bulk_bytes = o.bulk_mib << 20;
  std::atomic<bool> stop{false};
  std::uint16_t bulk_port = 0, small_port = 0;
  UniqueFd bulk_listen, small_listen;
  in_netns(w.upstream_ns, [&] {
    bulk_listen = listen_on(w.upstream_ip, bulk_port);
    small_listen = listen_on(w.upstream_ip, small_port);
  });
  std::thread bulk([&] { bulk_server(bulk_listen.get(), bulk_bytes, stop); });
  std::thread small([&] { small_server(small_listen.get(), stop); });

  net::EgressProxyOptions options;
  options.pipe_bytes = o.pipe_kib * 1024;
  options.batch_bytes = o.batch_kib * 1024;
  options.unsent_bytes = o.unsent_kib * 1024;
  options.client_sndbuf_bytes = o.client_sndbuf_kib * 1024;
  std::unique_ptr<net::EgressProxy> proxy;
  std::uint16_t proxy_port = 0;
  auto policy = std::make_shared<net::NetworkPolicy>();
  policy->mode = net::NetworkMode::kAllowlist;
  // The upstream's address is private or loopback: a rule that names it
  // for the two ports lets the names resolve to it.
  for (std::string r :
       {"tcp://bulk.test:" + std::to_string(bulk_port), "small.test:" + std::to_string(small_port),
        "tcp://" + w.upstream_ip + ":" + std::to_string(bulk_port) + "," +
            std::to_string(small_port)})
    policy->rules.push_back(*net::parse_rule(r, false));
  policy->rate = {0, 0};
  // Started in the host namespace: its threads (which connect upstream)
  // and its listener live there.
  in_netns(w.host_ns, [&] {
    auto p = net::EgressProxy::start(
        std::make_shared<TableResolver>(w.upstream_ip), nullptr,
        [&](const net::EgressEvent& ev) {
          if (!ev.allowed) std::fprintf(stderr, "refused: %s\n", ev.reason.c_str());
        },
        options);
    if (!p) {
      std::fprintf(stderr, "%s\n", p.error().to_string().c_str());
      return;
    }
    proxy = std::move(*p);
    auto port = proxy->add_sandbox("bench", w.proxy_ip, 0, policy);
    if (!port) {
      std::fprintf(stderr, "%s\n", port.error().to_string().c_str());
      proxy.reset();
      return;
    }
    proxy_port = *port;
  });
  bool ok = proxy != nullptr;

  // The client runs in its own namespace.
  if (ok)
    in_netns(w.client_ns, [&] {
      // --- bulk ---
      std::vector<char> buf(1 << 20);
      std::vector<double> direct_rates, proxy_rates;
      const std::string bulk_target = "bulk.test:" + std::to_string(bulk_port);
      for (int i = 0; i < o.bulk_runs; ++i) {
        if (o.only != "proxy")
          direct_rates.push_back(
              bulk_once(w.upstream_ip, bulk_port, "", bulk_bytes, buf, &f.direct_cpu));
        if (o.only != "direct")
          proxy_rates.push_back(
              bulk_once(w.proxy_ip, proxy_port, bulk_target, bulk_bytes, buf, &f.proxy_cpu));
      }
      auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v.empty() ? 0 : v[v.size() / 2];
      };
      auto best = [](const std::vector<double>& v) {
        return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
      };
      f.d_med = median(direct_rates);
      f.p_med = median(proxy_rates);
      f.d_best = best(direct_rates);
      f.p_best = best(proxy_rates);
      f.gib = static_cast<double>(bulk_bytes) * o.bulk_runs / (1024.0 * 1024 * 1024);

      // --- small requests ---
      if (o.requests <= 0) return;
      Stats st[3];
      char small_buf[4096];
      for (int m = 0; m < 3; ++m) {  // warm-up
        for (int i = 0; i < 300; ++i)
          small_once(w, static_cast<Mode>(m), small_port, proxy_port, small_buf, sizeof small_buf);
      }
      // Rounds of 100 per variant, rotating, so that load drifts hit all alike.
      for (int done = 0; done < o.requests; done += 100) {
        for (int m = 0; m < 3; ++m) {
          for (int i = 0; i < 100 && done + i < o.requests; ++i) {
            auto t0 = Clock::now();
            bool good = small_once(w, static_cast<Mode>(m), small_port, proxy_port, small_buf,
                                   sizeof small_buf);
            double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
            if (good)
              st[m].us.push_back(us);
            else
              ++st[m].failures;
          }
        }
      }
      for (int m = 0; m < 3; ++m) {
        f.small[m][0] = st[m].pct(50);
        f.small[m][1] = st[m].pct(95);
        f.small[m][2] = st[m].pct(99);
        f.failed[m] = st[m].failures;
      }
    });

  if (proxy) in_netns(w.host_ns, [&] { proxy.reset(); });
  stop = true;
  ::shutdown(bulk_listen.get(), SHUT_RDWR);
  ::shutdown(small_listen.get(), SHUT_RDWR);
  bulk.join();
  small.join();
  return ok;
}

void print_bulk(const Options& o, const Figures& f) {
  std::printf("bulk: %llu MiB x %d runs (pipe %zu KiB, batch %zu KiB, unsent %zu KiB)\n",
              static_cast<unsigned long long>(o.bulk_mib), o.bulk_runs, o.pipe_kib, o.batch_kib,
              o.unsent_kib);
  std::printf("  %-8s median %8.0f MiB/s  best %8.0f MiB/s\n", "direct", f.d_med, f.d_best);
  std::printf("  %-8s median %8.0f MiB/s  best %8.0f MiB/s\n", "proxy", f.p_med, f.p_best);
  std::printf("  ratio    median %8.2f        best %8.2f   (target >= 0.80)\n",
              f.d_med > 0 ? f.p_med / f.d_med : 0, f.d_best > 0 ? f.p_best / f.d_best : 0);
  // CPU per GiB moved, all threads of the process: what the proxy costs,
  // whatever else the machine is doing.
  const double gib = f.gib;
  std::printf("  cpu s/GiB (client + upstream + proxy threads), %u CPUs online:\n",
              std::thread::hardware_concurrency());
  std::printf("    direct   %.3f + %.3f          = %.3f\n", f.direct_cpu.client / gib,
              f.direct_cpu.upstream / gib, total(f.direct_cpu) / gib);
  std::printf("    proxy    %.3f + %.3f + %.3f  = %.3f (x%.2f)\n", f.proxy_cpu.client / gib,
              f.proxy_cpu.upstream / gib, f.proxy_cpu.rest / gib, total(f.proxy_cpu) / gib,
              total(f.direct_cpu) > 0 ? total(f.proxy_cpu) / total(f.direct_cpu) : 0);
  std::printf("  context switches per GiB (client + upstream + proxy threads):\n");
  std::printf("    direct   %.0f + %.0f\n", static_cast<double>(f.direct_cpu.sw_client) / gib,
              static_cast<double>(f.direct_cpu.sw_upstream) / gib);
  std::printf("    proxy    %.0f + %.0f + %.0f\n", static_cast<double>(f.proxy_cpu.sw_client) / gib,
              static_cast<double>(f.proxy_cpu.sw_upstream) / gib,
              static_cast<double>(f.proxy_cpu.sw_rest) / gib);
}

void print_world(const World& w, const Options& o, Figures& f) {
  std::printf("== %s ==\n", w.name.c_str());
  if (o.bulk_runs <= 0 || f.gib <= 0) {
    std::printf("bulk: not run (--bulk-runs 0)\n");
  } else {
    print_bulk(o, f);
  }
  if (o.requests <= 0) return;
  const char* names[3] = {"direct", "absolute", "connect"};
  std::printf("small: %d requests each, new connection per request (us)\n", o.requests);
  std::printf("  %-9s %8s %8s %8s %8s %9s\n", "variant", "p50", "p95", "p99", "failed",
              "added p50");
  for (int m = 0; m < 3; ++m) {
    std::printf("  %-9s %8.1f %8.1f %8.1f %8d %9.1f\n", names[m], f.small[m][0], f.small[m][1],
                f.small[m][2], f.failed[m], f.small[m][0] - f.small[0][0]);
  }
  std::printf("  (target: added p50 <= 100 us)\n");
}

std::string json_world(const Figures& f) {
  char b[1024];
  const double gib = f.gib > 0 ? f.gib : 1;
  std::snprintf(
      b, sizeof b,
      "{\"direct_mib_s\":%.0f,\"proxy_mib_s\":%.0f,\"throughput_ratio\":%.3f,"
      "\"direct_cpu_s_per_gib\":%.3f,\"proxy_cpu_s_per_gib\":%.3f,"
      "\"proxy_client_cpu_s_per_gib\":%.3f,\"proxy_upstream_cpu_s_per_gib\":%.3f,"
      "\"proxy_thread_cpu_s_per_gib\":%.3f,\"proxy_thread_switches_per_gib\":%.0f,"
      "\"direct_p50_us\":%.1f,\"direct_p95_us\":%.1f,"
      "\"absolute_p50_us\":%.1f,\"absolute_p95_us\":%.1f,\"connect_p50_us\":%.1f,"
      "\"connect_p95_us\":%.1f,\"added_p50_absolute_us\":%.1f,\"added_p50_connect_us\":%.1f}",
      f.d_med, f.p_med, f.d_med > 0 ? f.p_med / f.d_med : 0, total(f.direct_cpu) / gib,
      total(f.proxy_cpu) / gib, f.proxy_cpu.client / gib, f.proxy_cpu.upstream / gib,
      f.proxy_cpu.rest / gib, static_cast<double>(f.proxy_cpu.sw_rest) / gib, f.small[0][0],
      f.small[0][1], f.small[1][0], f.small[1][1], f.small[2][0], f.small[2][1],
      f.small[1][0] - f.small[0][0], f.small[2][0] - f.small[0][0]);
  return b;
}

// A new, anonymous network namespace: an fd that holds it.
UniqueFd new_netns() {
  UniqueFd fd;
  std::thread t([&] {
    if (::unshare(CLONE_NEWNET) != 0) return;
    fd.reset(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  });
  t.join();
  return fd;
}

bool write_file(const char* path, const char* text) {
  std::ofstream f(path);
  f << text;
  f.flush();
  return static_cast<bool>(f);
}

// The netns world: host, client ("sandbox") and upstream namespaces, the
// client's and the upstream's veths made by setup_sandbox_link from a
// throwaway pool in the host namespace. Empty on failure (why on stderr).
struct NetnsWorld {
  UniqueFd host, client, upstream;
  World world;
};

// Sets the MTU of link `name` in the calling thread's namespace.
std::string set_mtu(const std::string& name, std::uint32_t mtu) {
  auto sock = net::netlink::Socket::open();
  if (!sock) return sock.error().to_string();
  auto link = net::netlink::get_link(*sock, name);
  if (!link) return link.error().to_string();
  auto st = net::netlink::set_link_mtu(*sock, *link, mtu);
  return st ? "" : st.error().to_string();
}

// `upstream_mtu`: the upstream's link is a stand-in for the network
// between the host and a real upstream, so it gets that network's MTU
// (default 1500), not the 65535 of a sandbox's link (0 keeps that).
std::optional<NetnsWorld> make_netns_world(std::uint32_t upstream_mtu) {
  NetnsWorld nw;
  nw.host = new_netns();
  nw.client = new_netns();
  nw.upstream = new_netns();
  if (!nw.host || !nw.client || !nw.upstream) {
    std::fprintf(stderr, "netns world: cannot create network namespaces (root needed)\n");
    return std::nullopt;
  }
  auto pool = net::NetSlotPool::make("10.219.0.0/24", "cpb", "/nonexistent-corral-bench");
  std::string why;
  std::string client_host_end, upstream_end;
  in_netns(nw.host.get(), [&] {
    auto cs = net::NetSlot::at(*pool, 0), us = net::NetSlot::at(*pool, 1);
    if (!cs || !us) {
      why = "slots";
      return;
    }
    if (auto st = net::setup_sandbox_link(*cs, nw.client.get()); !st) {
      why = st.error().to_string();
      return;
    }
    if (auto st = net::setup_sandbox_link(*us, nw.upstream.get()); !st) {
      why = st.error().to_string();
      return;
    }
    if (upstream_mtu != 0) {
      why = set_mtu(us->host_ifname(), upstream_mtu);
      if (why.empty())
        in_netns(nw.upstream.get(), [&] { why = set_mtu(us->sandbox_ifname(), upstream_mtu); });
      if (!why.empty()) return;
    }
    // Forwarding in the host namespace only (sysctl files of /proc/sys/net
    // are those of the opener's namespace).
    if (!write_file("/proc/sys/net/ipv4/ip_forward", "1")) why = "ip_forward";
    client_host_end = net::IpAddress::v4(cs->host_address()).str();
    upstream_end = net::IpAddress::v4(us->sandbox_address()).str();
  });
  if (!why.empty()) {
    std::fprintf(stderr, "netns world: %s\n", why.c_str());
    return std::nullopt;
  }
  nw.world.name = "netns (client behind a sandbox veth, upstream behind a network-MTU one)";
  nw.world.upstream_ip = upstream_end;
  nw.world.proxy_ip = client_host_end;
  nw.world.client_ns = nw.client.get();
  nw.world.host_ns = nw.host.get();
  nw.world.upstream_ns = nw.upstream.get();
  return nw;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  Options o;
  o.bulk_mib = static_cast<std::uint64_t>(arg(argc, argv, "--bulk-mib", 1024));
  o.bulk_runs = static_cast<int>(arg(argc, argv, "--bulk-runs", 5));
  o.requests = static_cast<int>(arg(argc, argv, "--requests", 10000));
  o.pipe_kib = static_cast<std::size_t>(arg(argc, argv, "--pipe-kib", 1024));
  o.batch_kib = static_cast<std::size_t>(arg(argc, argv, "--batch-kib", 256));
  o.unsent_kib = static_cast<std::size_t>(arg(argc, argv, "--unsent-kib", 32));
  o.client_sndbuf_kib = static_cast<std::size_t>(arg(argc, argv, "--client-sndbuf-kib", 256));
  o.upstream_mtu = static_cast<std::uint32_t>(arg(argc, argv, "--upstream-mtu", 1500));
  o.only = sarg(argc, argv, "--only", "");
  const std::string which = sarg(argc, argv, "--world", "both");

  std::string json = "{\"bench\":\"egress_proxy\",\"bulk_mib\":" + std::to_string(o.bulk_mib) +
                     ",\"bulk_runs\":" + std::to_string(o.bulk_runs) +
                     ",\"requests\":" + std::to_string(o.requests) +
                     ",\"cpus\":" + std::to_string(std::thread::hardware_concurrency());
  int code = 0;
  if (which == "both" || which == "loopback") {
    World w;
    w.name = "loopback (all on 127.0.0.1 in the host namespace)";
    Figures f;
    if (run_world(w, o, f)) {
      print_world(w, o, f);
      json += ",\"loopback\":" + json_world(f);
    } else {
      code = 1;
    }
  }
  if (which == "both" || which == "netns") {
    auto nw = make_netns_world(o.upstream_mtu);
    Figures f;
    if (nw && run_world(nw->world, o, f)) {
      print_world(nw->world, o, f);
      json += ",\"netns\":" + json_world(f);
    } else {
      std::printf("== netns: skipped (see stderr) ==\n");
      if (which == "netns") code = 1;
    }
    // The namespaces (and the veths in them) go with their last fd.
  }
  std::printf("%s}\n", json.c_str());
  return code;
}
