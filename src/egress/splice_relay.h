// The data phase of the egress proxy (ADR 0005, "Proxy (as built)"): moves
// bytes both ways between a sandbox's connection and the upstream with
// splice(2) through a pipe per direction, so that they never enter user
// space, until both directions have ended, one side fails, or the
// connection idles; the caller then closes both sockets.
//
// Ends, each way:
//   - a side's end of stream is passed on (shutdown(SHUT_WR) of the other
//     socket): a client that half-closes still gets the upstream's answer;
//   - once the upstream has ended, the client has half_close_timeout to end
//     too (it normally closes at once): no socket stays half-open for long;
//   - a reset or error on either side ends both;
//   - no progress either way for idle_timeout ends both.
// Short flows are copied through user space; a flow that has moved 64 KiB
// opens its pipe and splices from then on (see splice_relay.cc).
// A plain HTTP request (framing kLength or kChunked) is forwarded up to the
// end of its body and no further: a second request on the connection never
// reaches the upstream chosen for the first (see egress_session.cc).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace corral::net {

enum class RequestFraming {
  kNone,     // any bytes, until the client's end of stream
  kLength,   // one HTTP request with a body of `length` bytes (0: none)
  kChunked,  // one HTTP request with a chunked body, up to its last chunk
};

struct RelaySpec {
  int client = -1;  // non-blocking sockets, connected; not closed here
  int upstream = -1;
  std::string head;  // sent upstream first, as is
  std::string body;  // then these, the start of the request body (counted by `framing`)
  RequestFraming framing = RequestFraming::kNone;
  std::uint64_t length = 0;
  std::chrono::milliseconds idle_timeout{10'000};
  std::chrono::milliseconds half_close_timeout{2'000};
  std::size_t pipe_bytes = 1 << 20;  // pipes grow to this after the first 256 KiB of a flow
  // A fast unframed stream (one that has moved 1 MiB and had 64 KiB waiting
  // at once) is read in batches: SO_RCVLOWAT on its source is set to this
  // (at most a quarter of the source's receive buffer), so the relay (and, through fewer window
  // updates, the sender) wakes up once per batch instead of once per segment. A batch that does not
  // fill within 1 ms is taken as it is and batching stops until the stream is fast again: a pause
  // in a fast stream costs at most 1 ms once. 0: off.
  std::size_t batch_bytes = 256 * 1024;
  // Once a flow splices (its first 64 KiB are behind it), TCP_NOTSENT_LOWAT
  // on its destination: the kernel takes at most this many bytes more than
  // it can send at once, the rest waits in the pipe and in the source
  // socket. So segments go out in the relay's own splice, while the data
  // is still in cache, instead of later on the peer's ACKs, which would
  // make the peer (a sandbox reading a download) do the sending for us.
  // Bytes in flight are not limited: it costs a long-distance upstream
  // nothing. 0: the kernel's default (no limit).
  std::size_t unsent_bytes = 32 * 1024;
  // Once the download direction splices, SO_SNDBUF on `client`. The client
  // is a sandbox on this host, a veth away: tens of microseconds of round
  // trip, so this covers its bandwidth-delay product many times over.
  // Without it the buffer autotunes to megabytes in flight, and the
  // sandbox's reader copies data gone cold in cache: on a real download
  // through corral run it paid 1.8 times the copy cost of a direct reader
  // (docs/performance.md). The upstream's socket keeps autotuning (it may
  // be far away). 0: the kernel's autotuning.
  std::size_t client_sndbuf_bytes = 256 * 1024;
};

struct RelayResult {
  std::uint64_t bytes_up = 0;    // delivered to the upstream (head and body included)
  std::uint64_t bytes_down = 0;  // delivered to the client
  std::string end;  // "closed", "idle timeout (N ms)", "reset (client to upstream)", ...
};

// Blocks (with the timeouts above) until the relay ends.
RelayResult relay_connection(RelaySpec spec);

}  // namespace corral::net
