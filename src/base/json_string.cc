#include "base/json_string.h"

#include "base/utf8.h"

#include <bit>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace corral {
namespace {

void append_escape(std::string& out, unsigned char c) {
  switch (c) {
    case '"':
      out += "\\\"";
      return;
    case '\\':
      out += "\\\\";
      return;
    case '\b':
      out += "\\b";
      return;
    case '\f':
      out += "\\f";
      return;
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    default: {
      static constexpr char kHex[] = "0123456789abcdef";
      const char u[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
      out.append(u, sizeof u);
    }
  }
}

// One bit per byte of a block that needs escaping (below 0x20, '"' or
// '\'), bit k for byte k. Bytes >= 0x80 (UTF-8 sequences) never do.
#if defined(__SSE2__)
constexpr std::size_t kBlock = 16;
std::uint32_t special_mask(const char* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  // v < 0x20 unsigned  <=>  min(v, 0x1f) == v
  const __m128i low = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
  const __m128i quote = _mm_cmpeq_epi8(v, _mm_set1_epi8('"'));
  const __m128i slash = _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'));
  return static_cast<std::uint32_t>(
      _mm_movemask_epi8(_mm_or_si128(low, _mm_or_si128(quote, slash))));
}
#else
// Elsewhere the byte loop below does it all (correct, slower).
constexpr std::size_t kBlock = 0;
std::uint32_t special_mask(const char*) { return 0; }
#endif

constexpr bool special(unsigned char c) { return c < 0x20 || c == '"' || c == '\\'; }

}  // namespace

void append_json_string(std::string& out, std::string_view utf8) {
  const char* s = utf8.data();
  const std::size_t n = utf8.size();
  out.reserve(out.size() + n + n / 8 + 2);
  out.push_back('"');
  std::size_t run = 0;  // start of the bytes not yet copied
  auto escape_at = [&](std::size_t k) {
    out.append(s + run, k - run);
    append_escape(out, static_cast<unsigned char>(s[k]));
    run = k + 1;
  };
  std::size_t i = 0;
  for (; kBlock > 0 && i + kBlock <= n; i += kBlock) {
    for (std::uint32_t mask = special_mask(s + i); mask != 0; mask &= mask - 1)
      escape_at(i + static_cast<std::size_t>(std::countr_zero(mask)));
  }
  for (; i < n; ++i)
    if (special(static_cast<unsigned char>(s[i]))) escape_at(i);
  out.append(s + run, n - run);
  out.push_back('"');
}

void append_json_string_lossy(std::string& out, std::string_view bytes) {
  if (is_valid_utf8(bytes)) {
    append_json_string(out, bytes);
    return;
  }
  std::string utf8;
  utf8.reserve(bytes.size() + 16);
  for (char ch : bytes) {
    if (static_cast<unsigned char>(ch) < 0x80) {
      utf8.push_back(ch);
    } else {
      utf8.append("\xef\xbf\xbd");
    }
  }
  append_json_string(out, utf8);
}

}  // namespace corral
