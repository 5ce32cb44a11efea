// Known key formats the redactor finds without being told the value
// (issue 5, S3): AWS access key ids, GitHub, Slack and `sk-` API tokens,
// PEM private key blocks and JWTs.
//
// Each format is a few literal anchors ("AKIA", "ghp_", "-----BEGIN ",
// "eyJ", ...), which the redactor's Vectorscan database finds in the
// stream, and a matcher that decides, from the bytes at an anchor on, whether
// a token of the format starts there and how long it is. A matcher may ask
// for more bytes (kNeedMore), but never once it has max_length bytes: that
// bounds what a stream holds back for a format. Matches are greedy: a token
// runs as far as its character class does.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace corral::secrets {

// A window of stream bytes in at most two pieces (the bytes a stream holds
// back, then the new chunk), indexed as one.
struct ByteWindow {
  std::string_view first;
  std::string_view second;

  std::size_t size() const { return first.size() + second.size(); }
  unsigned char operator[](std::size_t i) const {
    return static_cast<unsigned char>(i < first.size() ? first[i] : second[i - first.size()]);
  }
};

enum class FormatVerdict { kNoMatch, kMatch, kNeedMore };

struct FormatResult {
  FormatVerdict verdict = FormatVerdict::kNoMatch;
  std::size_t length = 0;  // of the match, anchor included (kMatch)
};

// `window` starts at the anchor; `prev` is the byte before it (-1 at the
// start of the stream); `at_end` says no byte will follow the window.
using FormatMatcher = FormatResult (*)(const ByteWindow& window, int prev, bool at_end);

struct KeyFormat {
  std::string_view name;  // in the placeholder: [REDACTED:<name>]
  std::vector<std::string_view> anchors;
  std::size_t max_length;  // of a match, and of a window before a decision
  FormatMatcher match;
};

// The formats, in a fixed order (their index is stable for a build):
//   aws-access-key-id  (AKIA|ASIA)[A-Z0-9]{16}, not inside a longer word
//   github-token       gh[pousr]_[A-Za-z0-9]{30,255} and github_pat_[A-Za-z0-9_]{22,255}
//   slack-token        xox[abprs]-[A-Za-z0-9-]{10,255}
//   sk-api-key         sk-[A-Za-z0-9_-]{32,255} (OpenAI sk-..., sk-proj-..., Anthropic sk-ant-...)
//   private-key        -----BEGIN <...>PRIVATE KEY[ BLOCK]----- through the next -----END ...-----
//   jwt                eyJ<b64url>{7,}.<b64url>{2,}.<b64url>*
// Every token format also needs a word boundary before the anchor (no letter,
// digit, '_' or '-' there), so "task-force" or "xsk-..." is no key.
const std::vector<KeyFormat>& key_formats();

}  // namespace corral::secrets
