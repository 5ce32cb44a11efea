#include "secrets/key_formats.h"

namespace corral::secrets {
namespace {

bool is_upper(int c) { return c >= 'A' && c <= 'Z'; }
bool is_lower(int c) { return c >= 'a' && c <= 'z'; }
bool is_digit(int c) { return c >= '0' && c <= '9'; }
bool is_alnum(int c) { return is_upper(c) || is_lower(c) || is_digit(c); }
bool is_b64url(int c) { return is_alnum(c) || c == '_' || c == '-'; }
// A byte that continues a word: a token glued to one is not a token.
bool is_word(int c) { return is_b64url(c); }

constexpr FormatResult kNoMatch{FormatVerdict::kNoMatch, 0};
constexpr FormatResult kNeedMore{FormatVerdict::kNeedMore, 0};
FormatResult matched(std::size_t length) { return {FormatVerdict::kMatch, length}; }

// Whether `window` starts with `text`: 1 yes, 0 no, -1 cannot tell yet.
int starts_with(const ByteWindow& window, std::string_view text, std::size_t at = 0) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (at + i >= window.size()) return -1;
    if (window[at + i] != static_cast<unsigned char>(text[i])) return 0;
  }
  return 1;
}

struct TokenRule {
  std::size_t prefix;    // anchor length (the anchor is checked by the caller)
  bool (*body)(int);     // character class of the token's body
  std::size_t min_body;  // shortest body
  std::size_t max_body;  // longest body
  bool strict;           // a longer run is no token (else: cut at max_body)
  bool (*after)(int);    // no such byte may follow the token (nullptr: any)
};

// prefix + a greedy run of `body`, bounded as the rule says.
FormatResult match_token(const ByteWindow& w, int prev, bool at_end, const TokenRule& rule) {
  if (prev >= 0 && is_word(prev)) return kNoMatch;
  std::size_t i = rule.prefix;
  const std::size_t limit = rule.prefix + rule.max_body;
  while (i < w.size() && i <= limit && rule.body(w[i])) ++i;
  if (i > limit) {  // the run is longer than any token
    return rule.strict ? kNoMatch : matched(limit);
  }
  if (i == w.size() && !at_end) return kNeedMore;  // the run may go on
  if (i - rule.prefix < rule.min_body) return kNoMatch;
  if (rule.after && i < w.size() && rule.after(w[i])) return kNoMatch;
  return matched(i);
}

FormatResult match_aws(const ByteWindow& w, int prev, bool at_end) {
  static const TokenRule rule{
      4, [](int c) { return is_upper(c) || is_digit(c); }, 16, 16, true, is_word};
  return match_token(w, prev, at_end, rule);
}

FormatResult match_github(const ByteWindow& w, int prev, bool at_end) {
  static const TokenRule classic{4, is_alnum, 30, 255, false, nullptr};
  static const TokenRule fine{11,     [](int c) { return is_alnum(c) || c == '_'; }, 22, 255, false,
                              nullptr};
  return match_token(w, prev, at_end, w.size() > 3 && w[3] == '_' ? classic : fine);
}

FormatResult match_slack(const ByteWindow& w, int prev, bool at_end) {
  static const TokenRule rule{5,      [](int c) { return is_alnum(c) || c == '-'; }, 10, 255, false,
                              nullptr};
  return match_token(w, prev, at_end, rule);
}

FormatResult match_sk(const ByteWindow& w, int prev, bool at_end) {
  static const TokenRule rule{3, is_b64url, 32, 255, false, nullptr};
  return match_token(w, prev, at_end, rule);
}

constexpr std::size_t kPemMax = 32 * 1024;
constexpr std::size_t kPemLabelMax = 64;

bool is_label(int c) { return is_upper(c) || is_digit(c) || c == ' '; }

// "-----BEGIN <label>-----" with a label ending in "PRIVATE KEY" or
// "PRIVATE KEY BLOCK" (PKCS#8, RSA, EC, DSA, OPENSSH, ENCRYPTED, PGP),
// through the end of the next "-----END <label>-----". A block with no END
// within kPemMax bytes (or before the stream ends) is redacted to there.
FormatResult match_pem(const ByteWindow& w, int /*prev*/, bool at_end) {
  constexpr std::string_view kBegin = "-----BEGIN ";
  std::size_t i = kBegin.size();
  while (i < w.size() && i - kBegin.size() <= kPemLabelMax && is_label(w[i])) ++i;
  if (i - kBegin.size() > kPemLabelMax) return kNoMatch;
  if (i == w.size()) return at_end ? kNoMatch : kNeedMore;
  const std::size_t label_end = i;
  switch (starts_with(w, "-----", i)) {
    case -1:
      return at_end ? kNoMatch : kNeedMore;
    case 0:
      return kNoMatch;
    default:
      break;
  }
  auto label_ends_with = [&](std::string_view suffix) {
    const std::size_t len = label_end - kBegin.size();
    return len >= suffix.size() && starts_with(w, suffix, label_end - suffix.size()) == 1;
  };
  if (!label_ends_with("PRIVATE KEY") && !label_ends_with("PRIVATE KEY BLOCK")) return kNoMatch;
  // The body, up to the END line.
  constexpr std::string_view kEnd = "-----END ";
  for (std::size_t at = label_end + 5; at < w.size() && at < kPemMax; ++at) {
    if (w[at] != '-') continue;
    const int end_line = starts_with(w, kEnd, at);
    if (end_line == 0) continue;
    if (end_line < 0) break;  // maybe an END line: wait for it
    std::size_t j = at + kEnd.size();
    while (j < w.size() && j - at <= kPemLabelMax + kEnd.size() && is_label(w[j])) ++j;
    const int close = starts_with(w, "-----", j);
    if (close == 1) return matched(std::min(j + 5, kPemMax));
    if (close < 0 && j < kPemMax) break;  // the END line is not complete yet
  }
  if (at_end) return matched(std::min(w.size(), kPemMax));
  if (w.size() >= kPemMax) return matched(kPemMax);
  return kNeedMore;
}

constexpr std::size_t kJwtMax = 16 * 1024;

// header.payload.signature, each base64url; the header is JSON, so it starts
// with "eyJ" ('{"'). The signature may be empty (alg "none").
FormatResult match_jwt(const ByteWindow& w, int prev, bool at_end) {
  if (prev >= 0 && is_word(prev)) return kNoMatch;
  constexpr std::size_t kMinSegment[3] = {10, 2, 0};
  std::size_t i = 0;
  for (int segment = 0; segment < 3; ++segment) {
    const std::size_t start = i;
    while (i < w.size() && i < kJwtMax && is_b64url(w[i])) ++i;
    if (i >= kJwtMax) return segment == 2 ? matched(kJwtMax) : kNoMatch;
    if (i == w.size() && !at_end) return kNeedMore;
    if (i - start < kMinSegment[segment]) return kNoMatch;
    if (segment == 2) break;
    if (i == w.size() || w[i] != '.') return kNoMatch;
    ++i;
  }
  return matched(i);
}

}  // namespace

const std::vector<KeyFormat>& key_formats() {
  static const std::vector<KeyFormat> formats = {
      {"aws-access-key-id", {"AKIA", "ASIA"}, 4 + 16 + 1, match_aws},
      {"github-token",
       {"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"},
       11 + 255 + 1,
       match_github},
      {"slack-token", {"xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"}, 5 + 255 + 1, match_slack},
      {"sk-api-key", {"sk-"}, 3 + 255 + 1, match_sk},
      {"private-key", {"-----BEGIN "}, kPemMax, match_pem},
      {"jwt", {"eyJ"}, kJwtMax, match_jwt},
  };
  return formats;
}

}  // namespace corral::secrets
