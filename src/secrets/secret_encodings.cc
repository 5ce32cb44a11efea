#include "secrets/secret_encodings.h"

#include <algorithm>
#include <cstdint>

#include "secrets/secret_value.h"

namespace corral::secrets {
namespace {

constexpr std::string_view kStd =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr std::string_view kUrl =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

// Line length of GNU base64 (and of MIME).
constexpr std::size_t kWrap = 76;

bool unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

enum class UrlStyle { kStrict, kFormPlus, kComponent, kKeepSlash };

std::string percent_encode(std::string_view value, UrlStyle style, bool upper) {
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  out.reserve(value.size() * 3);
  for (char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    bool keep = unreserved(c);
    if (style == UrlStyle::kComponent &&
        (c == '!' || c == '\'' || c == '(' || c == ')' || c == '*'))
      keep = true;
    if (style == UrlStyle::kKeepSlash && c == '/') keep = true;
    if (keep) {
      out.push_back(ch);
    } else if (style == UrlStyle::kFormPlus && c == ' ') {
      out.push_back('+');
    } else {
      out.push_back('%');
      out.push_back(digits[c >> 4]);
      out.push_back(digits[c & 15]);
    }
  }
  return out;
}

// Appends `form` unless it is already in `forms` (or equal to `skip`);
// wipes it when dropped.
void add_unique(std::vector<std::string>& forms, std::string form, std::string_view skip = {}) {
  if (form == skip || std::find(forms.begin(), forms.end(), form) != forms.end()) {
    wipe(form);
    return;
  }
  forms.push_back(std::move(form));
  wipe(form);  // a short string's bytes stay in the moved-from object
}

}  // namespace

namespace {

// Characters [first, last) of base64(zeros(a) + bytes), where bits past
// the end are zero, then '=' padding up to a multiple of 4 characters of
// the whole encoding if `pad`.
std::string encode_range(std::string_view bytes, std::size_t a, std::size_t first, std::size_t last,
                         std::string_view table, bool pad) {
  const std::size_t n = a + bytes.size();
  std::string out;
  out.reserve(last - first + 3);
  auto byte_at = [&](std::size_t i) -> std::uint32_t {
    return i < a || i >= n ? 0u : static_cast<unsigned char>(bytes[i - a]);
  };
  for (std::size_t c = first; c < last; ++c) {
    const std::size_t bit = 6 * c;
    const std::size_t byte = bit / 8;
    const std::uint32_t pair = (byte_at(byte) << 8) | byte_at(byte + 1);
    const std::size_t shift = 16 - 6 - (bit % 8);
    out.push_back(table[(pair >> shift) & 63]);
  }
  if (pad) {
    for (std::size_t c = last; c % 4 != 0; ++c) out.push_back('=');
  }
  return out;
}

}  // namespace

std::string base64_aligned(std::string_view value, int alignment, Base64Alphabet alphabet) {
  const std::string_view table = alphabet == Base64Alphabet::kStandard ? kStd : kUrl;
  const std::size_t a = static_cast<std::size_t>(alignment % 3);
  const std::size_t n = a + value.size();  // bytes of (zeros(a) + value)
  // Character c covers bits [6c, 6c + 6) of the byte string. It depends on
  // the value alone when those bits lie within bytes [a, n).
  const std::size_t first = (8 * a + 5) / 6;  // ceil(8a / 6)
  const std::size_t last = (8 * n) / 6;       // floor(8n / 6), exclusive
  if (last <= first) return {};
  return encode_range(value, a, first, last, table, false);
}

std::string base64_ending(std::string_view value, int alignment, Base64Alphabet alphabet,
                          std::string_view suffix) {
  const std::string_view table = alphabet == Base64Alphabet::kStandard ? kStd : kUrl;
  const std::size_t a = static_cast<std::size_t>(alignment % 3);
  std::string bytes;
  bytes.reserve(value.size() + suffix.size());
  bytes.append(value);
  bytes.append(suffix);
  const std::size_t n = a + bytes.size();
  const std::size_t first = (8 * a + 5) / 6;
  const std::size_t last = (8 * n + 5) / 6;  // ceil: the last character is padded with zeros
  std::string out = encode_range(bytes, a, first, last, table, true);
  wipe(bytes);
  return out;
}

std::vector<std::string> base64_forms(std::string_view value) {
  std::vector<std::string> forms;
  forms.reserve(22);  // no reallocation: moved strings would leave copies
  for (auto alphabet : {Base64Alphabet::kStandard, Base64Alphabet::kUrlSafe}) {
    for (int a = 0; a < 3; ++a) {
      add_unique(forms, base64_aligned(value, a, alphabet));
      add_unique(forms, base64_ending(value, a, alphabet, ""));
      add_unique(forms, base64_ending(value, a, alphabet, "\n"));
    }
    // `echo "$KEY" | base64` wraps its output every 76 characters: the
    // value alone (with or without the newline), wrapped the same way.
    for (std::string_view suffix : {std::string_view(), std::string_view("\n")}) {
      std::string full = base64_ending(value, 0, alphabet, suffix);
      if (full.size() > kWrap) {
        std::string wrapped;
        wrapped.reserve(full.size() + full.size() / kWrap);
        for (std::size_t i = 0; i < full.size(); ++i) {
          if (i > 0 && i % kWrap == 0) wrapped.push_back('\n');
          wrapped.push_back(full[i]);
        }
        add_unique(forms, std::move(wrapped));
      }
      wipe(full);
    }
  }
  return forms;
}

std::vector<std::string> url_forms(std::string_view value) {
  std::vector<std::string> forms;
  forms.reserve(5);
  add_unique(forms, percent_encode(value, UrlStyle::kStrict, true), value);
  add_unique(forms, percent_encode(value, UrlStyle::kStrict, false), value);
  add_unique(forms, percent_encode(value, UrlStyle::kFormPlus, true), value);
  add_unique(forms, percent_encode(value, UrlStyle::kComponent, true), value);
  add_unique(forms, percent_encode(value, UrlStyle::kKeepSlash, true), value);
  return forms;
}

std::vector<std::string> hex_forms(std::string_view value) {
  std::vector<std::string> forms;
  forms.reserve(2);
  for (const char* digits : {"0123456789abcdef", "0123456789ABCDEF"}) {
    std::string out;
    out.reserve(value.size() * 2);
    for (char ch : value) {
      const auto c = static_cast<unsigned char>(ch);
      out.push_back(digits[c >> 4]);
      out.push_back(digits[c & 15]);
    }
    add_unique(forms, std::move(out));
  }
  return forms;
}

std::vector<std::string> redaction_forms(std::string_view value) {
  std::vector<std::string> forms;
  forms.reserve(30);
  forms.emplace_back(value);
  for (auto* make : {&base64_forms, &url_forms, &hex_forms}) {
    std::vector<std::string> more = make(value);
    for (auto& form : more) add_unique(forms, std::move(form));
    wipe_all(more);
  }
  return forms;
}

void wipe_all(std::vector<std::string>& strings) noexcept {
  for (auto& s : strings) wipe(s);
  strings.clear();
}

}  // namespace corral::secrets
