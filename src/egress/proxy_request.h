// The HTTP request heads the egress proxy reads (ADR 0005, "Proxy"): the
// first request of a plain-HTTP connection (transparent: origin-form with a
// Host; explicit: absolute-form http://host/...) and the CONNECT of an
// explicit client. The head itself is parsed by src/http's parser, which
// refuses the usual smuggling vectors; this file adds what a proxy needs
// around it: the request-target forms that parser does not take (authority
// and absolute form), the name and port, and the head to send upstream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "http/http_message.h"
#include "netns/host_name.h"

namespace corral::net {

inline constexpr std::size_t kMaxProxyHeadBytes = 16 * 1024;

enum class HttpStart {
  kRequestLine,  // a complete first line of the form METHOD SP target SP HTTP/1.x CRLF
  kIncomplete,   // could still become one: read more
  kNotHttp,      // cannot be an HTTP/1 request
};

// Looks only at the first line (bounded by kMaxProxyHeadBytes). Used to
// classify the first bytes of a transparent connection: "GET key\r\n" (a
// Redis inline command) is not HTTP, "GET / HTTP/1.1\r\n" is.
HttpStart classify_http_start(std::string_view bytes);

struct ProxyRequest {
  enum Form {
    kOrigin,    // GET /path HTTP/1.1 (+ Host): a transparent client
    kAbsolute,  // GET http://host[:port]/path HTTP/1.1: an explicit (HTTP_PROXY) client
    kConnect,   // CONNECT host:port HTTP/1.1: an explicit client's tunnel
  };
  Form form = kOrigin;
  std::string method;
  // From the target (absolute, CONNECT): lower case, IPv6 without
  // brackets; the port is the target's (absolute form: 80 if none).
  std::string target_host;
  std::uint16_t target_port = 0;
  // From the Host header, if there is one: its host part (lower case, no
  // brackets, no trailing dot) and its port, if it names one.
  std::optional<std::string> host_header;
  std::optional<std::uint16_t> host_header_port;
  // The parsed head, its target in origin form (CONNECT: "/").
  http::RequestHead head;
  // Not CONNECT: the head to send upstream. Origin-form target, the
  // hop-by-hop fields dropped (Connection and what it lists, Keep-Alive,
  // Proxy-Connection, Proxy-Authorization, TE, Upgrade) and
  // "Connection: close" added: one request per upstream connection, so
  // that every request's Host is checked (see egress_session.cc).
  std::string upstream_head;
};

// Parses a complete head (ending with CRLF CRLF, at most kMaxProxyHeadBytes).
// kInvalidArgument with a message fit for a 400 answer.
Result<ProxyRequest> parse_proxy_request(std::string_view head);

// The field names a Connection header lists (lower case, trimmed): more
// hop-by-hop fields of this hop, to drop with it. Requests and responses.
std::vector<std::string> connection_options(const http::Headers& headers);

// Text a peer sent (a reason, a header), made fit for one audit field:
// at most `max` bytes, anything but printable ASCII replaced by a space.
std::string one_line(std::string_view s, std::size_t max = 400);

}  // namespace corral::net
