// The error table and ApiError's JSON (api_error.h).
#include "api/api_error.h"

#include <algorithm>

#include "api/codec_internal.h"
#include "api/json_writer.h"

namespace corral::api {

using namespace json;  // json_reader.h, json_writer.h: this file's vocabulary

namespace {

constexpr std::size_t kMaxRawErrorBytes = 1024;

// ---- error table -------------------------------------------------------------

const std::vector<ErrorCodeInfo> kErrorCodes = {
    {"bad_json", 400},
    {"unknown_field", 400},
    {"wrong_type", 400},
    {"invalid_value", 400},
    {"path_escape", 400},
    {"unauthorized", 401},
    {"secret_file", 403},
    {"not_found", 404},
    {"method_not_allowed", 405},
    {"request_timeout", 408},
    {"conflict", 409},
    {"idempotency_mismatch", 409},
    {"sandbox_expired", 410},
    {"body_too_large", 413},
    {"unsupported_media_type", 415},
    {"over_capacity", 429},
    {"internal", 500},
    {"setup_failed", 500},
    {"unavailable", 503},
    {"network_unavailable", 503},
    {"insufficient_storage", 507},
};

const ErrorCodeInfo* find_code(std::string_view code) {
  for (const auto& info : kErrorCodes) {
    if (info.code == code) return &info;
  }
  return nullptr;
}

}  // namespace

Json error_body_json(const ApiError& e) {
  Json j = Json::object();
  j["code"] = e.code;
  j["message"] = e.message;
  if (!e.field.empty()) j["field"] = e.field;
  if (!e.hint.empty()) j["hint"] = e.hint;
  return j;
}

Result<ApiError> read_error_body(const Json& v, std::string_view path, const Ctx& ctx) {
  auto obj = open_object(v, std::string(path), ctx, {"code", "message", "field", "hint"});
  if (!obj) return tl::unexpected<Error>(obj.error());
  ApiError e;
  const Json* code = obj->get("code");
  if (code == nullptr) return fail("invalid_value", obj->at("code"), "is missing");
  CORRAL_TRY(read_into(*obj, "code", e.code, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "message", e.message, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "field", e.field, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "hint", e.hint, any_string(ctx)));
  const ErrorCodeInfo* info = find_code(e.code);
  e.http_status = info != nullptr ? info->http_status : 500;
  return e;
}

const std::vector<ErrorCodeInfo>& error_codes() { return kErrorCodes; }

ApiError make_api_error(std::string_view code, std::string message, std::string field,
                        std::string hint) {
  ApiError e;
  const ErrorCodeInfo* info = find_code(code);
  e.http_status = info != nullptr ? info->http_status : 500;
  e.code = std::string(code);
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
    if (error == nullptr) return fail("invalid_value", "error", "is missing");
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
  ApiError e = make_api_error("internal", std::move(message));
  e.http_status = http_status;
  return e;
}

ApiError to_api_error(const Error& error) {
  std::string_view message = error.message;
  std::size_t colon = message.find(": ");
  if (colon != std::string_view::npos) {
    std::string_view code = message.substr(0, colon);
    if (find_code(code) != nullptr) {
      std::string rest(message.substr(colon + 2));
      if (error.code == ErrorCode::kInvalidArgument) {
        // A parse error: the hint is the field path.
        return make_api_error(code, std::move(rest), error.hint);
      }
      return make_api_error(code, std::move(rest), {}, error.hint);
    }
  }
  std::string_view code = "internal";
  switch (error.code) {
    case ErrorCode::kInvalidArgument:
      code = "invalid_value";
      break;
    case ErrorCode::kNotFound:
      code = "not_found";
      break;
    case ErrorCode::kAlreadyExists:
      code = "conflict";
      break;
    case ErrorCode::kPermissionDenied:
      code = "path_escape";
      break;
    case ErrorCode::kResourceExhausted:
      code = "over_capacity";
      break;
    case ErrorCode::kTimeout:
      code = "request_timeout";
      break;
    case ErrorCode::kUnavailable:
      code = "unavailable";
      break;
    case ErrorCode::kSystem:
    case ErrorCode::kInternal:
      code = "internal";
      break;
  }
  return make_api_error(code, error.message, {}, error.hint);
}

}  // namespace corral::api
