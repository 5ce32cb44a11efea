// The stable API error codes (api_error.h): one table row per ApiErrorCode,
// distinct wire names, the statuses docs/api.md promises, and a doc table
// that lists exactly these codes.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/api_error.h"

#ifndef CORRAL_TEST_SOURCE_DIR
#error "CORRAL_TEST_SOURCE_DIR must name the source tree (tests/CMakeLists.txt)"
#endif

namespace corral::api {
namespace {

// The wire name and status each code must have, written out again so that a
// change of the table shows here. No default: -Wswitch (an error in this
// build) refuses a new enumerator until it has a case.
std::pair<std::string_view, int> expected_row(ApiErrorCode id) {
  switch (id) {
    case ApiErrorCode::kBadJson:
      return {"bad_json", 400};
    case ApiErrorCode::kUnknownField:
      return {"unknown_field", 400};
    case ApiErrorCode::kWrongType:
      return {"wrong_type", 400};
    case ApiErrorCode::kInvalidValue:
      return {"invalid_value", 400};
    case ApiErrorCode::kPathEscape:
      return {"path_escape", 400};
    case ApiErrorCode::kUnauthorized:
      return {"unauthorized", 401};
    case ApiErrorCode::kSecretFile:
      return {"secret_file", 403};
    case ApiErrorCode::kForbidden:
      return {"forbidden", 403};
    case ApiErrorCode::kNotFound:
      return {"not_found", 404};
    case ApiErrorCode::kMethodNotAllowed:
      return {"method_not_allowed", 405};
    case ApiErrorCode::kRequestTimeout:
      return {"request_timeout", 408};
    case ApiErrorCode::kConflict:
      return {"conflict", 409};
    case ApiErrorCode::kIdempotencyMismatch:
      return {"idempotency_mismatch", 409};
    case ApiErrorCode::kSandboxExpired:
      return {"sandbox_expired", 410};
    case ApiErrorCode::kBodyTooLarge:
      return {"body_too_large", 413};
    case ApiErrorCode::kUnsupportedMediaType:
      return {"unsupported_media_type", 415};
    case ApiErrorCode::kOverCapacity:
      return {"over_capacity", 429};
    case ApiErrorCode::kInternal:
      return {"internal", 500};
    case ApiErrorCode::kSetupFailed:
      return {"setup_failed", 500};
    case ApiErrorCode::kUnavailable:
      return {"unavailable", 503};
    case ApiErrorCode::kNetworkUnavailable:
      return {"network_unavailable", 503};
    case ApiErrorCode::kSelfCheckFailed:
      return {"self_check_failed", 503};
    case ApiErrorCode::kInsufficientStorage:
      return {"insufficient_storage", 507};
  }
  return {"", 0};
}

TEST(ApiErrorCodes, EveryEnumeratorHasExactlyOneRow) {
  ASSERT_EQ(error_codes().size(), kApiErrorCodeCount);
  std::vector<int> rows(kApiErrorCodeCount, 0);
  std::set<std::string_view> names;
  for (const auto& info : error_codes()) {
    auto i = static_cast<std::size_t>(info.id);
    ASSERT_LT(i, kApiErrorCodeCount) << info.code;
    ++rows[i];
    EXPECT_FALSE(info.code.empty());
    EXPECT_TRUE(names.insert(info.code).second) << "wire name " << info.code << " twice";
  }
  for (std::size_t i = 0; i < kApiErrorCodeCount; ++i) {
    EXPECT_EQ(rows[i], 1) << "enumerator " << i;
  }
  EXPECT_FALSE(names.contains("command_timeout"));  // a result, not an error
}

TEST(ApiErrorCodes, WireNamesAndStatusesAreTheDocumentedOnes) {
  for (std::size_t i = 0; i < kApiErrorCodeCount; ++i) {
    const auto id = static_cast<ApiErrorCode>(i);
    const auto [name, status] = expected_row(id);
    EXPECT_EQ(wire_name(id), name);
    EXPECT_EQ(error_code_info(id).http_status, status) << name;
    EXPECT_EQ(parse_error_code(name), id) << name;
    ApiError e = make_api_error(id, "m");
    EXPECT_EQ(e.code, name);
    EXPECT_EQ(e.http_status, status) << name;
    for (std::size_t j = 0; j < kApiErrorCodeCount; ++j) {
      EXPECT_EQ(e.is(static_cast<ApiErrorCode>(j)), i == j) << name << " is enumerator " << j;
    }
  }
  EXPECT_EQ(parse_error_code("no_such_code"), std::nullopt);
  EXPECT_EQ(parse_error_code("Not_Found"), std::nullopt);
}

// A client reading a newer server's error keeps the code it does not know.
TEST(ApiErrorCodes, UnknownCodeOfANewerServerIsKept) {
  ApiError e = parse_api_error(418, R"({"error":{"code":"brand_new","message":"m"}})");
  EXPECT_EQ(e.code, "brand_new");
  EXPECT_EQ(e.http_status, 418);
  EXPECT_EQ(e.message, "m");
  for (std::size_t j = 0; j < kApiErrorCodeCount; ++j) {
    EXPECT_FALSE(e.is(static_cast<ApiErrorCode>(j)));
  }
}

// An error body whose code is empty names nothing to act on: it is kept
// whole as the message of an internal error, never as an error without a code.
TEST(ApiErrorCodes, EmptyCodeIsNotAnErrorBody) {
  const std::string body = R"({"error":{"code":"","hint":"h"}})";
  ApiError e = parse_api_error(502, body);
  EXPECT_TRUE(e.is(ApiErrorCode::kInternal));
  EXPECT_EQ(e.http_status, 502);
  EXPECT_EQ(e.message, body);
}

// docs/api.md's table of stable codes ("| `code` | status | when |", after
// the line naming api::error_codes()) lists exactly the table's rows.
TEST(ApiErrorCodes, DocTableListsExactlyTheseCodes) {
  const std::string path = std::string(CORRAL_TEST_SOURCE_DIR) + "/docs/api.md";
  std::ifstream md(path);
  ASSERT_TRUE(md.good()) << path;
  std::string line;
  bool found = false;
  while (std::getline(md, line)) {
    if (line.starts_with("The stable codes, from `api::error_codes()`")) {
      found = true;
      break;
    }
  }
  ASSERT_TRUE(found) << path << " lacks the line introducing the table of stable codes";
  std::set<std::string> documented;
  bool in_table = false;
  while (std::getline(md, line)) {
    if (!line.starts_with("|")) {
      if (in_table) break;  // the blank line after the table
      continue;
    }
    in_table = true;
    if (!line.starts_with("| `")) continue;  // the header and the |---| line
    const std::size_t end = line.find('`', 3);
    ASSERT_NE(end, std::string::npos) << line;
    const std::size_t status_end = line.find(" |", end + 4);
    ASSERT_NE(status_end, std::string::npos) << line;
    std::string code = line.substr(3, end - 3);
    EXPECT_TRUE(documented.insert(code).second) << code << " twice in " << path;
    std::optional<ApiErrorCode> id = parse_error_code(code);
    ASSERT_TRUE(id.has_value()) << path << " documents " << code << ", not in the table";
    EXPECT_EQ(line.substr(end + 4, status_end - end - 4),
              std::to_string(error_code_info(*id).http_status))
        << line;
  }
  std::set<std::string> served;
  for (const auto& info : error_codes()) served.insert(std::string(info.code));
  EXPECT_EQ(documented, served);
}

}  // namespace
}  // namespace corral::api
