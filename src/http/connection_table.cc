#include "http/connection_table.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

namespace corral::http {

ConnectionTable::ConnectionTable(const ConnectionLimits& limits, bool authenticating)
    : limits_(limits), authenticating_(authenticating) {}

void ConnectionTable::count(const Slot& s, int delta) {
  auto add = [delta](std::size_t& n) { n = delta > 0 ? n + 1 : n - 1; };
  switch (s.budget) {
    case Slot::Budget::kUnix:
      add(unix_);
      break;
    case Slot::Budget::kTcpAuthenticated:
      add(tcp_);
      break;
    case Slot::Budget::kTcpUnauthenticated: {
      add(tcp_);
      add(unauth_);
      auto it = unauth_per_host_.try_emplace(s.host, 0).first;
      add(it->second);
      if (it->second == 0) unauth_per_host_.erase(it);
      break;
    }
  }
}

// An unauthenticated connection waiting for a head: of `only_host` if
// given, else of the host holding the most unauthenticated connections;
// the one idle longest. nullptr when every such connection is in a request.
ConnectionTable::Slot* ConnectionTable::evictable_victim(const std::string& only_host) const {
  const Slot* best = nullptr;
  std::size_t best_share = 0;
  for (const Slot& s : slots_) {
    if (s.budget != Slot::Budget::kTcpUnauthenticated || s.busy || s.evicted) continue;
    if (!only_host.empty() && s.host != only_host) continue;
    std::size_t share = unauth_per_host_.at(s.host);
    if (best == nullptr || share > best_share || (share == best_share && s.since < best->since)) {
      best = &s;
      best_share = share;
    }
  }
  return const_cast<Slot*>(best);
}

// Its thread sees end of stream (or a failed write) and closes it; it no
// longer counts from now on. No answer: the connection sent no complete
// request, and writing to a slow peer could block.
void ConnectionTable::evict(Slot* victim) {
  ::shutdown(victim->fd, SHUT_RDWR);
  count(*victim, -1);
  victim->evicted = true;
  ++evicted_;
}

ConnectionTable::Slot* ConnectionTable::admit(int fd, const Peer& peer) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot s;
  s.fd = fd;
  s.since = io::Clock::now();
  if (peer.kind == Peer::kUnix) {
    if (unix_ >= limits_.unix_socket) {
      ++refused_;
      return nullptr;
    }
    s.budget = Slot::Budget::kUnix;
  } else if (!authenticating_) {
    if (tcp_ >= limits_.tcp) {
      ++refused_;
      return nullptr;
    }
    s.budget = Slot::Budget::kTcpAuthenticated;
  } else {
    s.host = peer.host.empty() ? "(unknown)" : peer.host;  // "" means any host below
    auto share = unauth_per_host_.find(s.host);
    if (share != unauth_per_host_.end() && share->second >= limits_.unauthenticated_per_peer) {
      Slot* victim = evictable_victim(s.host);
      if (victim == nullptr) {
        ++refused_;
        return nullptr;
      }
      evict(victim);
    }
    if (unauth_ >= limits_.unauthenticated || tcp_ >= limits_.tcp) {
      Slot* victim = evictable_victim({});
      if (victim == nullptr) {
        ++refused_;
        return nullptr;
      }
      evict(victim);
    }
    s.budget = Slot::Budget::kTcpUnauthenticated;
  }
  slots_.push_back(std::move(s));
  Slot* slot = &slots_.back();
  slot->self = std::prev(slots_.end());
  count(*slot, +1);
  return slot;
}

bool ConnectionTable::begin_request(Slot* slot, bool authenticated) {
  std::lock_guard<std::mutex> lock(mu_);
  if (slot->evicted) return false;
  if (authenticated && slot->budget == Slot::Budget::kTcpUnauthenticated) {
    count(*slot, -1);
    slot->budget = Slot::Budget::kTcpAuthenticated;
    count(*slot, +1);
  }
  slot->busy = true;
  return true;
}

void ConnectionTable::end_request(Slot* slot) {
  std::lock_guard<std::mutex> lock(mu_);
  slot->busy = false;
  slot->since = io::Clock::now();
}

bool ConnectionTable::authenticated(const Slot* slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  return slot->budget != Slot::Budget::kTcpUnauthenticated;
}

void ConnectionTable::release(Slot* slot) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!slot->evicted) count(*slot, -1);
  ::close(slot->fd);
  slots_.erase(slot->self);
}

void ConnectionTable::shutdown_all() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Slot& s : slots_) ::shutdown(s.fd, SHUT_RDWR);
}

ConnectionStats ConnectionTable::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ConnectionStats st;
  st.unix_open = unix_;
  st.tcp_authenticated = tcp_ - unauth_;
  st.tcp_unauthenticated = unauth_;
  st.refused = refused_;
  st.evicted = evicted_;
  return st;
}

}  // namespace corral::http
