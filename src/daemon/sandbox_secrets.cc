// SandboxService: a sandbox's broker tokens bounded before it ends (issue
// 15, S4): revoked (POST /v1/sandboxes/{id}/secrets/revoke, a task's end)
// or given a deadline (a task's start). The work is SecretService's.
#include "daemon/sandbox_service.h"

namespace corral::daemon {

ApiResult<std::size_t> SandboxService::revoke_secrets(std::string_view id) {
  auto info = get(id);  // not_found for an unknown id
  if (!info) return tl::unexpected(info.error());
  if (secrets_ == nullptr) return std::size_t{0};
  auto n = secrets_->revoke_tokens(std::string(id));
  if (!n) return api_fail(n.error());
  return *n;
}

ApiResult<std::size_t> SandboxService::limit_secret_lifetime(
    std::string_view id, std::chrono::system_clock::time_point deadline) {
  auto info = get(id);
  if (!info) return tl::unexpected(info.error());
  if (secrets_ == nullptr) return std::size_t{0};
  auto n = secrets_->limit_token_lifetime(std::string(id), deadline);
  if (!n) return api_fail(n.error());
  return *n;
}

}  // namespace corral::daemon
