// IPv4/IPv6 addresses and prefixes as values, and the classification the
// egress policy needs: which addresses are not "the internet" (loopback,
// private, link-local, cloud metadata, ...) and so are refused unless a
// rule names them (ADR 0005, the DNS-rebinding defence).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

struct sockaddr;

namespace corral::net {

struct IpAddress {
  bool v6 = false;
  std::array<std::uint8_t, 16> bytes{};  // v4 uses the first 4

  static std::optional<IpAddress> parse(std::string_view text);  // "1.2.3.4", "::1", "[::1]"
  static IpAddress v4(std::uint32_t host_order);
  static std::optional<IpAddress> from_sockaddr(const sockaddr* sa);
  std::string str() const;
  std::uint32_t v4_host_order() const;  // v4 only
  // ::ffff:a.b.c.d as a.b.c.d; any other address unchanged.
  IpAddress unmapped() const;
  bool operator==(const IpAddress&) const = default;
};

struct IpPrefix {
  IpAddress address;  // with the host bits cleared
  int length = 0;

  // "10.0.0.0/8", "2001:db8::/32", or a single address (full length).
  static std::optional<IpPrefix> parse(std::string_view text);
  bool contains(const IpAddress& a) const;
  IpAddress last() const;  // the highest address in it (host bits set)
  std::string str() const;
  bool operator==(const IpPrefix&) const = default;
};

enum class AddressClass {
  kPublic,
  kUnspecified,  // 0.0.0.0/8, ::
  kLoopback,     // 127/8, ::1
  kPrivate,      // 10/8, 172.16/12, 192.168/16, fc00::/7
  kCarrierNat,   // 100.64/10
  kLinkLocal,    // 169.254/16, fe80::/10
  kMetadata,     // 169.254.169.254, fd00:ec2::254 (cloud instance metadata)
  kMulticast,    // 224/4, ff00::/8
  kReserved,     // 240/4 (incl. broadcast), 192.0.0/24, 198.18/15 ... see the table
};

AddressClass classify(const IpAddress& a);
const char* address_class_name(AddressClass c);

}  // namespace corral::net
