// Fuzz target for the egress proxy's reader of TLS ClientHellos (the first
// bytes of every transparent connection a sandbox opens). Beyond "no
// crash", it checks the promises of tls_client_hello.h: a parsed hello's
// SNI is a canonical DNS name, "incomplete" asks for more than it was
// given, errors are printable, and a complete hello parses the same from
// exactly the bytes it consumed, while every shorter cut is incomplete.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_checks.h"
#include "netns/host_name.h"
#include "egress/tls_client_hello.h"

namespace {

using corral::fuzz::printable;
using corral::fuzz::require;
using corral::net::TlsHello;
using corral::net::TlsHelloStatus;

void check(std::string_view in, const TlsHello& h) {
  switch (h.status) {
    case TlsHelloStatus::kClientHello:
      require(h.consumed >= 9 && h.consumed <= in.size());
      require(h.has_sni != h.sni.empty());
      if (h.has_sni) {
        require(corral::net::canonical_host(h.sni) == h.sni);
        require(!corral::net::is_ip_literal(h.sni));
      }
      break;
    case TlsHelloStatus::kIncomplete:
      require(h.needed > in.size());
      break;
    case TlsHelloStatus::kNotTls:
      require(!corral::net::looks_like_tls(in));
      break;
    case TlsHelloStatus::kMalformed:
      require(!h.error.empty() && printable(h.error));
      break;
  }
  require(printable(h.describe()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  TlsHello h = corral::net::parse_client_hello(in);
  check(in, h);
  if (h.status == TlsHelloStatus::kClientHello) {
    TlsHello exact = corral::net::parse_client_hello(in.substr(0, h.consumed));
    require(exact.status == TlsHelloStatus::kClientHello && exact.sni == h.sni &&
            exact.consumed == h.consumed && exact.ech == h.ech);
    for (std::size_t cut : {std::size_t{0}, h.consumed / 2, h.consumed - 1}) {
      TlsHello part = corral::net::parse_client_hello(in.substr(0, cut));
      require(part.status == TlsHelloStatus::kIncomplete && part.needed > cut);
    }
  }
  return 0;
}
