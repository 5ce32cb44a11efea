// Incremental parser of HTTP/1.1 message heads and bodies, shared by the
// server (requests) and the client (responses). It trusts nothing: every
// size is bounded by HeadLimits, every byte is checked against the RFC 9112
// grammar, and ambiguous framing (both Content-Length and chunked, two
// different Content-Lengths, obs-fold, a bare CR) is refused, the usual
// request-smuggling vectors, and so is a request that repeats a field whose
// meaning a repeat makes ambiguous (Host, Authorization, Content-Length,
// Content-Type, ...: http_parser.cc's kSingletonFields). No exceptions, no
// allocation beyond the limits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "http/http_message.h"

namespace corral::http {

struct HeadLimits {
  std::size_t max_head_bytes = 16 * 1024;  // request/status line + headers
  std::size_t max_headers = 100;
  std::size_t max_target_bytes = 8 * 1024;
};

// Parses a complete head: `bytes` must end with the blank line (CRLF CRLF);
// feed it what HeadBuffer found. Errors are kInvalidArgument with a message
// that says what is wrong ("header line without ':'", ...), or
// kResourceExhausted when the head exceeds max_head_bytes or max_headers,
// or the request target max_target_bytes (the server answers 431 to
// those). Input quoted in messages is escaped to printable ASCII.
Result<RequestHead> parse_request_head(std::string_view bytes, const HeadLimits& limits = {});
Result<ResponseHead> parse_response_head(std::string_view bytes, const HeadLimits& limits = {});

// Accumulates bytes until a head is complete (the "\r\n\r\n"), refusing
// heads longer than the limit. Bytes after the head stay available.
class HeadBuffer {
 public:
  explicit HeadBuffer(std::size_t max_head_bytes) : max_(max_head_bytes) {}
  // Appends; returns true when a complete head is buffered. kResourceExhausted
  // when the head outgrows the limit.
  Result<bool> feed(std::string_view bytes);
  std::string_view head() const;      // up to and including CRLF CRLF
  std::string_view leftover() const;  // bytes after the head
  void clear();

 private:
  std::size_t max_;
  std::string buf_;
  std::size_t head_end_ = 0;  // 0: not complete
};

// Decoder of a chunked body: consumes encoded bytes, produces data bytes.
// Chunk-size lines are bounded (no endless hex), extensions are skipped
// within a bound, trailers are read and discarded within a bound.
class ChunkedDecoder {
 public:
  // Decodes from `in`, appending data to `out` (at most `out_cap` bytes
  // appended per call). Returns the number of input bytes consumed. Stops
  // consuming when out is full or the body is complete.
  Result<std::size_t> decode(std::string_view in, std::string& out, std::size_t out_cap);
  // The same into a caller's buffer (no intermediate copy on the body
  // paths); `produced` is the number of data bytes written to out.
  Result<std::size_t> decode(std::string_view in, char* out, std::size_t out_cap,
                             std::size_t& produced);
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State { kSize, kExt, kSizeLf, kData, kDataCr, kDataLf, kTrailer, kTrailerLf, kDone };
  State state_ = State::kSize;
  std::uint64_t remaining_ = 0;
  std::size_t size_digits_ = 0;
  std::size_t line_bytes_ = 0;  // of the current ext/trailer line
  std::size_t trailer_bytes_ = 0;
  bool trailer_line_empty_ = true;
  bool ext_seen_semicolon_ = false;
};

}  // namespace corral::http
