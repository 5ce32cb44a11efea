#include "e2b/connect_protocol.h"

#include <nlohmann/json.hpp>

namespace corral::e2b {

namespace {

struct CodeRow {
  ConnectCode code;
  std::string_view name;
  int http;
};

// connectrpc.com/docs/protocol#error-codes
constexpr CodeRow kCodes[] = {
    {ConnectCode::kCanceled, "canceled", 499},
    {ConnectCode::kUnknown, "unknown", 500},
    {ConnectCode::kInvalidArgument, "invalid_argument", 400},
    {ConnectCode::kDeadlineExceeded, "deadline_exceeded", 504},
    {ConnectCode::kNotFound, "not_found", 404},
    {ConnectCode::kAlreadyExists, "already_exists", 409},
    {ConnectCode::kPermissionDenied, "permission_denied", 403},
    {ConnectCode::kResourceExhausted, "resource_exhausted", 429},
    {ConnectCode::kFailedPrecondition, "failed_precondition", 400},
    {ConnectCode::kAborted, "aborted", 409},
    {ConnectCode::kOutOfRange, "out_of_range", 400},
    {ConnectCode::kUnimplemented, "unimplemented", 501},
    {ConnectCode::kInternal, "internal", 500},
    {ConnectCode::kUnavailable, "unavailable", 503},
    {ConnectCode::kDataLoss, "data_loss", 500},
    {ConnectCode::kUnauthenticated, "unauthenticated", 401},
};

const CodeRow& row(ConnectCode code) {
  for (const CodeRow& r : kCodes)
    if (r.code == code) return r;
  return kCodes[1];
}

void put_u32(std::string& out, std::uint32_t v) {
  out.push_back(static_cast<char>(v >> 24));
  out.push_back(static_cast<char>(v >> 16));
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v));
}

std::uint32_t get_u32(const char* p) {
  auto b = [&](int i) { return static_cast<std::uint32_t>(static_cast<unsigned char>(p[i])); };
  return b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3);
}

}  // namespace

std::string_view connect_code_name(ConnectCode code) { return row(code).name; }
int connect_http_status(ConnectCode code) { return row(code).http; }

std::optional<ConnectCode> connect_code_from_name(std::string_view name) {
  for (const CodeRow& r : kCodes)
    if (r.name == name) return r.code;
  return std::nullopt;
}

ConnectCode connect_code_from_http(int status) {
  switch (status) {
    case 400: return ConnectCode::kInternal;
    case 401: return ConnectCode::kUnauthenticated;
    case 403: return ConnectCode::kPermissionDenied;
    case 404: return ConnectCode::kUnimplemented;
    case 429:
    case 502:
    case 503:
    case 504: return ConnectCode::kUnavailable;
    default: return ConnectCode::kUnknown;
  }
}

std::string connect_error_json(const ConnectError& e) {
  nlohmann::json j{{"code", std::string(connect_code_name(e.code))}, {"message", e.message}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<ConnectError> parse_connect_error(std::string_view body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  auto code = j.find("code");
  if (code == j.end() || !code->is_string()) return std::nullopt;
  auto c = connect_code_from_name(code->get<std::string>());
  if (!c) return std::nullopt;
  ConnectError e{*c, {}};
  if (auto m = j.find("message"); m != j.end() && m->is_string()) e.message = m->get<std::string>();
  return e;
}

std::string envelope(std::uint8_t flags, std::string_view message) {
  std::string out;
  out.reserve(5 + message.size());
  out.push_back(static_cast<char>(flags));
  put_u32(out, static_cast<std::uint32_t>(message.size()));
  out.append(message);
  return out;
}

std::string end_stream_envelope(const std::optional<ConnectError>& error) {
  if (!error) return envelope(kEnvelopeEndStream, "{}");
  return envelope(kEnvelopeEndStream, "{\"error\":" + connect_error_json(*error) + "}");
}

Status EnvelopeReader::feed(std::string_view bytes) {
  // Drop what was consumed before growing the buffer.
  if (pos_ > 0 && pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  buf_.append(bytes);
  while (buf_.size() - pos_ >= 5) {
    const std::uint8_t flags = static_cast<std::uint8_t>(buf_[pos_]);
    const std::uint32_t len = get_u32(buf_.data() + pos_ + 1);
    if (flags & kEnvelopeCompressed)
      return make_error(ErrorCode::kInvalidArgument, "a compressed envelope (none was negotiated)");
    if (len > kMaxEnvelope)
      return make_error(ErrorCode::kInvalidArgument,
                        "an envelope of " + std::to_string(len) + " bytes (at most " +
                            std::to_string(kMaxEnvelope) + ")");
    if (buf_.size() - pos_ - 5 < len) break;
    ready_.push_back({flags, buf_.substr(pos_ + 5, len)});
    pos_ += 5 + len;
  }
  return ok();
}

std::optional<Envelope> EnvelopeReader::next() {
  if (ready_pos_ == ready_.size()) {
    ready_.clear();
    ready_pos_ = 0;
    return std::nullopt;
  }
  return std::move(ready_[ready_pos_++]);
}

Result<std::string> single_envelope(std::string_view body) {
  if (body.size() < 5)
    return make_error(ErrorCode::kInvalidArgument,
                      "the body is not a Connect envelope (5 bytes of flags and length, then the "
                      "message)");
  const auto flags = static_cast<std::uint8_t>(body[0]);
  const std::uint32_t len = get_u32(body.data() + 1);
  if (flags != 0)
    return make_error(ErrorCode::kInvalidArgument,
                      "the request envelope has flags " + std::to_string(flags) +
                          " (only 0: uncompressed, not end-of-stream)");
  if (len != body.size() - 5)
    return make_error(ErrorCode::kInvalidArgument,
                      "the request envelope says " + std::to_string(len) + " bytes but " +
                          std::to_string(body.size() - 5) + " follow");
  return std::string(body.substr(5));
}

}  // namespace corral::e2b
