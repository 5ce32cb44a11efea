// The egress proxy's data phase (src/egress/splice_relay.h) between two
// socketpairs (TCP on loopback where the test needs TCP's SO_RCVLOWAT):
// the test holds the "sandbox" and "upstream" ends, the relay the other
// two, on a thread of its own.
#include "egress/splice_relay.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>

#include "base/unique_fd.h"

namespace corral::net {
namespace {

using namespace std::chrono_literals;

struct Pair {
  UniqueFd ours, relays;  // ours: blocking, 5 s timeouts; relays: non-blocking
  Pair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    ours.reset(fds[0]);
    relays.reset(fds[1]);
    timeval tv{5, 0};
    ::setsockopt(fds[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fds[0], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int fl = 1;
    ::ioctl(fds[1], FIONBIO, &fl);
  }
};

void send_all(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    ASSERT_GT(n, 0) << strerror(errno);
    s.remove_prefix(static_cast<std::size_t>(n));
  }
}

std::string read_n(int fd, std::size_t n) {
  std::string out;
  char buf[65536];
  while (out.size() < n) {
    ssize_t r = ::recv(fd, buf, std::min(sizeof buf, n - out.size()), 0);
    if (r <= 0) break;
    out.append(buf, static_cast<std::size_t>(r));
  }
  return out;
}

// Everything until end of stream; `eof` says whether it was a clean one.
std::string read_to_eof(int fd, bool* eof = nullptr) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r > 0) {
      out.append(buf, static_cast<std::size_t>(r));
      continue;
    }
    if (eof) *eof = r == 0;
    return out;
  }
}

class SpliceRelayTest : public ::testing::Test {
 protected:
  std::future<RelayResult> start(RelaySpec spec) {
    spec.client = client_.relays.get();
    spec.upstream = upstream_.relays.get();
    return std::async(std::launch::async, [spec]() { return relay_connection(spec); });
  }
  Pair client_, upstream_;
};

TEST_F(SpliceRelayTest, BothWaysAndAClientHalfCloseGetsItsAnswer) {
  RelaySpec spec;
  spec.head = "hello ";
  auto done = start(spec);
  send_all(client_.ours.get(), "world");
  EXPECT_EQ(read_n(upstream_.ours.get(), 11), "hello world");
  send_all(upstream_.ours.get(), "pong");
  EXPECT_EQ(read_n(client_.ours.get(), 4), "pong");
  ::shutdown(client_.ours.get(), SHUT_WR);
  bool eof = false;
  EXPECT_EQ(read_to_eof(upstream_.ours.get(), &eof), "");  // the half-close was passed on
  EXPECT_TRUE(eof);
  send_all(upstream_.ours.get(), "answer after EOF");
  upstream_.ours.reset();
  EXPECT_EQ(read_to_eof(client_.ours.get(), &eof), "answer after EOF");
  EXPECT_TRUE(eof);
  RelayResult r = done.get();
  EXPECT_EQ(r.end, "closed");
  EXPECT_EQ(r.bytes_up, 11u);
  EXPECT_EQ(r.bytes_down, 20u);
}

TEST_F(SpliceRelayTest, ALengthFramedRequestStopsAtItsBody) {
  RelaySpec spec;
  spec.head = "POST / HTTP/1.1\r\ncontent-length: 10\r\n\r\n";
  spec.body = "0123";
  spec.framing = RequestFraming::kLength;
  spec.length = 10;
  auto done = start(spec);
  send_all(client_.ours.get(), "456789GET /second HTTP/1.1\r\n\r\n");
  EXPECT_EQ(read_n(upstream_.ours.get(), spec.head.size() + 10), spec.head + "0123456789");
  send_all(upstream_.ours.get(), "HTTP/1.1 200 OK\r\n\r\n");
  ::shutdown(upstream_.ours.get(), SHUT_WR);
  bool eof = false;
  EXPECT_EQ(read_to_eof(client_.ours.get(), &eof), "HTTP/1.1 200 OK\r\n\r\n");
  EXPECT_TRUE(eof);
  RelayResult r = done.get();
  EXPECT_EQ(r.end, "closed");
  // The second request never went up, and the upstream was not told EOF
  // (the end of a request is not the end of the client's sending).
  EXPECT_EQ(r.bytes_up, spec.head.size() + 10);
  struct pollfd p = {upstream_.ours.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 50), 0) << "neither more bytes nor an end of stream";
}

TEST_F(SpliceRelayTest, ABodyBeyondItsLengthInTheFirstBytesIsCut) {
  RelaySpec spec;
  spec.head = "PUT / HTTP/1.1\r\n\r\n";
  spec.body = "abcEXTRA";
  spec.framing = RequestFraming::kLength;
  spec.length = 3;
  auto done = start(spec);
  EXPECT_EQ(read_n(upstream_.ours.get(), spec.head.size() + 3), spec.head + "abc");
  upstream_.ours.reset();
  EXPECT_EQ(read_to_eof(client_.ours.get()), "");
  RelayResult r = done.get();
  EXPECT_EQ(r.bytes_up, spec.head.size() + 3);
}

// The body is longer than what a flow copies before it splices: the count
// carries over from copying to splicing, and not a byte more goes up.
TEST_F(SpliceRelayTest, ALengthFramedBodyStopsAtItsEndAcrossCopyAndSplice) {
  constexpr std::size_t kBody = 300 * 1024 + 7;
  std::string body(kBody, 0);
  for (std::size_t i = 0; i < kBody; ++i) body[i] = static_cast<char>('a' + i % 26);
  RelaySpec spec;
  spec.head = "PUT / HTTP/1.1\r\n\r\n";
  spec.body = body.substr(0, 100);
  spec.framing = RequestFraming::kLength;
  spec.length = kBody;
  auto done = start(spec);
  std::thread writer([&] { send_all(client_.ours.get(), body.substr(100) + "GET /next"); });
  EXPECT_EQ(read_n(upstream_.ours.get(), spec.head.size() + kBody), spec.head + body);
  writer.join();
  struct pollfd p = {upstream_.ours.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 50), 0) << "bytes beyond the body went up";
  upstream_.ours.reset();
  read_to_eof(client_.ours.get());
  RelayResult r = done.get();
  EXPECT_EQ(r.bytes_up, spec.head.size() + kBody);
}

TEST_F(SpliceRelayTest, AChunkedRequestStopsAtItsLastChunk) {
  RelaySpec spec;
  spec.head = "POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n";
  spec.body = "5\r\nhel";
  spec.framing = RequestFraming::kChunked;
  auto done = start(spec);
  send_all(client_.ours.get(), "lo\r\n");
  std::this_thread::sleep_for(20ms);
  send_all(client_.ours.get(), "0\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n");
  const std::string body = "5\r\nhello\r\n0\r\n\r\n";
  EXPECT_EQ(read_n(upstream_.ours.get(), spec.head.size() + body.size()), spec.head + body);
  upstream_.ours.reset();
  read_to_eof(client_.ours.get());
  RelayResult r = done.get();
  EXPECT_EQ(r.bytes_up, spec.head.size() + body.size());
}

TEST_F(SpliceRelayTest, AMalformedChunkedBodyEndsTheRelay) {
  RelaySpec spec;
  spec.head = "POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n";
  spec.framing = RequestFraming::kChunked;
  auto done = start(spec);
  send_all(client_.ours.get(), "zz\r\n");
  RelayResult r = done.get();
  EXPECT_NE(r.end.find("malformed chunked body"), std::string::npos) << r.end;
}

TEST_F(SpliceRelayTest, IdleTimeout) {
  RelaySpec spec;
  spec.idle_timeout = 150ms;
  auto t0 = std::chrono::steady_clock::now();
  RelayResult r = start(spec).get();
  EXPECT_EQ(r.end, "idle timeout (150 ms)");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 150ms);
}

TEST_F(SpliceRelayTest, TheClientMustFollowTheUpstreamsEndSoon) {
  RelaySpec spec;
  spec.half_close_timeout = 200ms;
  auto done = start(spec);
  send_all(upstream_.ours.get(), "bye");
  ::shutdown(upstream_.ours.get(), SHUT_WR);
  bool eof = false;
  EXPECT_EQ(read_to_eof(client_.ours.get(), &eof), "bye");
  EXPECT_TRUE(eof);
  // The client keeps its side open: the relay ends anyway.
  RelayResult r = done.get();
  EXPECT_EQ(r.end, "closed (the client did not close within 200 ms of the upstream's end)");
}

TEST_F(SpliceRelayTest, WritingToAClosedUpstreamEndsBothWays) {
  RelaySpec spec;
  auto done = start(spec);
  send_all(client_.ours.get(), "x");
  EXPECT_EQ(read_n(upstream_.ours.get(), 1), "x");
  upstream_.ours.reset();  // gone, both ways
  // The relay passes the EOF on; the client's next bytes have nowhere to go.
  EXPECT_EQ(read_to_eof(client_.ours.get()), "");
  ::send(client_.ours.get(), "y", 1, MSG_NOSIGNAL);
  RelayResult r = done.get();
  EXPECT_TRUE(r.end == "reset (client to upstream)" || r.end.rfind("closed (the client", 0) == 0)
      << r.end;
}

TEST_F(SpliceRelayTest, LargeTransfersBothWaysAtOnce) {
  constexpr std::size_t kBytes = 48 << 20;
  RelaySpec spec;
  auto done = start(spec);
  auto pattern = [](std::size_t i) { return static_cast<char>((i * 7 + i / 4096) & 0xff); };
  auto writer = [&](int fd) {
    std::string block(1 << 16, 0);
    for (std::size_t off = 0; off < kBytes; off += block.size()) {
      for (std::size_t i = 0; i < block.size(); ++i) block[i] = pattern(off + i);
      send_all(fd, block);
    }
    ::shutdown(fd, SHUT_WR);
  };
  auto checker = [&](int fd, bool* ok) {
    std::string all = read_to_eof(fd);
    *ok = all.size() == kBytes;
    for (std::size_t i = 0; *ok && i < all.size(); i += 4093) *ok = all[i] == pattern(i);
  };
  bool up_ok = false, down_ok = false;
  std::thread w1(writer, client_.ours.get()), w2(writer, upstream_.ours.get());
  std::thread c1(checker, upstream_.ours.get(), &up_ok), c2(checker, client_.ours.get(), &down_ok);
  w1.join();
  w2.join();
  c1.join();
  c2.join();
  EXPECT_TRUE(up_ok);
  EXPECT_TRUE(down_ok);
  RelayResult r = done.get();
  EXPECT_EQ(r.end, "closed");
  EXPECT_EQ(r.bytes_up, kBytes);
  EXPECT_EQ(r.bytes_down, kBytes);
}

// A connected TCP pair on loopback (SO_RCVLOWAT, which batching uses,
// is TCP's): `ours` blocking with 5 s timeouts, `relays` non-blocking.
struct TcpPair {
  UniqueFd ours, relays;
  TcpPair() {
    UniqueFd l(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(l.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(l.get(), 1), 0);
    EXPECT_EQ(::getsockname(l.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
    ours.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    EXPECT_EQ(::connect(ours.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    relays.reset(::accept4(l.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    EXPECT_TRUE(relays.valid());
    timeval tv{5, 0};
    ::setsockopt(ours.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(ours.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
};

// A relay between two TCP pairs, with an idle timeout long enough for the
// slowest (ASan) run; each test sets what it is about.
RelaySpec tcp_spec(const TcpPair& client, const TcpPair& upstream) {
  RelaySpec spec;
  spec.client = client.relays.get();
  spec.upstream = upstream.relays.get();
  spec.idle_timeout = 20s;
  return spec;
}

// A fast stream is read in batches (SO_RCVLOWAT): when it pauses with less
// than a batch waiting, the tail still goes through at once (within the
// 1 ms batch wait, not at the idle timeout), both times batching was on.
TEST(SpliceRelayTcpTest, ATailAfterAFastStreamIsNotHeldForABatch) {
  TcpPair client, upstream;
  RelaySpec spec = tcp_spec(client, upstream);
  spec.batch_bytes = 512 * 1024;
  auto done = std::async(std::launch::async, [spec]() { return relay_connection(spec); });
  const std::string block(8 << 20, 'b');
  for (int round = 0; round < 2; ++round) {
    std::thread writer([&] { send_all(upstream.ours.get(), block); });
    EXPECT_EQ(read_n(client.ours.get(), block.size()).size(), block.size());
    writer.join();
    // Less than a batch, and the upstream waits for an answer.
    const auto t0 = std::chrono::steady_clock::now();
    send_all(upstream.ours.get(), "tail");
    EXPECT_EQ(read_n(client.ours.get(), 4), "tail") << "round " << round;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << "round " << round;
    send_all(client.ours.get(), "ack");
    EXPECT_EQ(read_n(upstream.ours.get(), 3), "ack");
  }
  upstream.ours.reset();
  client.ours.reset();
  RelayResult r = done.get();
  EXPECT_EQ(r.bytes_down, 2 * (block.size() + 4));
  EXPECT_EQ(r.bytes_up, 6u);
}

// A reader that stops reading (a sandbox that stalls a download): once the
// relay splices, the kernel holds at most unsent_bytes (plus the segment
// being added) unsent in the relay's socket towards it; the rest stays in
// the pipe and the upstream's socket. Without the limit the send buffer
// takes megabytes (checked: unsent_bytes = 0 holds more than the bound).
std::size_t stalled_unsent(std::size_t unsent_bytes) {
  TcpPair client, upstream;
  RelaySpec spec = tcp_spec(client, upstream);
  spec.unsent_bytes = unsent_bytes;
  auto done = std::async(std::launch::async, [spec]() { return relay_connection(spec); });
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    const std::string block(1 << 16, 'd');
    while (!stop) {
      pollfd p{upstream.ours.get(), POLLOUT, 0};
      if (::poll(&p, 1, 50) == 1)
        ::send(upstream.ours.get(), block.data(), block.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
  });
  // Let the pipeline fill up: the unsent count settles once every buffer
  // upstream of it is full.
  int unsent = 0, last = -1;
  for (int i = 0; i < 100 && unsent != last; ++i) {
    std::this_thread::sleep_for(100ms);
    last = unsent;
    EXPECT_EQ(::ioctl(client.relays.get(), SIOCOUTQNSD, &unsent), 0) << strerror(errno);
  }
  stop = true;
  writer.join();
  upstream.ours.reset();
  client.ours.reset();
  done.get();
  return static_cast<std::size_t>(unsent);
}

TEST(SpliceRelayTcpTest, AStalledReaderGetsAtMostTheUnsentLimitQueued) {
  constexpr std::size_t kLimit = 32 * 1024;
  // One segment (loopback: up to 64 KiB) may be added past the mark.
  constexpr std::size_t kBound = kLimit + 64 * 1024;
  EXPECT_LE(stalled_unsent(kLimit), kBound);
  EXPECT_GT(stalled_unsent(0), kBound) << "the kernel's default is not a limit: the test "
                                          "could not tell the setting apart";
}

// A download's send buffer toward the client is capped once it splices
// (the kernel doubles what it is given); the upload's toward the upstream
// is left to autotuning.
TEST(SpliceRelayTcpTest, ADownloadCapsTheSendBufferTowardTheClient) {
  TcpPair client, upstream;
  RelaySpec spec = tcp_spec(client, upstream);
  spec.client_sndbuf_bytes = 96 * 1024;
  int before = 0;
  socklen_t len = sizeof before;
  ASSERT_EQ(::getsockopt(upstream.relays.get(), SOL_SOCKET, SO_SNDBUF, &before, &len), 0);
  auto done = std::async(std::launch::async, [spec]() { return relay_connection(spec); });
  const std::string block(4 << 20, 'd');
  std::thread writer([&] { send_all(upstream.ours.get(), block); });
  EXPECT_EQ(read_n(client.ours.get(), block.size()).size(), block.size());
  writer.join();
  send_all(client.ours.get(), "small upload");
  EXPECT_EQ(read_n(upstream.ours.get(), 12), "small upload");
  int toward_client = 0, toward_upstream = 0;
  len = sizeof toward_client;
  ASSERT_EQ(::getsockopt(client.relays.get(), SOL_SOCKET, SO_SNDBUF, &toward_client, &len), 0);
  len = sizeof toward_upstream;
  ASSERT_EQ(::getsockopt(upstream.relays.get(), SOL_SOCKET, SO_SNDBUF, &toward_upstream, &len), 0);
  EXPECT_EQ(toward_client, 2 * 96 * 1024);
  EXPECT_EQ(toward_upstream, before) << "the upload (under 64 KiB) must not be capped";
  upstream.ours.reset();
  client.ours.reset();
  done.get();
}

}  // namespace
}  // namespace corral::net
