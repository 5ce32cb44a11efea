// The error table and ApiError's JSON (api_error.h).
#include "api/api_error.h"

#include <algorithm>
#include <array>

#include "api/codec_internal.h"
#include "api/json_writer.h"

namespace corral::api {

using namespace json;  // json_reader.h, json_writer.h: this file's vocabulary

namespace {

constexpr std::size_t kMaxRawErrorBytes = 1024;

// ---- error table -------------------------------------------------------------

// One row per ApiErrorCode, in the enum's order (checked below), so that
// error_code_info() is an index.
constexpr std::array<ErrorCodeInfo, kApiErrorCodeCount> kErrorCodes = {{
    {ApiErrorCode::kBadJson, "bad_json", 400},
    {ApiErrorCode::kUnknownField, "unknown_field", 400},
    {ApiErrorCode::kWrongType, "wrong_type", 400},
    {ApiErrorCode::kInvalidValue, "invalid_value", 400},
    {ApiErrorCode::kPathEscape, "path_escape", 400},
    {ApiErrorCode::kUnauthorized, "unauthorized", 401},
    {ApiErrorCode::kSecretFile, "secret_file", 403},
    {ApiErrorCode::kNotFound, "not_found", 404},
    {ApiErrorCode::kMethodNotAllowed, "method_not_allowed", 405},
    {ApiErrorCode::kRequestTimeout, "request_timeout", 408},
    {ApiErrorCode::kConflict, "conflict", 409},
    {ApiErrorCode::kIdempotencyMismatch, "idempotency_mismatch", 409},
    {ApiErrorCode::kSandboxExpired, "sandbox_expired", 410},
    {ApiErrorCode::kBodyTooLarge, "body_too_large", 413},
    {ApiErrorCode::kUnsupportedMediaType, "unsupported_media_type", 415},
    {ApiErrorCode::kOverCapacity, "over_capacity", 429},
    {ApiErrorCode::kInternal, "internal", 500},
    {ApiErrorCode::kSetupFailed, "setup_failed", 500},
    {ApiErrorCode::kUnavailable, "unavailable", 503},
    {ApiErrorCode::kNetworkUnavailable, "network_unavailable", 503},
    {ApiErrorCode::kInsufficientStorage, "insufficient_storage", 507},
    {ApiErrorCode::kForbidden, "forbidden", 403},
    {ApiErrorCode::kSelfCheckFailed, "self_check_failed", 503},
}};

constexpr bool rows_in_enum_order() {
  for (std::size_t i = 0; i < kErrorCodes.size(); ++i) {
    if (static_cast<std::size_t>(kErrorCodes[i].id) != i || kErrorCodes[i].code.empty())
      return false;
  }
  return true;
}
static_assert(rows_in_enum_order(), "kErrorCodes needs one row per ApiErrorCode, in order");

}  // namespace

Json error_body_json(const ApiError& e) {
  Json j = Json::object();
  j["code"] = e.code;
  j["message"] = e.message;
  if (!e.field.empty()) j["field"] = e.field;
  if (!e.hint.empty()) j["hint"] = e.hint;
  if (!e.check.empty()) j["check"] = e.check;
  return j;
}

Result<ApiError> read_error_body(const Json& v, std::string_view path, const Ctx& ctx) {
  auto obj = open_object(v, std::string(path), ctx, {"code", "message", "field", "hint", "check"});
  if (!obj) return tl::unexpected<Error>(obj.error());
  ApiError e;
  const Json* code = obj->get("code");
  if (code == nullptr) return fail(ApiErrorCode::kInvalidValue, obj->at("code"), "is missing");
  CORRAL_TRY(read_into(*obj, "code", e.code, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "message", e.message, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "field", e.field, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "hint", e.hint, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "check", e.check, any_string(ctx)));
  // An empty code names nothing a client could act on: the body is not an
  // error body (the caller keeps it as the message of an internal error).
  if (e.code.empty()) return fail(ApiErrorCode::kInvalidValue, obj->at("code"), "is empty");
  // A code this build does not know (a newer server's) is kept, as a 500.
  std::optional<ApiErrorCode> id = parse_error_code(e.code);
  e.http_status = id ? error_code_info(*id).http_status : 500;
  return e;
}

const std::vector<ErrorCodeInfo>& error_codes() {
  static const std::vector<ErrorCodeInfo> table(kErrorCodes.begin(), kErrorCodes.end());
  return table;
}

const ErrorCodeInfo& error_code_info(ApiErrorCode id) {
  return kErrorCodes.at(static_cast<std::size_t>(id));
}

std::string_view wire_name(ApiErrorCode id) { return error_code_info(id).code; }

std::optional<ApiErrorCode> parse_error_code(std::string_view code) {
  for (const auto& info : kErrorCodes) {
    if (info.code == code) return info.id;
  }
  return std::nullopt;
}

ApiError make_api_error(ApiErrorCode code, std::string message, std::string field,
                        std::string hint) {
  ApiError e;
  const ErrorCodeInfo& info = error_code_info(code);
  e.http_status = info.http_status;
  e.code = std::string(info.code);
  e.message = std::move(message);
  e.field = std::move(field);
  e.hint = std::move(hint);
  return e;
}

std::string to_json(const ApiError& error) {
  Json j = Json::object();
  j["error"] = error_body_json(error);
  return dump(j);
}

ApiError parse_api_error(int http_status, std::string_view body) {
  auto parsed = guarded<ApiError>([&]() -> Result<ApiError> {
    auto doc = parse_json(body, kResponse);
    if (!doc) return tl::unexpected<Error>(doc.error());
    auto obj = open_object(*doc, "", kResponse, {"error"});
    if (!obj) return tl::unexpected<Error>(obj.error());
    const Json* error = obj->get("error");
    if (error == nullptr) return fail(ApiErrorCode::kInvalidValue, "error", "is missing");
    return read_error_body(*error, "error", kResponse);
  });
  if (parsed) {
    parsed->http_status = http_status;
    return *parsed;
  }
  std::string message;
  if (body.empty()) {
    message = "HTTP " + std::to_string(http_status) + " with an empty body";
  } else {
    std::size_t n = std::min(body.size(), kMaxRawErrorBytes);
    // Cut at a character boundary so that the message stays UTF-8 when the
    // body was.
    while (n > 0 && n < body.size() && (static_cast<unsigned char>(body[n]) & 0xc0) == 0x80) --n;
    message = std::string(body.substr(0, n));
    if (n < body.size()) message.append("...");
  }
  ApiError e = make_api_error(ApiErrorCode::kInternal, std::move(message));
  e.http_status = http_status;
  return e;
}

ApiError to_api_error(const Error& error) {
  std::string_view message = error.message;
  std::size_t colon = message.find(": ");
  if (colon != std::string_view::npos) {
    std::optional<ApiErrorCode> code = parse_error_code(message.substr(0, colon));
    if (code) {
      std::string rest(message.substr(colon + 2));
      if (error.code == ErrorCode::kInvalidArgument) {
        // A parse error: the hint is the field path.
        return make_api_error(*code, std::move(rest), error.hint);
      }
      return make_api_error(*code, std::move(rest), {}, error.hint);
    }
  }
  ApiErrorCode code = ApiErrorCode::kInternal;
  switch (error.code) {
    case ErrorCode::kInvalidArgument:
      code = ApiErrorCode::kInvalidValue;
      break;
    case ErrorCode::kNotFound:
      code = ApiErrorCode::kNotFound;
      break;
    case ErrorCode::kAlreadyExists:
      code = ApiErrorCode::kConflict;
      break;
    case ErrorCode::kPermissionDenied:
      code = ApiErrorCode::kPathEscape;
      break;
    case ErrorCode::kResourceExhausted:
      code = ApiErrorCode::kOverCapacity;
      break;
    case ErrorCode::kTimeout:
      code = ApiErrorCode::kRequestTimeout;
      break;
    case ErrorCode::kUnavailable:
      code = ApiErrorCode::kUnavailable;
      break;
    case ErrorCode::kSystem:
    case ErrorCode::kInternal:
      code = ApiErrorCode::kInternal;
      break;
  }
  return make_api_error(code, error.message, {}, error.hint);
}

}  // namespace corral::api
