// A short unified diff of two small texts (dry-run reports, X2): lines
// compared by a longest-common-subsequence table, hunks with 3 lines of
// context. Bounded: inputs over kMaxDiffLines lines give no diff.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace corral {

inline constexpr std::size_t kMaxDiffLines = 2000;

// "--- a/NAME\n+++ b/NAME\n@@ -l,n +l,n @@\n..." or "" when equal;
// nullopt when either side has more than kMaxDiffLines lines.
// `before` empty with `created` set diffs against /dev/null.
std::optional<std::string> unified_diff(std::string_view before, std::string_view after,
                                        std::string_view name, bool created = false);

}  // namespace corral
