#include "netns/ip_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

namespace corral::net {

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
    if (text.find(':') == std::string_view::npos) return std::nullopt;  // "[1.2.3.4]"
  }
  if (text.empty() || text.size() > INET6_ADDRSTRLEN) return std::nullopt;
  std::string s(text);
  IpAddress a;
  if (s.find(':') == std::string::npos) {
    // inet_pton takes only dotted quads with four decimal parts: no
    // "127.1", octal or hex forms that other parsers accept.
    in_addr v4{};
    if (inet_pton(AF_INET, s.c_str(), &v4) != 1) return std::nullopt;
    std::memcpy(a.bytes.data(), &v4, 4);
    return a;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, s.c_str(), &v6) != 1) return std::nullopt;
  a.v6 = true;
  std::memcpy(a.bytes.data(), &v6, 16);
  return a;
}

IpAddress IpAddress::v4(std::uint32_t host_order) {
  IpAddress a;
  std::uint32_t n = htonl(host_order);
  std::memcpy(a.bytes.data(), &n, 4);
  return a;
}

std::optional<IpAddress> IpAddress::from_sockaddr(const sockaddr* sa) {
  if (sa == nullptr) return std::nullopt;
  IpAddress a;
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    std::memcpy(a.bytes.data(), &in->sin_addr, 4);
    return a;
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    a.v6 = true;
    std::memcpy(a.bytes.data(), &in6->sin6_addr, 16);
    return a;
  }
  return std::nullopt;
}

std::string IpAddress::str() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof buf);
  return buf;
}

std::uint32_t IpAddress::v4_host_order() const {
  std::uint32_t n;
  std::memcpy(&n, bytes.data(), 4);
  return ntohl(n);
}

IpAddress IpAddress::unmapped() const {
  static constexpr std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (!v6 || std::memcmp(bytes.data(), kMapped, 12) != 0) return *this;
  IpAddress a;
  std::memcpy(a.bytes.data(), bytes.data() + 12, 4);
  return a;
}

namespace {

void clear_host_bits(IpAddress& a, int length) {
  const int total = a.v6 ? 128 : 32;
  for (int bit = length; bit < total; ++bit) {
    a.bytes[bit / 8] = static_cast<std::uint8_t>(a.bytes[bit / 8] & ~(0x80 >> (bit % 8)));
  }
}

bool in(const IpAddress& a, const char* prefix) {
  auto p = IpPrefix::parse(prefix);
  return p && p->contains(a);
}

}  // namespace

std::optional<IpPrefix> IpPrefix::parse(std::string_view text) {
  std::size_t slash = text.find('/');
  auto addr = IpAddress::parse(text.substr(0, slash));
  if (!addr) return std::nullopt;
  const int total = addr->v6 ? 128 : 32;
  int length = total;
  if (slash != std::string_view::npos) {
    std::string_view digits = text.substr(slash + 1);
    if (digits.empty() || digits.size() > 3) return std::nullopt;
    length = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return std::nullopt;
      length = length * 10 + (c - '0');
    }
    if (length > total) return std::nullopt;
  }
  IpPrefix p{*addr, length};
  // ::ffff:a.b.c.d/96+n is the IPv4 prefix a.b.c.d/n: addresses are judged
  // unmapped, so only that form can match them.
  if (p.address.v6 && length >= 96) {
    const IpAddress v4 = p.address.unmapped();
    if (!v4.v6) p = IpPrefix{v4, length - 96};
  }
  clear_host_bits(p.address, p.length);
  return p;
}

bool IpPrefix::contains(const IpAddress& candidate) const {
  IpAddress a = candidate.v6 && !address.v6 ? candidate.unmapped() : candidate;
  if (a.v6 != address.v6) return false;
  clear_host_bits(a, length);
  return a == address;
}

IpAddress IpPrefix::last() const {
  IpAddress a = address;
  const int bits = a.v6 ? 128 : 32;
  for (int i = length; i < bits; ++i)
    a.bytes[static_cast<std::size_t>(i / 8)] |= static_cast<std::uint8_t>(0x80 >> (i % 8));
  return a;
}

std::string IpPrefix::str() const { return address.str() + "/" + std::to_string(length); }

AddressClass classify(const IpAddress& original) {
  const IpAddress a = original.unmapped();
  if (!a.v6) {
    // Most specific first: metadata sits inside link-local.
    if (in(a, "169.254.169.254/32")) return AddressClass::kMetadata;
    if (in(a, "0.0.0.0/8")) return AddressClass::kUnspecified;
    if (in(a, "127.0.0.0/8")) return AddressClass::kLoopback;
    if (in(a, "10.0.0.0/8") || in(a, "172.16.0.0/12") || in(a, "192.168.0.0/16"))
      return AddressClass::kPrivate;
    if (in(a, "100.64.0.0/10")) return AddressClass::kCarrierNat;
    if (in(a, "169.254.0.0/16")) return AddressClass::kLinkLocal;
    if (in(a, "224.0.0.0/4")) return AddressClass::kMulticast;
    // IETF protocol assignments, benchmarking, 6to4 relay, and 240/4
    // (future use, with 255.255.255.255).
    if (in(a, "192.0.0.0/24") || in(a, "198.18.0.0/15") || in(a, "192.88.99.0/24") ||
        in(a, "240.0.0.0/4"))
      return AddressClass::kReserved;
    return AddressClass::kPublic;
  }
  if (in(a, "::/128")) return AddressClass::kUnspecified;
  if (in(a, "::1/128")) return AddressClass::kLoopback;
  if (in(a, "fd00:ec2::254/128")) return AddressClass::kMetadata;
  if (in(a, "fc00::/7")) return AddressClass::kPrivate;
  if (in(a, "fe80::/10")) return AddressClass::kLinkLocal;
  if (in(a, "ff00::/8")) return AddressClass::kMulticast;
  // IPv4-compatible, NAT64 (reaches IPv4 space: judged as unreachable
  // rather than translated), discard-only, and site-local (deprecated).
  if (in(a, "::/96") || in(a, "64:ff9b::/96") || in(a, "64:ff9b:1::/48") || in(a, "100::/64") ||
      in(a, "fec0::/10"))
    return AddressClass::kReserved;
  return AddressClass::kPublic;
}

const char* address_class_name(AddressClass c) {
  switch (c) {
    case AddressClass::kPublic:
      return "public";
    case AddressClass::kUnspecified:
      return "unspecified";
    case AddressClass::kLoopback:
      return "loopback";
    case AddressClass::kPrivate:
      return "private";
    case AddressClass::kCarrierNat:
      return "carrier-grade NAT";
    case AddressClass::kLinkLocal:
      return "link-local";
    case AddressClass::kMetadata:
      return "cloud metadata";
    case AddressClass::kMulticast:
      return "multicast";
    case AddressClass::kReserved:
      return "reserved";
  }
  return "?";
}

}  // namespace corral::net
