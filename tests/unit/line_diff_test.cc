// The dry-run report's short unified diff (X2, base/line_diff.h).
#include "base/line_diff.h"

#include <gtest/gtest.h>

#include <string>

namespace corral {
namespace {

TEST(LineDiff, EqualTextsGiveNoDiff) { EXPECT_EQ(unified_diff("a\nb\n", "a\nb\n", "f"), ""); }

TEST(LineDiff, ChangedLineWithContext) {
  EXPECT_EQ(*unified_diff("1\n2\n3\n4\n5\n6\n7\n8\n", "1\n2\n3\n4\nfive\n6\n7\n8\n", "f"),
            "--- a/f\n+++ b/f\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
}

TEST(LineDiff, CreatedFileDiffsAgainstDevNull) {
  EXPECT_EQ(*unified_diff("", "hello\nworld\n", "new.txt", true),
            "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+hello\n+world\n");
}

TEST(LineDiff, DistantChangesAreSeparateHunks) {
  std::string a, b;
  for (int i = 0; i < 30; ++i) {
    a += std::to_string(i) + "\n";
    b += (i == 2 || i == 25 ? "x" : std::to_string(i)) + "\n";
  }
  const std::string d = *unified_diff(a, b, "f");
  EXPECT_NE(d.find("@@ -1,6 +1,6 @@"), std::string::npos) << d;
  EXPECT_NE(d.find("@@ -23,7 +23,7 @@"), std::string::npos) << d;
}

TEST(LineDiff, MissingFinalNewlineIsMarked) {
  const std::string d = *unified_diff("a\n", "a\nb", "f");
  EXPECT_NE(d.find("+b\n\\ No newline at end of file\n"), std::string::npos) << d;
}

TEST(LineDiff, TooManyLinesGiveNone) {
  std::string big;
  for (std::size_t i = 0; i <= kMaxDiffLines; ++i) big += "x\n";
  EXPECT_FALSE(unified_diff("", big, "f", true).has_value());
}

}  // namespace
}  // namespace corral
