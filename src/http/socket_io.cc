#include "http/socket_io.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

namespace corral::http::io {
namespace {

// poll()'s timeout for the next wait, or -1 for none.
int poll_timeout(const Timeouts& t) {
  using std::chrono::milliseconds;
  long long ms = -1;
  if (t.stall.count() > 0) ms = t.stall.count();
  if (t.deadline != Clock::time_point::max()) {
    long long left = std::chrono::ceil<milliseconds>(t.deadline - Clock::now()).count();
    left = std::max<long long>(left, 0);
    ms = ms < 0 ? left : std::min(ms, left);
  }
  return ms < 0 ? -1 : static_cast<int>(std::min<long long>(ms, 1LL << 30));
}

}  // namespace

Status wait(int fd, short events, const Timeouts& t) {
  while (true) {
    struct pollfd p[2] = {{fd, events, 0}, {t.hangup_fd, POLLRDHUP, 0}};
    int timeout = poll_timeout(t);
    int r = ::poll(p, t.hangup_fd >= 0 ? 2 : 1, timeout);
    if (r > 0 && t.hangup_fd >= 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0)
      return make_error(ErrorCode::kUnavailable, "the client this call was made for went away");
    if (r > 0) return ok();  // ready, or an error/hangup the next call reports
    if (r == 0) return make_error(ErrorCode::kTimeout, "peer stalled (no progress in time)");
    if (errno != EINTR) return errno_error("poll");
  }
}

Result<std::size_t> recv_some(int fd, char* buf, std::size_t cap, const Timeouts& t) {
  while (true) {
    ssize_t n = ::recv(fd, buf, cap, 0);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      auto e = errno_error("recv");
      e.value().code = ErrorCode::kSystem;
      return e;
    }
    CORRAL_TRY(wait(fd, POLLIN, t));
  }
}

Status send_all(int fd, struct iovec* iov, int iovcnt, const Timeouts& t) {
  while (iovcnt > 0) {
    if (iov->iov_len == 0) {
      ++iov;
      --iovcnt;
      continue;
    }
    struct msghdr msg = {};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(iovcnt);
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        auto e = errno_error("send");
        e.value().code = ErrorCode::kSystem;
        return e;
      }
      CORRAL_TRY(wait(fd, POLLOUT, t));
      continue;
    }
    auto left = static_cast<std::size_t>(n);
    while (iovcnt > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --iovcnt;
    }
    if (iovcnt > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return ok();
}

Status send_all(int fd, const char* data, std::size_t size, const Timeouts& t) {
  struct iovec iov = {const_cast<char*>(data), size};
  return send_all(fd, &iov, 1, t);
}

bool peer_closed(int fd) {
  struct pollfd p = {fd, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace corral::http::io
