#include "base/strings.h"

namespace corral {

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ascii_lower(c);
  return out;
}

namespace {

// `text` as printable ASCII, cut after `max` bytes ("..."): every other
// byte as \xNN, and with `escape_quotes` `"` and `\` escaped (\" \\).
void append_printable(std::string& out, std::string_view text, std::size_t max,
                      bool escape_quotes) {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::size_t n = text.size() < max ? text.size() : max;
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (escape_quotes && (c == '"' || c == '\\')) {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c >= 0x7f) {
      out.append("\\x");
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (n < text.size()) out.append("...");
}

}  // namespace

std::string quote_for_message(std::string_view text, std::size_t max) {
  std::string out = "\"";
  append_printable(out, text, max, true);
  out.push_back('"');
  return out;
}

std::string printable_ascii(std::string_view text, std::size_t max) {
  std::string out;
  append_printable(out, text, max, false);
  return out;
}

std::string to_hex(const unsigned char* bytes, std::size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[bytes[i] >> 4]);
    out.push_back(kDigits[bytes[i] & 0xf]);
  }
  return out;
}

}  // namespace corral
