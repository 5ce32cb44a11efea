#include "egress/upstream_resolver.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <sstream>

#include "base/unique_fd.h"
#include "egress/dns_message.h"

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

// One server's answers to the A and the AAAA question for a name.
struct Answers {
  bool answered = false;             // at least one question got an answer
  bool complete = true;              // both did (only then is the result cached)
  std::vector<IpAddress> addresses;  // A first, then AAAA, in answer order
  std::uint32_t ttl = 0;             // the smallest TTL of the address chains
  bool has_ttl = false;
  std::string errors;
};

sockaddr_storage address_of(const DnsEndpoint& server, socklen_t& len) {
  sockaddr_storage ss{};
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
  return ss;
}

// Both questions to one server at once, on one connected socket (the
// kernel then drops datagrams from any other source); each answer is
// matched by its id and question.
Answers ask(const DnsEndpoint& server, const std::string& name, Clock::time_point deadline) {
  Answers out;
  auto note = [&](const std::string& e) { out.errors += (out.errors.empty() ? "" : "; ") + e; };
  struct Question {
    std::uint16_t qtype, id;
    bool done = false;
    std::vector<IpAddress> addresses;
  } qs[2] = {{dns::kTypeA, dns::random_query_id()}, {dns::kTypeAaaa, dns::random_query_id()}};
  if (qs[1].id == qs[0].id) qs[1].id = static_cast<std::uint16_t>(qs[0].id + 1);
  UniqueFd fd(::socket(server.address.v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  socklen_t len = 0;
  sockaddr_storage ss = address_of(server, len);
  if (!fd || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    note("connect to DNS server " + server.address.str() + ": " + std::strerror(errno));
    out.complete = false;
    return out;
  }
  for (auto& q : qs) {
    auto packet = dns::build_query(q.id, name, q.qtype);
    if (!packet) {
      note(packet.error().message);
      q.done = true;
      out.complete = false;
    } else if (::send(fd.get(), packet->data(), packet->size(), 0) < 0) {
      note("send to DNS server " + server.address.str() + ": " + std::strerror(errno));
      q.done = true;
      out.complete = false;
    }
  }
  std::vector<std::uint8_t> buf(65535);
  while (!(qs[0].done && qs[1].done)) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      note("DNS server " + server.address.str() + " did not answer");
      out.complete = false;
      break;
    }
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    ssize_t n = ::recv(fd.get(), buf.data(), buf.size(), 0);
    if (n < 0) {
      note("DNS server " + server.address.str() + ": " + std::strerror(errno));
      out.complete = false;
      break;
    }
    auto r = dns::parse_response(std::span<const std::uint8_t>(buf.data(), static_cast<size_t>(n)));
    if (!r) continue;
    for (auto& q : qs) {
      if (q.done || !dns::response_matches(*r, q.id, dns::Question{name, q.qtype, dns::kClassIn}))
        continue;
      q.done = true;
      if (r->rcode() == static_cast<unsigned>(dns::Rcode::kNxDomain)) {
        out.answered = true;
      } else if (r->rcode() != 0) {
        note("DNS server " + server.address.str() + " answered " + dns::rcode_name(r->rcode()));
        out.complete = false;
      } else {
        out.answered = true;
        auto chain = dns::follow_address_chain(r->answers, name, q.qtype);
        for (const auto& a : chain.addresses)
          if (auto ip = IpAddress::parse(a)) q.addresses.push_back(*ip);
        if (!chain.addresses.empty()) {
          out.ttl = out.has_ttl ? std::min(out.ttl, chain.min_ttl) : chain.min_ttl;
          out.has_ttl = true;
        }
      }
    }
  }
  for (auto& q : qs)
    out.addresses.insert(out.addresses.end(), q.addresses.begin(), q.addresses.end());
  return out;
}

}  // namespace

std::uint64_t UpstreamResolver::cache_hits() const {
  std::lock_guard lock(mu_);
  return hits_;
}

void UpstreamResolver::remember(const std::string& name, const std::vector<IpAddress>& addresses,
                                std::uint32_t ttl) {
  const auto life =
      std::min<std::chrono::seconds>(std::chrono::seconds(ttl), cache_options_.max_ttl);
  if (cache_options_.max_entries == 0 || life.count() <= 0 || addresses.empty()) return;
  const auto now = Clock::now();
  std::lock_guard lock(mu_);
  if (!cache_.contains(name) && cache_.size() >= cache_options_.max_entries) {
    std::erase_if(cache_, [&](const auto& kv) { return kv.second.expires <= now; });
    if (cache_.size() >= cache_options_.max_entries) cache_.erase(cache_.begin());
  }
  cache_[name] = Entry{addresses, now + life};
}

Result<std::vector<IpAddress>> UpstreamResolver::resolve(const std::string& name,
                                                         std::chrono::milliseconds timeout) {
  if (servers_.empty())
    return make_error(ErrorCode::kUnavailable, "no upstream DNS server is configured",
                      "set network.dns_servers in the daemon config");
  if (cache_options_.max_entries > 0) {
    std::lock_guard lock(mu_);
    auto it = cache_.find(name);
    if (it != cache_.end()) {
      if (Clock::now() < it->second.expires) {
        ++hits_;
        return it->second.addresses;
      }
      cache_.erase(it);
    }
  }
  const auto deadline = Clock::now() + timeout;
  std::string errors;
  for (std::size_t i = 0; i < servers_.size(); ++i) {
    const std::string& s = servers_[i];
    auto server = parse_dns_endpoint(s);
    if (!server) {
      errors += (errors.empty() ? "" : "; ") + std::string("bad server ") + s;
      continue;
    }
    // Each server but the last leaves half of what is left to the others.
    const auto left = deadline - Clock::now();
    auto answers = ask(*server, name, Clock::now() + (i + 1 < servers_.size() ? left / 2 : left));
    if (!answers.errors.empty()) errors += (errors.empty() ? "" : "; ") + answers.errors;
    if (!answers.answered) continue;
    if (answers.complete && answers.has_ttl) remember(name, answers.addresses, answers.ttl);
    return answers.addresses;
  }
  return make_error(ErrorCode::kUnavailable, "resolving " + name + ": " + errors);
}

}  // namespace corral::net
