#include "api/base64.h"

#include <gtest/gtest.h>

#include <string>

namespace corral::api {
namespace {

TEST(Base64, Rfc4648Vectors) {
  const std::pair<std::string, std::string> vectors[] = {
      {"", ""},
      {"f", "Zg=="},
      {"fo", "Zm8="},
      {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="},
      {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"},
  };
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(base64_encode(plain), encoded);
    auto decoded = base64_decode(encoded);
    ASSERT_TRUE(decoded.has_value()) << encoded << ": " << decoded.error().message;
    EXPECT_EQ(*decoded, plain);
  }
}

TEST(Base64, EveryByteRoundTrips) {
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  for (std::size_t len = 0; len <= all.size(); len += 37) {
    std::string part = all.substr(all.size() - len);
    auto decoded = base64_decode(base64_encode(part));
    ASSERT_TRUE(decoded.has_value());
    EXPECT_EQ(*decoded, part);
  }
  EXPECT_EQ(base64_encode(std::string("\xff\xfe\x00", 3)), "//4A");
}

TEST(Base64, RefusesMalformedText) {
  auto refused = [](std::string_view text, std::string_view needle) {
    auto r = base64_decode(text);
    ASSERT_FALSE(r.has_value()) << "accepted " << text;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  };
  refused("Zg=", "not a multiple of 4");
  refused("Zg", "not a multiple of 4");
  refused("Zm9v\n", "not a multiple of 4");
  refused("Zm 9", "is not base64");
  refused("Zm-v", "is not base64");  // URL-safe alphabet is not accepted
  refused("Z===", "misplaced '=' padding");
  refused("Zg==Zm9v", "misplaced '=' padding");
  refused("=Zm9", "misplaced '=' padding");
  refused("Zh==", "non-zero bits");  // "Zg==" is the one encoding of "f"
  refused("Zm9=", "non-zero bits");
  refused("Zm\xc3\xa9", "is not base64");
}

// The strict cases, with the exact messages: libsodium does the decoding
// and only says yes or no, base64.cc names the first bad character as the
// hand-written decoder did.
TEST(Base64, RefusalsNameTheFirstBadCharacter) {
  auto message = [](std::string_view text) {
    auto r = base64_decode(text);
    return r.has_value() ? std::string("accepted") : r.error().message;
  };
  // Trailing garbage after complete groups (libsodium stops there without
  // an error: the end pointer must reach the end of the text).
  EXPECT_EQ(message("Zm9v===="), "invalid base64: misplaced '=' padding at offset 4");
  EXPECT_EQ(message("Zm9vZg==Zg=="), "invalid base64: misplaced '=' padding at offset 6");
  EXPECT_EQ(message("Zm9v*Zg="), "invalid base64: character \"*\" is not base64 at offset 4");
  EXPECT_EQ(message(std::string("Zm9v\0AAA", 8)),
            "invalid base64: character \"\\x00\" is not base64 at offset 4");
  // Whitespace anywhere, including where libsodium could skip it.
  EXPECT_EQ(message("Zm9v Zg="), "invalid base64: character \" \" is not base64 at offset 4");
  EXPECT_EQ(message("Zm9vZg=\n"), "invalid base64: misplaced '=' padding at offset 6");
  EXPECT_EQ(message("Zm9vZm9\n"), "invalid base64: character \"\\x0a\" is not base64 at offset 7");
  EXPECT_EQ(message("\tZm9v\r\n\r"),
            "invalid base64: character \"\\x09\" is not base64 at offset 0");
  // Non-canonical trailing bits: one encoding per byte string.
  EXPECT_EQ(message("Zh=="), "invalid base64: non-zero bits before the padding at offset 1");
  EXPECT_EQ(message("Zm9vZm9="), "invalid base64: non-zero bits before the padding at offset 6");
  EXPECT_EQ(message("Zm8="), "accepted");
  // Padding that is missing, short, misplaced or inside a group.
  EXPECT_EQ(message("Zm9vZ==="), "invalid base64: misplaced '=' padding at offset 5");
  EXPECT_EQ(message("Zg=a"), "invalid base64: misplaced '=' padding at offset 2");
  EXPECT_EQ(message("===="), "invalid base64: misplaced '=' padding at offset 0");
  EXPECT_EQ(message("Zg=*"), "invalid base64: misplaced '=' padding at offset 2");
  EXPECT_EQ(message("Z*=="), "invalid base64: character \"*\" is not base64 at offset 1");
  EXPECT_EQ(message("Zm9vZg"), "invalid base64: the length 6 is not a multiple of 4");
  // Bytes above 0x7f anywhere (libsodium 1.0.18 alone decodes them as
  // digits: its char is signed).
  for (int byte = 0x80; byte <= 0xff; ++byte) {
    for (std::size_t at = 0; at < 8; ++at) {
      std::string text = "Zm9vYmFy";
      text[at] = static_cast<char>(byte);
      EXPECT_FALSE(base64_decode(text).has_value()) << byte << " at " << at;
    }
  }
  // The hint says what is accepted.
  auto r = base64_decode("Zm 9");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().hint,
            "use standard base64 (A-Z a-z 0-9 + /) with '=' padding, without whitespace");
  EXPECT_EQ(base64_decode("").value(), "");
}

}  // namespace
}  // namespace corral::api
