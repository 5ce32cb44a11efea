#include "sdk/sandbox_provider.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace corral::sdk {

namespace {

// No default: a new ApiErrorCode does not compile until it is mapped here.
ErrorCode code_of(api::ApiErrorCode api_code) {
  using api::ApiErrorCode;
  switch (api_code) {
    case ApiErrorCode::kNotFound:
      return ErrorCode::kNotFound;
    case ApiErrorCode::kBadJson:
    case ApiErrorCode::kUnknownField:
    case ApiErrorCode::kWrongType:
    case ApiErrorCode::kInvalidValue:
    case ApiErrorCode::kMethodNotAllowed:
    case ApiErrorCode::kUnsupportedMediaType:
      return ErrorCode::kInvalidArgument;
    case ApiErrorCode::kPathEscape:
    case ApiErrorCode::kSecretFile:
    case ApiErrorCode::kForbidden:
    case ApiErrorCode::kUnauthorized:
      return ErrorCode::kPermissionDenied;
    case ApiErrorCode::kIdempotencyMismatch:
      return ErrorCode::kAlreadyExists;
    case ApiErrorCode::kConflict:
    case ApiErrorCode::kUnavailable:
    case ApiErrorCode::kSelfCheckFailed:  // that sandbox is gone; a new create may pass
      return ErrorCode::kUnavailable;
    case ApiErrorCode::kOverCapacity:
    case ApiErrorCode::kInsufficientStorage:
    case ApiErrorCode::kBodyTooLarge:
      return ErrorCode::kResourceExhausted;
    case ApiErrorCode::kRequestTimeout:
    case ApiErrorCode::kSandboxExpired:
      return ErrorCode::kTimeout;
    case ApiErrorCode::kSetupFailed:
      return ErrorCode::kSystem;
    case ApiErrorCode::kInternal:
    case ApiErrorCode::kNetworkUnavailable:
      return ErrorCode::kInternal;
  }
  return ErrorCode::kInternal;
}

// A code this build does not know (a newer server's) is kInternal.
ErrorCode code_of(std::string_view api_code) {
  std::optional<api::ApiErrorCode> known = api::parse_error_code(api_code);
  return known ? code_of(*known) : ErrorCode::kInternal;
}

}  // namespace

Error error_from_api(const api::ApiError& error) {
  Error e;
  e.code = code_of(error.code);
  e.message = error.message.empty() ? error.code : error.message;
  if (!error.field.empty() && e.message.find(error.field) == std::string::npos)
    e.message += " (field " + error.field + ")";
  e.hint = error.hint;
  return e;
}

int exit_status_of(const api::ExecResult& result) {
  if (result.timed_out) return 124;
  if (result.signal) return 128 + *result.signal;
  return result.exit_code.value_or(125);
}

Result<std::string> SandboxProvider::create(const api::CreateSandboxRequest& request) {
  auto info = create_sandbox(request, std::nullopt);
  if (!info) return tl::unexpected(std::move(info).error());
  return info->id;
}

Result<api::UploadResult> SandboxProvider::put_file(std::string_view id, std::string_view path,
                                                    std::string_view data, std::uint32_t mode) {
  std::size_t offset = 0;
  ByteSource source = [&](char* buf, std::size_t cap) -> Result<std::size_t> {
    std::size_t n = std::min(cap, data.size() - offset);
    std::memcpy(buf, data.data() + offset, n);
    offset += n;
    return n;
  };
  return put_file_from(id, path, source, data.size(), mode);
}

Result<std::string> SandboxProvider::get_file(std::string_view id, std::string_view path,
                                              std::uint64_t max_bytes) {
  std::string out;
  ByteSink sink = [&](std::string_view data) -> Status {
    if (out.size() + data.size() > max_bytes)
      return make_error(ErrorCode::kResourceExhausted,
                        std::string(path) + " is larger than " + std::to_string(max_bytes) +
                            " bytes",
                        "read big files with get_file_to_fd, which streams");
    out.append(data);
    return ok();
  };
  auto n = get_file_to(id, path, sink);
  if (!n) return tl::unexpected(std::move(n).error());
  return out;
}

Result<std::uint64_t> SandboxProvider::get_file_to_fd(std::string_view id, std::string_view path,
                                                      int fd) {
  ByteSink sink = [fd](std::string_view data) -> Status {
    while (!data.empty()) {
      ssize_t w = ::write(fd, data.data(), data.size());
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return errno_error("write");
      data.remove_prefix(static_cast<std::size_t>(w));
    }
    return ok();
  };
  return get_file_to(id, path, sink);
}

Status SandboxProvider::destroy(std::string_view id) {
  auto info = destroy_sandbox(id);
  if (!info) return tl::unexpected(std::move(info).error());
  if (!info->residue.empty()) {
    std::string what;
    for (const auto& r : info->residue) what += (what.empty() ? "" : "; ") + r;
    return make_error(ErrorCode::kSystem,
                      "sandbox " + std::string(id) + " was destroyed but left on the host: " + what,
                      "docs/operations.md, \"Residue after cleanup\", says what each item is and how to remove it");
  }
  return ok();
}

}  // namespace corral::sdk
