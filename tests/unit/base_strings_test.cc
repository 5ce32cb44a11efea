// base/strings.h and base/random.h: the helpers every layer shares.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "base/random.h"
#include "base/strings.h"

namespace corral {
namespace {

TEST(BaseStrings, AsciiLowerFoldsOnlyAsciiLetters) {
  EXPECT_EQ(ascii_lower("Content-LENGTH"), "content-length");
  // Bytes above 0x7f (UTF-8, Latin-1) are never folded: no locale.
  EXPECT_EQ(ascii_lower("\xC3\x84Z@["), "\xC3\x84z@[");
  EXPECT_EQ(ascii_lower(std::string_view("A\0B", 3)), std::string("a\0b", 3));
}

TEST(BaseStrings, IequalsAndPrefix) {
  EXPECT_TRUE(iequals("Host", "hOST"));
  EXPECT_FALSE(iequals("Host", "Hos"));
  EXPECT_FALSE(iequals("[", "{"));  // 0x5b and 0x7b differ by 32 but are not letters
  EXPECT_TRUE(istarts_with("Bearer abc", "bearer "));
  EXPECT_FALSE(istarts_with("Bear", "bearer "));
}

TEST(BaseStrings, QuoteForMessageEscapesEveryUnprintableByteAndCuts) {
  EXPECT_EQ(quote_for_message("plain"), "\"plain\"");
  EXPECT_EQ(quote_for_message("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(quote_for_message(std::string_view("\n\x7f\x00\xff", 4)), "\"\\x0a\\x7f\\x00\\xff\"");
  const std::string long_text(200, 'x');
  EXPECT_EQ(quote_for_message(long_text), "\"" + std::string(kQuotedBytes, 'x') + "...\"");
  EXPECT_EQ(quote_for_message(long_text, 3), "\"xxx...\"");
  // Every byte value: the result is printable ASCII only.
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  for (char c : quote_for_message(all, all.size())) {
    EXPECT_GE(static_cast<unsigned char>(c), 0x20);
    EXPECT_LT(static_cast<unsigned char>(c), 0x7f);
  }
}

TEST(BaseRandom, BytesDifferAndBoundsHold) {
  std::set<std::uint64_t> seen;
  for (int i = 0; i < 64; ++i) seen.insert(random_u64());
  EXPECT_EQ(seen.size(), 64u);  // a repeat in 64 draws of 64 bits: broken source
  EXPECT_EQ(random_below(0), 0u);
  EXPECT_EQ(random_below(1), 0u);
  std::set<std::uint64_t> small;
  for (int i = 0; i < 2000; ++i) {
    const auto v = random_below(7);
    ASSERT_LT(v, 7u);
    small.insert(v);
  }
  EXPECT_EQ(small.size(), 7u);  // each of 7 values in 2000 draws
  unsigned char buf[1000] = {};
  fill_random(buf, sizeof buf);
  int zeros = 0;
  for (unsigned char b : buf) zeros += b == 0;
  EXPECT_LT(zeros, 30);  // ~4 expected
}

}  // namespace
}  // namespace corral

namespace corral {
namespace {

TEST(BaseStrings, PrintableAsciiKeepsQuotesAndEscapesTheRest) {
  EXPECT_EQ(printable_ascii("a\"b\\c", 80), "a\"b\\c");
  EXPECT_EQ(printable_ascii(std::string_view("x\ny\xff", 4), 80), "x\\x0ay\\xff");
  EXPECT_EQ(printable_ascii("abcdef", 3), "abc...");
}

}  // namespace
}  // namespace corral
