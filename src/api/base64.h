// Base64 (RFC 4648, standard alphabet, with '=' padding) for the API's
// binary-safe fields: bytes that are not valid UTF-8 travel as "*_b64".
// Decoding is strict, so that every byte string has exactly one encoding:
// no whitespace, no missing or extra padding, no non-zero bits in the last
// character before the padding.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace corral::api {

std::string base64_encode(std::string_view bytes);
// kInvalidArgument naming the first bad character and its offset.
Result<std::string> base64_decode(std::string_view text);

// Well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing
// above U+10FFFF. NUL bytes are valid UTF-8.
bool is_valid_utf8(std::string_view bytes);

}  // namespace corral::api
