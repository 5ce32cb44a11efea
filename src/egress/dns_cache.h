// The answers corral's DNS got from upstream for one sandbox, kept for
// their TTL (per sandbox: no sandbox can probe another's lookups).
// Negative answers are kept by their SOA. Not thread-safe: DnsServer
// guards each sandbox's cache with its mutex.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "egress/dns_message.h"

namespace corral::net {

class DnsCache {
 public:
  using Clock = std::chrono::steady_clock;

  struct Entry {
    dns::Rcode rcode = dns::Rcode::kNoError;
    std::vector<dns::Record> records;  // TTLs as received
    int upstream_rcode = 0;
    Clock::time_point stored;
    std::uint32_t ttl = 0;
  };

  // At most `entries` answers (beyond: the expired go, else any one); 0
  // turns the cache off.
  explicit DnsCache(std::size_t entries = 0) : entries_(entries) {}

  // Keeps `entry` for its ttl (an entry with ttl 0 is not kept).
  void put(const dns::Question& q, Entry entry);
  // The cached answer with its TTLs aged, or nothing.
  std::optional<Entry> get(const dns::Question& q);
  void clear() { cache_.clear(); }

 private:
  std::size_t entries_;
  std::unordered_map<std::string, Entry> cache_;  // "type/name"
};

}  // namespace corral::net
