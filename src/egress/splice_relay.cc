#include "egress/splice_relay.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <optional>
#include <string_view>

#include "base/result.h"
#include "base/unique_fd.h"
#include "http/http_parser.h"

namespace corral::net {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A flow starts by copying through user space (recv, send): most
// connections are short, and for them two pipes (four fds, two pipe2, four
// close) and splices of a few bytes cost more than the copy. Once a flow
// has moved kSpliceAfter bytes it opens its pipe and splices. The pipe
// starts at the kernel's default size (16 pages) and grows to pipe_bytes
// once the flow has moved kGrowPipeAfter bytes: fewer, larger splices.
constexpr std::uint64_t kSpliceAfter = 64 * 1024;
constexpr std::uint64_t kGrowPipeAfter = 256 * 1024;
// Batching a fast stream (see RelaySpec::batch_bytes): turned on once the
// flow has moved kBatchAfter bytes and one splice found at least
// kBatchEvidence bytes waiting; off again as soon as a wait for the batch
// takes longer than kBatchWait.
constexpr std::uint64_t kBatchAfter = 1024 * 1024;
constexpr std::size_t kBatchEvidence = 64 * 1024;
constexpr milliseconds kBatchWait{1};

struct Pipe {
  UniqueFd r, w;
  std::size_t capacity = 16 * 4096;
  bool grown = false;
  bool open() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return false;
    r.reset(fds[0]);
    w.reset(fds[1]);
    // `capacity` only bounds each splice: asking for more than fits is
    // harmless (the splice moves what fits), so the size is not queried.
    return true;
  }
  bool is_open() const { return w.valid(); }
  void grow(std::size_t want) {
    grown = true;
    if (want <= capacity) return;
    int got =
        ::fcntl(w.get(), F_SETPIPE_SZ, static_cast<int>(std::min<std::size_t>(want, 1 << 30)));
    if (got > 0) capacity = static_cast<std::size_t>(got);  // refused: the old size stays
  }
};

// One direction of a relayed connection.
struct Flow {
  int from = -1, to = -1;
  Pipe pipe;
  bool copy_only = false;  // no pipe could be had: copies to the end
  std::size_t in_pipe = 0;
  std::string pending;  // user-space bytes to send first (the head, a chunked body)
  std::size_t pending_off = 0;
  RequestFraming framing = RequestFraming::kNone;
  std::uint64_t remaining = 0;  // kLength: body bytes still to read
  http::ChunkedDecoder chunked;
  bool eof = false;        // `from` ended
  bool body_done = false;  // the request is complete: read no more, keep `to` open
  bool shut = false;       // shutdown(to, SHUT_WR) done
  std::uint64_t bytes = 0;
  std::size_t pipe_bytes = 0;    // what the pipe grows to
  std::size_t batch_bytes = 0;   // SO_RCVLOWAT on `from` while batching (0: never)
  std::size_t unsent_bytes = 0;  // TCP_NOTSENT_LOWAT on `to` once splicing (0: none)
  std::size_t sndbuf_bytes = 0;  // SO_SNDBUF on `to` once splicing (0: autotuned)
  bool batching = false;         // SO_RCVLOWAT is batch_bytes now
  bool want_in = false, want_out = false;
  std::string error;  // why the flow failed ("reset", ...)

  bool finished() const {
    return (eof || body_done) && pending_off >= pending.size() && in_pipe == 0;
  }
  void set_batching(bool on) {
    if (on == batching) return;
    int v = 1;
    if (on) {
      // At most a quarter of the receive buffer: TCP grows a buffer smaller
      // than twice the mark and then clamps the window to the mark, which
      // would leave the sender one batch in flight.
      int rcvbuf = 0;
      socklen_t len = sizeof rcvbuf;
      if (::getsockopt(from, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len) != 0) return;
      v = static_cast<int>(
          std::min<std::size_t>(batch_bytes, static_cast<std::size_t>(rcvbuf) / 4));
      if (v < static_cast<int>(kBatchEvidence)) return;  // too small to be worth it
    }
    if (::setsockopt(from, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof v) == 0 || !on) batching = on;
  }
};

std::string errno_text(const char* what, int err) {
  if (err == ECONNRESET || err == EPIPE) return "reset";
  return std::string(what) + ": " + std::string(errno_name(err));
}

// Feeds the chunked body bytes in `in` to the decoder; how many belong to
// the body (the rest, after its last chunk, is not part of the request).
bool chunked_prefix(http::ChunkedDecoder& d, std::string_view in, std::size_t& used,
                    std::string& error) {
  used = 0;
  char sink[4096];
  while (used < in.size() && !d.done()) {
    std::size_t produced = 0;
    auto r = d.decode(in.substr(used), sink, sizeof sink, produced);
    if (!r) {
      error = "malformed chunked body: " + r.error().message;
      return false;
    }
    if (*r == 0 && produced == 0) break;
    used += *r;
  }
  return true;
}

// Moves what can move without blocking. False when the flow failed.
// One non-blocking read of `f.from` into `buf`. kWait and kEof set the
// flow's want_in / eof, kError its error.
enum class Got { kData, kWait, kEof, kError };
Got recv_some(Flow& f, char* buf, std::size_t len, std::size_t& got) {
  for (;;) {
    ssize_t n = ::recv(f.from, buf, len, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      f.want_in = true;
      return Got::kWait;
    }
    if (n < 0) {
      f.error = errno_text("recv", errno);
      return Got::kError;
    }
    if (n == 0) {
      f.eof = true;
      return Got::kEof;
    }
    got = static_cast<std::size_t>(n);
    return Got::kData;
  }
}

bool step(Flow& f, char* scratch, std::size_t scratch_size) {
  f.want_in = f.want_out = false;
  bool drained = false;
  for (;;) {
    // 1. Bytes held in user space.
    while (f.pending_off < f.pending.size()) {
      ssize_t n = ::send(f.to, f.pending.data() + f.pending_off, f.pending.size() - f.pending_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        f.pending_off += static_cast<std::size_t>(n);
        f.bytes += static_cast<std::uint64_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        f.want_out = true;
        return true;
      } else {
        f.error = errno_text("send", errno);
        return false;
      }
    }
    if (!f.pending.empty()) {
      f.pending.clear();
      f.pending_off = 0;
    }
    // 2. Bytes in the pipe.
    while (f.in_pipe > 0) {
      ssize_t n = ::splice(f.pipe.r.get(), nullptr, f.to, nullptr, f.in_pipe,
                           SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        f.in_pipe -= static_cast<std::size_t>(n);
        f.bytes += static_cast<std::uint64_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && errno == EAGAIN) {
        f.want_out = true;
        return true;
      } else {
        f.error = errno_text("splice", n == 0 ? EPIPE : errno);
        return false;
      }
    }
    // 3. More from the source (the pipe is empty here, so EAGAIN means the
    // socket is).
    if (f.eof || f.body_done) break;
    if (f.framing == RequestFraming::kLength && f.remaining == 0) {
      f.body_done = true;
      break;
    }
    if (f.framing == RequestFraming::kChunked) {
      std::size_t got = 0;
      const Got g = recv_some(f, scratch, scratch_size, got);
      if (g == Got::kError) return false;
      if (g != Got::kData) break;
      // Forward the encoded bytes up to the end of the body; the decoded
      // data is only looked at to find that end.
      std::string_view in(scratch, got);
      std::size_t used = 0;
      if (!chunked_prefix(f.chunked, in, used, f.error)) return false;
      f.pending.assign(in.substr(0, used));
      if (f.chunked.done()) f.body_done = true;
      continue;
    }
    if (drained) {
      // The last read took less than it could: the socket is most likely
      // empty. poll() tells (level-triggered) without a failing read.
      f.want_in = true;
      break;
    }
    if (!f.pipe.is_open() && !f.copy_only && f.bytes >= kSpliceAfter) {
      if (!f.pipe.open()) f.copy_only = true;  // out of fds: copying still works
      // Best effort, both: without them the relay is only slower.
      if (f.unsent_bytes > 0) {
        int v = static_cast<int>(std::min<std::size_t>(f.unsent_bytes, 1 << 30));
        ::setsockopt(f.to, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, sizeof v);
      }
      if (f.sndbuf_bytes > 0) {
        int v = static_cast<int>(std::min<std::size_t>(f.sndbuf_bytes, 1 << 30));
        ::setsockopt(f.to, SOL_SOCKET, SO_SNDBUF, &v, sizeof v);
      }
    }
    if (!f.pipe.is_open()) {
      // Copy mode: straight from the scratch buffer to `to`; what does not
      // fit now waits in `pending`.
      std::size_t len = scratch_size;
      if (f.framing == RequestFraming::kLength)
        len = static_cast<std::size_t>(std::min<std::uint64_t>(len, f.remaining));
      std::size_t got = 0;
      const Got g = recv_some(f, scratch, len, got);
      if (g == Got::kError) return false;
      if (g != Got::kData) break;
      if (f.framing == RequestFraming::kLength) f.remaining -= got;
      drained = got < len;
      ssize_t m = ::send(f.to, scratch, got, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (m < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        f.error = errno_text("send", errno);
        return false;
      }
      const std::size_t sent = m > 0 ? static_cast<std::size_t>(m) : 0;
      f.bytes += sent;
      if (sent < got) f.pending.assign(scratch + sent, got - sent);  // sent by 1. above
      continue;
    }
    if (!f.pipe.grown && f.bytes >= kGrowPipeAfter) f.pipe.grow(f.pipe_bytes);
    std::size_t len = f.pipe.capacity;
    if (f.framing == RequestFraming::kLength)
      len = static_cast<std::size_t>(std::min<std::uint64_t>(len, f.remaining));
    ssize_t n =
        ::splice(f.from, nullptr, f.pipe.w.get(), nullptr, len, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n > 0) {
      f.in_pipe += static_cast<std::size_t>(n);
      if (f.framing == RequestFraming::kLength) f.remaining -= static_cast<std::uint64_t>(n);
      drained = static_cast<std::size_t>(n) < len;
      // A fast stream (much was waiting): wake up for batches from now on.
      if (!f.batching && f.batch_bytes > 0 && f.framing == RequestFraming::kNone &&
          f.bytes >= kBatchAfter && static_cast<std::size_t>(n) >= kBatchEvidence)
        f.set_batching(true);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      f.want_in = true;
      break;
    }
    if (n < 0) {
      f.error = errno_text("splice", errno);
      return false;
    }
    f.eof = true;
    break;
  }
  // The source ended: pass the half-close on (not after a framed request:
  // its end is the end of the request, not of the client's sending).
  if (f.eof && !f.body_done && f.finished() && !f.shut) {
    ::shutdown(f.to, SHUT_WR);
    f.shut = true;
  }
  return true;
}

}  // namespace

// splice(2) into a socket whose peer is gone raises SIGPIPE (it has no
// MSG_NOSIGNAL). Blocked on this thread while the relay runs; one raised
// meanwhile is taken off (thread-directed, it is pending here) before the
// old mask returns.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~SigpipeBlock() {
    if (sigismember(&old_, SIGPIPE)) return;  // it was blocked before: leave it so
    timespec zero{};
    while (sigtimedwait(&set_, nullptr, &zero) == SIGPIPE) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t set_, old_;
};

RelayResult relay_connection(RelaySpec spec) {
  SigpipeBlock no_sigpipe;
  RelayResult result;
  Flow up, down;
  up.from = spec.client;
  up.to = spec.upstream;
  down.from = spec.upstream;
  down.to = spec.client;
  up.framing = spec.framing;
  std::string& body = spec.body;
  if (spec.framing == RequestFraming::kLength) {
    // The body bytes already read count against the declared length; any
    // beyond it (a pipelined next request) are not forwarded.
    up.remaining = spec.length;
    if (body.size() > up.remaining) body.resize(static_cast<std::size_t>(up.remaining));
    up.remaining -= body.size();
  } else if (spec.framing == RequestFraming::kChunked) {
    std::size_t used = 0;
    if (!chunked_prefix(up.chunked, body, used, up.error)) {
      result.end = up.error + " (client to upstream)";
      return result;
    }
    body.resize(used);
    if (up.chunked.done()) up.body_done = true;
  }
  up.pending = std::move(spec.head);
  up.pending += body;

  up.pipe_bytes = down.pipe_bytes = spec.pipe_bytes;
  up.batch_bytes = down.batch_bytes = spec.batch_bytes;
  up.unsent_bytes = down.unsent_bytes = spec.unsent_bytes;
  down.sndbuf_bytes = spec.client_sndbuf_bytes;
  const auto idle = spec.idle_timeout;
  const auto fin = std::min(idle, spec.half_close_timeout);
  std::optional<Clock::time_point> upstream_ended;
  constexpr std::size_t kScratch = 64 * 1024;
  std::unique_ptr<char[]> scratch(new char[kScratch]);  // not zeroed: written before read
  std::string end;
  // A flow is stepped when poll() said one of the fds it waits for is
  // ready (or it waits for nothing yet): no failing syscall for the quiet
  // direction on every wake-up of the busy one.
  bool step_up = true, step_down = true;
  for (;;) {
    if (step_up && !step(up, scratch.get(), kScratch)) {
      end = up.error + " (client to upstream)";
      break;
    }
    if (step_down && !step(down, scratch.get(), kScratch)) {
      end = down.error + " (upstream to client)";
      break;
    }
    // Done when the upstream has said all and the client has too (or its
    // request is complete).
    if (down.finished() && up.finished()) {
      end = "closed";
      break;
    }
    // The upstream has said all: the client gets a short while to finish
    // (it normally closes at once), never a socket held half-open.
    if (down.finished() && !upstream_ended) upstream_ended = Clock::now();
    auto wait = idle;
    if (upstream_ended) {
      auto left = fin - std::chrono::duration_cast<milliseconds>(Clock::now() - *upstream_ended);
      if (left <= milliseconds(0)) {
        end = "closed (the client did not close within " + std::to_string(fin.count()) +
              " ms of the upstream's end)";
        break;
      }
      wait = std::min(wait, left);
    }
    struct pollfd p[2] = {{spec.client, 0, 0}, {spec.upstream, 0, 0}};
    if (up.want_in) p[0].events |= POLLIN;
    if (down.want_out) p[0].events |= POLLOUT;
    if (down.want_in) p[1].events |= POLLIN;
    if (up.want_out) p[1].events |= POLLOUT;
    if (p[0].events == 0) p[0].fd = -1;
    if (p[1].events == 0) p[1].fd = -1;
    if (p[0].fd < 0 && p[1].fd < 0) {
      end = "closed";
      break;
    }
    // A flow that batches waits for its batch at most kBatchWait.
    const bool batch_wait = (up.batching && up.want_in) || (down.batching && down.want_in);
    if (batch_wait) wait = std::min<milliseconds>(wait, kBatchWait);
    int r = ::poll(p, 2, static_cast<int>(std::min<long long>(wait.count(), 1LL << 30)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      end = errno_text("poll", errno);
      break;
    }
    if (r == 0 && batch_wait) {
      // The stream slowed down: move what is there, and wake up for every
      // byte again.
      step_up = up.batching && up.want_in;
      step_down = down.batching && down.want_in;
      if (step_up) up.set_batching(false);
      if (step_down) down.set_batching(false);
      continue;
    }
    if (r == 0 && !upstream_ended) {
      end = "idle timeout (" + std::to_string(idle.count()) + " ms)";
      break;
    }
    constexpr short kIn = POLLIN | POLLHUP | POLLERR | POLLNVAL;
    constexpr short kOut = POLLOUT | POLLHUP | POLLERR | POLLNVAL;
    step_up = (up.want_in && (p[0].revents & kIn)) || (up.want_out && (p[1].revents & kOut));
    step_down = (down.want_in && (p[1].revents & kIn)) || (down.want_out && (p[0].revents & kOut));
  }
  result.bytes_up = up.bytes;
  result.bytes_down = down.bytes;
  result.end = std::move(end);
  return result;
}

}  // namespace corral::net
