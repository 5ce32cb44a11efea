// The state the egress proxy's threads share (egress_proxy.cc: the
// listeners and workers; egress_session.cc: one connection each): the
// registry of sandboxes with their policy and rate bucket, the admitted
// connections, the counters (all guarded by Impl::mu), and what is fixed
// at start (options, resolver, TLS context). Internal to src/egress.
#pragma once

#include <openssl/types.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "egress/egress_proxy.h"
#include "egress/egress_verdict.h"
#include "egress/upstream_resolver.h"

namespace corral::net {

// Types the Impl holds (a named namespace: Impl has external linkage).
namespace egress_detail {

using Clock = std::chrono::steady_clock;

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

inline void cut_conn(Conn& c, EgressRefusal why, std::string reason) {
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
  std::map<std::string, std::shared_ptr<egress_detail::SandboxState>> by_id;
  std::map<std::uint64_t, std::shared_ptr<egress_detail::SandboxState>> by_key;
  std::uint64_t next_key = 1;
  std::size_t active = 0;   // admitted, not yet closed
  std::size_t threads = 0;  // worker threads alive
  std::size_t idle = 0;     // of which waiting in epoll_wait
  bool stopping = false;
  EgressMetrics metrics;

  bool spawn_worker();
  void worker();
  std::optional<egress_detail::Accepted> accept_one(
      const std::shared_ptr<egress_detail::SandboxState>& sandbox,
      std::optional<EgressEvent>& refused);
  void serve(egress_detail::Accepted a);
  void emit(const EgressEvent& ev) {
    if (audit) audit(ev);
  }
};

}  // namespace corral::net
