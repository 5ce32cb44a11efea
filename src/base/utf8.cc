#include "base/utf8.h"

#include <cstdint>
#include <cstring>

namespace corral {

bool is_valid_utf8(std::string_view bytes) {
  std::size_t i = 0;
  const std::size_t n = bytes.size();
  auto at = [&](std::size_t k) { return static_cast<unsigned char>(bytes[k]); };
  auto cont = [&](std::size_t k) { return k < n && (at(k) & 0xc0) == 0x80; };
  while (i < n) {
    // Eight ASCII bytes at a time: exec output is mostly ASCII.
    std::uint64_t v;
    while (i + 8 <= n &&
           (std::memcpy(&v, bytes.data() + i, sizeof v), (v & 0x8080808080808080ULL) == 0))
      i += 8;
    if (i >= n) break;
    unsigned char c = at(i);
    if (c < 0x80) {
      ++i;
    } else if (c >= 0xc2 && c <= 0xdf) {
      if (!cont(i + 1)) return false;
      i += 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      if (!cont(i + 1) || !cont(i + 2)) return false;
      unsigned char c1 = at(i + 1);
      if (c == 0xe0 && c1 < 0xa0) return false;   // overlong
      if (c == 0xed && c1 >= 0xa0) return false;  // surrogates
      i += 3;
    } else if (c >= 0xf0 && c <= 0xf4) {
      if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return false;
      unsigned char c1 = at(i + 1);
      if (c == 0xf0 && c1 < 0x90) return false;   // overlong
      if (c == 0xf4 && c1 >= 0x90) return false;  // above U+10FFFF
      i += 4;
    } else {
      return false;  // 0x80..0xc1 (continuation or overlong lead), 0xf5..0xff
    }
  }
  return true;
}

}  // namespace corral
