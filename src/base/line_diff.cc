#include "base/line_diff.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace corral {

namespace {

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    std::size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    lines.push_back(text.substr(start, end - start));
    start = end;
  }
  return lines;
}

// One line of the edit script: ' ' kept, '-' removed, '+' added.
struct Edit {
  char op;
  std::string_view line;
};

// The edit script between a and b: common prefix and suffix first (most
// edits are small), an LCS table for the middle.
std::vector<Edit> edit_script(const std::vector<std::string_view>& a,
                              const std::vector<std::string_view>& b) {
  std::size_t pre = 0;
  while (pre < a.size() && pre < b.size() && a[pre] == b[pre]) ++pre;
  std::size_t suf = 0;
  while (suf < a.size() - pre && suf < b.size() - pre &&
         a[a.size() - 1 - suf] == b[b.size() - 1 - suf])
    ++suf;
  const std::size_t n = a.size() - pre - suf, m = b.size() - pre - suf;
  // lcs[i][j]: LCS length of a[pre+i..] and b[pre+j..] within the middle.
  std::vector<std::uint16_t> lcs((n + 1) * (m + 1), 0);
  auto at = [&](std::size_t i, std::size_t j) -> std::uint16_t& { return lcs[i * (m + 1) + j]; };
  for (std::size_t i = n; i-- > 0;)
    for (std::size_t j = m; j-- > 0;)
      at(i, j) = a[pre + i] == b[pre + j] ? static_cast<std::uint16_t>(at(i + 1, j + 1) + 1)
                                          : std::max(at(i + 1, j), at(i, j + 1));
  std::vector<Edit> out;
  for (std::size_t k = 0; k < pre; ++k) out.push_back({' ', a[k]});
  std::size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[pre + i] == b[pre + j]) {
      out.push_back({' ', a[pre + i]});
      ++i, ++j;
    } else if (i < n && (j == m || at(i + 1, j) >= at(i, j + 1))) {
      out.push_back({'-', a[pre + i++]});  // removals before additions, as diff -u
    } else {
      out.push_back({'+', b[pre + j++]});
    }
  }
  for (std::size_t k = a.size() - suf; k < a.size(); ++k) out.push_back({' ', a[k]});
  return out;
}

void append_line(std::string& out, char op, std::string_view line) {
  out += op;
  out += line;
  if (line.empty() || line.back() != '\n') out += "\n\\ No newline at end of file\n";
}

}  // namespace

std::optional<std::string> unified_diff(std::string_view before, std::string_view after,
                                        std::string_view name, bool created) {
  const auto a = split_lines(before), b = split_lines(after);
  if (a.size() > kMaxDiffLines || b.size() > kMaxDiffLines) return std::nullopt;
  const std::vector<Edit> edits = edit_script(a, b);
  constexpr std::size_t kContext = 3;
  std::string out;
  std::size_t k = 0;
  std::size_t line_a = 1, line_b = 1;  // 1-based line numbers at edits[k]
  while (k < edits.size()) {
    // The next change, and the hunk around it: it runs on while the gap
    // between changes is at most 2 * kContext kept lines.
    std::size_t first = k;
    while (first < edits.size() && edits[first].op == ' ') ++first;
    if (first == edits.size()) break;
    std::size_t start = first > kContext ? std::max(first - kContext, k) : k;
    std::size_t end = first;
    std::size_t kept_run = 0;
    for (std::size_t e = first; e < edits.size(); ++e) {
      if (edits[e].op == ' ') {
        if (++kept_run > 2 * kContext) break;
      } else {
        kept_run = 0;
        end = e + 1;
      }
    }
    std::size_t stop = std::min(end + kContext, edits.size());
    for (std::size_t e = k; e < start; ++e) ++line_a, ++line_b;
    std::size_t count_a = 0, count_b = 0;
    for (std::size_t e = start; e < stop; ++e) {
      if (edits[e].op != '+') ++count_a;
      if (edits[e].op != '-') ++count_b;
    }
    if (out.empty()) {
      out += "--- ";
      out += created ? std::string("/dev/null") : "a/" + std::string(name);
      out += "\n+++ b/" + std::string(name) + "\n";
    }
    out += "@@ -" + std::to_string(count_a == 0 ? line_a - 1 : line_a) + "," +
           std::to_string(count_a) + " +" + std::to_string(count_b == 0 ? line_b - 1 : line_b) +
           "," + std::to_string(count_b) + " @@\n";
    for (std::size_t e = start; e < stop; ++e) {
      append_line(out, edits[e].op, edits[e].line);
      if (edits[e].op != '+') ++line_a;
      if (edits[e].op != '-') ++line_b;
    }
    k = stop;
  }
  return out;
}

}  // namespace corral
