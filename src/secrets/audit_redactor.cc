#include "secrets/audit_redactor.h"

#include <algorithm>
#include <array>

#include "secrets/secret_encodings.h"
#include "secrets/token_swapper.h"

namespace corral::secrets {

namespace {

char lower_ascii(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

std::string lowered(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower_ascii(c);
  return out;
}

bool is_alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z'); }
bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }
bool is_b64(char c) { return is_alnum(c) || c == '+' || c == '/' || c == '-' || c == '_'; }

// The token prefix as the forms a token can take, lower-cased, each with
// the characters its body is made of in that form.
struct TokenForm {
  std::string prefix;
  bool (*body)(char);
  bool padding;  // '=' may follow (base64)
};

const std::vector<TokenForm>& token_forms() {
  static const std::vector<TokenForm> forms = [] {
    std::vector<TokenForm> f;
    f.push_back({std::string(kTokenPrefix), is_alnum, false});
    std::string hex;
    static constexpr char kHex[] = "0123456789abcdef";
    for (unsigned char c : kTokenPrefix) {
      hex.push_back(kHex[c >> 4]);
      hex.push_back(kHex[c & 0xf]);
    }
    f.push_back({hex, is_hex, false});
    for (auto alphabet : {Base64Alphabet::kStandard, Base64Alphabet::kUrlSafe}) {
      for (int alignment = 0; alignment < 3; ++alignment) {
        std::string p = lowered(base64_aligned(kTokenPrefix, alignment, alphabet));
        bool dup = false;
        for (const auto& e : f) dup |= e.prefix == p;
        if (!dup) f.push_back({p, is_b64, true});
      }
    }
    return f;
  }();
  return forms;
}

}  // namespace

std::string redact_token_shapes(std::string_view text) {
  const std::string low = lowered(text);
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  for (const auto& form : token_forms()) {
    for (std::size_t at = low.find(form.prefix); at != std::string::npos;
         at = low.find(form.prefix, at + 1)) {
      std::size_t end = at + form.prefix.size();
      const std::size_t body = end;
      while (end < low.size() && form.body(low[end])) ++end;
      if (end == body) continue;  // the prefix alone (a mention, not a token)
      if (form.padding)
        while (end < low.size() && low[end] == '=') ++end;
      spans.emplace_back(at, end);
    }
  }
  if (spans.empty()) return std::string(text);
  std::sort(spans.begin(), spans.end());
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  for (std::size_t i = 0; i < spans.size();) {
    auto [start, end] = spans[i];
    // Overlapping spans become one placeholder.
    for (++i; i < spans.size() && spans[i].first < end; ++i) end = std::max(end, spans[i].second);
    out.append(text.substr(pos, start - pos));
    out.append(kTokenPlaceholder);
    pos = end;
  }
  out.append(text.substr(pos));
  return out;
}

Result<std::shared_ptr<const AuditRedactor>> AuditRedactor::build(
    std::shared_ptr<const RedactionSet> exact, const std::vector<NamedValue>& values) {
  std::shared_ptr<AuditRedactor> r(new AuditRedactor());
  r->exact_ = std::move(exact);
  if (values.empty()) return std::shared_ptr<const AuditRedactor>(std::move(r));
  // Every form of every value, lower-cased, as a value of its own (the
  // forms are made here, so the set is told not to make forms of forms).
  std::vector<std::string> forms;
  std::vector<std::size_t> owner;
  struct Wipe {
    std::vector<std::string>& forms;
    ~Wipe() { wipe_all(forms); }
  } wipe_forms{forms};
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::vector<std::string> f = redaction_forms(values[i].value);
    for (auto& form : f) {
      if (form.size() < kMinRedactedValue) continue;
      std::string low = lowered(form);
      // The longest forms (percent-encoding, hex of a long value) are cut
      // to what the set takes: their start is still found.
      if (low.size() > kMaxRedactedValue) low.resize(kMaxRedactedValue);
      forms.push_back(std::move(low));
      owner.push_back(i);
    }
    wipe_all(f);
  }
  std::vector<NamedValue> named;
  named.reserve(forms.size());
  for (std::size_t k = 0; k < forms.size(); ++k) named.push_back({values[owner[k]].name, forms[k]});
  RedactorOptions options;
  options.key_formats = false;
  options.encoded_forms = false;
  auto set = RedactionSet::build(std::move(named), options);
  if (!set)
    return tl::unexpected(set.error().wrap("building the audit log's letter-case-blind redactor"));
  r->caseless_ = std::move(*set);
  return std::shared_ptr<const AuditRedactor>(std::move(r));
}

std::string AuditRedactor::redact(std::string_view text) const {
  std::string out = exact_ ? secrets::redact(*exact_, text) : std::string(text);
  out = redact_token_shapes(out);
  if (!caseless_ || caseless_->empty()) return out;
  const std::string low = lowered(out);
  std::string found = secrets::redact(*caseless_, low);
  if (found == low) return out;
  // A value in another letter case: the string stays lower-cased (what the
  // match was made on), its placeholders written as everywhere else.
  static constexpr std::string_view kLow = "[redacted:", kUp = "[REDACTED:";
  for (std::size_t at = found.find(kLow); at != std::string::npos;
       at = found.find(kLow, at + kUp.size()))
    found.replace(at, kLow.size(), kUp);
  return found;
}

}  // namespace corral::secrets
