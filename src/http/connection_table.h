// Which connections the server admits, and which it lets go to make room
// (issue 14: no lock-out by unauthenticated connections). Internal to
// src/http; http_server.cc asks it at accept, server_connection.cc tells it
// when a connection starts and ends a request and when one authenticates.
//
// Three budgets, counted apart:
//   - unix: connections on unix sockets. Who may connect is the socket
//     file's mode (the daemon's is 0600, root only), so these are never
//     "unauthenticated", and a TCP flood cannot take their room.
//   - tcp: every TCP connection, authenticated or not.
//   - unauthenticated: TCP connections none of whose requests has yet
//     passed ServerOptions::authenticate, at most `unauthenticated` in all
//     and `unauthenticated_per_peer` from one IP address.
// An unauthenticated connection must send each request head within the
// short unauthenticated_head_timeout (server_connection.cc), and once one
// of its requests authenticates it moves to the tcp budget for good (every
// later request is checked again by the handler, and a refused one closes
// the connection).
//
// Why an authenticated caller always gets in: unauthenticated connections
// are never allowed to make a newcomer wait. When a new TCP connection finds
// a budget full (its peer's share, the unauthenticated total, or all of
// tcp), the table closes an unauthenticated connection that is waiting for
// a request head (not one in the middle of a request) to make room: of its
// own peer when the per-peer share is full, else the oldest of the peer
// that holds the most. Only authenticated connections can fill `tcp` so
// that newcomers are refused (503 overloaded). A slowloris therefore only
// churns its own connections, and a caller with a key reaches the handler
// as soon as its head arrives. What this cannot stop is a client that opens
// connections faster than a caller's head can follow on the same address:
// that is a flood for the firewall and the kernel's SYN backlog.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <string>

#include "http/http_server.h"
#include "http/socket_io.h"

namespace corral::http {

class ConnectionTable {
 public:
  struct Slot;

  // `authenticating`: false when the server knows no credentials; then
  // every TCP connection is admitted as authenticated.
  ConnectionTable(const ConnectionLimits& limits, bool authenticating);

  // Admits the connection on `fd` (which the table then owns until
  // release()), closing an unauthenticated one to make room if needed.
  // nullptr: over budget, the caller answers 503 and closes fd itself.
  Slot* admit(int fd, const Peer& peer);
  // The connection has a complete request head. `authenticated`: this
  // request passed ServerOptions::authenticate (it moves the connection to
  // the authenticated budget). False when the table closed the connection
  // meanwhile: drop it without an answer.
  bool begin_request(Slot* slot, bool authenticated);
  // The response is done; the connection waits for the next head.
  void end_request(Slot* slot);
  bool authenticated(const Slot* slot) const;
  // Unregisters and closes the connection's fd, under the lock, so that
  // neither an eviction nor shutdown_all() ever acts on a reused fd number.
  void release(Slot* slot);
  // shutdown(SHUT_RDWR) on every connection (the server stops).
  void shutdown_all();

  ConnectionStats stats() const;

 private:
  Slot* evictable_victim(const std::string& only_host) const;
  void evict(Slot* victim);
  void count(const Slot& s, int delta);

  const ConnectionLimits limits_;
  const bool authenticating_;
  mutable std::mutex mu_;
  std::list<Slot> slots_;
  std::map<std::string, std::size_t> unauth_per_host_;
  std::size_t unix_ = 0;
  std::size_t tcp_ = 0;     // authenticated and not
  std::size_t unauth_ = 0;  // of tcp_
  std::uint64_t refused_ = 0;
  std::uint64_t evicted_ = 0;
};

struct ConnectionTable::Slot {
  enum class Budget { kUnix, kTcpUnauthenticated, kTcpAuthenticated };
  int fd = -1;
  std::string host;  // TCP: the peer's IP address, the per-peer key
  Budget budget = Budget::kTcpUnauthenticated;
  bool busy = false;     // in a request: never evicted
  bool evicted = false;  // shut down by the table to make room; no longer counted
  io::Clock::time_point since;  // admitted, or its last request ended
  std::list<Slot>::iterator self;
};

}  // namespace corral::http
