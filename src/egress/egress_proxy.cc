#include "egress/egress_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
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
#include <map>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "egress/egress_proxy_state.h"
#include "egress/egress_session.h"
#include "egress/socket_wait.h"
#include "egress/tls_stream.h"

// The listeners and the worker threads of the egress proxy, and its public
// API; one connection's work is a Session (egress_session.cc).
//
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
    case EgressRefusal::kDryRun:
      return "dry_run";
    case EgressRefusal::kCount:
      break;
  }
  return "?";
}

namespace {

using egress_detail::Clock;
using std::chrono::milliseconds;

constexpr std::size_t kMaxIdleThreads = 16;
constexpr std::chrono::seconds kIdleThreadLinger{5};

std::uint64_t ms_since(Clock::time_point t) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<milliseconds>(Clock::now() - t).count());
}

}  // namespace

using namespace egress_detail;

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
