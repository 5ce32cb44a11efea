#include "egress/dns_cache.h"

#include <utility>

namespace corral::net {

namespace {

std::string cache_key(const dns::Question& q) { return std::to_string(q.qtype) + "/" + q.name; }

}  // namespace

void DnsCache::put(const dns::Question& q, Entry entry) {
  if (entries_ == 0 || entry.ttl == 0) return;
  auto key = cache_key(q);
  if (!cache_.contains(key) && cache_.size() >= entries_) {
    auto now = Clock::now();
    std::erase_if(cache_, [&](const auto& kv) {
      return now - kv.second.stored >= std::chrono::seconds(kv.second.ttl);
    });
    if (cache_.size() >= entries_) cache_.erase(cache_.begin());
  }
  cache_[key] = std::move(entry);
}

// The cached answer with its TTLs aged, or nothing.
std::optional<DnsCache::Entry> DnsCache::get(const dns::Question& q) {
  if (entries_ == 0) return std::nullopt;
  auto it = cache_.find(cache_key(q));
  if (it == cache_.end()) return std::nullopt;
  auto age = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - it->second.stored);
  if (age >= std::chrono::seconds(it->second.ttl)) {
    cache_.erase(it);
    return std::nullopt;
  }
  Entry e = it->second;
  auto aged = static_cast<std::uint32_t>(age.count());
  for (auto& r : e.records) r.ttl = r.ttl > aged ? r.ttl - aged : 0;
  e.ttl -= aged;
  return e;
}

}  // namespace corral::net
