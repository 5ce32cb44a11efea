// is_valid_utf8 (base/utf8.h): what JSON may carry as text.
#include "base/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace corral {
namespace {

TEST(Utf8, Validation) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain ascii\n"));
  EXPECT_TRUE(is_valid_utf8(std::string("nul\0inside", 10)));
  EXPECT_TRUE(is_valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_TRUE(is_valid_utf8("\xf4\x8f\xbf\xbf"));  // U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xff"));
  EXPECT_FALSE(is_valid_utf8("\x80"));              // lone continuation
  EXPECT_FALSE(is_valid_utf8("\xc3"));              // truncated
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xe0\x80\xaf"));      // overlong
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // surrogate U+D800
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xf8\x88\x80\x80\x80"));
  EXPECT_FALSE(is_valid_utf8("ok\xe2\x82"));  // truncated at the end
}

// The ASCII fast path of is_valid_utf8 must not skip a bad byte at any
// offset of its eight-byte steps.
TEST(Utf8, FindsABadByteAtEveryOffset) {
  for (std::size_t at = 0; at < 24; ++at) {
    std::string s(25, 'a');
    s[at] = '\xff';
    EXPECT_FALSE(is_valid_utf8(s)) << at;
    s[at] = '\xc3';  // truncated two-byte sequence, then ASCII
    EXPECT_FALSE(is_valid_utf8(s)) << at;
    s.replace(at, 1, "\xc3\xa9");
    EXPECT_TRUE(is_valid_utf8(s)) << at;
  }
}

}  // namespace
}  // namespace corral
