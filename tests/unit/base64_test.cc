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

}  // namespace
}  // namespace corral::api
