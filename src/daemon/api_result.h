// ApiResult: what the daemon's services return, so that every failure
// already carries its stable API error code and HTTP status (api_model.h).
#pragma once

#include <string>
#include <tl/expected.hpp>

#include "api/api_model.h"
#include "base/result.h"

namespace corral::daemon {

template <typename T>
using ApiResult = tl::expected<T, api::ApiError>;

inline tl::unexpected<api::ApiError> api_fail(api::ApiErrorCode code, std::string message,
                                              std::string field = {}, std::string hint = {}) {
  return tl::unexpected<api::ApiError>(
      api::make_api_error(code, std::move(message), std::move(field), std::move(hint)));
}

inline tl::unexpected<api::ApiError> api_fail(const Error& error) {
  return tl::unexpected<api::ApiError>(api::to_api_error(error));
}

}  // namespace corral::daemon
