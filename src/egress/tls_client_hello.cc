#include "egress/tls_client_hello.h"

#include <bitset>
#include <cstdint>

#include "netns/host_name.h"

namespace corral::net {
namespace {

constexpr std::uint8_t kHandshakeRecord = 22;
constexpr std::uint8_t kClientHelloType = 1;
constexpr std::size_t kRecordHeader = 5;
constexpr std::size_t kHandshakeHeader = 4;
constexpr std::uint16_t kServerNameExt = 0;
constexpr std::uint16_t kEchExt = 0xfe0d;  // draft-ietf-tls-esni
constexpr std::uint8_t kHostNameType = 0;

TlsHello incomplete(std::size_t needed) {
  TlsHello h;
  h.status = TlsHelloStatus::kIncomplete;
  h.needed = needed;
  return h;
}

TlsHello malformed(std::string why) {
  TlsHello h;
  h.status = TlsHelloStatus::kMalformed;
  h.error = std::move(why);
  return h;
}

// A bounds-checked cursor over the handshake message.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  std::size_t left() const { return data_.size() - pos_; }
  bool u8(std::uint8_t& v) {
    if (left() < 1) return false;
    v = static_cast<std::uint8_t>(data_[pos_++]);
    return true;
  }
  bool u16(std::uint16_t& v) {
    if (left() < 2) return false;
    v = static_cast<std::uint16_t>((static_cast<std::uint8_t>(data_[pos_]) << 8) |
                                   static_cast<std::uint8_t>(data_[pos_ + 1]));
    pos_ += 2;
    return true;
  }
  bool bytes(std::size_t n, std::string_view& out) {
    if (left() < n) return false;
    out = data_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool skip(std::size_t n) {
    std::string_view ignored;
    return bytes(n, ignored);
  }

 private:
  std::string_view data_;
  std::size_t pos_ = 0;
};

// A host name as RFC 6066 allows it: a DNS name (ASCII), no IP literal;
// canonical (lower case, no trailing dot). Empty if it is not one.
std::string checked_host_name(std::string_view raw) {
  std::string name = canonical_host(raw);
  if (name.empty() || is_ip_literal(name)) return {};
  return name;
}

// The body of the ClientHello handshake message (after its 4-byte header).
TlsHello parse_body(std::string_view body) {
  Reader r(body);
  std::uint8_t major = 0, minor = 0, len8 = 0;
  std::uint16_t len16 = 0;
  if (!r.u8(major) || !r.u8(minor)) return malformed("ClientHello too short for its version");
  if (major != 3) return malformed("ClientHello version is not 3.x");
  if (!r.skip(32)) return malformed("ClientHello too short for its random");
  if (!r.u8(len8) || len8 > 32 || !r.skip(len8)) return malformed("bad session id");
  if (!r.u16(len16) || len16 < 2 || len16 % 2 != 0 || !r.skip(len16))
    return malformed("bad cipher suite list");
  if (!r.u8(len8) || len8 < 1 || !r.skip(len8)) return malformed("bad compression method list");

  TlsHello hello;
  hello.status = TlsHelloStatus::kClientHello;
  if (r.left() == 0) return hello;  // no extensions at all (legal before TLS 1.3)
  std::uint16_t ext_total = 0;
  if (!r.u16(ext_total) || ext_total != r.left())
    return malformed("extension block length does not match the message");

  std::bitset<65536> seen;
  while (r.left() > 0) {
    std::uint16_t type = 0, len = 0;
    std::string_view data;
    if (!r.u16(type) || !r.u16(len) || !r.bytes(len, data))
      return malformed("extension overruns the message");
    if (seen.test(type)) return malformed("extension " + std::to_string(type) + " appears twice");
    seen.set(type);
    if (type == kEchExt) hello.ech = true;
    if (type != kServerNameExt) continue;

    Reader sni(data);
    std::uint16_t list_len = 0;
    if (!sni.u16(list_len) || list_len != sni.left() || list_len == 0)
      return malformed("server_name list length does not match its extension");
    while (sni.left() > 0) {
      std::uint8_t name_type = 0;
      std::uint16_t name_len = 0;
      std::string_view name;
      if (!sni.u8(name_type) || !sni.u16(name_len) || !sni.bytes(name_len, name))
        return malformed("server_name entry overruns its list");
      if (name_type != kHostNameType) continue;  // no other type is defined; skipped
      if (hello.has_sni) return malformed("more than one host name in server_name");
      hello.sni = checked_host_name(name);
      if (hello.sni.empty()) return malformed("server_name is not a valid DNS host name");
      hello.has_sni = true;
    }
  }
  return hello;
}

}  // namespace

bool looks_like_tls(std::string_view b) {
  if (b.size() >= 1 && static_cast<std::uint8_t>(b[0]) != kHandshakeRecord) return false;
  if (b.size() >= 2 && static_cast<std::uint8_t>(b[1]) != 3) return false;
  if (b.size() >= 3 && static_cast<std::uint8_t>(b[2]) > 4) return false;
  return true;
}

TlsHello parse_client_hello(std::string_view bytes) {
  if (bytes.empty()) return incomplete(kRecordHeader);
  if (!looks_like_tls(bytes)) {
    TlsHello h;
    h.status = TlsHelloStatus::kNotTls;
    return h;
  }

  // Reassembles the handshake message from consecutive handshake records.
  std::string message;
  std::size_t pos = 0;   // start of the next record in `bytes`
  std::size_t want = 0;  // handshake bytes needed; 0 until the header is known
  while (want == 0 || message.size() < want) {
    if (bytes.size() < pos + kRecordHeader) return incomplete(pos + kRecordHeader);
    auto hdr = reinterpret_cast<const std::uint8_t*>(bytes.data() + pos);
    if (hdr[0] != kHandshakeRecord) {
      // The first record was checked by looks_like_tls; a later one of
      // another type interrupts the ClientHello.
      return malformed("a record of type " + std::to_string(hdr[0]) + " inside the ClientHello");
    }
    if (hdr[1] != 3 || hdr[2] > 4) return malformed("record version is not 3.0-3.4");
    std::size_t len = (std::size_t{hdr[3]} << 8) | hdr[4];
    if (len == 0) return malformed("empty handshake record");
    if (len > kMaxTlsRecordBytes) return malformed("record longer than 2^14 bytes");
    if (bytes.size() < pos + kRecordHeader + len) return incomplete(pos + kRecordHeader + len);
    std::string_view fragment = bytes.substr(pos + kRecordHeader, len);
    pos += kRecordHeader + len;

    std::size_t take = fragment.size();
    if (want != 0) take = std::min(take, want - message.size());
    message.append(fragment.substr(0, take));
    if (want == 0 && message.size() >= kHandshakeHeader) {
      auto m = reinterpret_cast<const std::uint8_t*>(message.data());
      if (m[0] != kClientHelloType)
        return malformed("first handshake message is not a ClientHello");
      std::size_t body = (std::size_t{m[1]} << 16) | (std::size_t{m[2]} << 8) | m[3];
      if (body > kMaxClientHelloBytes - kHandshakeHeader)
        return malformed("ClientHello longer than " + std::to_string(kMaxClientHelloBytes) +
                         " bytes");
      want = kHandshakeHeader + body;
      // Bytes of the fragment beyond the message (none in a real first
      // flight) are not part of it.
      if (message.size() > want) message.resize(want);
    }
  }

  TlsHello hello = parse_body(std::string_view(message).substr(kHandshakeHeader));
  if (hello.status == TlsHelloStatus::kClientHello) hello.consumed = pos;
  return hello;
}

std::string TlsHello::describe() const {
  switch (status) {
    case TlsHelloStatus::kClientHello:
      return has_sni ? "tls (sni " + sni + ")" : "tls (no sni)";
    case TlsHelloStatus::kIncomplete:
      return "incomplete: need more bytes";
    case TlsHelloStatus::kNotTls:
      return "not TLS";
    case TlsHelloStatus::kMalformed:
      return "malformed TLS: " + error;
  }
  return "?";
}

}  // namespace corral::net
