#include "base/result.h"

#include <cstring>

namespace corral {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kAlreadyExists: return "already_exists";
    case ErrorCode::kPermissionDenied: return "permission_denied";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kResourceExhausted: return "resource_exhausted";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kSystem: return "system";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

Error Error::wrap(std::string_view context) const& {
  Error e = *this;
  return std::move(e).wrap(context);
}

Error Error::wrap(std::string_view context) && {
  std::string m;
  m.reserve(context.size() + 2 + message.size());
  m.append(context).append(": ").append(message);
  message = std::move(m);
  return std::move(*this);
}

std::string Error::to_string() const {
  if (hint.empty()) return message;
  return message + " (hint: " + hint + ")";
}

std::string_view errno_name(int err) {
  const char* name = strerrorname_np(err);
  return name != nullptr ? std::string_view(name) : std::string_view("E?");
}

tl::unexpected<Error> errno_error(std::string_view call, int err, std::string hint) {
  ErrorCode code = ErrorCode::kSystem;
  if (err == ENOENT) code = ErrorCode::kNotFound;
  if (err == EACCES || err == EPERM) code = ErrorCode::kPermissionDenied;
  std::string msg(call);
  msg.append(": ").append(errno_name(err)).append(" (").append(strerror(err)).append(")");
  return tl::unexpected<Error>(Error{code, std::move(msg), std::move(hint), err});
}

}  // namespace corral
