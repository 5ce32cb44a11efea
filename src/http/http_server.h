// A small blocking HTTP/1.1 server: one thread per connection (bounded),
// keep-alive, Content-Length and chunked bodies both ways, streaming in and
// out. Listens on TCP and on unix sockets. Handlers are plain functions; the
// daemon's router sits on top. Why not an async framework: the daemon's
// work per request is blocking by nature (SQLite, namespaces, waiting for a
// process), the connection count is bounded by the sandboxes one host can
// run, and a thread per connection keeps streaming code straight-line.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "http/http_message.h"
#include "http/http_parser.h"

namespace corral::http {

// Reads a request body (already de-chunked), never more than it declared.
class BodyReader {
 public:
  virtual ~BodyReader() = default;
  // Up to `cap` bytes into `buf`; 0 means the body is complete. Errors:
  // kInvalidArgument (bad chunking), kTimeout (client stalled),
  // kSystem (connection lost).
  virtual Result<std::size_t> read(char* buf, std::size_t cap) = 0;
  // The whole body, refused with kResourceExhausted beyond `limit` bytes.
  Result<std::string> read_all(std::size_t limit);
  // Declared length if the client sent Content-Length.
  virtual std::optional<std::uint64_t> declared_length() const = 0;
};

// The server owns the framing: handlers must not set Content-Length,
// Transfer-Encoding (refused), and "Connection: close" from a handler closes
// the connection after the response. A header value with CR, LF or another
// control character is refused (no response splitting from user data).
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  // A complete response with Content-Length.
  virtual Status send(int status, const Headers& headers, std::string_view body) = 0;
  // A response whose body follows in write() calls: with a known length
  // (Content-Length) or, when `length` is empty, chunked.
  virtual Status start(int status, const Headers& headers, std::optional<std::uint64_t> length) = 0;
  virtual Status write(std::string_view data) = 0;
  // Ends a started response (the last chunk when chunked). Idempotent.
  virtual Status finish() = 0;
  virtual bool started() const = 0;
  // True once the peer has closed or reset the connection (checked without
  // blocking): a streaming handler polls this to stop early.
  virtual bool peer_gone() = 0;
  // The connection's fd, for poll() beside other fds (POLLRDHUP).
  virtual int fd() const = 0;
};

struct Peer {
  enum Kind { kTcp, kUnix } kind = kTcp;
  std::string address;  // "127.0.0.1:5555" or the socket path
  std::string host;     // TCP: the IP address alone ("127.0.0.1", "::1")
  // Unix sockets: the peer's credentials (SO_PEERCRED).
  pid_t pid = -1;
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
};

using Handler = std::function<void(const Peer&, const RequestHead&, BodyReader&, ResponseWriter&)>;

// How many connections the server holds, by budget (connection_table.h
// explains the budgets and why a caller with valid credentials always gets
// in). Beyond a budget: 503 overloaded, after closing an unauthenticated
// connection that waits for a head if there is one.
struct ConnectionLimits {
  std::size_t tcp = 1024;  // TCP connections, authenticated or not
  std::size_t unix_socket = 64;  // unix socket connections, a budget of their own
  // TCP connections none of whose requests has authenticated yet, in all
  // and from one IP address. Each must complete every request head within
  // unauthenticated_head_timeout (from the accept, or from the end of its
  // previous response).
  std::size_t unauthenticated = 128;
  std::size_t unauthenticated_per_peer = 32;
  std::chrono::milliseconds unauthenticated_head_timeout{10000};
};

struct ConnectionStats {
  std::size_t unix_open = 0;
  std::size_t tcp_authenticated = 0;
  std::size_t tcp_unauthenticated = 0;
  std::uint64_t refused = 0;                // 503: over a budget, no room to make
  std::uint64_t evicted = 0;                // unauthenticated ones closed to make room
  std::uint64_t refused_no_descriptor = 0;  // 503: accept() found no free fd
};

struct ServerOptions {
  HeadLimits head_limits;
  ConnectionLimits connections;
  std::chrono::milliseconds head_timeout{30000};  // whole head must arrive within
  std::chrono::milliseconds idle_timeout{60000};  // keep-alive wait for the next request
  std::chrono::milliseconds io_timeout{60000};    // a body read/write stalled this long
  // Whether a request carries valid credentials (the daemon: a bearer key
  // it knows). Asked for each request of a TCP connection that has not
  // authenticated yet, before the handler runs; the handler still decides
  // what to answer. Empty: the server knows no credentials, and every TCP
  // connection counts as authenticated from its accept.
  std::function<bool(const Peer&, const RequestHead&)> authenticate;
  // Where the server reports trouble the operator should see (accept()
  // out of file descriptors), at most once per 10 s with a count. Empty:
  // nowhere (the counts are in connection_stats()).
  std::function<void(const std::string&)> warn;
};

class Server {
 public:
  explicit Server(Handler handler, ServerOptions options = {});
  ~Server();  // stops and joins
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Listeners are added before run(). Errors name the address and hint.
  // "127.0.0.1" (numeric addresses or "localhost"), port 0 picks a free
  // port (see bound_port).
  Status listen_tcp(const std::string& host, std::uint16_t port);
  // Creates the socket file with `mode` (umask-independent); an existing
  // socket file nobody listens on is replaced, anything else is refused.
  Status listen_unix(const std::string& path, mode_t mode);
  std::uint16_t bound_port() const;  // of the first TCP listener

  // Serves until stop(); returns after every connection thread ended (a
  // handler blocked on something other than its connection delays that).
  // Unix socket files this server created are removed.
  void run();
  // Thread-safe and async-signal-safe (writes to an eventfd).
  void stop();

  std::size_t active_connections() const;
  ConnectionStats connection_stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace corral::http
