// A blocking HTTP/1.1 client for corral's CLI and C++ SDK: one connection
// (TCP or unix socket), keep-alive, request bodies from memory or streamed
// from a source, response bodies streamed. Plain HTTP only: the daemon's TCP
// listener is meant for loopback or behind a TLS terminator.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "http/http_message.h"

namespace corral::http {

struct Endpoint {
  // "unix:/run/corral/corral.sock" (or "unix:///..."), "http://127.0.0.1:7070",
  // "http://[::1]:7070", "http://localhost" (port 80). Hosts are numeric or
  // "localhost": no name resolution (the binary is static). https is refused.
  static Result<Endpoint> parse(std::string_view url);
  bool is_unix = false;
  std::string unix_path;
  std::string host;
  std::uint16_t port = 0;
  std::string host_header() const;  // "127.0.0.1:7070" or "localhost"
};

// Streams a request body: fills buf, returns bytes written, 0 at the end.
using BodySource = std::function<Result<std::size_t>(char* buf, std::size_t cap)>;

// When the server closed the previous keep-alive connection (idle timeout,
// "Connection: close"), the next request transparently opens a new one.
class Client {
 public:
  // `timeout` bounds the connect and is the initial io timeout.
  static Result<Client> connect(const Endpoint& endpoint,
                                std::chrono::milliseconds timeout = std::chrono::seconds(30));
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  ~Client();

  // Sends a request; `body` (with Content-Length) or `source` (chunked, or
  // Content-Length when `source_length` is given). Reads the response head.
  // The body must then be consumed with read_body()/read_all() before the
  // next request on this connection. The answer to "HEAD" has no body,
  // whatever its Content-Length says (RFC 9112 6.3).
  Result<ResponseHead> send(std::string_view method, std::string_view target,
                            const Headers& headers, std::string_view body);
  Result<ResponseHead> send_streaming(std::string_view method, std::string_view target,
                                      const Headers& headers, const BodySource& source,
                                      std::optional<std::uint64_t> source_length);

  // Up to cap bytes of the current response body; 0 at its end.
  Result<std::size_t> read_body(char* buf, std::size_t cap);
  Result<std::string> read_all(std::size_t limit);

  // Timeout of each blocking read/write (0: none, for long streams).
  void set_io_timeout(std::chrono::milliseconds timeout);
  // Ends every blocking read or write with an error once the peer of
  // socket `fd` closes (a relay whose own client went away; -1: never).
  void end_when_gone(int fd);

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace corral::http
