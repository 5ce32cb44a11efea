// http::json_error (src/http/server_connection.h): the error bodies the
// HTTP layer writes itself (400 on a malformed head, 503 over the
// connection cap), escaped by the one JSON string escaper
// (base/json_string.h) without linking the JSON library.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "http/server_connection.h"

namespace corral::http {
namespace {

// The bytes are those json_error always wrote for the messages the HTTP
// layer sends (printable ASCII, request bytes quoted as \xNN).
TEST(HttpJsonError, PrintableAsciiBytesAsBefore) {
  EXPECT_EQ(json_error("overloaded", "too many connections; retry later"),
            R"({"error":{"code":"overloaded","message":"too many connections; retry later"}})");
  EXPECT_EQ(
      json_error("bad_request", R"x(bad header name "X\x01" (a "quote" and a \ slash))x"),
      R"x({"error":{"code":"bad_request","message":"bad header name \"X\\x01\" (a \"quote\" and a \\ slash)"}})x");
  EXPECT_EQ(json_error("", ""), R"({"error":{"code":"","message":""}})");
}

// Control characters get JSON's escapes, UTF-8 passes as it is, and bytes
// that are not UTF-8 become U+FFFD: the body is always valid JSON that
// parses back to the message (or its U+FFFD form).
TEST(HttpJsonError, AnyBytesGiveValidJson) {
  auto message_of = [](const std::string& body) {
    auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << body;
    return j.is_discarded() ? std::string("<invalid>") : j["error"]["message"].get<std::string>();
  };
  EXPECT_EQ(json_error("c", "a\nb\t\x01"), R"({"error":{"code":"c","message":"a\nb\t\u0001"}})");
  EXPECT_EQ(message_of(json_error("c", "caf\xc3\xa9")), "caf\xc3\xa9");
  EXPECT_EQ(json_error("c", "caf\xc3\xa9"),
            "{\"error\":{\"code\":\"c\",\"message\":\"caf\xc3\xa9\"}}");
  EXPECT_EQ(message_of(json_error("c", "a\xff\"b")), "a\xef\xbf\xbd\"b");
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  const std::string body = json_error(all, all);
  EXPECT_EQ(message_of(body).size(), 0x80 + 0x80 * 3u);
}

}  // namespace
}  // namespace corral::http
