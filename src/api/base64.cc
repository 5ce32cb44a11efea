#include "api/base64.h"

#include <sodium.h>

#include <string_view>

#include "base/base64_digits.h"
#include "base/strings.h"

namespace corral::api {
namespace {

constexpr int kVariant = sodium_base64_VARIANT_ORIGINAL;

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
  std::string out(n / 4 * 3, '\0');
  std::size_t length = 0;
  const char* end = nullptr;
  // libsodium checks the padding's length and refuses non-zero bits in the
  // last digit before it (one encoding per byte string); `end` must reach
  // the end of the text.
  int rc = sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(),
                             n, /*ignore=*/nullptr, &length, &end, kVariant);
  if (rc != 0 || end != text.data() + n) {
    // What is left to refuse: the bits of "Zh==" or "Zm9=".
    return bad(pad == 0 ? "refused by the decoder" : "non-zero bits before the padding",
               pad == 2 ? n - 3 : n - 2);
  }
  out.resize(length);
  return out;
}

}  // namespace corral::api
