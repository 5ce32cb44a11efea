// Blocking-style I/O on non-blocking sockets, bounded in time: every wait
// is a poll() with a timeout, so no thread of the server or the client can
// hang on a stalled peer. Internal to src/http.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstddef>

#include "base/result.h"

namespace corral::http::io {

using Clock = std::chrono::steady_clock;

// How long one operation may wait: `stall` bounds each wait for progress
// (0: unbounded), `deadline` bounds the whole operation (max(): none).
struct Timeouts {
  std::chrono::milliseconds stall{0};
  Clock::time_point deadline = Clock::time_point::max();
  // Another socket whose peer closing ends a wait with kUnavailable (a relay
  // watching the client it relays for; -1: none). Only its hangup counts,
  // never data it has to read.
  int hangup_fd = -1;
};

// Waits until fd is ready for `events` (POLLIN/POLLOUT). kTimeout when the
// limits pass first, kUnavailable when t.hangup_fd's peer closes first.
Status wait(int fd, short events, const Timeouts& t);

// Receives up to cap bytes, waiting for at least one; 0 at end of stream.
// Errors: kTimeout, kSystem (reset, ...).
Result<std::size_t> recv_some(int fd, char* buf, std::size_t cap, const Timeouts& t);

// Sends every byte of the iovecs (modified in place), with MSG_NOSIGNAL: a
// closed peer is an EPIPE error, never a SIGPIPE.
Status send_all(int fd, struct iovec* iov, int iovcnt, const Timeouts& t);
Status send_all(int fd, const char* data, std::size_t size, const Timeouts& t);

// True when the peer closed or reset the connection (no waiting).
bool peer_closed(int fd);

}  // namespace corral::http::io
