#include "net/upstream_resolver.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <sstream>

#include "base/unique_fd.h"
#include "net/dns_message.h"

namespace corral::net {

std::optional<DnsEndpoint> parse_dns_endpoint(std::string_view text) {
  DnsEndpoint e;
  std::string_view host = text;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    std::size_t close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return std::nullopt;
      port = text.substr(close + 2);
    }
  } else if (std::size_t colon = text.find(':');
             colon != std::string_view::npos && text.rfind(':') == colon) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  auto a = IpAddress::parse(host);
  if (!a) return std::nullopt;
  e.address = *a;
  if (!port.empty()) {
    unsigned v = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || v > 65535) return std::nullopt;
      v = v * 10 + static_cast<unsigned>(c - '0');
    }
    if (v == 0 || v > 65535) return std::nullopt;
    e.port = static_cast<std::uint16_t>(v);
  }
  return e;
}

std::vector<std::string> resolv_conf_nameservers(std::string_view text) {
  std::vector<std::string> out;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string key, value;
    if (words >> key >> value && key == "nameserver" && IpAddress::parse(value))
      out.push_back(IpAddress::parse(value)->v6 ? "[" + value + "]:53" : value);
  }
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;

// One question to one server; the addresses (possibly none) or an error.
Result<std::vector<std::string>> ask(const DnsEndpoint& server, const std::string& name,
                                     std::uint16_t qtype, Clock::time_point deadline) {
  const std::uint16_t id = dns::random_query_id();
  auto packet = dns::build_query(id, name, qtype);
  if (!packet) return tl::unexpected(packet.error());
  UniqueFd fd(::socket(server.address.v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) return errno_error("socket");
  sockaddr_storage ss{};
  socklen_t len;
  if (server.address.v6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(server.port);
    std::memcpy(&in6->sin6_addr, server.address.bytes.data(), 16);
    len = sizeof *in6;
  } else {
    auto* in = reinterpret_cast<sockaddr_in*>(&ss);
    in->sin_family = AF_INET;
    in->sin_port = htons(server.port);
    std::memcpy(&in->sin_addr, server.address.bytes.data(), 4);
    len = sizeof *in;
  }
  // connect(): the kernel then drops datagrams from any other source.
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0)
    return errno_error("connect to DNS server " + server.address.str());
  if (::send(fd.get(), packet->data(), packet->size(), 0) < 0)
    return errno_error("send to DNS server " + server.address.str());
  const dns::Question question{name, qtype, dns::kClassIn};
  std::vector<std::uint8_t> buf(65535);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0)
      return make_error(ErrorCode::kTimeout,
                        "DNS server " + server.address.str() + " did not answer");
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    ssize_t n = ::recv(fd.get(), buf.data(), buf.size(), 0);
    if (n < 0) return errno_error("DNS server " + server.address.str());
    auto r = dns::parse_response(std::span<const std::uint8_t>(buf.data(), static_cast<size_t>(n)));
    if (!r || !dns::response_matches(*r, id, question)) continue;  // not ours: keep waiting
    if (r->rcode() == static_cast<unsigned>(dns::Rcode::kNxDomain))
      return std::vector<std::string>{};
    if (r->rcode() != 0)
      return make_error(ErrorCode::kUnavailable, "DNS server " + server.address.str() +
                                                     " answered " + dns::rcode_name(r->rcode()));
    return dns::follow_address_chain(r->answers, name, qtype).addresses;
  }
}

}  // namespace

Result<std::vector<IpAddress>> UpstreamResolver::resolve(const std::string& name,
                                                         std::chrono::milliseconds timeout) {
  if (servers_.empty())
    return make_error(ErrorCode::kUnavailable, "no upstream DNS server is configured",
                      "set network.dns_servers in the daemon config");
  const auto deadline = Clock::now() + timeout;
  std::string errors;
  for (const auto& s : servers_) {
    auto server = parse_dns_endpoint(s);
    if (!server) {
      errors += (errors.empty() ? "" : "; ") + std::string("bad server ") + s;
      continue;
    }
    // Each server gets a fair share of what is left.
    auto share = (deadline - Clock::now()) / 2;
    std::vector<IpAddress> out;
    bool answered = false;
    for (std::uint16_t qtype : {dns::kTypeA, dns::kTypeAaaa}) {
      auto addrs = ask(*server, name, qtype, Clock::now() + share);
      if (!addrs) {
        errors += (errors.empty() ? "" : "; ") + addrs.error().message;
        continue;
      }
      answered = true;
      for (const auto& a : *addrs) {
        if (auto ip = IpAddress::parse(a)) out.push_back(*ip);
      }
    }
    if (answered) return out;
  }
  return make_error(ErrorCode::kUnavailable, "resolving " + name + ": " + errors);
}

}  // namespace corral::net
