// Fuzz target for the HTTP parser: the first bytes every client of the
// daemon controls. The first input byte picks what is fuzzed (its value
// modulo 4, so corpus files can start with the digits '0'..'3'):
//   0 parse_request_head   1 parse_response_head
//   2 HeadBuffer           3 ChunkedDecoder
// Beyond "no crash", it checks the promises of http_parser.h: parsed heads
// meet the limits and carry no ambiguous framing, errors are named and
// printable, and the incremental parsers give the same answer however the
// input is split.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_checks.h"
#include "http/http_parser.h"

namespace {

using corral::ErrorCode;
using corral::fuzz::printable;
using corral::fuzz::require;
namespace http = corral::http;

void check_error(const corral::Error& e) {
  require(e.code == ErrorCode::kInvalidArgument || e.code == ErrorCode::kResourceExhausted);
  require(!e.message.empty() && printable(e.message) && printable(e.hint));
}

void check_headers(const http::Headers& headers, const http::HeadLimits& limits) {
  require(headers.size() <= limits.max_headers);
  for (const auto& h : headers) {
    require(!h.name.empty());
    for (char c : h.name) require(c > 0x20 && c < 0x7f && c != ':' && !(c >= 'A' && c <= 'Z'));
    for (char c : h.value) require(c == '\t' || static_cast<unsigned char>(c) >= 0x20);
    require(h.value.empty() || (h.value.front() != ' ' && h.value.back() != ' '));
  }
}

void fuzz_request(std::string_view in) {
  http::HeadLimits limits;
  limits.max_head_bytes = 4096;
  limits.max_headers = 16;
  limits.max_target_bytes = 512;
  auto req = http::parse_request_head(in, limits);
  if (!req) return check_error(req.error());
  require(in.size() <= limits.max_head_bytes && in.ends_with("\r\n\r\n"));
  require(!req->method.empty() && req->method.size() <= 32);
  require(req->target.starts_with("/") && req->target.size() <= limits.max_target_bytes);
  // The path is the target's, as sent: never decoded (docs/api.md "Routes").
  require(req->path == req->target.substr(0, req->target.find('?')));
  require(req->path.find('\0') == std::string::npos);
  // No single-valued field twice (http_parser.cc's kSingletonFields).
  for (std::string_view name :
       {"host", "authorization", "proxy-authorization", "content-length", "content-type",
        "transfer-encoding", "idempotency-key", "x-corral-gateway-token"}) {
    std::size_t n = 0;
    for (const auto& h : req->headers) n += h.name == name;
    require(n <= 1);
  }
  require(req->version_minor == 0 || req->version_minor == 1);
  require(!(req->chunked && req->content_length));
  require(!(req->chunked && req->version_minor == 0));
  require(!req->expect_continue || req->version_minor == 1);
  check_headers(req->headers, limits);
}

void fuzz_response(std::string_view in) {
  http::HeadLimits limits;
  limits.max_head_bytes = 4096;
  limits.max_headers = 16;
  auto resp = http::parse_response_head(in, limits);
  if (!resp) return check_error(resp.error());
  require(resp->status >= 100 && resp->status <= 599);
  require(!(resp->chunked && resp->content_length));
  if (resp->status < 200 || resp->status == 204 || resp->status == 304) {
    require(resp->content_length == 0u);
  }
  // A body delimited by the end of the connection cannot be kept alive.
  if (!resp->chunked && !resp->content_length) require(!resp->keep_alive);
  check_headers(resp->headers, limits);
}

// Feeds `in` whole and in pieces whose sizes come from `seed`.
void fuzz_head_buffer(std::string_view in, std::uint8_t seed) {
  constexpr std::size_t kMax = 1024;
  http::HeadBuffer whole(kMax);
  auto one = whole.feed(in);

  http::HeadBuffer pieces(kMax);
  corral::Result<bool> r = false;
  std::size_t pos = 0;
  std::size_t step = 1 + seed % 7;
  while (pos < in.size()) {
    std::size_t n = std::min(step, in.size() - pos);
    r = pieces.feed(in.substr(pos, n));
    pos += n;
    step = 1 + (step * 5 + seed) % 13;
    if (!r || *r) break;
  }
  if (!one) {
    require(one.error().code == ErrorCode::kResourceExhausted && printable(one.error().message));
    // Split or not, a head that is too long stays too long.
    require(!r || !*r);
    return;
  }
  if (!*one) {
    require(in.size() < kMax && in.find("\r\n\r\n") == std::string_view::npos);
    require(whole.head().empty() && whole.leftover().empty());
    return;
  }
  std::string_view head = whole.head();
  require(head.size() <= kMax && head.ends_with("\r\n\r\n"));
  require(head.find("\r\n\r\n") == head.size() - 4);  // the first blank line ends it
  require(std::string(head) + std::string(whole.leftover()) == in);
  require(r && *r && pieces.head() == head);
  whole.clear();
  require(whole.head().empty() && whole.leftover().empty());
}

// Decodes `in` in one call and in small steps with a small output cap; the
// outcomes must agree.
void fuzz_chunked(std::string_view in, std::uint8_t seed) {
  http::ChunkedDecoder a;
  std::string out_a;
  auto used_a = a.decode(in, out_a, in.size() + 1);
  if (used_a) {
    require(*used_a <= in.size() && out_a.size() <= *used_a);
    require(a.done() || *used_a == in.size());
  } else {
    require(used_a.error().code == ErrorCode::kInvalidArgument &&
            printable(used_a.error().message));
  }

  http::ChunkedDecoder b;
  std::string out_b;
  std::size_t pos = 0;
  std::size_t cap = 1 + seed % 5;
  bool failed = false;
  while (pos < in.size() && !b.done()) {
    std::size_t n = std::min<std::size_t>(1 + (pos * 7 + seed) % 11, in.size() - pos);
    auto used = b.decode(in.substr(pos, n), out_b, cap);
    if (!used) {
      failed = true;
      break;
    }
    require(*used <= n);
    if (*used == 0 && !b.done()) {
      // Only a full output stops consumption: the cap was reached.
      require(cap == 0);
    }
    pos += *used;
  }
  require(failed == !used_a);
  if (!failed) {
    require(out_a == out_b && a.done() == b.done());
    require(pos == *used_a);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      fuzz_request(in);
      break;
    case 1:
      fuzz_response(in);
      break;
    case 2:
      fuzz_head_buffer(in, data[0]);
      break;
    case 3:
      fuzz_chunked(in, data[0]);
      break;
  }
  return 0;
}
