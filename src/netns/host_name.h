// Host names and ports as the egress proxy reads them from untrusted bytes
// (CONNECT targets, Host headers, absolute URLs, TLS SNI), in one canonical
// form so that rules, agreement checks and the resolver all see the same
// string.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace corral::net {

// A DNS host name, lower case, without a trailing dot: labels of letters,
// digits, '-' and '_', 1-63 bytes each, 253 in all, and a last label that
// is not all digits (so "127.1" or "0x7f.1" never pass as a name and reach
// a resolver that would read them as an address). An IP literal ("1.2.3.4",
// "::1", "[::1]") comes back in its normal text form (IPv6 without
// brackets). Empty if `text` is neither.
std::string canonical_host(std::string_view text);

// Whether canonical_host() returned an IP literal rather than a name.
bool is_ip_literal(std::string_view canonical);

// Splits "host", "host:port", "[v6]", "[v6]:port" and canonicalizes the
// host. False if malformed: no host, a bad port (1-65535), unbalanced
// brackets, an IPv6 address without brackets, or a host that is neither a
// name nor a literal.
bool split_host_port(std::string_view text, std::string& host, std::optional<std::uint16_t>& port);

}  // namespace corral::net
