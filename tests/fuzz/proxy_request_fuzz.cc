// Fuzz target for the egress proxy's request reading (proxy_request.h):
// the first line classifier and the head parser, on bytes a sandbox
// controls. Beyond "no crash": a classified request line is what the
// parser can take, the head sent upstream is itself a valid origin-form
// request for the same host, asks to close, and keeps the body's framing;
// errors are printable.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_checks.h"
#include "netns/host_name.h"
#include "egress/proxy_request.h"

namespace {

using corral::fuzz::printable;
using corral::fuzz::require;
namespace net = corral::net;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  net::HttpStart start = net::classify_http_start(in);
  if (start == net::HttpStart::kNotHttp) return 0;
  std::size_t end = in.find("\r\n\r\n");
  if (end == std::string_view::npos) return 0;
  std::string_view head = in.substr(0, end + 4);
  auto req = net::parse_proxy_request(head);
  if (!req) {
    require(!req.error().message.empty() && printable(req.error().message));
    return 0;
  }
  require(start == net::HttpStart::kRequestLine);
  if (req->form != net::ProxyRequest::kOrigin) {
    require(!req->target_host.empty() && net::canonical_host(req->target_host) == req->target_host);
    require(req->target_port != 0);
  }
  if (req->host_header) require(net::canonical_host(*req->host_header) == *req->host_header);
  if (req->form == net::ProxyRequest::kConnect) {
    require(req->upstream_head.empty());
    return 0;
  }
  require(req->upstream_head.ends_with("connection: close\r\n\r\n"));
  auto again = net::parse_proxy_request(req->upstream_head);
  require(again.has_value());
  require(again->form == net::ProxyRequest::kOrigin);
  require(again->method == req->method);
  require(again->head.chunked == req->head.chunked);
  require(again->head.content_length == req->head.content_length);
  require(!again->head.keep_alive);
  if (req->form == net::ProxyRequest::kAbsolute)
    require(again->host_header == req->target_host || again->host_header == req->host_header);
  else
    require(again->host_header == req->host_header);
  return 0;
}
