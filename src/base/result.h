// Result<T>: the error convention of corral (see docs/error-handling.md).
// Expected failures travel as values; messages name the call and its
// arguments, get wrapped with the step as they go up, and carry a hint that
// tells the user what to do.
#pragma once

#include <cerrno>
#include <string>
#include <string_view>
#include <utility>

#include <tl/expected.hpp>

namespace corral {

enum class ErrorCode {
  kInvalidArgument,    // the user's input is wrong (spec, flag, path)
  kNotFound,           // a named thing does not exist (image, file, id)
  kAlreadyExists,      // a named thing exists and would be overwritten
  kPermissionDenied,   // a path or action is outside what is allowed
  kUnavailable,        // the host lacks a feature corral needs
  kResourceExhausted,  // a limit or capacity was reached
  kTimeout,            // a deadline passed
  kSystem,             // a syscall failed for an environmental reason
  kInternal,           // corral's own bug
};

std::string_view error_code_name(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  std::string hint;  // what the user can do about it; may be empty
  int sys_errno = 0;

  // Prefixes the message with the step that was under way:
  // "setting up mounts: bind(/data -> /workspace): ENOENT".
  Error wrap(std::string_view context) const&;
  Error wrap(std::string_view context) &&;
  // "message (hint: ...)"
  std::string to_string() const;
};

template <typename T>
using Result = tl::expected<T, Error>;
using Status = tl::expected<void, Error>;

inline tl::unexpected<Error> make_error(ErrorCode code, std::string message,
                                        std::string hint = {}) {
  return tl::unexpected<Error>(Error{code, std::move(message), std::move(hint), 0});
}

// "call: strerror(err)" with code kSystem (or kNotFound/kPermissionDenied
// for ENOENT/EACCES/EPERM, which callers often want to tell apart).
tl::unexpected<Error> errno_error(std::string_view call, int err = errno,
                                  std::string hint = {});

// Name of an errno value ("ENOENT"), for messages and reports.
std::string_view errno_name(int err);

inline Status ok() { return {}; }

}  // namespace corral

// Propagates an error from an expression returning Result/Status.
#define CORRAL_TRY(expr)                                          \
  do {                                                            \
    auto corral_try_result_ = (expr);                             \
    if (!corral_try_result_) {                                    \
      return tl::unexpected<::corral::Error>(                     \
          std::move(corral_try_result_).error());                 \
    }                                                             \
  } while (0)

// Like CORRAL_TRY, but wraps the error with a context string.
#define CORRAL_TRY_CTX(expr, ctx)                                 \
  do {                                                            \
    auto corral_try_result_ = (expr);                             \
    if (!corral_try_result_) {                                    \
      return tl::unexpected<::corral::Error>(                     \
          std::move(corral_try_result_).error().wrap(ctx));       \
    }                                                             \
  } while (0)
