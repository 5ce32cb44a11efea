#include "api/base64.h"

#include <openssl/evp.h>
#include <sodium.h>

#include <climits>
#include <string_view>

#include "base/base64_digits.h"
#include "base/strings.h"

namespace corral::api {
namespace {

constexpr int kVariant = sodium_base64_VARIANT_ORIGINAL;

// The value of a standard-alphabet digit (the caller checked it is one).
unsigned digit_value(char c) {
  if (c >= 'A' && c <= 'Z') return static_cast<unsigned>(c - 'A');
  if (c >= 'a' && c <= 'z') return static_cast<unsigned>(c - 'a' + 26);
  if (c >= '0' && c <= '9') return static_cast<unsigned>(c - '0' + 52);
  return c == '+' ? 62u : 63u;
}

tl::unexpected<Error> bad(std::string_view why, std::size_t offset) {
  return make_error(ErrorCode::kInvalidArgument,
                    "invalid base64: " + std::string(why) + " at offset " + std::to_string(offset),
                    "use standard base64 (A-Z a-z 0-9 + /) with '=' padding, without whitespace");
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  // sodium_bin2base64 writes a terminating NUL, counted in ENCODED_LEN.
  std::string out(sodium_base64_ENCODED_LEN(bytes.size(), kVariant), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()),
                    bytes.size(), kVariant);
  out.pop_back();
  return out;
}

Result<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return make_error(
        ErrorCode::kInvalidArgument,
        "invalid base64: the length " + std::to_string(text.size()) + " is not a multiple of 4",
        "base64 text comes in groups of 4 characters, padded with '='");
  }
  if (text.empty()) return std::string();
  // Digits, then at most two '=' at the very end: else name the first
  // character that is neither.
  const std::size_t n = text.size();
  const std::size_t digits = first_non_base64_digit(text, Base64Alphabet::kStandard);
  const std::size_t pad = n - digits;
  if (pad > 2 || text.substr(digits).find_first_not_of('=') != std::string_view::npos) {
    if (text[digits] == '=') return bad("misplaced '=' padding", digits);
    return bad("character " + quote_for_message(text.substr(digits, 1)) + " is not base64", digits);
  }
  // The text is checked above (alphabet, padding); what is left to refuse
  // is a last digit with bits that no byte uses ("Zh==", "Zm9="): exactly
  // one encoding per byte string.
  if (pad > 0) {
    const unsigned digit = digit_value(text[n - pad - 1]);
    if ((pad == 2 && (digit & 0x0f) != 0) || (pad == 1 && (digit & 0x03) != 0))
      return bad("non-zero bits before the padding", n - pad - 1);
  }
  // OpenSSL's table decoder: these are request bodies (a task's inline
  // inputs run to megabytes), not secrets, and libsodium's constant-time
  // decoder ran at ~170 MB/s, a fifth of a 1 MiB task's submit.
  if (n > static_cast<std::size_t>(INT_MAX)) return bad("too long to decode", 0);
  std::string out(n / 4 * 3, '\0');
  const int decoded = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                      reinterpret_cast<const unsigned char*>(text.data()),
                                      static_cast<int>(n));
  if (decoded < 0 || static_cast<std::size_t>(decoded) != out.size())
    return bad("refused by the decoder", 0);
  const std::size_t length = out.size() - pad;  // EVP_DecodeBlock counts the padding as zeros
  out.resize(length);
  return out;
}

}  // namespace corral::api
