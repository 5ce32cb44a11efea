// SecretBroker: the tokens of broker-mode secrets (issue 5, S1 "runtime
// API", S2 tier high, S4, S5). A sandbox is given `corral_tok_` + 43
// base62 characters (256 random bits) in place of the value; the proxy and
// the gateway hand request heads to swap() (token_swapper.h), which puts
// the value in only toward the secret's hosts. The gateway's runtime
// endpoint reads a low or medium secret's value with read_value().
//
// Tokens are not kept: the table is keyed by a keyed BLAKE2b hash of each
// token (a per-broker random key), so a dump of it gives no token back.
// Revoked and expired tokens stay as tombstones (no value) for
// `tombstone_retention`, so a late use is refused as "revoked" or
// "expired" rather than "unknown token".
//
// Every issue, swap, refusal, revoke, expiry and read is one BrokerEvent to
// the audit sink; events hold names, hosts and a token's hash prefix,
// never a value or a token. Thread-safe. User guide: docs/secrets.md,
// "Broker tokens".
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "secrets/secret_spec.h"
#include "secrets/secret_value.h"
#include "secrets/token_swapper.h"

namespace corral::secrets {

inline constexpr std::size_t kTokenRandomChars = 43;  // base62: 256.04 bits
inline constexpr std::size_t kTokenLength = kTokenPrefix.size() + kTokenRandomChars;

// Refusal reasons (SwapResult::reason, BrokerEvent::reason).
inline constexpr std::string_view kReasonUnknown = "unknown token";
inline constexpr std::string_view kReasonOtherSandbox = "token of another sandbox";
inline constexpr std::string_view kReasonExpired = "expired";
inline constexpr std::string_view kReasonRevoked = "revoked";
inline constexpr std::string_view kReasonHost = "host not allowed";
inline constexpr std::string_view kReasonTierHigh = "tier high: no runtime read";

using BrokerClock = std::function<std::chrono::system_clock::time_point()>;

struct BrokerEvent {
  std::string sandbox;
  std::string secret;      // the secret's name; empty for an unknown token
  std::string kind;        // "issued", "swapped", "refused", "revoked", "read", "expired"
  std::string host;        // destination host:port of a swap or refusal
  std::string via;         // "gateway", "tls-intercept", "http", "runtime-api"
  std::string reason;      // why refused
  std::string token_hash;  // 12 hex digits of the token's keyed hash
  std::chrono::system_clock::time_point time;
};
using BrokerAuditSink = std::function<void(const BrokerEvent&)>;

struct BrokerCounters {
  std::uint64_t issued = 0;
  std::uint64_t swaps = 0;  // tokens replaced by values
  std::uint64_t swapped_requests = 0;
  std::uint64_t reads = 0;  // runtime reads that returned a value
  std::uint64_t revoked = 0;
  std::uint64_t expired = 0;
  std::uint64_t refusals = 0;  // refused tokens (swap and read)
  std::map<std::string, std::uint64_t> refusals_by_reason;
  std::size_t active_tokens = 0;
};

struct BrokerOptions {
  // How long a revoked or expired token's tombstone is kept.
  std::chrono::seconds tombstone_retention{std::chrono::hours(1)};
};

class SecretBroker : public TokenSwapper {
 public:
  // `sink` receives every event (called without the broker's lock held,
  // from whichever thread acted: it must be thread-safe);
  // `clock` defaults to the system clock.
  explicit SecretBroker(BrokerAuditSink sink = {}, BrokerClock clock = {},
                        BrokerOptions options = {});
  ~SecretBroker() override;
  SecretBroker(const SecretBroker&) = delete;
  SecretBroker& operator=(const SecretBroker&) = delete;

  // A new token for a broker-mode secret of `sandbox_id`, valid until
  // `expiry` (which must be in the future). The caller puts it in the
  // sandbox (secret.env_var) and keeps no copy beyond that.
  Result<std::string> issue(std::string_view sandbox_id, const ResolvedSecret& secret,
                            std::chrono::system_clock::time_point expiry);
  // The same, with expiry = now + secret.ttl.
  Result<std::string> issue(std::string_view sandbox_id, const ResolvedSecret& secret);

  // Revokes every token of the sandbox (at its end, or when its task ends
  // and the sandbox is kept); how many were active. Idempotent: a second
  // call revokes nothing and returns 0.
  std::size_t revoke_sandbox(std::string_view sandbox_id);
  // Caps the expiry of every active token of the sandbox at `deadline`
  // (issue 15, S4: a task's tokens end with the task's time). Never makes
  // a token live longer. A token whose expiry is then reached is expired
  // at once (one "expired" event each). Returns how many were shortened.
  std::size_t limit_sandbox(std::string_view sandbox_id,
                            std::chrono::system_clock::time_point deadline);
  // Revokes one token; false when it is unknown or already revoked.
  bool revoke(std::string_view token);

  // Finds every token in the head: the request line, any field, and the
  // base64 credentials of `Authorization: Basic` (re-encoded on a swap).
  SwapResult swap(const OutboundRequest& request, std::string& head) override;
  bool intercepts(std::string_view sandbox, std::string_view host,
                  std::uint16_t port) const override;

  // The gateway's runtime endpoint: the value of the secret behind `token`
  // for its own sandbox, when the secret is tier low or medium (tier high
  // values leave the broker only toward their hosts). Refusals carry the
  // reason in the message (kPermissionDenied) and are audited.
  Result<SecretValue> read_value(std::string_view token, std::string_view sandbox_id) override;

  // Drops tombstones older than the retention, marks expired tokens (and
  // drops their values). Called by issue/revoke from time to time too.
  void sweep();

  BrokerCounters counters() const;

  // Whether `token` was issued to `sandbox_id` for secret `secret` and is
  // active with its value, or has since ended by its own TTL (the self-check,
  // T3: it proves the variable's wiring; a TTL shorter than the create is
  // the client's choice, and the proxy refuses that token as "expired"). A
  // revoked or unknown token is false. Emits no event and changes nothing;
  // the token is looked up by its hash.
  bool issued_to(std::string_view token, std::string_view sandbox_id,
                 std::string_view secret) const;

 private:
  enum class State : std::uint8_t { kActive, kRevoked, kExpired };
  struct Entry {
    std::string hash;  // the full keyed hash (also the map key)
    std::string sandbox;
    std::string secret;
    SecretTier tier = SecretTier::kMedium;
    std::vector<SecretHost> hosts;
    std::shared_ptr<const SecretValue> value;  // null once revoked or expired
    std::chrono::system_clock::time_point expiry;
    std::chrono::system_clock::time_point ended;  // when revoked or expired
    State state = State::kActive;
  };
  struct Check {
    const Entry* entry = nullptr;
    std::string_view reason;  // empty: valid
  };

  std::string hash_token(std::string_view token) const;
  // Under mu_: finds and checks a token for a sandbox; marks expiry.
  Check check_locked(std::string_view token, std::string_view sandbox,
                     std::chrono::system_clock::time_point now, std::vector<BrokerEvent>& events);
  void mark_ended_locked(Entry& e, State state, std::chrono::system_clock::time_point now);
  void sweep_locked(std::chrono::system_clock::time_point now, std::vector<BrokerEvent>& events);
  void refuse_locked(std::string_view reason);
  void emit(std::vector<BrokerEvent>& events) const;
  std::chrono::system_clock::time_point now() const;

  BrokerAuditSink sink_;
  BrokerClock clock_;
  BrokerOptions options_;
  unsigned char hash_key_[32];

  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> tokens_;                         // by hash
  std::unordered_map<std::string, std::vector<std::string>> by_sandbox_;  // sandbox -> hashes
  std::chrono::system_clock::time_point last_sweep_{};
  BrokerCounters counters_;
};

// Whether `text` has the shape of a broker token (prefix + 43 base62).
bool looks_like_token(std::string_view text);

}  // namespace corral::secrets
