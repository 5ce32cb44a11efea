// Deadline-bounded waits, writes and connects on non-blocking sockets: what
// the egress proxy and the gateway both do with a connection's sockets.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string_view>

#include "netns/ip_address.h"

namespace corral::net {

using SteadyClock = std::chrono::steady_clock;

// Milliseconds left until `deadline` for poll(2): 0 when it has passed.
int poll_ms(SteadyClock::time_point deadline);

// Waits for `events` on `fd` until `deadline`; also wakes when `watch` (the
// client, while its upstream is waited for) is shut down or reset.
// 1: ready, 0: timeout, -1: `watch` ended (or poll failed).
int wait_fd(int fd, short events, SteadyClock::time_point deadline, int watch = -1);

// Writes all of `data` to the non-blocking `fd` before `deadline`.
bool send_all(int fd, std::string_view data, SteadyClock::time_point deadline, int watch = -1);

// `address`:`port` as a sockaddr; returns its length.
socklen_t to_sockaddr(const IpAddress& address, std::uint16_t port, sockaddr_storage& ss);

struct ConnectResult {
  int err = 0;             // 0: connected; else an errno value
  bool timed_out = false;  // err is ETIMEDOUT because the deadline passed
};
// connect(2) on the non-blocking `fd`, waiting for it until `deadline` or
// until `watch` ends (then err is ECONNABORTED).
ConnectResult connect_until(int fd, const IpAddress& address, std::uint16_t port,
                            SteadyClock::time_point deadline, int watch = -1);

}  // namespace corral::net
