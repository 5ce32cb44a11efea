// The daemon API's errors (docs/api.md): the body every error response
// carries, the table of stable codes and their HTTP status, and the bridge
// from a corral Error (a parse error of the codecs in api_model.h, or a
// failure of the daemon) to an ApiError.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace corral::api {

// The stable error codes (docs/api.md). Code passes these, never the wire
// names, so that a misspelt code does not compile. One row per enumerator in
// error_codes() gives its wire name and HTTP status; a command that times out
// is NOT an error (a timed-out command is a result: no command_timeout).
enum class ApiErrorCode {
  kBadJson,               // bad_json 400
  kUnknownField,          // unknown_field 400
  kWrongType,             // wrong_type 400
  kInvalidValue,          // invalid_value 400
  kPathEscape,            // path_escape 400
  kUnauthorized,          // unauthorized 401
  kSecretFile,            // secret_file 403: the file API does not serve /run/secrets
  kNotFound,              // not_found 404
  kMethodNotAllowed,      // method_not_allowed 405
  kRequestTimeout,        // request_timeout 408: the per-request timeout
  kConflict,              // conflict 409, e.g. exec on a sandbox being destroyed
  kIdempotencyMismatch,   // idempotency_mismatch 409
  kSandboxExpired,        // sandbox_expired 410
  kBodyTooLarge,          // body_too_large 413
  kUnsupportedMediaType,  // unsupported_media_type 415
  kOverCapacity,          // over_capacity 429
  kInternal,              // internal 500
  kSetupFailed,           // setup_failed 500: a sandbox stage failed; message has stage + hint
  kUnavailable,           // unavailable 503
  kNetworkUnavailable,    // network_unavailable 503
  kInsufficientStorage,   // insufficient_storage 507
  kForbidden,             // forbidden 403: another namespace's resource (volumes)
  kSelfCheckFailed,       // self_check_failed 503: the new sandbox failed its self-check (T3)
};
// One more than the last enumerator: api_error.cc checks at compile time
// that its table has this many rows, in the enum's order. A new code goes
// last and takes kSelfCheckFailed's place here; the switches over the
// enum without a default (sdk's code_of, api_error_code_test.cc) make the
// build name every place that must decide about it.
inline constexpr std::size_t kApiErrorCodeCount =
    static_cast<std::size_t>(ApiErrorCode::kSelfCheckFailed) + 1;

struct ErrorCodeInfo {
  ApiErrorCode id;
  std::string_view code;  // the wire name
  int http_status;
};
// The table, in the enum's order (docs/api.md lists it).
const std::vector<ErrorCodeInfo>& error_codes();
const ErrorCodeInfo& error_code_info(ApiErrorCode id);
std::string_view wire_name(ApiErrorCode id);
// The enumerator of a wire name; nullopt for a name this build does not know
// (a newer server's code).
std::optional<ApiErrorCode> parse_error_code(std::string_view code);

// Every error response: {"error": {"code": "...", "message": "...",
// "field": "...", "hint": "..."}} with `code` one of the stable names above.
// `code` stays a string: a client reading a newer server's body keeps a code
// it does not know.
struct ApiError {
  int http_status = 500;
  std::string code;     // stable, snake_case (see error_codes())
  std::string message;  // says what is wrong and what to do
  std::string field;    // JSON path of the offending field, when there is one
  std::string hint;
  std::string check;  // self_check_failed: the check that failed ("layer", "dns", ...)

  bool is(ApiErrorCode id) const { return code == wire_name(id); }
};

ApiError make_api_error(ApiErrorCode code, std::string message, std::string field = {},
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
