// The per-sandbox tokens of the internal-service gateway (N5, ADR 0005,
// "Gateway"). A token names one sandbox and an expiry and is signed with
// the owner's secret (HMAC-SHA256):
//
//   cgw1.<base64url(sandbox id)>.<expiry, unix seconds>.<base64url(mac)>
//
// where mac = HMAC-SHA256(secret, everything before the last '.'). It is
// not a secret of the sandbox's choosing: the owner mints it and puts it
// in the workload's environment (CORRAL_GATEWAY_TOKEN); the gateway checks
// it on every request. The secret stays on the host (a 0600 file for the
// daemon, so that tokens of re-attached sandboxes survive a restart).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace corral::net {

inline constexpr std::size_t kGatewaySecretBytes = 32;

// Why verify() refused a token.
enum class TokenError : std::uint8_t {
  kNone,
  kMalformed,     // not of the form above
  kBadSignature,  // the MAC does not match: forged, altered, or another owner's
  kExpired,       // signed, but past its expiry
  kOtherSandbox,  // signed and current, but for another sandbox
};
std::string_view token_error_name(TokenError e);  // "none", "malformed", ...

struct TokenCheck {
  TokenError error = TokenError::kNone;
  std::string reason;  // a sentence for the refusal and the audit record
  bool ok() const { return error == TokenError::kNone; }
};

// `secret` must not be empty (kGatewaySecretBytes from the helpers below).
std::string mint_gateway_token(std::string_view secret, std::string_view sandbox_id,
                               std::int64_t expires_at_unix);

// Checks, in this order: the form, the signature (constant-time compare),
// the expiry (now >= expiry is expired), the sandbox.
TokenCheck verify_gateway_token(std::string_view secret, std::string_view token,
                                std::string_view sandbox_id, std::int64_t now_unix);

// kGatewaySecretBytes random bytes (getrandom).
Result<std::string> random_gateway_secret();

// Reads the secret from `path`, creating it (0600, O_EXCL, random) when it
// does not exist. Refuses a file that is not a regular file owned by the
// caller with mode 0600 exactly, or that does not hold exactly
// kGatewaySecretBytes bytes; never follows a symlink.
Result<std::string> load_or_create_gateway_secret(const std::string& path);

}  // namespace corral::net
