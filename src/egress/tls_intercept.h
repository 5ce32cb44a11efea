// The data phase of an intercepted TLS connection (issue 5, broker mode;
// docs/network.md "TLS interception"). The egress proxy has decided that
// the connection is allowed, connected the upstream, and that the
// sandbox's broker secret asks for interception of this host and port; it
// then hands the connection here:
//
//   1. TLS toward the sandbox is ended with a leaf certificate for the host
//      (cert_authority.h), starting from the ClientHello the proxy read;
//   2. TLS toward the upstream is opened with SNI = the host, and its
//      certificate chain and name are verified (refused otherwise: the
//      sandbox gets a 502 that says why);
//   3. one HTTP/1.1 request is read (head bounded, parsed by src/http),
//      its Host must be the host, and its head (rewritten for the upstream:
//      hop-by-hop fields dropped, Connection: close) goes to the swapper:
//      refused -> the sandbox gets a 403 and nothing is sent upstream;
//      otherwise the head is sent (then wiped: it may hold a secret) and
//      the body follows (Content-Length or chunked, streamed);
//   4. the response is streamed back with its Connection field rewritten
//      to close (1xx answers pass as they are), and both sides are closed.
//
// One request per connection: a client that wants to reuse the connection
// sees "Connection: close" and opens a new one (each new request is then
// decided, swapped and audited on its own).
#pragma once

#include <openssl/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "secrets/token_swapper.h"

namespace corral::net {

struct InterceptSpec {
  std::string sandbox;
  std::string host;  // canonical: what the leaf names and the upstream must prove
  std::uint16_t port = 443;
  int client = -1;  // connected, non-blocking; not closed here
  int upstream = -1;
  std::string client_hello;  // bytes already read from the client (its ClientHello)
  std::shared_ptr<SSL_CTX> leaf;
  SSL_CTX* upstream_ctx = nullptr;  // make_upstream_tls_context()
  secrets::TokenSwapper* swapper = nullptr;
  std::chrono::milliseconds head_timeout{10'000};  // handshakes and the request head
  std::chrono::milliseconds idle_timeout{10'000};  // no progress while relaying
};

enum class InterceptOutcome : std::uint8_t {
  kRelayed,        // the request went upstream (`end` says how it ended)
  kNoRequest,      // the client closed (or stalled) before sending a request
  kClientTls,      // the sandbox's handshake failed (does it trust corral's CA?)
  kUpstreamTls,    // the upstream's handshake or certificate failed: 502
  kSecretRefused,  // the swapper refused a token: 403
  kMismatch,       // the request's Host (or URL) is not the host: 403
  kMalformed,      // not an HTTP/1.1 request we forward: 400
  kTimeout,        // no complete request head in time: 408
};

struct InterceptResult {
  InterceptOutcome outcome = InterceptOutcome::kRelayed;
  std::string reason;                // why, for refusals
  std::string end;                   // how a relayed request ended
  std::vector<std::string> secrets;  // swapped (kRelayed) or refused (kSecretRefused)
  std::string method;
  std::string target;
  int status = 0;                // the status the sandbox got (0: none)
  std::uint64_t bytes_up = 0;    // on the upstream socket (TLS records)
  std::uint64_t bytes_down = 0;  // on the client socket (TLS records)
};

// Blocks (bounded by the spec's timeouts; it also ends when a socket is
// shut down from outside).
InterceptResult relay_intercepted(InterceptSpec spec);

}  // namespace corral::net
