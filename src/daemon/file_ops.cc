#include "daemon/file_ops.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/sandbox_service.h"

namespace corral::daemon {

tl::expected<ConfinedRoot, api::ApiError> open_sandbox_root(SandboxService& service,
                                                            const SandboxEntry& sandbox) {
  auto root = ConfinedRoot::open(sandbox.live->root_path(), /*cross_mounts=*/true);
  if (!root) {
    const bool host = root.error().code == ErrorCode::kUnavailable;
    return tl::unexpected(api::make_api_error(
        host ? api::ApiErrorCode::kUnavailable : api::ApiErrorCode::kConflict,
        "the root of sandbox " + sandbox.id + " is not reachable: " + root.error().message, "",
        root.error().hint));
  }
  // Sealed by device, not by path: a symlink to /run/secrets, or another
  // mount of it, reaches the same file system.
  auto devices = service.secret_devices(sandbox.id);
  if (!devices)
    return tl::unexpected(api::make_api_error(
        api::ApiErrorCode::kUnavailable,
        "the secret files of sandbox " + sandbox.id +
            " cannot be told apart from its other files: " + devices.error().message));
  for (dev_t dev : *devices)
    root->seal_device(dev, std::string(api::wire_name(api::ApiErrorCode::kSecretFile)));
  return std::move(*root);
}

FileRedactor::FileRedactor(std::shared_ptr<const secrets::RedactionSet> set) {
  if (set) stream_.emplace(std::move(set));
}

FileRedactor::FileRedactor(SandboxService& service, const std::string& sandbox)
    : FileRedactor(service.redaction(sandbox)) {}

std::string FileRedactor::text(std::string_view s) {
  if (!stream_) return std::string(s);
  std::string out;
  stream_->feed(s, out);
  stream_->finish(out);  // and ready for the next string
  return out;
}

void FileRedactor::info(FileInfo& f) {
  f.name = text(f.name);
  if (!f.link_target.empty()) f.link_target = text(f.link_target);
}

api::ApiError FileRedactor::error(api::ApiError e) {
  e.message = text(e.message);
  e.hint = text(e.hint);
  e.field = text(e.field);
  return e;
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
          api::ApiErrorCode::kInsufficientStorage, e.message, "",
          e.hint.empty() ? "create the sandbox with a bigger limits.disk" : e.hint);
    case EROFS:
    case EACCES:
    case EPERM:
    case EBUSY:
      return api::make_api_error(api::ApiErrorCode::kConflict, e.message, "", e.hint);
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
            api::ApiErrorCode::kInsufficientStorage,
            "the sandbox's disk limit is full after " + std::to_string(written) + " bytes", "",
            "create the sandbox with a bigger limits.disk");
      return api::make_api_error(api::ApiErrorCode::kInternal,
                                 std::string("write: ") + std::strerror(e));
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
