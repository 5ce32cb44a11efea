#include "secrets/token_swapper.h"

namespace corral::secrets {

std::string stale_token_refusal(const SwapResult& result, std::string_view destination) {
  if (result.outcome != SwapOutcome::kRefused) return {};
  std::string names;
  for (const auto& n : result.secrets) names += (names.empty() ? "" : ", ") + n;
  const std::string whose = names.empty() ? "a broker token" : "the token of secret " + names;
  const std::string dest(destination);
  // The strings match broker.h's kReasonRevoked / kReasonExpired.
  if (result.reason == "revoked")
    return "broker token revoked: " + whose +
           " was revoked (its task or sandbox ended, or an operator revoked it); nothing was "
           "sent to " +
           dest;
  if (result.reason == "expired")
    return "broker token expired: " + whose + " is past its lifetime; nothing was sent to " + dest;
  return {};
}

}  // namespace corral::secrets
