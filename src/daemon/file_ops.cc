#include "daemon/file_ops.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/sandbox_service.h"

namespace corral::daemon {

tl::expected<ConfinedRoot, api::ApiError> open_sandbox_root(const SandboxEntry& sandbox) {
  auto root = ConfinedRoot::open(sandbox.live->root_path(), /*cross_mounts=*/true);
  if (root) return std::move(*root);
  const bool host = root.error().code == ErrorCode::kUnavailable;
  return tl::unexpected(api::make_api_error(
      host ? "unavailable" : "conflict",
      "the root of sandbox " + sandbox.id + " is not reachable: " + root.error().message, "",
      root.error().hint));
}

uid_t file_owner(const SandboxEntry& sandbox) {
  return sandbox.spec.root ? sandbox.live->identity().host_uid_base : sandbox.live->host_user_uid();
}

api::ApiError file_error(const Error& e) {
  switch (e.sys_errno) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return api::make_api_error(
          "insufficient_storage", e.message, "",
          e.hint.empty() ? "create the sandbox with a bigger limits.disk" : e.hint);
    case EROFS:
    case EACCES:
    case EPERM:
    case EBUSY:
      return api::make_api_error("conflict", e.message, "", e.hint);
    default:
      return api::to_api_error(e);
  }
}

std::optional<api::ApiError> write_upload_chunk(int fd, std::string_view chunk,
                                                std::uint64_t& written) {
  std::size_t off = 0;
  while (off < chunk.size()) {
    ssize_t w = ::write(fd, chunk.data() + off, chunk.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      const int e = errno;
      if (e == ENOSPC || e == EDQUOT || e == EFBIG)
        return api::make_api_error(
            "insufficient_storage",
            "the sandbox's disk limit is full after " + std::to_string(written) + " bytes", "",
            "create the sandbox with a bigger limits.disk");
      return api::make_api_error("internal", std::string("write: ") + std::strerror(e));
    }
    off += static_cast<std::size_t>(w);
    written += static_cast<std::uint64_t>(w);
  }
  return std::nullopt;
}

void audit_file(SandboxService& service, const std::string& sandbox, std::string_view op,
                std::string_view path, nlohmann::json extra) {
  extra["type"] = "file." + std::string(op);
  extra["sandbox"] = sandbox;
  extra["path"] = std::string(path);
  if (!extra.contains("outcome")) extra["outcome"] = "ok";
  service.audit_now(extra);
}

void audit_refused(SandboxService& service, const std::string& sandbox, std::string_view op,
                   std::string_view path, const api::ApiError& e, nlohmann::json extra) {
  extra["outcome"] = "refused";
  extra["error"] = e.code;
  extra["reason"] = e.message;
  audit_file(service, sandbox, op, path, std::move(extra));
}

}  // namespace corral::daemon
