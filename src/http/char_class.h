// Character classes of RFC 9110/9112 and RFC 3986, shared by the parser,
// the query helpers and the writers (which refuse to emit what the parser
// would refuse to read). Internal to src/http.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/strings.h"

namespace corral::http::chars {

inline bool is_alnum(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// tchar: the characters of a method or a header name.
inline bool is_tchar(unsigned char c) {
  return is_alnum(c) ||
         (c != 0 && std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos);
}

inline bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!is_tchar(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// field-vchar / SP / HTAB: what a header value may hold (obs-text included,
// control characters and DEL not).
inline bool is_field_char(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

inline bool is_field_value(std::string_view s) {
  for (char c : s) {
    if (!is_field_char(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// RFC 3986 pchar (unreserved, sub-delims, ':', '@', and '%' whose escapes
// are checked separately), plus '/' and '?' of paths and queries.
inline bool is_target_char(unsigned char c) {
  return is_alnum(c) ||
         (c != 0 && std::string_view("-._~!$&'()*+,;=:@/?%").find(c) != std::string_view::npos);
}

inline int hex_value(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Case folding is base's (ASCII only, never the locale).
using ::corral::iequals;

inline std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// True when the comma-separated list `value` (Connection, ...) holds
// `token`, case-insensitively.
inline bool list_has_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    std::size_t comma = value.find(',');
    if (iequals(trim_ows(value.substr(0, comma)), token)) return true;
    value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
  }
  return false;
}

// Input quoted in an error message (base's quote_for_message), cut after
// `max` bytes: a hostile request can put no control bytes into logs or
// error bodies.
inline std::string quote(std::string_view s, std::size_t max = 64) {
  return quote_for_message(s, max);
}

}  // namespace corral::http::chars
