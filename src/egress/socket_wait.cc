#include "egress/socket_wait.h"

#include <netinet/in.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace corral::net {

int poll_ms(SteadyClock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyClock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1LL << 30));
}

int wait_fd(int fd, short events, SteadyClock::time_point deadline, int watch) {
  for (;;) {
    struct pollfd p[2] = {{fd, events, 0}, {watch, 0, 0}};
    int r = ::poll(p, watch >= 0 ? 2 : 1, poll_ms(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (watch >= 0 && (p[1].revents & (POLLHUP | POLLERR | POLLNVAL))) return -1;
    if (r > 0) return 1;
    return 0;
  }
}

bool send_all(int fd, std::string_view data, SteadyClock::time_point deadline, int watch) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (wait_fd(fd, POLLOUT, deadline, watch) != 1) return false;
      continue;
    }
    return false;
  }
  return true;
}

socklen_t to_sockaddr(const IpAddress& address, std::uint16_t port, sockaddr_storage& ss) {
  std::memset(&ss, 0, sizeof ss);
  if (!address.v6) {
    auto* in = reinterpret_cast<sockaddr_in*>(&ss);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    std::memcpy(&in->sin_addr, address.bytes.data(), 4);
    return sizeof(sockaddr_in);
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
  in6->sin6_family = AF_INET6;
  in6->sin6_port = htons(port);
  std::memcpy(&in6->sin6_addr, address.bytes.data(), 16);
  return sizeof(sockaddr_in6);
}

ConnectResult connect_until(int fd, const IpAddress& address, std::uint16_t port,
                            SteadyClock::time_point deadline, int watch) {
  sockaddr_storage ss;
  const socklen_t len = to_sockaddr(address, port, ss);
  ConnectResult out;
  int r = ::connect(fd, reinterpret_cast<sockaddr*>(&ss), len);
  out.err = r == 0 ? 0 : errno;
  if (out.err == EINPROGRESS) {
    int w = wait_fd(fd, POLLOUT, deadline, watch);
    if (w == 1) {
      socklen_t elen = sizeof out.err;
      if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &out.err, &elen) != 0) out.err = errno;
    } else {
      out.err = w == 0 ? ETIMEDOUT : ECONNABORTED;
      out.timed_out = w == 0;
    }
  }
  return out;
}

}  // namespace corral::net
