#include "api/base64.h"

#include <array>
#include <cstdint>

#include "spec/units.h"

namespace corral::api {
namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// 0..63 for alphabet characters, -1 for anything else.
constexpr std::array<std::int8_t, 256> make_table() {
  std::array<std::int8_t, 256> table{};
  for (auto& v : table) v = -1;
  for (std::size_t i = 0; i < kAlphabet.size(); ++i) {
    table[static_cast<unsigned char>(kAlphabet[i])] = static_cast<std::int8_t>(i);
  }
  return table;
}
constexpr std::array<std::int8_t, 256> kTable = make_table();

tl::unexpected<Error> bad(std::string_view why, std::size_t offset) {
  return make_error(ErrorCode::kInvalidArgument,
                    "invalid base64: " + std::string(why) + " at offset " + std::to_string(offset),
                    "use standard base64 (A-Z a-z 0-9 + /) with '=' padding, without whitespace");
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  auto byte = [&](std::size_t k) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[k]));
  };
  for (; i + 3 <= bytes.size(); i += 3) {
    std::uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    out.push_back(kAlphabet[v >> 18 & 63]);
    out.push_back(kAlphabet[v >> 12 & 63]);
    out.push_back(kAlphabet[v >> 6 & 63]);
    out.push_back(kAlphabet[v & 63]);
  }
  std::size_t rest = bytes.size() - i;
  if (rest == 1) {
    std::uint32_t v = byte(i) << 16;
    out.push_back(kAlphabet[v >> 18 & 63]);
    out.push_back(kAlphabet[v >> 12 & 63]);
    out.append("==");
  } else if (rest == 2) {
    std::uint32_t v = byte(i) << 16 | byte(i + 1) << 8;
    out.push_back(kAlphabet[v >> 18 & 63]);
    out.push_back(kAlphabet[v >> 12 & 63]);
    out.push_back(kAlphabet[v >> 6 & 63]);
    out.push_back('=');
  }
  return out;
}

Result<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return make_error(
        ErrorCode::kInvalidArgument,
        "invalid base64: the length " + std::to_string(text.size()) + " is not a multiple of 4",
        "base64 text comes in groups of 4 characters, padded with '='");
  }
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    std::size_t pad = 0;
    if (last) {
      if (text[i + 3] == '=') pad = text[i + 2] == '=' ? 2 : 1;
    }
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      char c = text[i + k];
      if (k >= 4 - pad) {
        v <<= 6;
        continue;
      }
      std::int8_t d = kTable[static_cast<unsigned char>(c)];
      if (d < 0) {
        return bad(c == '=' ? "misplaced '=' padding"
                            : "character " + quote_for_message(std::string_view(&text[i + k], 1)) +
                                  " is not base64",
                   i + k);
      }
      v = v << 6 | static_cast<std::uint32_t>(d);
    }
    if (pad == 2 && (v & 0xffff) != 0) return bad("non-zero bits before the padding", i + 1);
    if (pad == 1 && (v & 0xff) != 0) return bad("non-zero bits before the padding", i + 2);
    out.push_back(static_cast<char>(v >> 16 & 0xff));
    if (pad < 2) out.push_back(static_cast<char>(v >> 8 & 0xff));
    if (pad < 1) out.push_back(static_cast<char>(v & 0xff));
  }
  return out;
}

}  // namespace corral::api
