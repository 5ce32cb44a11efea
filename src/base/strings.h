// Small string helpers every layer uses: ASCII case folding (protocol
// names, header fields, DNS names: never locale-dependent) and the one way
// untrusted text is quoted into an error message.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace corral {

constexpr char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

// `s` with A-Z folded to a-z; every other byte as it is.
std::string ascii_lower(std::string_view s);

// Equal ignoring ASCII case.
constexpr bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  }
  return true;
}

constexpr bool istarts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

// How much of a quoted text an error message shows by default.
inline constexpr std::size_t kQuotedBytes = 80;

// User text made safe to print inside an error message: wrapped in double
// quotes, with quotes and backslashes escaped (\" \\), every other byte
// outside printable ASCII as \xNN, and cut after `max` bytes ("...") so
// that hostile input can neither flood a log line nor put control bytes
// into it.
std::string quote_for_message(std::string_view text, std::size_t max = kQuotedBytes);

// The same bytes without the quotes and with `"` and `\` as they are: for
// text that is already delimited (a parser's own message).
std::string printable_ascii(std::string_view text, std::size_t max);

// `n` bytes as lower-case hex digits (two per byte).
std::string to_hex(const unsigned char* bytes, std::size_t n);

}  // namespace corral
