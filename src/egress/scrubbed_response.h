// The response to a request that carried a swapped-in secret (issue 12,
// point 7 "responses"; docs/secrets.md "Responses to a swapped request").
// Every path where corral swaps a broker token for its value (plain HTTP
// through the egress proxy, TLS interception, the gateway) sends the
// upstream's answer through a ScrubbedResponse instead of relaying it as
// it is: whatever the swap put in (secrets/reflection_guard.h) is written
// back as the token, in the head (status line, every field, 1xx heads
// included) and in the body, across reads and chunk boundaries (one
// RedactStream for the whole body, with its hold-back).
//
// Framing. The body is decoded (Content-Length, chunked, or until the
// upstream closes) and sent again in a framing of our own, since the
// token and the value differ in length:
//   - to an HTTP/1.1 request: `Transfer-Encoding: chunked` (one chunk per
//     piece written), so a cut answer is still seen as cut by the client;
//   - to an HTTP/1.0 request: no length; the end is the close.
// Content-Length and Transfer-Encoding of the upstream are dropped, and
// the answer says `Connection: close` (these paths carry one request per
// connection). A response without a body (to HEAD, 204, 304) keeps its
// framing fields as they were. Trailers of a chunked body are dropped.
//
// Refused (the caller answers 502 if nothing was written yet, else just
// closes): a compressed body (a Content-Encoding or Transfer-Encoding
// other than identity/chunked), which cannot be scanned (the request
// asked for `Accept-Encoding: identity`, so a host that compresses
// anyway is not trusted with it); a protocol switch (101: the request had
// no Upgrade, which is a hop-by-hop field corral drops); a malformed or
// oversized head.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "http/http_parser.h"
#include "secrets/redactor.h"

namespace corral::net {

struct ScrubOptions {
  bool head_request = false;  // the request was HEAD: the answer has no body
  bool chunked_ok = true;     // the request was HTTP/1.1 (else HTTP/1.0: close-delimited)
};

class ScrubbedResponse {
 public:
  enum class State : std::uint8_t {
    kMore,    // feed more
    kDone,    // the response is complete: stop reading, close
    kFailed,  // refused or broken: error() says why; stop
  };

  ScrubbedResponse(std::shared_ptr<const secrets::RedactionSet> set, ScrubOptions options);

  // Upstream bytes in; appends to `out` what the client gets.
  State feed(std::string_view in, std::string& out);
  // The upstream ended (closed its side).
  State end_of_stream(std::string& out);

  const std::string& error() const { return error_; }
  // Whether anything was appended to an `out` yet (else the caller may
  // still answer with a status of its own).
  bool started() const { return started_; }
  int status() const { return status_; }
  // Texts written back as their token, in the heads and the body.
  std::uint64_t replaced() const;

 private:
  enum class Body : std::uint8_t { kHead, kLength, kChunked, kClose, kDone };
  State fail(std::string why);
  State on_head(std::string_view head, std::string& out, bool& final);
  void emit_body(std::string_view scrubbed, std::string& out);
  State finish_body(std::string& out);
  void put(std::string& out, std::string_view bytes);

  std::shared_ptr<const secrets::RedactionSet> set_;
  ScrubOptions options_;
  http::HeadBuffer head_{64 * 1024};
  secrets::RedactStream body_;
  std::uint64_t head_replacements_ = 0;
  http::ChunkedDecoder chunks_;
  Body state_ = Body::kHead;
  std::uint64_t left_ = 0;  // kLength: body bytes still to come
  bool chunked_out_ = false;
  bool started_ = false;
  bool failed_ = false;
  int status_ = 0;
  std::string error_;
  std::string scratch_;
};

// The loop each path runs: reads the upstream (`first`: bytes already read
// after the request), writes the client, until the response is done, the
// upstream ends, or either side fails.
struct ScrubIo {
  // Upstream bytes: > 0 read, 0 end of stream, -1 failed, -2 idle timeout.
  std::function<long(char*, std::size_t)> read;
  // To the client; false: it stopped reading.
  std::function<bool(std::string_view)> write;
};

struct ScrubRelayResult {
  bool answered = false;  // something reached the client
  bool refused = false;   // ScrubbedResponse refused it (error says why)
  int status = 0;
  std::uint64_t bytes_down = 0;  // written to the client
  std::uint64_t replaced = 0;
  std::string end;  // "closed", or what went wrong
};

ScrubRelayResult relay_scrubbed(ScrubbedResponse& response, const ScrubIo& io,
                                std::string_view first = {});

}  // namespace corral::net
