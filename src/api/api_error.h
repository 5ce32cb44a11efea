// The daemon API's errors (docs/api.md): the body every error response
// carries, the table of stable codes and their HTTP status, and the bridge
// from a corral Error (a parse error of the codecs in api_model.h, or a
// failure of the daemon) to an ApiError.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace corral::api {

// Every error response: {"error": {"code": "...", "message": "...",
// "field": "...", "hint": "..."}} with `code` one of the stable names below.
struct ApiError {
  int http_status = 500;
  std::string code;     // stable, snake_case (see kErrorCodes)
  std::string message;  // says what is wrong and what to do
  std::string field;    // JSON path of the offending field, when there is one
  std::string hint;
};

// Stable error codes and their HTTP status, in one table (docs/api.md lists
// them from here): bad_json 400, unknown_field 400, wrong_type 400,
// invalid_value 400, path_escape 400, unauthorized 401, secret_file 403
// (the file API does not serve /run/secrets), not_found 404,
// method_not_allowed 405, conflict 409 (e.g. exec on a sandbox being
// destroyed), idempotency_mismatch 409, body_too_large 413,
// unsupported_media_type 415, over_capacity 429, insufficient_storage 507,
// request_timeout 408 (per-request timeout), command_timeout 504 is NOT an
// error (a timed-out command is a result), sandbox_expired 410,
// setup_failed 500 (a sandbox stage failed; message has stage + hint),
// internal 500, unavailable 503.
struct ErrorCodeInfo {
  std::string_view code;
  int http_status;
};
const std::vector<ErrorCodeInfo>& error_codes();
ApiError make_api_error(std::string_view code, std::string message, std::string field = {},
                        std::string hint = {});
std::string to_json(const ApiError& error);
// Parses an error body; anything unparseable becomes code "internal" with
// the raw text (bounded) as message.
ApiError parse_api_error(int http_status, std::string_view body);

// Parse errors from the codecs (api_model.h) are kInvalidArgument whose
// message starts with the API error code and a colon ("unknown_field: ...",
// "wrong_type: ...", "bad_json: ...", "invalid_value: ...") and whose hint
// is the field path: to_api_error() turns them into an ApiError.
ApiError to_api_error(const Error& error);

}  // namespace corral::api
