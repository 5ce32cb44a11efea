#include "netns/host_name.h"

#include "netns/ip_address.h"

namespace corral::net {

std::string canonical_host(std::string_view text) {
  if (text.find(':') != std::string_view::npos || (!text.empty() && text.front() == '[')) {
    auto a = IpAddress::parse(text);
    return a ? a->str() : std::string();
  }
  if (auto a = IpAddress::parse(text)) return a->str();
  if (!text.empty() && text.back() == '.') text.remove_suffix(1);
  if (text.empty() || text.size() > 253) return {};
  std::string name;
  name.reserve(text.size());
  std::size_t label = 0;
  bool label_all_digits = true;
  for (char c : text) {
    if (c == '.') {
      if (label == 0) return {};
      label = 0;
      label_all_digits = true;
      name.push_back(c);
      continue;
    }
    bool digit = c >= '0' && c <= '9';
    bool ok = digit || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_';
    if (!ok || ++label > 63) return {};
    label_all_digits = label_all_digits && digit;
    name.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c);
  }
  if (label == 0 || label_all_digits) return {};
  return name;
}

bool is_ip_literal(std::string_view canonical) { return IpAddress::parse(canonical).has_value(); }

bool split_host_port(std::string_view text, std::string& host, std::optional<std::uint16_t>& port) {
  port.reset();
  std::string_view h = text, p;
  bool has_port = false;
  if (!text.empty() && text.front() == '[') {
    std::size_t close = text.find(']');
    if (close == std::string_view::npos) return false;
    h = text.substr(0, close + 1);
    std::string_view after = text.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return false;
      p = after.substr(1);
      has_port = true;
    }
  } else if (std::size_t colon = text.find(':'); colon != std::string_view::npos) {
    if (text.find(':', colon + 1) != std::string_view::npos) return false;  // bare IPv6
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
    has_port = true;
  }
  if (has_port) {
    if (p.empty() || p.size() > 5) return false;
    unsigned v = 0;
    for (char c : p) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + static_cast<unsigned>(c - '0');
    }
    if (v == 0 || v > 65535) return false;
    port = static_cast<std::uint16_t>(v);
  }
  host = canonical_host(h);
  return !host.empty();
}

}  // namespace corral::net
