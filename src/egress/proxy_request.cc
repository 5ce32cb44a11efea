#include "egress/proxy_request.h"

#include <algorithm>
#include <vector>

#include "http/http_parser.h"

#include "base/strings.h"

namespace corral::net {
namespace {

constexpr std::size_t kMaxMethodBytes = 32;

tl::unexpected<Error> bad(std::string message) {
  return make_error(ErrorCode::kInvalidArgument, std::move(message));
}

// The printable form of untrusted text for an error message.
std::string quoted(std::string_view s) { return quote_for_message(s, 200); }

// Fields that concern only this hop and are never passed upstream. The
// framing fields and Host are never dropped, whatever Connection lists:
// dropping Content-Length while still framing the body by it would hand
// the upstream a different message than the one checked.
bool always_hop_by_hop(std::string_view name) {
  return name == "connection" || name == "keep-alive" || name == "proxy-connection" ||
         name == "proxy-authorization" || name == "proxy-authenticate" || name == "te" ||
         name == "upgrade";
}

bool never_dropped(std::string_view name) {
  return name == "host" || name == "content-length" || name == "transfer-encoding";
}

}  // namespace

HttpStart classify_http_start(std::string_view b) {
  enum { kMethod, kTarget, kVersion, kLf } state = kMethod;
  static constexpr std::string_view kVersionPrefix = "HTTP/1.";
  std::size_t field = 0;  // bytes of the current part
  std::size_t n = std::min(b.size(), kMaxProxyHeadBytes);
  for (std::size_t i = 0; i < n; ++i) {
    const char c = b[i];
    switch (state) {
      case kMethod:
        if (c == ' ') {
          if (field == 0) return HttpStart::kNotHttp;
          state = kTarget;
          field = 0;
        } else if (!((c >= 'A' && c <= 'Z') || c == '-' || c == '_') || ++field > kMaxMethodBytes) {
          return HttpStart::kNotHttp;
        }
        break;
      case kTarget:
        if (c == ' ') {
          if (field == 0) return HttpStart::kNotHttp;
          state = kVersion;
          field = 0;
        } else if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
          return HttpStart::kNotHttp;
        } else {
          ++field;
        }
        break;
      case kVersion:
        if (field < kVersionPrefix.size()) {
          if (c != kVersionPrefix[field]) return HttpStart::kNotHttp;
        } else if (field == kVersionPrefix.size()) {
          if (c < '0' || c > '9') return HttpStart::kNotHttp;
        } else if (c == '\r') {
          state = kLf;
        } else {
          return HttpStart::kNotHttp;
        }
        ++field;
        break;
      case kLf:
        return c == '\n' ? HttpStart::kRequestLine : HttpStart::kNotHttp;
    }
  }
  return b.size() >= kMaxProxyHeadBytes ? HttpStart::kNotHttp : HttpStart::kIncomplete;
}

Result<ProxyRequest> parse_proxy_request(std::string_view head) {
  if (head.size() > kMaxProxyHeadBytes)
    return bad("request head longer than " + std::to_string(kMaxProxyHeadBytes) + " bytes");
  std::size_t eol = head.find("\r\n");
  if (eol == std::string_view::npos) return bad("no request line");
  std::string_view line = head.substr(0, eol);
  std::size_t sp1 = line.find(' ');
  std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return bad("malformed request line " + quoted(line));
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);

  ProxyRequest req;
  std::string origin_target;
  if (method == "CONNECT") {
    req.form = ProxyRequest::kConnect;
    std::optional<std::uint16_t> port;
    if (!split_host_port(target, req.target_host, port) || !port)
      return bad("CONNECT target " + quoted(target) + " is not host:port");
    req.target_port = *port;
    origin_target = "/";
  } else if (!target.empty() && target.front() == '/') {
    req.form = ProxyRequest::kOrigin;
    origin_target.assign(target);
  } else if (istarts_with(target, "http://")) {
    req.form = ProxyRequest::kAbsolute;
    std::string_view rest = target.substr(7);
    std::size_t end = rest.find_first_of("/?");
    std::string_view authority = rest.substr(0, end);
    if (authority.find('@') != std::string_view::npos)
      return bad("a URL with user information is not accepted: " + quoted(target));
    std::optional<std::uint16_t> port;
    if (!split_host_port(authority, req.target_host, port))
      return bad("bad host in request target " + quoted(target));
    req.target_port = port.value_or(80);
    std::string_view path = end == std::string_view::npos ? std::string_view() : rest.substr(end);
    origin_target =
        path.empty() || path.front() == '?' ? "/" + std::string(path) : std::string(path);
  } else if (istarts_with(target, "https://")) {
    return bad("an https:// URL goes through CONNECT, not a plain request: " + quoted(target));
  } else {
    return bad("request target " + quoted(target) +
               " is neither a path, an http:// URL nor (with CONNECT) host:port");
  }

  // The shared parser checks the rest (method, origin-form target,
  // version, fields, framing) on the head with an origin-form target.
  std::string rebuilt;
  rebuilt.reserve(head.size());
  rebuilt.append(method).append(" ").append(origin_target).append(" ").append(version);
  rebuilt.append(head.substr(eol));
  http::HeadLimits limits;
  limits.max_head_bytes = kMaxProxyHeadBytes + 8;  // "/" may be longer than a CONNECT target
  auto parsed = http::parse_request_head(rebuilt, limits);
  if (!parsed) return tl::unexpected(parsed.error());
  req.head = std::move(*parsed);
  req.method = req.head.method;

  if (auto host = req.head.header("host"); host && !host->empty()) {
    std::string name;
    std::optional<std::uint16_t> port;
    if (!split_host_port(*host, name, port)) return bad("bad Host header " + quoted(*host));
    req.host_header = std::move(name);
    req.host_header_port = port;
  }
  if (req.form == ProxyRequest::kConnect) return req;

  // Connection options name more fields of this hop.
  const std::vector<std::string> listed = connection_options(req.head.headers);
  std::string& out = req.upstream_head;
  out.reserve(rebuilt.size() + 32);
  out.append(req.method).append(" ").append(origin_target);
  out.append(req.head.version_minor == 0 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n");
  std::size_t out_fields = 0;
  if (req.form == ProxyRequest::kAbsolute && !req.head.header("host")) {
    ++out_fields;
    // RFC 9112 3.2.2: the URL's authority is the Host.
    out.append("host: ").append(target.substr(7, target.substr(7).find_first_of("/?")));
    out.append("\r\n");
  }
  for (const auto& h : req.head.headers) {
    if (!never_dropped(h.name) && (always_hop_by_hop(h.name) ||
                                   std::find(listed.begin(), listed.end(), h.name) != listed.end()))
      continue;
    out.append(h.name).append(": ").append(h.value).append("\r\n");
    ++out_fields;
  }
  out.append("connection: close\r\n\r\n");
  // The head sent upstream may carry more fields than the one received
  // (host, connection): it must still be one that corral's own parser, and
  // so a strict upstream, takes (found by fuzzing: 100 fields in, 101 out).
  if (out_fields + 1 > limits.max_headers) {
    return make_error(ErrorCode::kResourceExhausted,
                      "more than " + std::to_string(limits.max_headers) +
                          " header fields once the proxy adds host and connection");
  }
  return req;
}

std::vector<std::string> connection_options(const http::Headers& headers) {
  std::vector<std::string> listed;
  for (const auto& h : headers) {
    if (h.name != "connection") continue;
    std::string_view rest = h.value;
    while (!rest.empty()) {
      std::size_t comma = rest.find(',');
      std::string_view opt = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      while (!opt.empty() && (opt.front() == ' ' || opt.front() == '\t')) opt.remove_prefix(1);
      while (!opt.empty() && (opt.back() == ' ' || opt.back() == '\t')) opt.remove_suffix(1);
      if (!opt.empty()) listed.push_back(ascii_lower(opt));
    }
  }
  return listed;
}

std::string one_line(std::string_view s, std::size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) {
    auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? c : ' ';
  }
  return out;
}

}  // namespace corral::net
