#include "egress/egress_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "netns/host_name.h"
#include "egress/proxy_request.h"
#include "egress/socket_wait.h"
#include "egress/splice_relay.h"
#include "egress/swapped_relay.h"
#include "egress/tls_client_hello.h"
#include "egress/tls_intercept.h"
#include "secrets/reflection_guard.h"
#include "egress/tls_stream.h"
#include "egress/upstream_resolver.h"
#include "secrets/secret_value.h"

// Why a thread per connection rather than an event loop:
//   - The steps before the data phase block by nature: Resolver::resolve
//     is a blocking call with a timeout, the connect has its own timeout,
//     and the classification waits for the first bytes. In a thread they
//     are straight-line code with one deadline each; in an event loop each
//     would be a state machine, and resolution would still need threads.
//   - The data phase is splice(2) through a pipe in each direction (after
//     a flow's first 64 KiB, which are copied: see splice_relay.cc): bulk
//     bytes never enter user space, so a thread costs no copy, and the
//     kernel does the work whichever thread asks. One thread per connection
//     keeps a large transfer on its own core without a loop to share.
//   - The added latency of a small request is mostly wake-ups. No acceptor
//     hands connections to workers: idle workers wait on the listeners
//     themselves and the one woken serves (see worker()), and workers that
//     finish linger a few seconds for the next connection (as in
//     src/http/http_server.cc), so short connections reuse warm threads
//     instead of cloning one each.
//   - The count is bounded (max_connections, and per sandbox), and a
//     sandbox's connections are few compared to what a host runs.
// bench/egress_proxy_bench.cc measures both targets against direct.

namespace corral::net {

Resolver::~Resolver() = default;
DnsAnswers::~DnsAnswers() = default;

std::string_view egress_refusal_name(EgressRefusal r) {
  switch (r) {
    case EgressRefusal::kNone:
      return "none";
    case EgressRefusal::kDenied:
      return "denied";
    case EgressRefusal::kAddress:
      return "address";
    case EgressRefusal::kMismatch:
      return "mismatch";
    case EgressRefusal::kRateLimited:
      return "rate_limited";
    case EgressRefusal::kMalformed:
      return "malformed";
    case EgressRefusal::kTimeout:
      return "timeout";
    case EgressRefusal::kResolveFailed:
      return "resolve_failed";
    case EgressRefusal::kConnectFailed:
      return "connect_failed";
    case EgressRefusal::kOverloaded:
      return "overloaded";
    case EgressRefusal::kPolicyChanged:
      return "policy_changed";
    case EgressRefusal::kSecretRefused:
      return "secret_refused";
    case EgressRefusal::kUpstreamTls:
      return "upstream_tls";
    case EgressRefusal::kCount:
      break;
  }
  return "?";
}

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// netfilter's getsockopt for the destination before NAT (linux/netfilter_ipv4.h,
// not included: it clashes with the libc headers).
constexpr int kSoOriginalDst = 80;

constexpr std::size_t kMaxIdleThreads = 16;
constexpr std::chrono::seconds kIdleThreadLinger{5};
// What classification may buffer: a ClientHello of kMaxClientHelloBytes in
// records of any size, or a request head.
constexpr std::size_t kMaxFirstBytes = kMaxClientHelloBytes + 4 * 1024;
constexpr std::size_t kReadChunk = 16 * 1024;
constexpr milliseconds kLingerOnRefusal{200};

struct Endpoint {
  IpAddress address;
  std::uint16_t port = 0;
  bool operator==(const Endpoint&) const = default;
  std::string str() const {
    return (address.v6 ? "[" + address.str() + "]" : address.str()) + ":" + std::to_string(port);
  }
};

std::optional<Endpoint> endpoint_of(const sockaddr_storage& ss) {
  auto a = IpAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&ss));
  if (!a) return std::nullopt;
  Endpoint e{a->unmapped(), 0};
  e.port = ss.ss_family == AF_INET ? ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port)
                                   : ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  return e;
}

std::uint64_t ms_since(Clock::time_point t) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<milliseconds>(Clock::now() - t).count());
}

void set_nodelay(int fd) {
  int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

// Types the Impl holds (a named namespace: Impl has external linkage).
namespace egress_detail {

// --- Decisions -------------------------------------------------------------

// What a connection is for, as far as the policy is concerned.
struct Target {
  std::vector<std::string> names;    // one (CONNECT host, SNI, Host), or tcp: corral's DNS names
  bool names_from_dns = false;       // the names are what corral's DNS answered for `address`
  std::optional<IpAddress> address;  // an IP literal, or the original destination
  std::uint16_t port = 0;
  Protocol protocol = kTcp;
  // Transparent: if no rule allows the name, a rule naming the original
  // destination by address still may (the sandbox's own choice of address
  // is then what the rule granted).
  bool address_fallback = false;
};

struct Verdict {
  bool allowed = false;
  bool via_name = false;  // connect to what names[0] resolves to, else to `address`
  std::string rule;
  std::string reason;
};

Verdict refused(const Decision& d) { return Verdict{false, false, d.rule, d.reason}; }

Verdict decide_target(const NetworkPolicy& policy, const Target& t) {
  std::optional<Decision> allowed, refusal;
  for (const auto& name : t.names) {
    Decision d = decide(policy, EgressQuery{name, std::nullopt, t.port, t.protocol});
    if (!d.allowed && !d.rule.empty()) return refused(d);  // a deny rule wins over all
    if (d.allowed && !allowed) allowed = d;
    if (!d.allowed && !refusal) refusal = d;
  }
  if (allowed) return Verdict{true, !t.names_from_dns, allowed->rule, allowed->reason};
  if (!t.address || (!t.names.empty() && !t.address_fallback)) {
    if (refusal) return refused(*refusal);
    return Verdict{false, false, "", "no destination name or address"};
  }
  Decision d = decide(policy, EgressQuery{"", t.address, t.port, t.protocol});
  if (d.allowed) return Verdict{true, false, d.rule, d.reason};
  if (refusal && d.rule.empty()) return refused(*refusal);  // the name's reason says more
  Verdict v = refused(d);
  if (t.protocol == kTcp && t.names.empty() && t.address_fallback)
    v.reason += " (corral's DNS gave this sandbox no name for " + t.address->str() + ")";
  return v;
}

// Still allowed under `policy`: the decision and the address connected to.
Verdict reevaluate(const NetworkPolicy& policy, const Target& t, const IpAddress& connected) {
  Verdict v = decide_target(policy, t);
  if (!v.allowed) return v;
  Decision a = check_address(policy, connected, t.port, t.protocol);
  if (!a.allowed) return refused(a);
  return v;
}

struct TokenBucket {
  double tokens = -1;  // < 0: full at first use
  Clock::time_point last{};

  bool take(const RateLimit& rate, Clock::time_point now) {
    if (rate.per_second <= 0) return true;
    const double burst = std::max(1.0, rate.burst);
    if (tokens < 0) {
      tokens = burst;
    } else {
      double elapsed = std::chrono::duration<double>(now - last).count();
      tokens = std::min(burst, tokens + elapsed * rate.per_second);
    }
    last = now;
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  }
};

struct Conn;

struct SandboxState {
  std::string id;
  std::uint64_t key = 0;  // epoll data
  UniqueFd listener;
  std::shared_ptr<const NetworkPolicy> policy;
  TokenBucket bucket;
  std::set<Conn*> conns;  // admitted, not yet unregistered
  std::size_t open = 0;   // admitted, not yet closed
  std::size_t live = 0;   // admitted, not yet audited (remove_sandbox waits for 0)
  bool removed = false;
};

// An admitted connection, as the rest of the proxy sees it. Fields are
// guarded by the proxy's mutex.
struct Conn {
  std::shared_ptr<SandboxState> sandbox;
  int client = -1;    // raw copies, for shutdown() from other threads;
  int upstream = -1;  // cleared before the owner closes them
  bool rate_ok = true;
  // Set once relaying: what set_policy re-evaluates.
  bool relaying = false;
  // Handed to the gateway: set_policy cuts it when a grant is withdrawn.
  bool gateway = false;
  Target target;
  IpAddress connected;
  // Closed from outside: why.
  EgressRefusal cut = EgressRefusal::kNone;
  std::string cut_reason;  // "policy changed: ...", "sandbox removed", "proxy stopped"
  bool cut_done = false;
};

void cut_conn(Conn& c, EgressRefusal why, std::string reason) {
  if (c.cut_done) return;
  c.cut_done = true;
  c.cut = why;
  c.cut_reason = std::move(reason);
  if (c.client >= 0) ::shutdown(c.client, SHUT_RDWR);
  if (c.upstream >= 0) ::shutdown(c.upstream, SHUT_RDWR);
}

struct Accepted {
  std::unique_ptr<Conn> conn;
  UniqueFd fd;
  Clock::time_point at;
};

}  // namespace egress_detail

using namespace egress_detail;

struct EgressProxy::Impl {
  std::shared_ptr<Resolver> resolver;
  std::shared_ptr<DnsAnswers> answers;
  // Resolvers (with their caches) of sandboxes that name DNS servers of
  // their own, one per list of servers.
  std::mutex own_resolvers_mu;
  std::map<std::vector<std::string>, std::shared_ptr<UpstreamResolver>> own_resolvers;
  std::shared_ptr<Resolver> resolver_for(const std::vector<std::string>& servers) {
    if (servers.empty()) return resolver;
    std::lock_guard<std::mutex> lock(own_resolvers_mu);
    if (auto it = own_resolvers.find(servers); it != own_resolvers.end()) return it->second;
    if (own_resolvers.size() >= 256) own_resolvers.clear();  // bounded; many sets are rare
    auto r = std::make_shared<UpstreamResolver>(servers);
    own_resolvers.emplace(servers, r);
    return r;
  }
  EgressAuditSink audit;
  EgressProxyOptions options;
  // Broker mode: the client context of intercepted connections (set when
  // options has a swapper and a CA).
  std::shared_ptr<SSL_CTX> upstream_tls;

  UniqueFd epoll_fd;  // the listeners (one-shot: re-armed after each accept)
  UniqueFd stop_fd;   // eventfd in epoll_fd, data 0; once written, stays readable

  mutable std::mutex mu;
  std::condition_variable cv;  // live counts / threads changed
  std::map<std::string, std::shared_ptr<SandboxState>> by_id;
  std::map<std::uint64_t, std::shared_ptr<SandboxState>> by_key;
  std::uint64_t next_key = 1;
  std::size_t active = 0;   // admitted, not yet closed
  std::size_t threads = 0;  // worker threads alive
  std::size_t idle = 0;     // of which waiting in epoll_wait
  bool stopping = false;
  EgressMetrics metrics;

  bool spawn_worker();
  void worker();
  std::optional<Accepted> accept_one(const std::shared_ptr<SandboxState>& sandbox,
                                     std::optional<EgressEvent>& refused);
  void serve(Accepted a);
  void emit(const EgressEvent& ev) {
    if (audit) audit(ev);
  }
};

namespace {

// The work on one connection, from the first byte to the audit event.
class Session {
 public:
  Session(EgressProxy::Impl& px, Conn& conn, int client) : px_(px), conn_(conn), client_(client) {}

  // Serves the connection; the event says how it ended.
  EgressEvent run();
  // The upstream socket, if one was opened (closed by the caller after
  // unregistering).
  UniqueFd take_upstream() { return std::move(upstream_); }
  // Handed to the gateway, which audits it itself: no EgressEvent.
  bool gateway_served() const { return gateway_served_; }

 private:
  enum class First { kTls, kHttp, kTcp, kFailed };

  std::shared_ptr<const NetworkPolicy> policy() const {
    std::lock_guard<std::mutex> lock(px_.mu);
    return conn_.sandbox->policy;
  }
  bool cut() const {
    std::lock_guard<std::mutex> lock(px_.mu);
    return conn_.cut_done;
  }

  // Ends the connection without relaying: audit fields, and an HTTP answer
  // when the client spoke HTTP and has not been answered yet.
  void refuse(EgressRefusal why, std::string reason, int http_status = 0);
  // `head_timeout`: how long the whole first head may take (the proxy's
  // head timeout or the sandbox's shorter network timeout).
  First read_first(bool lenient, bool quiet_is_tcp, std::chrono::milliseconds head_timeout);
  bool handle_http(const ProxyRequest& req, bool transparent);
  bool handle_connect(const ProxyRequest& req);
  bool route(const Target& target, const std::shared_ptr<const NetworkPolicy>& policy,
             Verdict& verdict);
  bool connect_upstream(const std::vector<IpAddress>& candidates, std::uint16_t port,
                        const NetworkPolicy& policy);
  bool start_relay(const Target& target, const std::shared_ptr<const NetworkPolicy>& used);
  // The data phase: `head` then `body` (the bytes already read) go upstream
  // first; `framing` and `length` bound a plain HTTP request.
  // `secret_head`: the head holds swapped-in secret values; it is sent
  // first and wiped before the relay starts.
  void relay(std::string head, std::string body, RequestFraming framing, std::uint64_t length,
             bool secret_head = false);
  // Broker mode (issue 5).
  bool wants_interception(const std::string& host, std::uint16_t port) const;
  void intercept(const std::string& host, std::uint16_t port, std::string client_hello);
  // Gives a plain HTTP head to the swapper (via "http"). False: refused,
  // answered 403 and recorded. `secret_head` says whether values went in;
  // then the answer will be scrubbed (reflection_, scrub_).
  bool swap_plain(const std::string& host, std::uint16_t port, std::string& head,
                  bool& secret_head, const http::RequestHead& request);
  // The data phase of a request that carried a secret (swapped_relay.h).
  void relay_swapped_request(std::string head, std::string body, RequestFraming framing,
                             std::uint64_t length);
  void set_protocol(Protocol p) { ev_.protocol = protocol_name(p); }
  EgressEvent to_gateway(std::string already_read) {
    gateway_served_ = true;
    {
      std::lock_guard<std::mutex> lock(px_.mu);
      conn_.gateway = true;
    }
    px_.options.gateway(
        GatewayConnection{conn_.sandbox->id, client_, std::move(already_read), policy()});
    return ev_;
  }

  EgressProxy::Impl& px_;
  Conn& conn_;
  int client_;
  UniqueFd upstream_;
  std::string buf_;  // bytes read from the client and not yet forwarded
  TlsHello hello_;
  std::size_t head_end_ = 0;
  bool http_answer_pending_ = false;  // the client waits for an HTTP answer from the proxy
  Endpoint local_;
  Endpoint original_;
  IpAddress connected_;
  EgressEvent ev_;
  bool gateway_served_ = false;
  // Set by swap_plain when it swapped: the response scan (issue 12).
  std::shared_ptr<const secrets::RedactionSet> reflection_;
  ScrubOptions scrub_;
  bool expect_continue_ = false;
};

void Session::refuse(EgressRefusal why, std::string reason, int http_status) {
  ev_.allowed = false;
  ev_.refusal = why;
  ev_.reason = one_line(reason);
  if (http_status == 0 || !http_answer_pending_) return;
  http_answer_pending_ = false;
  const char* text = http_status == 400   ? "Bad Request"
                     : http_status == 403 ? "Forbidden"
                     : http_status == 429 ? "Too Many Requests"
                     : http_status == 502 ? "Bad Gateway"
                     : http_status == 504 ? "Gateway Timeout"
                                          : "Error";
  std::string body = "corral egress proxy: " + ev_.reason + "\n";
  std::string msg = "HTTP/1.1 " + std::to_string(http_status) + " " + text +
                    "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
                    std::to_string(body.size()) +
                    "\r\nX-Corral-Refusal: " + std::string(egress_refusal_name(why)) +
                    "\r\nConnection: close\r\n\r\n" + body;
  auto deadline = Clock::now() + kLingerOnRefusal;
  if (!send_all(client_, msg, deadline)) return;
  // A lingering close: what the client still sends (a request body) is
  // read and dropped for a moment, so that closing with unread bytes does
  // not reset the connection before the client has read the answer.
  ::shutdown(client_, SHUT_WR);
  char scratch[4096];
  std::size_t dropped = 0;
  while (dropped < 256 * 1024 && wait_fd(client_, POLLIN, deadline) == 1) {
    ssize_t n = ::recv(client_, scratch, sizeof scratch, MSG_DONTWAIT);
    if (n <= 0 && !(n < 0 && (errno == EINTR || errno == EAGAIN))) break;
    if (n > 0) dropped += static_cast<std::size_t>(n);
  }
}

// Reads until the bytes in buf_ say what the connection is. Explicit
// clients must send a request head. Transparent ones (and tunnels after
// CONNECT), `lenient`, may send anything: what is neither TLS nor HTTP is
// tcp at once. A client that has sent nothing for first_bytes_timeout (a
// protocol where the server speaks first) is tcp too, if `quiet_is_tcp`:
// a tcp rule allows the destination, so classifying early changes no
// decision. A client that has started a TLS record or an HTTP request line
// stays that protocol however long it pauses: judged as tcp, a request
// whose Host or SNI names a denied host would reach that host's address
// anyway. It may take until the head deadline: a slow TLS or HTTP client is
// never refused for its pace.
Session::First Session::read_first(bool lenient, bool quiet_is_tcp,
                                   std::chrono::milliseconds head_timeout) {
  const auto head_deadline = Clock::now() + head_timeout;
  const auto stall = px_.options.first_bytes_timeout;
  auto first_deadline = std::min(head_deadline, Clock::now() + stall);
  bool read_at_once = true;
  for (;;) {
    if (!buf_.empty()) {
      if (looks_like_tls(buf_)) {
        hello_ = parse_client_hello(buf_);
        if (hello_.status == TlsHelloStatus::kClientHello) return First::kTls;
        if (hello_.status == TlsHelloStatus::kMalformed) {
          refuse(EgressRefusal::kMalformed, "malformed TLS ClientHello: " + hello_.error);
          return First::kFailed;
        }
        if (buf_.size() >= kMaxFirstBytes) {
          refuse(EgressRefusal::kMalformed,
                 "TLS ClientHello larger than " + std::to_string(kMaxFirstBytes) + " bytes");
          return First::kFailed;
        }
      } else {
        HttpStart s = classify_http_start(buf_);
        if (s == HttpStart::kRequestLine) {
          std::size_t limit = std::min(buf_.size(), kMaxProxyHeadBytes);
          std::size_t end = std::string_view(buf_.data(), limit).find("\r\n\r\n");
          if (end != std::string_view::npos) {
            head_end_ = end + 4;
            return First::kHttp;
          }
          if (buf_.size() >= kMaxProxyHeadBytes) {
            http_answer_pending_ = true;
            refuse(EgressRefusal::kMalformed,
                   "request head longer than " + std::to_string(kMaxProxyHeadBytes) + " bytes",
                   400);
            return First::kFailed;
          }
        } else if (s == HttpStart::kNotHttp) {
          if (lenient) return First::kTcp;
          refuse(EgressRefusal::kMalformed,
                 "not a proxy request: expected CONNECT host:port or an http:// URL");
          return First::kFailed;
        }
      }
    }
    // More bytes are needed. The first time, they are most often there
    // already (a client sends its request right after connecting): read
    // before waiting, and wait only if that found nothing.
    // Whatever is in buf_ here may still become a ClientHello or a request
    // head (the rest returned above): only a client that sent nothing yet
    // can be judged quiet.
    auto deadline = lenient && quiet_is_tcp && buf_.empty() ? first_deadline : head_deadline;
    int w = read_at_once ? 1 : wait_fd(client_, POLLIN, deadline);
    read_at_once = false;
    if (w == 0) {
      // Quiet: the server speaks first. A silent client is judged as tcp
      // (the decision says why it is refused, if it is).
      if (lenient && buf_.empty()) return First::kTcp;
      refuse(EgressRefusal::kTimeout,
             std::string(lenient ? "no complete TLS ClientHello or HTTP request head"
                                 : "no complete request") +
                 " within " + std::to_string(head_timeout.count()) + " ms");
      return First::kFailed;
    }
    std::size_t old = buf_.size();
    buf_.resize(old + kReadChunk);
    ssize_t n = w < 0 ? -1 : ::recv(client_, buf_.data() + old, kReadChunk, MSG_DONTWAIT);
    int err = errno;
    buf_.resize(old + (n > 0 ? static_cast<std::size_t>(n) : 0));
    if (n < 0 && (err == EINTR || err == EAGAIN)) continue;
    if (n == 0 && lenient && !cut()) return First::kTcp;  // half-closed: what it sent is all
    if (n <= 0) {
      refuse(EgressRefusal::kMalformed, n == 0 ? "client closed before a complete request"
                                               : "client connection failed before a request");
      return First::kFailed;
    }
    first_deadline = std::min(head_deadline, Clock::now() + stall);
  }
}

// Decides, resolves, checks the addresses and connects. On failure the
// refusal is recorded (and answered when the client waits for HTTP).
bool Session::route(const Target& t, const std::shared_ptr<const NetworkPolicy>& policy,
                    Verdict& v) {
  v = decide_target(*policy, t);
  ev_.rule = v.rule;
  if (!v.allowed) {
    refuse(EgressRefusal::kDenied, v.reason, 403);
    return false;
  }
  std::vector<IpAddress> candidates;
  if (v.via_name) {
    // Always connect to what the PROXY resolves for the name, never to the
    // address the sandbox chose: a sandbox cannot send an allowed SNI or
    // Host to an address of its choosing (and corral's DNS may not even
    // have been asked).
    const std::string& name = t.names.front();
    // A sandbox with DNS servers of its own resolves through them here too.
    std::shared_ptr<Resolver> resolver = px_.resolver_for(policy->dns_servers);
    auto addrs = resolver != nullptr ? resolver->resolve(name, policy->request_timeout)
                                     : Result<std::vector<IpAddress>>(make_error(
                                           ErrorCode::kUnavailable, "no resolver configured"));
    if (!addrs || addrs->empty()) {
      refuse(EgressRefusal::kResolveFailed,
             "cannot resolve " + name + ": " +
                 (addrs ? std::string("no addresses") : addrs.error().to_string()),
             502);
      return false;
    }
    std::string first_refusal;
    for (const auto& raw : *addrs) {
      IpAddress a = raw.unmapped();
      Decision c = check_address(*policy, a, t.port, t.protocol);
      if (c.allowed) {
        if (std::find(candidates.begin(), candidates.end(), a) == candidates.end())
          candidates.push_back(a);
      } else if (first_refusal.empty()) {
        first_refusal = name + " resolved to " + a.str() + ": " + c.reason;
        ev_.address = a.str();
      }
    }
    if (candidates.empty()) {
      refuse(EgressRefusal::kAddress, first_refusal, 403);
      return false;
    }
  } else {
    Decision c = check_address(*policy, *t.address, t.port, t.protocol);
    if (!c.allowed) {
      ev_.address = t.address->str();
      refuse(EgressRefusal::kAddress, c.reason, 403);
      return false;
    }
    candidates.push_back(*t.address);
  }
  return connect_upstream(candidates, t.port, *policy);
}

bool Session::connect_upstream(const std::vector<IpAddress>& candidates, std::uint16_t port,
                               const NetworkPolicy& policy) {
  const auto deadline = Clock::now() + policy.request_timeout;
  std::string last_error = "no address";
  bool timed_out = false;
  for (const auto& a : candidates) {
    ev_.address = a.str();
    if (cut()) break;
    UniqueFd fd(::socket(a.v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                         IPPROTO_TCP));
    if (!fd) {
      last_error = "socket: " + std::string(errno_name(errno));
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(px_.mu);
      if (conn_.cut_done) break;
      conn_.upstream = fd.get();
    }
    const ConnectResult c = connect_until(fd.get(), a, port, deadline, client_);
    const int err = c.err;
    timed_out = timed_out || c.timed_out;
    if (err == 0) {
      set_nodelay(fd.get());
      upstream_ = std::move(fd);
      connected_ = a;
      return true;
    }
    {
      std::lock_guard<std::mutex> lock(px_.mu);
      conn_.upstream = -1;
    }
    last_error = "connect to " + Endpoint{a, port}.str() + ": " + std::string(errno_name(err));
    if (timed_out || Clock::now() >= deadline) {
      timed_out = true;
      break;
    }
  }
  if (timed_out) {
    refuse(EgressRefusal::kConnectFailed,
           "connect timed out after " + std::to_string(policy.request_timeout.count()) + " ms (" +
               last_error + ")",
           504);
  } else {
    refuse(EgressRefusal::kConnectFailed, last_error, 502);
  }
  return false;
}

// Registers the connection for set_policy and checks that the policy did
// not change while it was being decided.
bool Session::start_relay(const Target& t, const std::shared_ptr<const NetworkPolicy>& used) {
  std::lock_guard<std::mutex> lock(px_.mu);
  if (conn_.cut_done) return false;
  const auto& now = conn_.sandbox->policy;
  if (now.get() != used.get()) {
    Verdict v = reevaluate(*now, t, connected_);
    if (!v.allowed) {
      ev_.allowed = false;
      ev_.refusal = EgressRefusal::kPolicyChanged;
      ev_.reason = "policy changed: " + one_line(v.reason);
      ev_.rule = v.rule;
      return false;
    }
  }
  conn_.relaying = true;
  conn_.target = t;
  conn_.connected = connected_;
  ev_.allowed = true;
  return true;
}

bool same_host(const std::string& a, const std::string& b) { return a == b; }

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

EgressEvent Session::run() {
  ev_.sandbox = conn_.sandbox->id;
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(client_, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    if (auto e = endpoint_of(ss)) local_ = *e;
  }
  // The destination the sandbox asked for, before the firewall's redirect.
  // Without a NAT entry (a client that connected to the proxy itself) there
  // is none, or it is the proxy's own address: an explicit client.
  original_ = local_;
  sockaddr_in orig{};
  socklen_t olen = sizeof orig;
  if (!local_.address.v6 && ::getsockopt(client_, SOL_IP, kSoOriginalDst, &orig, &olen) == 0 &&
      orig.sin_family == AF_INET) {
    sockaddr_storage os{};
    std::memcpy(&os, &orig, sizeof orig);
    if (auto e = endpoint_of(os)) original_ = *e;
  }
  const bool transparent = !(original_ == local_);
  ev_.explicit_proxy = !transparent;
  if (transparent) {
    ev_.original_address = original_.address.str();
    ev_.port = original_.port;
  }
  const auto policy_now = policy();
  // The internal-service gateway (gateway.h) listens on the host end's port 80.
  if (transparent && px_.options.gateway && original_.address == local_.address &&
      original_.port == 80)
    return to_gateway({});
  const auto head_timeout = std::min(px_.options.head_timeout, policy_now->request_timeout);

  // Whether a tcp rule allows the destination as it is: then a quiet
  // client need not be waited for (see read_first).
  bool quiet_is_tcp = false;
  std::vector<std::string> dns_names;
  if (transparent) {
    if (px_.answers) dns_names = px_.answers->names_for(conn_.sandbox->id, original_.address);
    Target tcp_target;
    tcp_target.names = dns_names;
    tcp_target.names_from_dns = true;
    tcp_target.address = original_.address;
    tcp_target.port = original_.port;
    tcp_target.protocol = kTcp;
    tcp_target.address_fallback = true;
    quiet_is_tcp = decide_target(*policy_now, tcp_target).allowed;
  }
  First first = read_first(transparent, quiet_is_tcp, head_timeout);
  if (first == First::kFailed) return ev_;

  if (first == First::kHttp) {
    http_answer_pending_ = true;
    set_protocol(kHttp);
    auto req = parse_proxy_request(std::string_view(buf_).substr(0, head_end_));
    if (!req) {
      refuse(EgressRefusal::kMalformed, req.error().message, 400);
      return ev_;
    }
    if (!transparent && px_.options.gateway && req->form == ProxyRequest::kAbsolute &&
        req->target_host == kGatewayHost)
      return to_gateway(std::move(buf_));  // an explicit client's gateway request
    if (req->form == ProxyRequest::kConnect) {
      handle_connect(*req);
    } else if (req->form == ProxyRequest::kOrigin && !transparent) {
      refuse(EgressRefusal::kMalformed,
             "this is corral's egress proxy: send CONNECT host:port or an http:// URL", 400);
    } else {
      handle_http(*req, transparent);
    }
    return ev_;
  }

  if (!transparent) {
    refuse(EgressRefusal::kMalformed,
           "not a proxy request: expected CONNECT host:port or an http:// URL");
    return ev_;
  }
  Target t;
  t.address = original_.address;
  t.port = original_.port;
  t.address_fallback = true;
  if (first == First::kTls) {
    set_protocol(kTls);
    t.protocol = kTls;
    ev_.sni = hello_.sni;
    if (hello_.has_sni) t.names.push_back(hello_.sni);
  } else {
    set_protocol(kTcp);
    t.protocol = kTcp;
    t.names = std::move(dns_names);
    t.names_from_dns = true;
  }
  ev_.name = joined(t.names);
  if (!conn_.rate_ok) {
    refuse(EgressRefusal::kRateLimited, "rate limited: too many new connections");
    return ev_;
  }
  Verdict v;
  if (!route(t, policy_now, v)) return ev_;
  if (!start_relay(t, policy_now)) return ev_;
  ev_.reason = v.reason;
  if (first == First::kTls && hello_.has_sni && v.via_name &&
      wants_interception(hello_.sni, original_.port)) {
    intercept(hello_.sni, original_.port, std::move(buf_));
    return ev_;
  }
  relay(std::move(buf_), {}, RequestFraming::kNone, 0);
  return ev_;
}

// A plain HTTP request: origin form (transparent) or absolute form (an
// explicit client, or a transparent one that thinks it talks to a proxy).
bool Session::handle_http(const ProxyRequest& req, bool transparent) {
  Target t;
  t.protocol = kHttp;
  if (req.host_header) ev_.host = *req.host_header;
  std::string name;
  if (req.form == ProxyRequest::kAbsolute) {
    ev_.connect_host = req.target_host;
    name = req.target_host;
    t.port = req.target_port;
    ev_.port = t.port;
    if (req.host_header && !same_host(*req.host_header, req.target_host)) {
      ev_.name = name;
      refuse(EgressRefusal::kMismatch,
             "Host " + *req.host_header + " does not match the URL's host " + req.target_host, 403);
      return false;
    }
  } else {
    t.port = original_.port;
    t.address = original_.address;
    t.address_fallback = true;
    if (req.host_header) name = *req.host_header;
  }
  if (!name.empty() && is_ip_literal(name)) {
    auto literal = IpAddress::parse(name);
    if (transparent && req.form == ProxyRequest::kOrigin && !(*literal == original_.address)) {
      refuse(EgressRefusal::kMismatch,
             "Host " + name + " is not the address connected to (" + original_.address.str() + ")",
             403);
      return false;
    }
    t.address = literal;
    t.address_fallback = false;
  } else if (!name.empty()) {
    t.names.push_back(name);
  }
  ev_.name = name;
  if (!conn_.rate_ok) {
    refuse(EgressRefusal::kRateLimited, "rate limited: too many new connections", 429);
    return false;
  }
  const auto used = policy();
  Verdict v;
  if (!route(t, used, v)) return false;
  if (!start_relay(t, used)) {
    if (ev_.refusal == EgressRefusal::kPolicyChanged) refuse(ev_.refusal, ev_.reason, 403);
    return false;
  }
  ev_.reason = v.reason;
  std::string head = req.upstream_head;
  bool secret_head = false;
  const std::string swap_host = !name.empty() ? name : t.address ? t.address->str() : "";
  if (!swap_plain(swap_host, t.port, head, secret_head, req.head)) return false;
  http_answer_pending_ = false;
  relay(std::move(head), buf_.substr(head_end_),
        req.head.chunked ? RequestFraming::kChunked : RequestFraming::kLength,
        req.head.content_length.value_or(0), secret_head);
  return true;
}

bool Session::handle_connect(const ProxyRequest& req) {
  ev_.connect_host = req.target_host;
  ev_.name = req.target_host;
  ev_.port = req.target_port;
  ev_.protocol.clear();
  if (!conn_.rate_ok) {
    refuse(EgressRefusal::kRateLimited, "rate limited: too many new connections", 429);
    return false;
  }
  Target t;
  t.port = req.target_port;
  if (is_ip_literal(req.target_host)) {
    t.address = IpAddress::parse(req.target_host);
  } else {
    t.names.push_back(req.target_host);
  }
  // Before the tunnel is open only the name and port are known: refuse at
  // once (with a 403 the client can show) unless some protocol is allowed
  // there; the protocol decides once the first bytes through the tunnel
  // show what it carries.
  auto used = policy();
  Verdict best;
  for (Protocol p : {kTls, kHttp, kTcp}) {
    t.protocol = p;
    Verdict v = decide_target(*used, t);
    if (v.allowed) {
      best = v;
      break;
    }
    if (p == kTls) best = v;
  }
  if (!best.allowed) {
    ev_.rule = best.rule;
    refuse(EgressRefusal::kDenied, best.reason, 403);
    return false;
  }
  Verdict routed;
  if (!route(t, used, routed)) return false;

  if (!send_all(client_, "HTTP/1.1 200 Connection established\r\n\r\n",
                Clock::now() + used->request_timeout)) {
    refuse(EgressRefusal::kMalformed, "client went away before the tunnel opened");
    return false;
  }
  http_answer_pending_ = false;
  // What the client sent after the CONNECT head already belongs to the tunnel.
  buf_.erase(0, head_end_);
  head_end_ = 0;
  ev_.protocol.clear();
  Target tcp_target = t;
  tcp_target.protocol = kTcp;
  First first =
      read_first(true, decide_target(*used, tcp_target).allowed,
                 std::min(px_.options.head_timeout, used->request_timeout));
  if (first == First::kFailed) return false;

  RequestFraming framing = RequestFraming::kNone;
  std::uint64_t length = 0;
  std::string head, body;
  http::RequestHead inner_head;  // HTTP inside the tunnel: its parsed head
  const std::string& host = req.target_host;
  if (first == First::kTls) {
    set_protocol(kTls);
    t.protocol = kTls;
    ev_.sni = hello_.sni;
    if (hello_.has_sni && !same_host(hello_.sni, host)) {
      refuse(EgressRefusal::kMismatch,
             "TLS SNI " + hello_.sni + " does not match the CONNECT host " + host);
      return false;
    }
    head = std::move(buf_);
  } else if (first == First::kHttp) {
    set_protocol(kHttp);
    t.protocol = kHttp;
    auto inner = parse_proxy_request(std::string_view(buf_).substr(0, head_end_));
    if (!inner || inner->form == ProxyRequest::kConnect) {
      refuse(EgressRefusal::kMalformed,
             inner ? std::string("CONNECT inside a CONNECT tunnel") : inner.error().message);
      return false;
    }
    if (inner->host_header) ev_.host = *inner->host_header;
    if (inner->form == ProxyRequest::kAbsolute && !same_host(inner->target_host, host)) {
      refuse(EgressRefusal::kMismatch,
             "URL host " + inner->target_host + " does not match the CONNECT host " + host);
      return false;
    }
    if (inner->host_header && !same_host(*inner->host_header, host)) {
      refuse(EgressRefusal::kMismatch,
             "HTTP Host " + *inner->host_header + " does not match the CONNECT host " + host);
      return false;
    }
    head = inner->upstream_head;
    inner_head = inner->head;
    body = buf_.substr(head_end_);
    framing = inner->head.chunked ? RequestFraming::kChunked : RequestFraming::kLength;
    length = inner->head.content_length.value_or(0);
  } else {
    set_protocol(kTcp);
    t.protocol = kTcp;
    head = std::move(buf_);
  }
  // Now with the protocol the tunnel carries (the policy may have changed
  // meanwhile: start_relay re-checks against the current one).
  Verdict v = decide_target(*used, t);
  ev_.rule = v.rule;
  if (!v.allowed) {
    refuse(EgressRefusal::kDenied, v.reason);
    return false;
  }
  if (!start_relay(t, used)) return false;
  ev_.reason = v.reason;
  if (first == First::kTls && routed.via_name && wants_interception(host, req.target_port)) {
    intercept(host, req.target_port, std::move(head));
    return true;
  }
  bool secret_head = false;
  if (first == First::kHttp) {
    http_answer_pending_ = true;  // the client waits for an answer inside the tunnel
    if (!swap_plain(host, req.target_port, head, secret_head, inner_head)) return false;
    http_answer_pending_ = false;
  }
  relay(std::move(head), std::move(body), framing, length, secret_head);
  return true;
}

// --- The data phase ---------------------------------------------------------

void Session::relay(std::string head, std::string body, RequestFraming framing,
                    std::uint64_t length, bool secret_head) {
  if (secret_head && reflection_) {
    relay_swapped_request(std::move(head), std::move(body), framing, length);
    return;
  }
  std::uint64_t head_sent = 0;
  if (secret_head) {
    // The relay keeps its head in buffers of its own: a head that holds a
    // secret goes out from here, and is wiped at once.
    const bool sent =
        send_all(upstream_.get(), head, Clock::now() + policy()->request_timeout, client_);
    head_sent = sent ? head.size() : 0;
    secrets::wipe(head);
    if (!sent) {
      ev_.end = "sending the request head failed";
      return;
    }
  }
  RelaySpec spec;
  spec.client = client_;
  spec.upstream = upstream_.get();
  spec.head = std::move(head);
  spec.body = std::move(body);
  spec.framing = framing;
  spec.length = length;
  spec.idle_timeout = policy()->request_timeout;
  spec.half_close_timeout = px_.options.half_close_timeout;
  spec.pipe_bytes = px_.options.pipe_bytes;
  spec.batch_bytes = px_.options.batch_bytes;
  spec.unsent_bytes = px_.options.unsent_bytes;
  spec.client_sndbuf_bytes = px_.options.client_sndbuf_bytes;
  set_nodelay(client_);  // the proxy adds no coalescing delay of its own
  RelayResult r = relay_connection(std::move(spec));
  ev_.bytes_up = r.bytes_up + head_sent;
  ev_.bytes_down = r.bytes_down;
  ev_.end = std::move(r.end);
}

// --- Broker mode (issue 5) ---------------------------------------------------

bool Session::wants_interception(const std::string& host, std::uint16_t port) const {
  const auto& o = px_.options;
  return o.swapper && o.ca && px_.upstream_tls && !host.empty() &&
         o.swapper->intercepts(conn_.sandbox->id, host, port);
}

void Session::relay_swapped_request(std::string head, std::string body, RequestFraming framing,
                                    std::uint64_t length) {
  SwappedRelaySpec spec;
  spec.client = client_;
  spec.upstream = upstream_.get();
  spec.head = std::move(head);
  spec.body = std::move(body);
  spec.framing = framing;
  spec.length = length;
  spec.idle_timeout = policy()->request_timeout;
  spec.reflection = reflection_;
  spec.scrub = scrub_;
  spec.expect_continue = expect_continue_;
  set_nodelay(client_);
  SwappedRelayResult r = relay_swapped(std::move(spec));
  ev_.bytes_up = r.relay.bytes_up;
  ev_.bytes_down = r.relay.bytes_down;
  ev_.end = std::move(r.relay.end);
  if (r.refused) {
    // An answer corral could not check for the secret (compressed): not
    // relayed, and a 502 if the client has had nothing yet.
    http_answer_pending_ = !r.answered;
    refuse(EgressRefusal::kSecretRefused, ev_.end, 502);
  }
}

bool Session::swap_plain(const std::string& host, std::uint16_t port, std::string& head,
                         bool& secret_head, const http::RequestHead& request) {
  secret_head = false;
  if (!px_.options.swapper) return true;
  secrets::OutboundRequest out{conn_.sandbox->id, host, port, "http"};
  secrets::SwapResult r = px_.options.swapper->swap(out, head);
  if (r.outcome == secrets::SwapOutcome::kRefused) {
    ev_.secrets = r.secrets;
    std::string names = joined(r.secrets);
    refuse(EgressRefusal::kSecretRefused,
           "the token of secret " + names + " may not be sent to " + host + ":" +
               std::to_string(port) + " in plain HTTP" +
               (r.reason.empty() ? "" : " (" + r.reason + ")"),
           403);
    return false;
  }
  if (r.outcome == secrets::SwapOutcome::kSwapped) {
    ev_.secrets = r.secrets;
    secret_head = true;
    // The answer is scanned for what went in: uncompressed, and nothing is
    // sent when the scan cannot be set up.
    auto set = secrets::reflection_set(r.swapped);
    if (!set) {
      secrets::wipe(head);
      refuse(EgressRefusal::kSecretRefused,
             "the answer could not be checked for the secret: " + set.error().message, 502);
      return false;
    }
    reflection_ = std::move(*set);
    scrub_ = {request.method == "HEAD", request.version_minor >= 1};
    expect_continue_ = request.expect_continue &&
                       (request.chunked || request.content_length.value_or(0) > 0);
    if (reflection_) secrets::ask_identity_encoding(head);
  }
  return true;
}

void Session::intercept(const std::string& host, std::uint16_t port, std::string client_hello) {
  ev_.intercepted = true;
  auto leaf = px_.options.ca->leaf_for(host);
  if (!leaf) {
    refuse(EgressRefusal::kMalformed, "no certificate for " + host + ": " + leaf.error().message);
    return;
  }
  const auto p = policy();
  InterceptSpec spec;
  spec.sandbox = conn_.sandbox->id;
  spec.host = host;
  spec.port = port;
  spec.client = client_;
  spec.upstream = upstream_.get();
  spec.client_hello = std::move(client_hello);
  spec.leaf = std::move(*leaf);
  spec.upstream_ctx = px_.upstream_tls.get();
  spec.swapper = px_.options.swapper.get();
  spec.head_timeout = std::min(px_.options.head_timeout, p->request_timeout);
  spec.idle_timeout = p->request_timeout;
  set_nodelay(client_);
  InterceptResult r = relay_intercepted(std::move(spec));
  ev_.bytes_up = r.bytes_up;
  ev_.bytes_down = r.bytes_down;
  ev_.secrets = std::move(r.secrets);
  if (!r.method.empty()) ev_.host = host;
  switch (r.outcome) {
    case InterceptOutcome::kRelayed:
      ev_.end = r.end;
      break;
    case InterceptOutcome::kNoRequest:
    case InterceptOutcome::kClientTls:
      ev_.end = r.reason;  // allowed; the sandbox sent nothing to forward
      break;
    case InterceptOutcome::kUpstreamTls:
      refuse(EgressRefusal::kUpstreamTls, r.reason);
      break;
    case InterceptOutcome::kSecretRefused:
      refuse(EgressRefusal::kSecretRefused, r.reason);
      break;
    case InterceptOutcome::kMismatch:
      refuse(EgressRefusal::kMismatch, r.reason);
      break;
    case InterceptOutcome::kMalformed:
      refuse(EgressRefusal::kMalformed, r.reason);
      break;
    case InterceptOutcome::kTimeout:
      refuse(EgressRefusal::kTimeout, r.reason);
      break;
  }
}

}  // namespace

// --- Threads and registry -----------------------------------------------------

// Leader/followers: idle workers wait in epoll_wait on the listeners
// themselves, and the one woken for a connection accepts and serves it;
// there is no acceptor thread to hand off from (one wake-up less per
// connection). The listeners are one-shot, so one connection wakes one
// worker; the accepting worker re-arms its listener at once. There is
// always a worker waiting: the one that takes the last waiting place
// starts another before it serves.
void EgressProxy::Impl::worker() {
  // splice(2) into a socket whose peer is gone raises SIGPIPE (it has no
  // MSG_NOSIGNAL); blocked on these threads, whatever the process does
  // with it (relay_connection also blocks it while it runs).
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &block, nullptr);
  const int linger_ms =
      static_cast<int>(std::chrono::duration_cast<milliseconds>(kIdleThreadLinger).count());
  std::unique_lock<std::mutex> lock(mu);
  while (!stopping) {
    ++idle;
    lock.unlock();
    epoll_event ev{};
    int n = ::epoll_wait(epoll_fd.get(), &ev, 1, linger_ms);
    const std::uint64_t key = ev.data.u64;  // a copy: epoll_event is packed
    lock.lock();
    --idle;
    if (stopping) break;
    if (n == 0 && idle > 0) break;  // lingered long enough, and another worker waits
    if (n <= 0) continue;           // the last waiter stays; EINTR
    if (key == 0) break;            // stop_fd
    auto it = by_key.find(key);
    if (it == by_key.end()) continue;  // removed meanwhile
    std::optional<EgressEvent> refused;
    std::optional<Accepted> a = accept_one(it->second, refused);
    bool need_waiter = idle == 0 && a;
    if (need_waiter) ++threads;
    lock.unlock();
    if (need_waiter && !spawn_worker()) {
      // No new thread: this one waits again after serving (connections
      // queue in the listen backlog meanwhile).
      std::lock_guard<std::mutex> relock(mu);
      --threads;
    }
    if (refused) emit(*refused);
    if (a) serve(std::move(*a));
    lock.lock();
    if (idle >= kMaxIdleThreads) break;
  }
  // The thread's OpenSSL state (the gateway's HMAC leaves an error queue
  // behind) is freed now, before the owner can see the thread gone and
  // end, rather than by a thread-exit handler that may run after it.
  lock.unlock();
  OPENSSL_thread_stop();
  lock.lock();
  --threads;
  cv.notify_all();
}

bool EgressProxy::Impl::spawn_worker() {
  try {
    std::thread([this] { worker(); }).detach();
    return true;
  } catch (const std::system_error&) {
    return false;  // EAGAIN: out of threads
  }
}

// Under mu: accepts one connection and admits it, or refuses it for
// overload (then `refused` is its audit event). Re-arms the listener.
std::optional<Accepted> EgressProxy::Impl::accept_one(const std::shared_ptr<SandboxState>& sandbox,
                                                      std::optional<EgressEvent>& refused) {
  SandboxState& sb = *sandbox;
  if (!sb.listener) return std::nullopt;
  int fd = ::accept4(sb.listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  int err = errno;
  epoll_event rearm{};
  rearm.events = EPOLLIN | EPOLLONESHOT;
  rearm.data.u64 = sb.key;
  (void)::epoll_ctl(epoll_fd.get(), EPOLL_CTL_MOD, sb.listener.get(), &rearm);
  if (fd < 0) {
    if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
      // Out of fds or memory: pause instead of spinning on a ready listener.
      struct pollfd p = {stop_fd.get(), POLLIN, 0};
      ::poll(&p, 1, 20);
    }
    return std::nullopt;  // EAGAIN (taken by another worker), ECONNABORTED, ...
  }
  UniqueFd client(fd);
  ++metrics.connections;
  if (active >= options.max_connections || sb.open >= options.max_connections_per_sandbox) {
    ++metrics.refused[static_cast<std::size_t>(EgressRefusal::kOverloaded)];
    EgressEvent ev;
    ev.sandbox = sb.id;
    ev.refusal = EgressRefusal::kOverloaded;
    ev.reason = active >= options.max_connections
                    ? "too many open connections (" + std::to_string(options.max_connections) + ")"
                    : "too many open connections for this sandbox (" +
                          std::to_string(options.max_connections_per_sandbox) + ")";
    refused = std::move(ev);
    return std::nullopt;  // closed here: a reset, before anything was read
  }
  auto conn = std::make_unique<Conn>();
  conn->sandbox = sandbox;
  conn->client = fd;
  conn->rate_ok = sb.bucket.take(sb.policy->rate, Clock::now());
  sb.conns.insert(conn.get());
  ++sb.live;
  ++sb.open;
  ++active;
  return Accepted{std::move(conn), std::move(client), Clock::now()};
}

void EgressProxy::Impl::serve(Accepted a) {
  Conn& conn = *a.conn;
  Session session(*this, conn, a.fd.get());
  EgressEvent ev = session.run();
  UniqueFd upstream = session.take_upstream();
  ev.duration_ms = ms_since(a.at);
  {
    std::lock_guard<std::mutex> lock(mu);
    // Unregistered before the fds close: nobody may shut down an fd number
    // that was closed and reused meanwhile.
    conn.sandbox->conns.erase(&conn);
    conn.client = -1;
    conn.upstream = -1;
    if (conn.cut_done) {
      // Closed from outside: that is the story, whatever the session saw.
      if (ev.allowed) {
        if (conn.cut == EgressRefusal::kPolicyChanged) ev.refusal = EgressRefusal::kPolicyChanged;
      } else {
        ev.refusal = conn.cut;
        ev.reason = conn.cut_reason;
      }
      ev.end = conn.cut_reason;
    }
    --active;  // open connections; `live` (below) also covers the audit
    --conn.sandbox->open;
    if (ev.allowed) ++metrics.relayed;
    if (ev.refusal != EgressRefusal::kNone) ++metrics.refused[static_cast<std::size_t>(ev.refusal)];
    metrics.bytes_up += ev.bytes_up;
    metrics.bytes_down += ev.bytes_down;
  }
  upstream.reset();
  a.fd.reset();
  if (!session.gateway_served()) emit(ev);
  std::lock_guard<std::mutex> lock(mu);
  --conn.sandbox->live;
  cv.notify_all();
}

// --- Public API ----------------------------------------------------------------

EgressProxy::EgressProxy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<EgressProxy>> EgressProxy::start(std::shared_ptr<Resolver> resolver,
                                                        std::shared_ptr<DnsAnswers> answers,
                                                        EgressAuditSink audit,
                                                        EgressProxyOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->resolver = std::move(resolver);
  impl->answers = std::move(answers);
  impl->audit = std::move(audit);
  impl->options = options;
  impl->options.max_connections = std::max<std::size_t>(impl->options.max_connections, 1);
  if (impl->options.swapper && impl->options.ca) {
    auto ctx = make_upstream_tls_context(impl->options.upstream_ca_file);
    if (!ctx) return tl::unexpected(ctx.error().wrap("TLS interception"));
    impl->upstream_tls = std::move(*ctx);
  }
  impl->epoll_fd.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!impl->epoll_fd) return errno_error("epoll_create1");
  impl->stop_fd.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl->stop_fd) return errno_error("eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  if (::epoll_ctl(impl->epoll_fd.get(), EPOLL_CTL_ADD, impl->stop_fd.get(), &ev) != 0)
    return errno_error("epoll_ctl(ADD, eventfd)");
  impl->threads = 1;
  if (!impl->spawn_worker())
    return make_error(ErrorCode::kResourceExhausted, "starting the egress proxy's first thread",
                      "the process is out of threads");
  return std::unique_ptr<EgressProxy>(new EgressProxy(std::move(impl)));
}

EgressProxy::~EgressProxy() {
  Impl& s = *impl_;
  std::unique_lock<std::mutex> lock(s.mu);
  s.stopping = true;
  // Wakes every waiting worker, now and later (never read: stays readable).
  std::uint64_t one = 1;
  ssize_t w = ::write(s.stop_fd.get(), &one, sizeof one);
  (void)w;
  for (auto& [id, sb] : s.by_id) {
    sb->removed = true;
    if (sb->listener) {
      (void)::epoll_ctl(s.epoll_fd.get(), EPOLL_CTL_DEL, sb->listener.get(), nullptr);
      sb->listener.reset();
    }
    for (Conn* c : sb->conns) cut_conn(*c, EgressRefusal::kNone, "proxy stopped");
  }
  s.cv.wait(lock, [&] { return s.active == 0 && s.threads == 0; });
  s.by_id.clear();
  s.by_key.clear();
}

Result<std::uint16_t> EgressProxy::add_sandbox(const std::string& id, const std::string& address,
                                               std::uint16_t port,
                                               std::shared_ptr<const NetworkPolicy> policy) {
  if (!policy) return make_error(ErrorCode::kInvalidArgument, "add_sandbox: no policy");
  auto ip = IpAddress::parse(address);
  if (!ip)
    return make_error(ErrorCode::kInvalidArgument,
                      "egress proxy address \"" + address + "\" is not a numeric IP address");
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->by_id.count(id))
      return make_error(ErrorCode::kAlreadyExists,
                        "sandbox " + id + " already has an egress proxy listener");
  }
  const std::string where = Endpoint{*ip, port}.str();
  UniqueFd fd(::socket(ip->v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                       IPPROTO_TCP));
  if (!fd) return errno_error("socket for the egress proxy on " + where);
  int one = 1;
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ip->v6) (void)::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  sockaddr_storage ss;
  socklen_t len = to_sockaddr(*ip, port, ss);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0)
    return errno_error("bind(" + where + ") for the egress proxy", errno,
                       errno == EADDRINUSE ? "another listener holds this address and port" : "");
  if (::listen(fd.get(), 1024) != 0) return errno_error("listen(" + where + ")");
  sockaddr_storage bound{};
  socklen_t blen = sizeof bound;
  std::uint16_t bound_port = port;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &blen) == 0) {
    if (auto e = endpoint_of(bound)) bound_port = e->port;
  }

  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->by_id.count(id))
    return make_error(ErrorCode::kAlreadyExists,
                      "sandbox " + id + " already has an egress proxy listener");
  auto sb = std::make_shared<SandboxState>();
  sb->id = id;
  sb->key = impl_->next_key++;
  sb->policy = std::move(policy);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLONESHOT;
  ev.data.u64 = sb->key;
  if (::epoll_ctl(impl_->epoll_fd.get(), EPOLL_CTL_ADD, fd.get(), &ev) != 0)
    return errno_error("epoll_ctl(ADD) for " + where);
  sb->listener = std::move(fd);
  impl_->by_key[sb->key] = sb;
  impl_->by_id[id] = std::move(sb);
  return bound_port;
}

bool EgressProxy::remove_sandbox(const std::string& id) {
  Impl& s = *impl_;
  std::unique_lock<std::mutex> lock(s.mu);
  auto it = s.by_id.find(id);
  if (it == s.by_id.end()) return false;
  std::shared_ptr<SandboxState> sb = it->second;
  s.by_id.erase(it);
  s.by_key.erase(sb->key);
  sb->removed = true;
  if (sb->listener) {
    (void)::epoll_ctl(s.epoll_fd.get(), EPOLL_CTL_DEL, sb->listener.get(), nullptr);
    sb->listener.reset();
  }
  for (Conn* c : sb->conns) cut_conn(*c, EgressRefusal::kNone, "sandbox removed");
  s.cv.wait(lock, [&] { return sb->live == 0; });
  return true;
}

Status EgressProxy::set_policy(const std::string& id, std::shared_ptr<const NetworkPolicy> policy) {
  if (!policy) return make_error(ErrorCode::kInvalidArgument, "set_policy: no policy");
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->by_id.find(id);
  if (it == impl_->by_id.end())
    return make_error(ErrorCode::kNotFound, "sandbox " + id + " has no egress proxy listener");
  SandboxState& sb = *it->second;
  const std::shared_ptr<const NetworkPolicy> before = sb.policy;
  sb.policy = std::move(policy);
  // A gateway connection may carry requests to any service granted when it
  // started: once a grant is withdrawn (or the network is), it goes.
  const auto& now = sb.policy->gateway_services;
  bool grant_lost = sb.policy->mode == NetworkMode::kNone;
  for (const auto& g : before->gateway_services)
    grant_lost |= std::find(now.begin(), now.end(), g) == now.end();
  for (Conn* c : sb.conns) {
    if (c->gateway) {
      if (grant_lost)
        cut_conn(*c, EgressRefusal::kPolicyChanged,
                 "policy changed: a gateway grant was withdrawn");
      continue;
    }
    if (!c->relaying) continue;  // checked against the new policy when it starts relaying
    Verdict v = reevaluate(*sb.policy, c->target, c->connected);
    if (!v.allowed) cut_conn(*c, EgressRefusal::kPolicyChanged, "policy changed: " + v.reason);
  }
  return ok();
}

EgressMetrics EgressProxy::metrics() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  EgressMetrics m = impl_->metrics;
  m.active = impl_->active;
  return m;
}

std::size_t EgressProxy::active_connections(const std::string& id) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->by_id.find(id);
  return it == impl_->by_id.end() ? 0 : it->second->open;
}

}  // namespace corral::net
