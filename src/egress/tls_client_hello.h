// The first flight of a TLS client as the egress proxy sees it (ADR 0005,
// "Proxy"): from the first bytes of a connection, tell whether they are a
// TLS ClientHello and, if so, which host name it asks for (the SNI
// extension, RFC 6066). The proxy never decrypts anything: it reads this one
// plaintext message, decides, and then moves the bytes it read (and every
// byte after them) unchanged.
//
// The parser trusts nothing. Every length is checked against what encloses
// it, the handshake message may span several records but never more than
// kMaxClientHelloBytes, duplicate extensions and a second host name are
// refused (RFC 8446 4.2, RFC 6066 3), and the host name must be a plain DNS
// name. It allocates nothing beyond the reassembled message and the name.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace corral::net {

// Bounds of what the proxy buffers before it decides: a real ClientHello is
// well under 2 KiB (a post-quantum key share included); 16 KiB of handshake
// leaves room for large PSK and session-ticket extensions.
inline constexpr std::size_t kMaxClientHelloBytes = 16 * 1024;  // the handshake message
inline constexpr std::size_t kMaxTlsRecordBytes = 16 * 1024;    // 2^14, RFC 8446 5.1

enum class TlsHelloStatus {
  kClientHello,  // complete and well-formed; `sni` is set if it names a host
  kIncomplete,   // a ClientHello so far: read more (at least `needed` bytes in all)
  kNotTls,       // not a TLS handshake record at all (another protocol)
  kMalformed,    // starts like TLS but breaks the rules; `error` says how
};

struct TlsHello {
  TlsHelloStatus status = TlsHelloStatus::kNotTls;
  std::string sni;           // lower case, no trailing dot; empty: no SNI
  bool has_sni = false;      // the server_name extension carried a host name
  bool ech = false;          // an encrypted_client_hello extension is present (or GREASE)
  std::size_t needed = 0;    // kIncomplete: total bytes needed to go on (a lower bound)
  std::size_t consumed = 0;  // kClientHello: bytes of the records that carried it
  std::string error;         // kMalformed: what is wrong

  // "tls (sni x.example)", "tls (no sni)", "not TLS", "incomplete: need more
  // bytes", "malformed TLS: ..." (for logs and tests).
  std::string describe() const;
};

// Parses the ClientHello at the start of `bytes` (the first bytes a client
// sent). Looks at no more than kMaxClientHelloBytes of handshake plus the
// record headers around it.
TlsHello parse_client_hello(std::string_view bytes);

// Whether the bytes so far could start a TLS handshake record (the first
// three bytes, or fewer when fewer arrived). Cheap, for classification.
bool looks_like_tls(std::string_view bytes);

}  // namespace corral::net
