// SecretService: the bounds a task puts on its sandbox's broker tokens
// (issue 15, S4; docs/secrets.md "Lifetime"): a deadline and revocation,
// applied to the broker now and stored (token_limits.h) for a restart.
#include <utility>

#include "daemon/secret_service.h"

namespace corral::daemon {

using nlohmann::json;
namespace sec = corral::secrets;
using Clock = std::chrono::system_clock;

namespace {

std::int64_t unix_ms(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

}  // namespace

bool SecretService::has_broker_secrets(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end() || !it->second.resolved) return false;
  for (const auto& s : it->second.resolved->secrets)
    if (s.mode == sec::SecretMode::kBroker) return true;
  return false;
}

Result<std::size_t> SecretService::limit_token_lifetime(const std::string& id,
                                                        Clock::time_point deadline) {
  if (!broker_) return make_error(ErrorCode::kUnavailable, "the secret service is not started");
  // A sandbox without broker secrets (or one already gone, whose tokens
  // were revoked at its end) has nothing to bound and stores nothing.
  if (!has_broker_secrets(id)) return std::size_t{0};
  // To the millisecond, as it is stored: a restart then restores it exactly.
  deadline = std::chrono::time_point_cast<std::chrono::milliseconds>(deadline);
  Status stored = ok();
  {
    std::lock_guard lock(limits_mu_);
    auto limit = limits_.get(id);
    if (limit) {
      if (!limit->deadline || deadline < *limit->deadline) limit->deadline = deadline;
      deadline = *limit->deadline;
      stored = limits_.put(id, *limit);
    } else {
      stored = tl::unexpected(limit.error());
    }
  }
  // The broker first, whatever the file says: the bound holds in this
  // daemon even when it cannot be stored for the next one.
  const std::size_t shortened = broker_->limit_sandbox(id, deadline);
  audit(json{{"type", "secret.lifetime"},
             {"sandbox", id},
             {"mode", "broker"},
             {"not_after_ms", unix_ms(deadline)},
             {"tokens", shortened},
             {"outcome", stored ? "ok" : "not_stored"}});
  if (!stored)
    return tl::unexpected(stored.error().wrap("storing the token deadline of " + id +
                                              " (it holds until the daemon restarts)"));
  return shortened;
}

Result<std::size_t> SecretService::revoke_tokens(const std::string& id) {
  if (!broker_) return make_error(ErrorCode::kUnavailable, "the secret service is not started");
  // Revoked in the broker first and always (a sandbox never injected may
  // still hold tokens of a failed create): each one is its own
  // `secret.revoked` record.
  const std::size_t revoked = broker_->revoke_sandbox(id);
  if (!has_broker_secrets(id)) return revoked;
  std::lock_guard lock(limits_mu_);
  auto limit = limits_.get(id);
  Status stored = limit ? ok() : Status(tl::unexpected(limit.error()));
  if (limit && !limit->revoked) {
    limit->revoked = true;
    stored = limits_.put(id, *limit);
  }
  if (!stored)
    return tl::unexpected(stored.error().wrap("storing the revocation of " + id +
                                              "'s tokens (they are revoked until the daemon "
                                              "restarts)"));
  return revoked;
}

Status SecretService::apply_stored_limit(const std::string& id) {
  if (!has_broker_secrets(id)) return ok();
  std::lock_guard lock(limits_mu_);
  auto limit = limits_.get(id);
  if (!limit) {
    // Unreadable: what it said is unknown, so the tokens end now.
    broker_->revoke_sandbox(id);
    return tl::unexpected(limit.error().wrap("the token limits of " + id));
  }
  if (limit->revoked)
    broker_->revoke_sandbox(id);
  else if (limit->deadline)
    broker_->limit_sandbox(id, *limit->deadline);
  return ok();
}

}  // namespace corral::daemon
