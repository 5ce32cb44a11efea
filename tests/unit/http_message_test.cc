#include "http/http_message.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace corral::http {
namespace {

using Params = std::vector<std::pair<std::string, std::string>>;

TEST(HttpMessage, FindHeaderIsCaseInsensitiveAndReturnsTheFirst) {
  Headers h = {{"content-type", "text/plain"}, {"x-a", "1"}, {"x-a", "2"}};
  EXPECT_EQ(find_header(h, "Content-Type"), "text/plain");
  EXPECT_EQ(find_header(h, "X-A"), "1");
  EXPECT_FALSE(find_header(h, "x-b").has_value());
  RequestHead req;
  req.headers = h;
  EXPECT_EQ(req.header("CONTENT-TYPE"), "text/plain");
}

TEST(HttpMessage, PercentDecode) {
  EXPECT_EQ(percent_decode("/a%20b/%C3%A9", false).value(), "/a b/\xC3\xA9");
  EXPECT_EQ(percent_decode("a+b", false).value(), "a+b");
  EXPECT_EQ(percent_decode("a+b", true).value(), "a b");
  EXPECT_EQ(percent_decode("%2f%2F", false).value(), "//");
  EXPECT_EQ(percent_decode("%7e%7E", false).value(), "~~");
  EXPECT_EQ(percent_decode("", false).value(), "");
}

TEST(HttpMessage, PercentDecodeRefusesNulAndBadEscapes) {
  for (std::string bad :
       {std::string("%00"), std::string("a%00b"), std::string("%"), std::string("%4"),
        std::string("%G1"), std::string("%1G"), std::string("abc%"), std::string("a\0b", 3)}) {
    auto r = percent_decode(bad, false);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  }
}

TEST(HttpMessage, PercentEncodeKeepsUnreservedAndRoundTrips) {
  EXPECT_EQ(percent_encode("aZ09-._~"), "aZ09-._~");
  EXPECT_EQ(percent_encode("a b/c?d&e=f+%"), "a%20b%2Fc%3Fd%26e%3Df%2B%25");
  EXPECT_EQ(percent_encode("\xff\x01"), "%FF%01");
  std::string all;
  for (int c = 1; c < 256; ++c) all.push_back(static_cast<char>(c));
  EXPECT_EQ(percent_decode(percent_encode(all), false).value(), all);
  EXPECT_EQ(percent_decode(percent_encode(all), true).value(), all);
}

TEST(HttpMessage, ParseQuery) {
  EXPECT_EQ(parse_query("").value(), Params{});
  EXPECT_EQ(parse_query("a=1&b=two%20words&c=x+y").value(),
            (Params{{"a", "1"}, {"b", "two words"}, {"c", "x y"}}));
  // Order and duplicates are kept; empty parts are skipped.
  EXPECT_EQ(parse_query("k=1&&k=2&").value(), (Params{{"k", "1"}, {"k", "2"}}));
  // A name without '=' has an empty value; '=' in a value is kept.
  EXPECT_EQ(parse_query("flag&expr=a=b").value(), (Params{{"flag", ""}, {"expr", "a=b"}}));
  EXPECT_EQ(parse_query("path=%2Fwork%2Fa.txt").value(), (Params{{"path", "/work/a.txt"}}));
  EXPECT_EQ(parse_query("n%61me=v").value(), (Params{{"name", "v"}}));
}

TEST(HttpMessage, ParseQueryNamesTheBadParameter) {
  auto r = parse_query("ok=1&path=a%zzb");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("\"path\""), std::string::npos) << r.error().message;

  r = parse_query("name=%00");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("\"name\""), std::string::npos) << r.error().message;
}

TEST(HttpMessage, StatusReason) {
  EXPECT_EQ(status_reason(200), "OK");
  EXPECT_EQ(status_reason(404), "Not Found");
  EXPECT_EQ(status_reason(431), "Request Header Fields Too Large");
  EXPECT_EQ(status_reason(503), "Service Unavailable");
  EXPECT_EQ(status_reason(299), "");
}

}  // namespace
}  // namespace corral::http
