// UTF-8 validation: JSON carries text as UTF-8, so byte strings that may
// not be (command output, file names, paths, environment values) are
// checked before they become JSON text, and travel as base64 or are
// refused when they are not.
#pragma once

#include <string_view>

namespace corral {

// Well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing
// above U+10FFFF. NUL bytes are valid UTF-8.
bool is_valid_utf8(std::string_view bytes);

}  // namespace corral
