#include "egress/swapped_relay.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "http/http_parser.h"
#include "egress/socket_wait.h"
#include "secrets/secret_value.h"

namespace corral::net {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kChunk = 16 * 1024;

class Relay {
 public:
  explicit Relay(SwappedRelaySpec& spec) : s_(spec) {}
  SwappedRelayResult run();

 private:
  Clock::time_point idle() const { return Clock::now() + s_.idle_timeout; }
  // > 0 bytes, 0 end of stream, -1 failed (or the other side ended), -2 idle.
  long recv_from(int fd, int watch, char* buf, std::size_t n) const;
  bool send_up(std::string_view data);
  bool forward_body();

  SwappedRelaySpec& s_;
  SwappedRelayResult r_;
};

long Relay::recv_from(int fd, int watch, char* buf, std::size_t n) const {
  for (;;) {
    const int w = wait_fd(fd, POLLIN, idle(), watch);
    if (w == 0) return -2;
    if (w < 0) return -1;
    const ssize_t got = ::recv(fd, buf, n, MSG_DONTWAIT);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    return got < 0 ? -1 : static_cast<long>(got);
  }
}

bool Relay::send_up(std::string_view data) {
  if (data.empty()) return true;
  if (!send_all(s_.upstream, data, idle(), s_.client)) return false;
  r_.relay.bytes_up += data.size();
  return true;
}

// The request body, up to its end and no further (a second request on the
// connection never reaches this upstream).
bool Relay::forward_body() {
  std::string tmp(kChunk, '\0');
  std::string_view piece = s_.body;
  if (s_.framing == RequestFraming::kChunked) {
    http::ChunkedDecoder d;
    std::string scratch;
    for (;;) {
      std::size_t used = 0;
      while (used < piece.size() && !d.done()) {
        scratch.clear();
        auto n = d.decode(piece.substr(used), scratch, kChunk);
        if (!n) {
          r_.relay.end = "malformed chunked request body";
          return false;
        }
        if (*n == 0 && scratch.empty()) break;
        used += *n;
      }
      if (!send_up(piece.substr(0, used))) {
        r_.relay.end = "sending the request body failed";
        return false;
      }
      if (d.done()) return true;
      const long n = recv_from(s_.client, s_.upstream, tmp.data(), tmp.size());
      if (n <= 0) {
        r_.relay.end = "the client ended before the end of its request body";
        return false;
      }
      piece = std::string_view(tmp.data(), static_cast<std::size_t>(n));
    }
  }
  std::uint64_t left = s_.framing == RequestFraming::kLength ? s_.length : 0;
  piece = piece.substr(0, static_cast<std::size_t>(std::min<std::uint64_t>(left, piece.size())));
  for (;;) {
    if (!send_up(piece)) {
      r_.relay.end = "sending the request body failed";
      return false;
    }
    left -= piece.size();
    if (left == 0) return true;
    const long n =
        recv_from(s_.client, s_.upstream, tmp.data(),
                  static_cast<std::size_t>(std::min<std::uint64_t>(left, tmp.size())));
    if (n <= 0) {
      r_.relay.end = "the client ended before the end of its request body";
      return false;
    }
    piece = std::string_view(tmp.data(), static_cast<std::size_t>(n));
  }
}

SwappedRelayResult Relay::run() {
  const bool sent = send_all(s_.upstream, s_.head, idle(), s_.client);
  if (sent) r_.relay.bytes_up += s_.head.size();
  secrets::wipe(s_.head);
  if (!sent) {
    r_.relay.end = "sending the request head failed";
    return r_;
  }
  if (s_.expect_continue) (void)send_all(s_.client, "HTTP/1.1 100 Continue\r\n\r\n", idle(), -1);
  // An upstream may answer before the whole body (an early 413): the
  // answer is read either way.
  (void)forward_body();
  ScrubbedResponse response(s_.reflection, s_.scrub);
  ScrubIo io;
  io.read = [&](char* buf, std::size_t n) { return recv_from(s_.upstream, s_.client, buf, n); };
  io.write = [&](std::string_view data) { return send_all(s_.client, data, idle(), -1); };
  const std::string body_end = r_.relay.end;
  ScrubRelayResult sr = relay_scrubbed(response, io);
  r_.relay.bytes_down = sr.bytes_down;
  r_.relay.end = sr.end == "closed" && !body_end.empty() ? body_end : sr.end;
  r_.refused = sr.refused;
  r_.answered = sr.answered;
  r_.status = sr.status;
  r_.replaced = sr.replaced;
  return r_;
}

}  // namespace

SwappedRelayResult relay_swapped(SwappedRelaySpec spec) {
  Relay relay(spec);
  SwappedRelayResult r = relay.run();
  // A refused answer the client has had nothing of is answered by the
  // caller (a 502 that says why): the connection stays open for it.
  if (!r.refused || r.answered) ::shutdown(spec.client, SHUT_WR);
  return r;
}

}  // namespace corral::net
