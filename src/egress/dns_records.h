// What corral's DNS handed one sandbox: for each name, the addresses it
// answered and until when they count (the answer's TTL, bounded below and
// above), and the reverse. The egress proxy asks which names a sandbox
// looked up for an address (DnsServer::answered, names_for). Not
// thread-safe: DnsServer guards each sandbox's records with its mutex.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace corral::net {

// One text form per address, so that "::ffff:1.2.3.4" and "1.2.3.4", or
// "2001:DB8::1" and "2001:db8::1", are the same key. Empty if not an address.
std::string canonical_address(std::string_view text);

struct DnsRecordLimits {
  std::chrono::seconds min_ttl{30};
  std::chrono::seconds max_ttl{3600};
  std::size_t max_names = 4096;  // beyond: the name that expires first goes
};

class DnsRecords {
 public:
  using Clock = std::chrono::steady_clock;

  explicit DnsRecords(DnsRecordLimits limits = {}) : limits_(limits) {}

  // Records that `addresses` were handed out for `name` (lower case, no
  // final dot) for `ttl` seconds, bounded by the limits.
  void remember(const std::string& name, const std::vector<std::string>& addresses,
                std::uint32_t ttl);
  // Whether `address` was handed out for `name` and has not expired. Names
  // in any case, with or without the final dot.
  bool answered(std::string_view name, std::string_view address) const;
  // The names for which `address` was handed out and has not expired, sorted.
  std::vector<std::string> names_for(std::string_view address) const;

 private:
  void prune(Clock::time_point now);
  void forget_name(const std::string& name);

  DnsRecordLimits limits_;
  // name -> address -> expiry, and the reverse.
  std::unordered_map<std::string, std::map<std::string, Clock::time_point>> by_name_;
  std::unordered_map<std::string, std::map<std::string, Clock::time_point>> by_address_;
};

}  // namespace corral::net
