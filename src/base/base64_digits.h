// Which bytes are base64 digits, for the two alphabets corral decodes
// (RFC 4648 standard and url-safe). Checked before a decoder (libsodium's
// for secrets, OpenSSL's for request bodies), not left to it: libsodium 1.0.18 reads its input as (signed) char and decodes a
// byte above 0x7f as a digit ("Zm\xc3\xa9" came back as three bytes), and
// it stops without an error at anything else once the bits so far need no
// padding ("AAAA====").
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace corral {

enum class Base64Alphabet { kStandard, kUrlSafe };

namespace base64_detail {
constexpr std::array<bool, 256> digits_of(std::string_view last_two) {
  std::array<bool, 256> digits{};
  for (char c : std::string_view("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"))
    digits[static_cast<unsigned char>(c)] = true;
  for (char c : last_two) digits[static_cast<unsigned char>(c)] = true;
  return digits;
}
inline constexpr std::array<bool, 256> kStandard = digits_of("+/");
inline constexpr std::array<bool, 256> kUrlSafe = digits_of("-_");
}  // namespace base64_detail

// The offset of the first byte of `text` that is not a digit of
// `alphabet` ('=' padding is not a digit), or text.size() if there is none.
constexpr std::size_t first_non_base64_digit(std::string_view text, Base64Alphabet alphabet) {
  const auto& digits =
      alphabet == Base64Alphabet::kStandard ? base64_detail::kStandard : base64_detail::kUrlSafe;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (!digits[static_cast<unsigned char>(text[i])]) return i;
  }
  return text.size();
}

// True when `text` is digits of `alphabet` followed by at most two '='.
// Lengths and the bits before the padding are left to the decoder.
constexpr bool only_base64_digits_and_padding(std::string_view text, Base64Alphabet alphabet) {
  const std::size_t digits = first_non_base64_digit(text, alphabet);
  const std::size_t pad = text.size() - digits;
  return pad <= 2 && text.substr(digits).find_first_not_of('=') == std::string_view::npos;
}

}  // namespace corral
