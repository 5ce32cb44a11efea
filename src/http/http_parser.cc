#include "http/http_parser.h"

#include <algorithm>
#include <cstring>

#include "http/char_class.h"

namespace corral::http {
namespace {

constexpr std::size_t kMaxMethodBytes = 32;
constexpr std::size_t kMaxChunkLineBytes = 4096;  // chunk size + extensions
constexpr std::size_t kMaxTrailerBytes = 16 * 1024;
constexpr std::string_view kEndOfHead = "\r\n\r\n";

tl::unexpected<Error> bad(std::string message) {
  return make_error(ErrorCode::kInvalidArgument, std::move(message));
}

tl::unexpected<Error> too_large(std::string message) {
  return make_error(ErrorCode::kResourceExhausted, std::move(message));
}

// Checks what holds for the whole head before it is split into lines: it
// ends with the blank line, holds no NUL, and every CR and LF is part of a
// CRLF pair (a bare CR or LF is read as a line end by some parsers and not
// by others: a classic smuggling vector).
Status check_head_bytes(std::string_view bytes, const HeadLimits& limits) {
  if (bytes.size() > limits.max_head_bytes) {
    return too_large("head longer than " + std::to_string(limits.max_head_bytes) + " bytes");
  }
  if (!bytes.ends_with(kEndOfHead)) return bad("head does not end with an empty line");
  if (std::memchr(bytes.data(), '\0', bytes.size()) != nullptr) return bad("NUL byte in head");
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] == '\r' && (i + 1 == bytes.size() || bytes[i + 1] != '\n')) {
      return bad("bare CR in head");
    }
    if (bytes[i] == '\n' && (i == 0 || bytes[i - 1] != '\r')) return bad("bare LF in head");
  }
  return ok();
}

// Splits off the next CRLF-terminated line (check_head_bytes ran first).
std::string_view next_line(std::string_view& rest) {
  std::size_t end = rest.find("\r\n");
  std::string_view line = rest.substr(0, end);
  rest.remove_prefix(end + 2);
  return line;
}

Result<int> parse_version(std::string_view v) {
  if (v.size() != 8 || !v.starts_with("HTTP/") || v[6] != '.' || v[5] < '0' || v[5] > '9' ||
      v[7] < '0' || v[7] > '9') {
    return bad("malformed HTTP version " + chars::quote(v));
  }
  if (v[5] != '1' || (v[7] != '0' && v[7] != '1')) {
    return bad("unsupported HTTP version " + chars::quote(v) + " (HTTP/1.0 and 1.1 only)");
  }
  return v[7] - '0';
}

// The header block (after the start line), lower-casing names.
Status parse_fields(std::string_view rest, const HeadLimits& limits, Headers& out) {
  while (true) {
    std::string_view line = next_line(rest);
    if (line.empty()) return ok();  // the blank line that ends the head
    if (line.front() == ' ' || line.front() == '\t') {
      return bad("obsolete line folding in header block");
    }
    if (out.size() >= limits.max_headers) {
      return too_large("more than " + std::to_string(limits.max_headers) + " header fields");
    }
    std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) return bad("header line without ':'");
    std::string_view name = line.substr(0, colon);
    if (name.empty()) return bad("empty header name");
    if (name.back() == ' ' || name.back() == '\t') {
      return bad("whitespace between header name " + chars::quote(chars::trim_ows(name)) +
                 " and ':'");
    }
    if (!chars::is_token(name)) return bad("invalid header name " + chars::quote(name));
    std::string_view value = chars::trim_ows(line.substr(colon + 1));
    if (!chars::is_field_value(value)) {
      return bad("control character in the value of header " + chars::quote(name));
    }
    Header h;
    h.name.resize(name.size());
    std::transform(name.begin(), name.end(), h.name.begin(),
                   [](char c) { return ascii_lower(c); });
    h.value.assign(value);
    out.push_back(std::move(h));
  }
}

struct Framing {
  std::optional<std::uint64_t> content_length;
  bool chunked = false;
  bool conn_close = false;
  bool conn_keep_alive = false;
  std::size_t hosts = 0;
  bool expect_continue = false;
};

Result<std::uint64_t> parse_content_length(std::string_view v) {
  if (v.empty()) return bad("empty Content-Length");
  std::uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return bad("Content-Length is not a number: " + chars::quote(v));
    auto digit = static_cast<std::uint64_t>(c - '0');
    if (n > (UINT64_MAX - digit) / 10) return bad("Content-Length overflows: " + chars::quote(v));
    n = n * 10 + digit;
  }
  return n;
}

// Reads the fields that decide how the body is delimited and whether the
// connection persists, refusing every ambiguous combination.
Result<Framing> framing_of(const Headers& headers, int version_minor) {
  Framing f;
  std::size_t transfer_encodings = 0;
  for (const auto& h : headers) {
    if (h.name == "content-length") {
      auto n = parse_content_length(h.value);
      if (!n) return tl::unexpected(n.error());
      if (f.content_length && *f.content_length != *n) {
        return bad("two different Content-Length values");
      }
      f.content_length = *n;
    } else if (h.name == "transfer-encoding") {
      if (++transfer_encodings > 1) return bad("more than one Transfer-Encoding header");
      if (!chars::iequals(h.value, "chunked")) {
        return bad("unsupported Transfer-Encoding " + chars::quote(h.value) +
                   " (only \"chunked\")");
      }
      f.chunked = true;
    } else if (h.name == "connection") {
      std::string_view rest = h.value;
      while (!rest.empty()) {
        std::size_t comma = rest.find(',');
        std::string_view opt = chars::trim_ows(rest.substr(0, comma));
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        if (chars::iequals(opt, "close")) f.conn_close = true;
        if (chars::iequals(opt, "keep-alive")) f.conn_keep_alive = true;
      }
    } else if (h.name == "host") {
      ++f.hosts;
    } else if (h.name == "expect") {
      // Expect means nothing in HTTP/1.0 (RFC 9110 10.1.1).
      if (version_minor == 1 && chars::iequals(h.value, "100-continue")) f.expect_continue = true;
    }
  }
  if (f.chunked && f.content_length) {
    return bad("both Content-Length and Transfer-Encoding");
  }
  if (f.chunked && version_minor == 0) {
    return bad("Transfer-Encoding in an HTTP/1.0 message");  // RFC 9112 6.1
  }
  return f;
}

bool keep_alive_of(const Framing& f, int version_minor) {
  if (f.conn_close) return false;
  return version_minor == 1 || f.conn_keep_alive;
}

// "content-length" -> "Content-Length", for messages.
std::string canonical_name(std::string_view lower) {
  std::string out(lower);
  bool start = true;
  for (char& c : out) {
    if (start && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    start = c == '-';
  }
  return out;
}

// Request fields whose meaning is ambiguous when one is repeated: each is a
// single value, not a list (RFC 9110 5.3), so two copies leave the server
// to pick one, and two hops may pick differently (the first Authorization
// checked, the last one forwarded; one Content-Length framing here and the
// other further on). A repeated one is refused, never merged or picked.
// Host is RFC 9112 3.2's rule; Transfer-Encoding is a list, but corral
// accepts only one "chunked". List fields (Connection, Accept, Expect...)
// may repeat: their copies combine into one list with the same meaning.
constexpr std::string_view kSingletonFields[] = {
    "host",         "authorization",     "proxy-authorization", "content-length",
    "content-type", "transfer-encoding", "idempotency-key",     "x-corral-gateway-token",
};

Status check_singletons(const Headers& headers) {
  for (std::string_view name : kSingletonFields) {
    std::size_t seen = 0;
    for (const auto& h : headers) {
      if (h.name == name && ++seen > 1) {
        return bad("more than one " + canonical_name(name) + " header");
      }
    }
  }
  return ok();
}

// Origin-form only ("/path?query"): checks every character and every
// percent escape of the raw target.
Status check_target(std::string_view target, const HeadLimits& limits) {
  if (target.empty()) return bad("empty request target");
  if (target.size() > limits.max_target_bytes) {
    // Part of the head's size limits, answered like them (431).
    return too_large("request target longer than " + std::to_string(limits.max_target_bytes) +
                     " bytes");
  }
  if (target.front() != '/') {
    return bad("request target " + chars::quote(target) + " is not an absolute path");
  }
  for (std::size_t i = 0; i < target.size(); ++i) {
    auto c = static_cast<unsigned char>(target[i]);
    if (!chars::is_target_char(c)) {
      return bad("invalid character in request target " + chars::quote(target));
    }
    if (c == '%') {
      if (i + 2 >= target.size() ||
          chars::hex_value(static_cast<unsigned char>(target[i + 1])) < 0 ||
          chars::hex_value(static_cast<unsigned char>(target[i + 2])) < 0) {
        return bad("bad percent escape in request target " + chars::quote(target));
      }
    }
  }
  return ok();
}

}  // namespace

Result<RequestHead> parse_request_head(std::string_view bytes, const HeadLimits& limits) {
  CORRAL_TRY(check_head_bytes(bytes, limits));
  std::string_view rest = bytes;
  std::string_view line = next_line(rest);
  if (line.empty()) return bad("empty request line");

  // method SP request-target SP HTTP-version, single spaces only.
  std::size_t sp1 = line.find(' ');
  std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return bad("malformed request line " + chars::quote(line));
  }
  RequestHead req;
  std::string_view method = line.substr(0, sp1);
  if (method.size() > kMaxMethodBytes || !chars::is_token(method) ||
      std::any_of(method.begin(), method.end(), [](char c) { return c >= 'a' && c <= 'z'; })) {
    return bad("invalid method " + chars::quote(method));
  }
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  CORRAL_TRY(check_target(target, limits));
  auto minor = parse_version(line.substr(sp2 + 1));
  if (!minor) return tl::unexpected(minor.error());

  req.method.assign(method);
  req.target.assign(target);
  req.version_minor = *minor;
  std::size_t q = target.find('?');
  // The path stays as sent, escapes and all: "%2F" is three characters of
  // one segment, never a '/' (docs/api.md "Routes"). Decoding before
  // routing would give one resource many spellings and let an escaped
  // slash split a segment; only query values are decoded (parse_query).
  req.path.assign(target.substr(0, q));
  if (q != std::string_view::npos) req.query.assign(target.substr(q + 1));

  CORRAL_TRY(parse_fields(rest, limits, req.headers));
  CORRAL_TRY(check_singletons(req.headers));
  auto framing = framing_of(req.headers, req.version_minor);
  if (!framing) return tl::unexpected(framing.error());
  // RFC 9112 3.2: exactly one Host in HTTP/1.1, at most one in 1.0.
  if (req.version_minor == 1 && framing->hosts == 0) return bad("HTTP/1.1 request without Host");
  req.content_length = framing->content_length;
  req.chunked = framing->chunked;
  req.keep_alive = keep_alive_of(*framing, req.version_minor);
  req.expect_continue = framing->expect_continue;
  return req;
}

Result<ResponseHead> parse_response_head(std::string_view bytes, const HeadLimits& limits) {
  CORRAL_TRY(check_head_bytes(bytes, limits));
  std::string_view rest = bytes;
  std::string_view line = next_line(rest);
  // HTTP-version SP 3DIGIT SP [reason]; the last SP is tolerated missing.
  if (line.size() < 12 || line[8] != ' ' || (line.size() > 12 && line[12] != ' ')) {
    return bad("malformed status line " + chars::quote(line));
  }
  auto minor = parse_version(line.substr(0, 8));
  if (!minor) return tl::unexpected(minor.error());
  std::string_view code = line.substr(9, 3);
  if (code[0] < '1' || code[0] > '5' || code[1] < '0' || code[1] > '9' || code[2] < '0' ||
      code[2] > '9') {
    return bad("malformed status code " + chars::quote(code));
  }
  std::string_view reason = line.size() > 12 ? line.substr(13) : std::string_view();
  if (!chars::is_field_value(reason)) return bad("control character in reason phrase");

  ResponseHead resp;
  resp.status = (code[0] - '0') * 100 + (code[1] - '0') * 10 + (code[2] - '0');
  resp.reason.assign(reason);
  CORRAL_TRY(parse_fields(rest, limits, resp.headers));
  auto framing = framing_of(resp.headers, *minor);
  if (!framing) return tl::unexpected(framing.error());
  resp.keep_alive = keep_alive_of(*framing, *minor);
  if (resp.status < 200 || resp.status == 204 || resp.status == 304) {
    // These never have a body, whatever the headers say (RFC 9112 6.3).
    resp.content_length = 0;
  } else if (framing->chunked) {
    resp.chunked = true;
  } else if (framing->content_length) {
    resp.content_length = framing->content_length;
  } else {
    resp.keep_alive = false;  // the body ends when the server closes
  }
  return resp;
}

// --- HeadBuffer ---

Result<bool> HeadBuffer::feed(std::string_view bytes) {
  std::size_t old = buf_.size();
  buf_.append(bytes);
  if (head_end_ != 0) return true;
  // Only the first max_ bytes can hold the end of an acceptable head; never
  // search further (a huge read must not make this quadratic).
  std::size_t from = old >= 3 ? old - 3 : 0;
  std::size_t limit = std::min(buf_.size(), max_);
  if (from < limit) {
    std::string_view window(buf_.data(), limit);
    std::size_t pos = window.find(kEndOfHead, from);
    if (pos != std::string_view::npos) {
      head_end_ = pos + kEndOfHead.size();
      return true;
    }
  }
  if (buf_.size() >= max_) {
    return make_error(ErrorCode::kResourceExhausted,
                      "head longer than " + std::to_string(max_) + " bytes");
  }
  return false;
}

std::string_view HeadBuffer::head() const { return std::string_view(buf_.data(), head_end_); }

std::string_view HeadBuffer::leftover() const {
  if (head_end_ == 0) return {};
  return std::string_view(buf_).substr(head_end_);
}

void HeadBuffer::clear() {
  buf_.clear();
  head_end_ = 0;
}

// --- ChunkedDecoder ---

Result<std::size_t> ChunkedDecoder::decode(std::string_view in, std::string& out,
                                           std::size_t out_cap) {
  // Never more data than input bytes, so the scratch space stays small.
  std::size_t cap = std::min(out_cap, in.size());
  std::size_t old = out.size();
  out.resize(old + cap);
  std::size_t produced = 0;
  auto r = decode(in, out.data() + old, cap, produced);
  out.resize(old + produced);
  return r;
}

Result<std::size_t> ChunkedDecoder::decode(std::string_view in, char* out, std::size_t out_cap,
                                           std::size_t& produced) {
  produced = 0;
  std::size_t i = 0;
  while (i < in.size() && state_ != State::kDone) {
    if (state_ == State::kData) {
      if (produced == out_cap) break;  // out is full
      std::size_t n = std::min<std::uint64_t>(
          {remaining_, static_cast<std::uint64_t>(in.size() - i), out_cap - produced});
      std::memcpy(out + produced, in.data() + i, n);
      produced += n;
      i += n;
      remaining_ -= n;
      if (remaining_ == 0) state_ = State::kDataCr;
      continue;
    }
    auto c = static_cast<unsigned char>(in[i++]);
    switch (state_) {
      case State::kSize: {
        int v = chars::hex_value(c);
        if (v >= 0) {
          // 16 hex digits fill 64 bits; more is an attack or a broken peer.
          if (++size_digits_ > 16) return bad("chunked body: chunk size too long");
          remaining_ = (remaining_ << 4) | static_cast<std::uint64_t>(v);
          break;
        }
        if (size_digits_ == 0) return bad("chunked body: chunk size is not hexadecimal");
        line_bytes_ = size_digits_;
        if (c == '\r') {
          state_ = State::kSizeLf;
        } else if (c == ';' || c == ' ' || c == '\t') {
          ext_seen_semicolon_ = c == ';';
          state_ = State::kExt;
        } else {
          return bad("chunked body: invalid character after chunk size");
        }
        break;
      }
      case State::kExt:
        // chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS value ] ): skipped,
        // but it must start with ';' and hold no control characters.
        if (++line_bytes_ > kMaxChunkLineBytes) return bad("chunked body: chunk line too long");
        if (c == '\r') {
          state_ = State::kSizeLf;
        } else if (c == ';') {
          ext_seen_semicolon_ = true;
        } else if (c == ' ' || c == '\t') {
        } else if (!ext_seen_semicolon_ || c < 0x20 || c == 0x7f) {
          return bad("chunked body: invalid chunk extension");
        }
        break;
      case State::kSizeLf:
        if (c != '\n') return bad("chunked body: bare CR in chunk line");
        size_digits_ = 0;
        if (remaining_ == 0) {
          state_ = State::kTrailer;
          line_bytes_ = 0;
          trailer_line_empty_ = true;
        } else {
          state_ = State::kData;
        }
        break;
      case State::kDataCr:
        if (c != '\r') return bad("chunked body: chunk data longer than its size");
        state_ = State::kDataLf;
        break;
      case State::kDataLf:
        if (c != '\n') return bad("chunked body: chunk data not followed by CRLF");
        state_ = State::kSize;
        break;
      case State::kTrailer:
        if (++trailer_bytes_ > kMaxTrailerBytes) return bad("chunked body: trailer too long");
        if (c == '\r') {
          state_ = State::kTrailerLf;
        } else if (c == '\n') {
          return bad("chunked body: bare LF in trailer");
        } else if (!chars::is_field_char(c) || (trailer_line_empty_ && (c == ' ' || c == '\t'))) {
          return bad("chunked body: invalid trailer line");
        } else {
          trailer_line_empty_ = false;
        }
        break;
      case State::kTrailerLf:
        if (c != '\n') return bad("chunked body: bare CR in trailer");
        if (trailer_line_empty_) {
          state_ = State::kDone;
        } else {
          state_ = State::kTrailer;  // trailer fields are read and dropped
          trailer_line_empty_ = true;
        }
        break;
      case State::kData:
      case State::kDone:
        break;
    }
  }
  return i;
}

}  // namespace corral::http
