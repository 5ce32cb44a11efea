// The Connect protocol (connectrpc.com/docs/protocol) as E2B's envd speaks
// it with the JSON codec: the envelopes of a streaming call (one flag byte,
// a 4-byte big-endian length, a JSON message), the end-of-stream message,
// and the error codes with the HTTP status each one maps to. No HTTP here:
// the daemon's facade and the hosted provider both build on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace corral::e2b {

enum class ConnectCode {
  kCanceled,
  kUnknown,
  kInvalidArgument,
  kDeadlineExceeded,
  kNotFound,
  kAlreadyExists,
  kPermissionDenied,
  kResourceExhausted,
  kFailedPrecondition,
  kAborted,
  kOutOfRange,
  kUnimplemented,
  kInternal,
  kUnavailable,
  kDataLoss,
  kUnauthenticated,
};

// "not_found", ...; the HTTP status of a unary error with this code.
std::string_view connect_code_name(ConnectCode code);
int connect_http_status(ConnectCode code);
std::optional<ConnectCode> connect_code_from_name(std::string_view name);
// The code a client infers from an HTTP status when the body says none
// (the protocol's table: 404 is unimplemented, 502-504 unavailable).
ConnectCode connect_code_from_http(int status);

struct ConnectError {
  ConnectCode code = ConnectCode::kUnknown;
  std::string message;
};
// {"code":"not_found","message":"..."}: a unary error's body, and the
// "error" member of an end-of-stream message.
std::string connect_error_json(const ConnectError& e);
// A unary error body, or nullopt when it is not one.
std::optional<ConnectError> parse_connect_error(std::string_view body);

inline constexpr std::uint8_t kEnvelopeCompressed = 0x01;
inline constexpr std::uint8_t kEnvelopeEndStream = 0x02;
// Envelopes larger than this are refused (both directions): envd's
// messages are small; output comes in chunks far below it.
inline constexpr std::size_t kMaxEnvelope = 16u << 20;

std::string envelope(std::uint8_t flags, std::string_view message);
// The end-of-stream envelope: {} or {"error":{...}}.
std::string end_stream_envelope(const std::optional<ConnectError>& error);

struct Envelope {
  std::uint8_t flags = 0;
  std::string message;
};

// Cuts a byte stream into envelopes as it arrives (a client reading a
// stream). Compressed envelopes are refused: no compression is ever
// negotiated.
class EnvelopeReader {
 public:
  // Appends bytes; kInvalidArgument for an envelope over kMaxEnvelope or a
  // compressed one (the reader is then unusable).
  Status feed(std::string_view bytes);
  // The next whole envelope, if one has arrived.
  std::optional<Envelope> next();
  // Bytes of an envelope not complete yet.
  bool partial() const { return pos_ < buf_.size(); }

 private:
  std::string buf_;
  std::size_t pos_ = 0;
  std::vector<Envelope> ready_;
  std::size_t ready_pos_ = 0;
};

// A streaming request's body: exactly one uncompressed envelope with flag
// 0, nothing after it.
Result<std::string> single_envelope(std::string_view body);

}  // namespace corral::e2b
