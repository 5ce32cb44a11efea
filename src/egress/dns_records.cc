#include "egress/dns_records.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <cstring>

namespace corral::net {

namespace {

std::string canonical_name(std::string_view name) {
  std::string s(name);
  if (s.size() > 1 && s.back() == '.') s.pop_back();
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string canonical_address(std::string_view text) {
  std::string s(text);
  char out[INET6_ADDRSTRLEN];
  in_addr v4{};
  if (::inet_pton(AF_INET, s.c_str(), &v4) == 1) {
    return ::inet_ntop(AF_INET, &v4, out, sizeof out);
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, s.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_V4MAPPED(&v6)) {
      std::memcpy(&v4, &v6.s6_addr[12], 4);
      return ::inet_ntop(AF_INET, &v4, out, sizeof out);
    }
    return ::inet_ntop(AF_INET6, &v6, out, sizeof out);
  }
  return {};
}

void DnsRecords::prune(Clock::time_point now) {
  for (auto it = by_name_.begin(); it != by_name_.end();) {
    auto& addrs = it->second;
    for (auto a = addrs.begin(); a != addrs.end();) {
      if (a->second <= now) {
        auto r = by_address_.find(a->first);
        if (r != by_address_.end()) {
          r->second.erase(it->first);
          if (r->second.empty()) by_address_.erase(r);
        }
        a = addrs.erase(a);
      } else {
        ++a;
      }
    }
    it = addrs.empty() ? by_name_.erase(it) : std::next(it);
  }
}

void DnsRecords::forget_name(const std::string& name) {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return;
  for (const auto& [addr, expiry] : it->second) {
    auto r = by_address_.find(addr);
    if (r == by_address_.end()) continue;
    r->second.erase(name);
    if (r->second.empty()) by_address_.erase(r);
  }
  by_name_.erase(it);
}

void DnsRecords::remember(const std::string& name, const std::vector<std::string>& addresses,
                          std::uint32_t ttl) {
  if (addresses.empty() || limits_.max_names == 0) return;
  auto now = Clock::now();
  auto life =
      std::clamp<std::chrono::seconds>(std::chrono::seconds(ttl), limits_.min_ttl, limits_.max_ttl);
  auto expiry = now + life;
  if (!by_name_.contains(name) && by_name_.size() >= limits_.max_names) {
    prune(now);
    while (!by_name_.empty() && by_name_.size() >= limits_.max_names) {
      // Evict the name that expires first.
      auto victim = by_name_.begin();
      auto latest = [](const auto& m) {
        Clock::time_point t{};
        for (const auto& [a, e] : m) t = std::max(t, e);
        return t;
      };
      auto victim_t = latest(victim->second);
      for (auto it = by_name_.begin(); it != by_name_.end(); ++it) {
        auto t = latest(it->second);
        if (t < victim_t) victim = it, victim_t = t;
      }
      forget_name(std::string(victim->first));
    }
  }
  for (const auto& a : addresses) {
    std::string addr = canonical_address(a);
    if (addr.empty()) continue;
    auto& e1 = by_name_[name][addr];
    e1 = std::max(e1, expiry);
    auto& e2 = by_address_[addr][name];
    e2 = std::max(e2, expiry);
  }
}

bool DnsRecords::answered(std::string_view name, std::string_view address) const {
  std::string addr = canonical_address(address);
  if (addr.empty()) return false;
  auto it = by_name_.find(canonical_name(name));
  if (it == by_name_.end()) return false;
  auto a = it->second.find(addr);
  return a != it->second.end() && a->second > Clock::now();
}

std::vector<std::string> DnsRecords::names_for(std::string_view address) const {
  std::vector<std::string> out;
  std::string addr = canonical_address(address);
  if (addr.empty()) return out;
  auto it = by_address_.find(addr);
  if (it == by_address_.end()) return out;
  auto now = Clock::now();
  for (const auto& [name, expiry] : it->second) {
    if (expiry > now) out.push_back(name);
  }
  return out;  // std::map: already sorted
}

}  // namespace corral::net
