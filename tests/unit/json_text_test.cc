// json_text (base/json_text.h): JSON text that never throws, and a check
// over src/ that no strict nlohmann dump() is left. A strict dump() throws
// type_error.316 on a string that is not UTF-8, and corral's JSON carries
// bytes it does not choose (paths, environment values, messages quoting
// them): thrown in the daemon, its sandbox factory or the CLI, it ended the
// process in std::terminate (tests/integration/non_utf8_test.cc feeds such
// bytes through each way in).
#include "base/json_text.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace corral {
namespace {

const std::string kBad = "a\xff\xfe" "b";

TEST(JsonText, ReplacesBytesThatAreNotUtf8InsteadOfThrowing) {
  nlohmann::json j{{"message", kBad}, {kBad, {kBad}}};
  EXPECT_THROW((void)j.dump(), nlohmann::json::type_error);  // why json_text exists
  std::string text;
  ASSERT_NO_THROW(text = json_text(j));
  auto back = nlohmann::json::parse(text, nullptr, false);
  ASSERT_FALSE(back.is_discarded()) << text;
  EXPECT_EQ(back["message"], "a\xef\xbf\xbd\xef\xbf\xbd" "b");
  // ordered_json, and an indent.
  nlohmann::ordered_json o{{"k", kBad}};
  EXPECT_NE(json_text(o, 2).find("\n  \"k\""), std::string::npos);
  // Valid UTF-8 passes unchanged, not escaped.
  EXPECT_EQ(json_text(nlohmann::json("h\xc3\xa9")), "\"h\xc3\xa9\"");
}

// Every `.dump(` or `->dump(` call in src/ names a non-throwing error
// handler within its argument list (json_text() does; so do a few older
// call sites that spell it out). A new strict dump() fails here.
TEST(JsonText, NoStrictDumpInTheSources) {
  namespace fs = std::filesystem;
  const fs::path src = fs::path(CORRAL_TEST_SOURCE_DIR) / "src";
  ASSERT_TRUE(fs::is_directory(src)) << src;
  const std::regex call(R"((\.|->)dump\()");
  std::vector<std::string> strict;
  int seen = 0;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".cc" && ext != ".h")) continue;
    std::ifstream in(entry.path());
    std::stringstream buf;
    buf << in.rdbuf();
    const std::string text = buf.str();
    for (auto it = std::sregex_iterator(text.begin(), text.end(), call);
         it != std::sregex_iterator(); ++it) {
      ++seen;
      // The call's arguments: up to the matching parenthesis.
      std::size_t open = static_cast<std::size_t>(it->position() + it->length()) - 1;
      int depth = 0;
      std::size_t end = open;
      for (; end < text.size(); ++end) {
        if (text[end] == '(') ++depth;
        if (text[end] == ')' && --depth == 0) break;
      }
      const std::string args = text.substr(open, end - open + 1);
      if (args.find("error_handler_t::replace") == std::string::npos &&
          args.find("error_handler_t::ignore") == std::string::npos) {
        const auto line = std::count(text.begin(), text.begin() + it->position(), '\n') + 1;
        strict.push_back(fs::relative(entry.path(), src).string() + ":" + std::to_string(line) +
                         ": " + it->str().substr(0, it->length() - 1) + args);
      }
    }
  }
  EXPECT_GT(seen, 0) << "found no dump() at all: is " << src << " the source tree?";
  for (const auto& s : strict)
    ADD_FAILURE() << "a strict nlohmann dump() (throws on bytes that are not UTF-8): " << s
                  << "\n  use json_text() from base/json_text.h";
}

}  // namespace
}  // namespace corral
