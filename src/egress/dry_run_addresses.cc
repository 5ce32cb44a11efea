#include "egress/dry_run_addresses.h"

namespace corral::net {

namespace {

constexpr std::uint32_t kBase = (198u << 24) | (18u << 16);  // 198.18.0.0/15
constexpr std::uint32_t kUsable = (1u << 17) - 2;            // .0.0 and the last one left out

}  // namespace

std::string DryRunAddresses::address_for(std::string_view name) {
  std::lock_guard lock(mu_);
  if (auto it = by_name_.find(name); it != by_name_.end()) return it->second;
  if (by_name_.size() >= kUsable) by_name_.clear();  // a new cycle; the names are asked again
  const std::uint32_t a = kBase + 1 + (next_++ % kUsable);
  std::string text = std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 0xff) + "." +
                     std::to_string((a >> 8) & 0xff) + "." + std::to_string(a & 0xff);
  by_name_.emplace(std::string(name), text);
  return text;
}

}  // namespace corral::net
