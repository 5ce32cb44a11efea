#include "secrets/reflection_guard.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <new>

#include "secrets/secret_encodings.h"
#include "secrets/secret_value.h"

namespace corral::secrets {

namespace {

// GNU base64's line length: base64_forms() looks for a long value's
// wrapped form, so the reverse map has it too.
constexpr std::size_t kWrap = 76;

std::string wrapped(const std::string& full) {
  std::string out;
  out.reserve(full.size() + full.size() / kWrap);
  for (std::size_t i = 0; i < full.size(); ++i) {
    if (i > 0 && i % kWrap == 0) out.push_back('\n');
    out.push_back(full[i]);
  }
  return out;
}

// The forms of `text` in a fixed order, one per kind (no deduplication),
// so that the i-th form of a value pairs with the i-th form of its token.
std::vector<std::string> paired_forms(std::string_view text) {
  std::vector<std::string> forms;
  forms.reserve(24);  // never reallocated: a moved short string leaves a copy
  forms.emplace_back(text);
  for (auto alphabet : {Base64Alphabet::kStandard, Base64Alphabet::kUrlSafe}) {
    for (int a = 0; a < 3; ++a) {
      forms.push_back(base64_aligned(text, a, alphabet));
      forms.push_back(base64_ending(text, a, alphabet, ""));
      forms.push_back(base64_ending(text, a, alphabet, "\n"));
    }
    // The whole text alone, wrapped as `base64` prints it when it is long
    // (a token never is: it pairs with its whole base64).
    for (std::string_view suffix : {std::string_view(), std::string_view("\n")}) {
      std::string full = base64_ending(text, 0, alphabet, suffix);
      if (full.size() > kWrap) {
        forms.push_back(wrapped(full));
        wipe(full);
      } else {
        forms.push_back(std::move(full));
      }
    }
  }
  return forms;
}

std::vector<std::string> hex_pair(std::string_view text) {
  std::vector<std::string> out;
  out.reserve(2);
  for (const char* digits : {"0123456789abcdef", "0123456789ABCDEF"}) {
    std::string& h = out.emplace_back();
    h.reserve(text.size() * 2);
    for (char ch : text) {
      const auto c = static_cast<unsigned char>(ch);
      h.push_back(digits[c >> 4]);
      h.push_back(digits[c & 15]);
    }
  }
  return out;
}

bool field_named(std::string_view line, std::string_view name) {
  if (line.size() <= name.size() || line[name.size()] != ':') return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  }
  return true;
}

}  // namespace

Result<std::shared_ptr<const RedactionSet>> reflection_set(
    const std::vector<SwappedText>& swapped) {
  if (swapped.empty()) return std::shared_ptr<const RedactionSet>();
  // Every temporary is wiped on the way out; reserved so that none moves.
  std::vector<std::string> from;
  std::vector<std::string> to;
  struct WipeAll {
    std::vector<std::string>& a;
    std::vector<std::string>& b;
    ~WipeAll() {
      wipe_all(a);
      wipe_all(b);
    }
  } wipe_temporaries{from, to};
  from.reserve(swapped.size() * 32);
  to.reserve(swapped.size() * 32);
  for (const SwappedText& s : swapped) {
    if (!s.sent || s.sent->empty()) continue;
    const std::string_view value = s.sent->view();
    if (!s.encodings) {
      from.emplace_back(value);
      to.emplace_back(s.had);
      continue;
    }
    std::vector<std::string> vf = paired_forms(value);
    std::vector<std::string> tf = paired_forms(s.had);
    for (std::size_t i = 0; i < vf.size(); ++i) {
      from.push_back(std::move(vf[i]));
      to.push_back(std::move(tf[i]));
    }
    wipe_all(vf);
    wipe_all(tf);
    // Percent-encodings: a token is made of unreserved characters, so each
    // of the value's forms maps to the token itself.
    std::vector<std::string> uf = url_forms(value);
    for (auto& u : uf) {
      from.push_back(std::move(u));
      to.emplace_back(s.had);
    }
    wipe_all(uf);
    std::vector<std::string> vh = hex_pair(value);
    std::vector<std::string> th = hex_pair(s.had);
    for (std::size_t i = 0; i < 2; ++i) {
      from.push_back(std::move(vh[i]));
      to.push_back(std::move(th[i]));
    }
    wipe_all(vh);
    wipe_all(th);
  }
  std::vector<Replacement> pairs;
  pairs.reserve(from.size());
  for (std::size_t i = 0; i < from.size(); ++i) pairs.push_back({from[i], to[i]});
  return RedactionSet::build_replacements(pairs);
}

void ask_identity_encoding(std::string& head) {
  constexpr std::string_view kField = "accept-encoding: identity\r\n";
  // The head: a request line, fields, each ending in CRLF, then CRLF.
  std::size_t first_eol = head.find("\r\n");
  if (first_eol == std::string::npos) return;
  struct Line {
    std::size_t pos, len;  // with its CRLF
  };
  std::vector<Line> drop;
  std::size_t at = first_eol + 2;
  std::size_t end_of_fields = at;
  while (at < head.size()) {
    std::size_t eol = head.find("\r\n", at);
    if (eol == std::string::npos || eol == at) {
      end_of_fields = at;
      break;
    }
    if (field_named(std::string_view(head).substr(at, eol - at), "accept-encoding")) {
      drop.push_back({at, eol + 2 - at});
    }
    at = eol + 2;
    end_of_fields = at;
  }
  std::size_t size = head.size() + kField.size();
  for (const Line& l : drop) size -= l.len;
  std::string out(size, '\0');
  std::size_t w = 0;
  std::size_t from = 0;
  auto put = [&](std::string_view piece) {
    std::memcpy(out.data() + w, piece.data(), piece.size());
    w += piece.size();
  };
  const std::string_view h(head);
  for (const Line& l : drop) {
    put(h.substr(from, l.pos - from));
    from = l.pos + l.len;
  }
  put(h.substr(from, end_of_fields - from));
  put(kField);
  put(h.substr(end_of_fields));
  wipe(head);
  head = std::move(out);
}

}  // namespace corral::secrets
