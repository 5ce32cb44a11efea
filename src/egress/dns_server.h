// The per-sandbox filtering resolver (ADR 0005, "DNS (as built)").
//
// One DnsServer per owner (daemon or `corral run`) runs one thread with an
// epoll loop. Each sandbox gets its own UDP socket on <host end>:<port>:
// the firewall redirects the sandbox's UDP 53 there, so the socket a query
// arrives on says which sandbox asked. A query is answered like this:
//   - malformed: FORMERR (NOTIMP for another opcode); not even a header, or
//     a response: dropped;
//   - a class other than IN, or any type but A and AAAA (TXT, ANY, MX, NULL,
//     SRV, ...): REFUSED, nobody else asked;
//   - otherwise the sandbox's policy decides: NXDOMAIN or REFUSED without
//     contacting upstream, a fixed IPv4 answer (gateway.corral.internal),
//     or resolution by the configured upstream servers, of which only the
//     A/AAAA records of the question and the CNAMEs leading to them are
//     passed on.
// Every query ends in one log entry and one outcome counter. The addresses
// handed to a sandbox are remembered per sandbox with their TTL (bounded
// below and above) for the proxy: answered() and names_for().
//
// TCP DNS is not served here: the firewall sends all TCP from a sandbox to
// the egress proxy, which does not speak DNS, so a client that retries a
// query over TCP fails closed. Responses are therefore never truncated with
// TC; records that do not fit are left out.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace corral::net {

enum class DnsAction {
  kResolve,   // ask upstream (or answer fixed_ipv4)
  kNxDomain,  // the name does not exist for this sandbox
  kRefused,   // refused outright
};

struct DnsVerdict {
  DnsAction action = DnsAction::kNxDomain;
  std::string reason;  // for the log: the rule that decided, or why none did
  // With kResolve: answer A queries with this IPv4 address (AAAA: no data)
  // instead of asking upstream. Used for gateway.corral.internal.
  std::optional<std::string> fixed_ipv4;
};

struct DnsQuestionContext {
  std::string sandbox_id;
  std::string name;  // lower-case, no trailing dot
  std::uint16_t qtype = 0;
};

// Called on the server's thread with no lock held: it may call back into
// the DnsServer, but should not block.
using DnsPolicy = std::function<DnsVerdict(const DnsQuestionContext&)>;

enum class DnsOutcome : std::uint8_t {
  kAnswered,          // NOERROR (addresses, or none: "no data")
  kUpstreamNxDomain,  // allowed, but upstream says the name does not exist
  kDenied,            // the policy said NXDOMAIN
  kRefused,           // the policy said REFUSED
  kTypeRefused,       // not A/AAAA (or not class IN): REFUSED
  kServFail,          // upstream failed, timed out, or limits were hit
  kFormErr,           // malformed query
  kNotImp,            // opcode other than QUERY
  kIgnored,           // not a query at all: dropped without an answer
  kCount,
};
// "answered", "upstream_nxdomain", "denied", "refused", "type_refused",
// "servfail", "formerr", "notimp", "ignored".
std::string_view dns_outcome_name(DnsOutcome outcome);

struct DnsLogEntry {
  std::string sandbox_id;
  std::string name;  // empty when the packet had no readable question
  std::uint16_t qtype = 0;
  DnsOutcome outcome = DnsOutcome::kIgnored;
  std::string reason;                  // the policy's reason, or why the server decided alone
  std::string upstream_error;          // what went wrong upstream, if anything
  int upstream_rcode = -1;             // RCODE of the upstream answer used; -1: none
  bool cached = false;                 // answered from this sandbox's cache
  std::vector<std::string> addresses;  // handed to the sandbox
  std::chrono::microseconds latency{0};
};

using DnsLogSink = std::function<void(const DnsLogEntry&)>;

struct DnsServerConfig {
  // Upstream servers: "IP", "IP:PORT", "[IPv6]:PORT". Tried in order: a
  // query that times out or fails goes to the next one.
  std::vector<std::string> upstreams;
  std::chrono::milliseconds upstream_timeout{2000};  // per attempt
  int upstream_attempts = 2;                         // first try + one retry
  // Bounds of the lifetime of remembered answers: at least min (a lookup
  // followed by a connect must work with TTL 0), at most max.
  std::chrono::seconds record_min_ttl{30};
  std::chrono::seconds record_max_ttl{3600};
  std::size_t max_recorded_names = 4096;  // per sandbox; the oldest go first
  // Answers cached per sandbox (no sandbox can probe another's lookups);
  // 0 turns the cache off. Negative answers are cached by their SOA.
  std::size_t cache_entries = 1024;
  std::uint32_t fixed_answer_ttl = 60;
  std::size_t max_pending = 1024;             // queries waiting for upstream, all sandboxes
  std::size_t max_pending_per_sandbox = 128;  // beyond: SERVFAIL at once
};

struct DnsMetrics {
  std::array<std::uint64_t, static_cast<std::size_t>(DnsOutcome::kCount)> outcomes{};
  std::uint64_t queries = 0;              // packets received from sandboxes
  std::uint64_t upstream_queries = 0;     // sent upstream, retries included
  std::uint64_t upstream_timeouts = 0;    // attempts that got no answer in time
  std::uint64_t upstream_failures = 0;    // attempts refused, unreachable or SERVFAIL
  std::uint64_t upstream_mismatched = 0;  // upstream packets dropped (wrong id or question)
  std::uint64_t cache_hits = 0;

  std::uint64_t count(DnsOutcome o) const { return outcomes[static_cast<std::size_t>(o)]; }
};

class DnsServer {
 public:
  // Validates the config and starts the thread. `log` gets every query, on
  // the server's thread, with no lock held.
  static Result<std::unique_ptr<DnsServer>> start(DnsServerConfig config, DnsLogSink log = {});
  // Stops the thread and closes every socket; queries in flight are dropped.
  ~DnsServer();
  DnsServer(const DnsServer&) = delete;
  DnsServer& operator=(const DnsServer&) = delete;

  // Binds UDP `bind_address`:`port` (numeric IPv4 or IPv6; port 0 picks
  // one) for `sandbox_id` and returns the bound port. kAlreadyExists if
  // the id is registered; the bind's error if the address is taken.
  // With `client_address` (the sandbox's own address), datagrams from any
  // other source are dropped: a sandbox that spoofs its source could
  // otherwise make the host send answers to an address of its choosing.
  Result<std::uint16_t> add_sandbox(const std::string& sandbox_id, const std::string& bind_address,
                                    std::uint16_t port, DnsPolicy policy,
                                    const std::string& client_address = {});
  // Closes the sandbox's socket before returning and forgets its answers
  // and cache. False if the id was not registered.
  bool remove_sandbox(const std::string& sandbox_id);
  // Takes effect for the next query. kNotFound if the id is not registered.
  // Upstream servers for this sandbox's queries ("IP", "IP:PORT"); empty:
  // the server's own (DnsServerConfig::upstreams). Clears its cache.
  Status set_upstreams(const std::string& sandbox_id, const std::vector<std::string>& servers);
  Status set_policy(const std::string& sandbox_id, DnsPolicy policy);

  // Whether `address` was handed to `sandbox_id` as an answer for `name`
  // and has not expired. Names in any case, with or without the final dot.
  bool answered(const std::string& sandbox_id, std::string_view name,
                std::string_view address) const;
  // The names for which `address` was handed to `sandbox_id` and has not
  // expired, sorted.
  std::vector<std::string> names_for(const std::string& sandbox_id, std::string_view address) const;

  DnsMetrics metrics() const;

  struct Impl;

 private:
  explicit DnsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace corral::net
