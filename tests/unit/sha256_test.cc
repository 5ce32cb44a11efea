// SHA-256 against the FIPS 180-4 / NIST CAVS example vectors, and the
// streaming API against the one-shot result for every split point.
#include "base/sha256.h"

#include <gtest/gtest.h>

#include <string>

namespace corral {
namespace {

TEST(Sha256, EmptyString) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, Abc) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, TwoBlockMessage) {
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, FourBlockMessage) {
  EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnop"
                       "jklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, MillionA) {
  // Fed in odd-sized chunks so the buffering path is exercised too.
  Sha256 h;
  std::string chunk(997, 'a');
  std::size_t left = 1000000;
  while (left > 0) {
    std::size_t n = std::min(left, chunk.size());
    h.update(chunk.data(), n);
    left -= n;
  }
  EXPECT_EQ(Sha256::hex(h.final()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PaddingBoundaries) {
  // 55, 56 and 64 bytes: the length fits in the last block, does not, and
  // the message fills a block exactly.
  EXPECT_EQ(sha256_hex(std::string(55, 'a')),
            "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(sha256_hex(std::string(56, 'a')),
            "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(sha256_hex(std::string(64, 'a')),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST(Sha256, StreamingMatchesOneShotAtEverySplit) {
  std::string msg;
  for (int i = 0; i < 200; ++i) msg.push_back(static_cast<char>(i * 7 + 3));
  const std::string expected = sha256_hex(msg);
  for (std::size_t split = 0; split <= msg.size(); ++split) {
    Sha256 h;
    h.update(std::string_view(msg).substr(0, split));
    h.update(std::string_view(msg).substr(split));
    ASSERT_EQ(Sha256::hex(h.final()), expected) << "split at " << split;
  }
}

TEST(Sha256, FinalResetsForTheNextMessage) {
  Sha256 h;
  h.update("garbage");
  (void)h.final();
  h.update("abc");
  EXPECT_EQ(Sha256::hex(h.final()),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace corral
