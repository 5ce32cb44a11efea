// TLS over one of the proxy's non-blocking sockets, with deadlines (issue
// 5: TLS interception in the egress proxy, https services in the gateway).
// OpenSSL reads and writes memory BIOs and this class moves their bytes
// to and from the socket with socket_wait.h's bounded waits, so that a
// handshake can start from bytes already read (the ClientHello the proxy
// classified the connection by) and every wait has a deadline and wakes
// when the other side of a relay goes away.
#pragma once

#include <openssl/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "egress/socket_wait.h"

namespace corral::net {

class TlsStream {
 public:
  // Takes `ssl` (freed here), whose BIOs become memory BIOs; `fd` is a
  // connected non-blocking socket, not closed here. `already_read`: bytes
  // the peer sent before, given to TLS first.
  TlsStream(SSL* ssl, int fd, std::string_view already_read = {});
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  // SSL_set_accept_state / SSL_set_connect_state must have been called.
  // False with error() set on failure (a certificate that does not verify
  // says why).
  bool handshake(SteadyClock::time_point deadline, int watch = -1);
  // > 0: bytes read; 0: the peer ended (close_notify or end of stream);
  // -1: error (error() says which); -2: the deadline passed.
  long read(char* buf, std::size_t n, SteadyClock::time_point deadline, int watch = -1);
  bool write_all(std::string_view data, SteadyClock::time_point deadline, int watch = -1);
  // Sends close_notify (best effort, bounded by `deadline`).
  void close(SteadyClock::time_point deadline);

  SSL* ssl() const { return ssl_; }
  std::uint64_t bytes_sent() const { return sent_; }          // on the socket
  std::uint64_t bytes_received() const { return received_; }  // from the socket
  const std::string& error() const { return error_; }

 private:
  bool flush(SteadyClock::time_point deadline, int watch);
  // Socket -> TLS: 1 some bytes, 0 end of stream, -1 error, -2 timeout.
  int fill(SteadyClock::time_point deadline, int watch);
  void fail(std::string_view what);

  SSL* ssl_ = nullptr;
  BIO* in_ = nullptr;   // owned by ssl_
  BIO* out_ = nullptr;  // owned by ssl_
  int fd_ = -1;
  bool eof_ = false;
  std::uint64_t sent_ = 0;
  std::uint64_t received_ = 0;
  std::string error_;
};

// A client context for upstreams: TLS 1.2 or later, the peer's chain
// verified against the system trust store plus `extra_ca_file` (PEM; may
// be empty), ALPN http/1.1. kInvalidArgument if the file cannot be loaded.
Result<std::shared_ptr<SSL_CTX>> make_upstream_tls_context(const std::string& extra_ca_file);

// A client SSL for `host` (canonical: a DNS name or an IP literal): SNI
// for a name, and the certificate must name `host` (SAN DNS or IP).
// nullptr if OpenSSL fails.
SSL* new_upstream_ssl(SSL_CTX* ctx, const std::string& host);

// The OpenSSL error queue as one line (and cleared).
std::string openssl_errors();

}  // namespace corral::net
