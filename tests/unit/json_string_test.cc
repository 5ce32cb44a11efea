// append_json_string (src/base/json_string.h) and api::exec_output_json
// (api_model.h) against the JSON library's own dump(): the fast writer must
// produce the same bytes for every input, including escapes at every offset
// of its block scan, and the lines must parse back to the same data.
#include "base/json_string.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "api/api_model.h"
#include "api/base64.h"
#include "base/utf8.h"

namespace corral::api {
namespace {

std::string library_string(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string ours(std::string_view s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

TEST(JsonString, EveryByteBelow0x80AloneAndInsideRuns) {
  for (int c = 0; c < 0x80; ++c) {
    const std::string one(1, static_cast<char>(c));
    EXPECT_EQ(ours(one), library_string(one)) << "byte " << c;
    // At each offset of two 16-byte blocks and the tail, with plain text
    // (and a multi-byte character) around it.
    for (std::size_t at = 0; at < 40; ++at) {
      std::string s(40, 'a');
      if (at != 3 && at != 4) s.replace(3, 2, "\xc3\xa9");
      s[at] = static_cast<char>(c);
      ASSERT_EQ(ours(s), library_string(s)) << "byte " << c << " at " << at;
    }
  }
}

TEST(JsonString, NamedEscapes) {
  EXPECT_EQ(ours("a\"b\\c\b\f\n\r\t\x01\x1f\x7f"), R"("a\"b\\c\b\f\n\r\t\u0001\u001f)"
                                                   "\x7f\"");
  EXPECT_EQ(ours(""), "\"\"");
  EXPECT_EQ(ours(std::string("\0", 1)), R"("\u0000")");
}

TEST(JsonString, RandomUtf8MatchesTheLibrary) {
  std::mt19937 rng(20261130);
  // Pieces chosen to hit the escapes, multi-byte characters (which must
  // pass as is) and long clean runs.
  const std::string pieces[] = {"a",
                                "plain text ",
                                "\"",
                                "\\",
                                "\n",
                                "\t",
                                std::string("\0", 1),
                                "\x1b[31m",
                                "\x7f",
                                "caf\xc3\xa9",
                                "\xe2\x82\xac",
                                "\xf0\x9f\x98\x80",
                                std::string(40, 'x'),
                                "\r\n"};
  for (int round = 0; round < 2000; ++round) {
    std::string s;
    const int parts = static_cast<int>(rng() % 40);
    for (int i = 0; i < parts; ++i) s += pieces[rng() % std::size(pieces)];
    ASSERT_TRUE(is_valid_utf8(s));
    ASSERT_EQ(ours(s), library_string(s)) << "round " << round;
  }
}

TEST(JsonString, AppendsAfterWhatIsThere) {
  std::string out = "{\"k\":";
  append_json_string(out, "v\n");
  EXPECT_EQ(out, "{\"k\":\"v\\n\"");
}

// The exec event line: the same bytes as building the event as a json
// value, text or base64, and it parses back to the same data.
TEST(JsonString, ExecOutputLinesMatchTheLibraryAndRoundTrip) {
  std::mt19937 rng(7);
  for (int round = 0; round < 500; ++round) {
    std::string data;
    const std::size_t len = rng() % 300;
    const bool binary = round % 5 == 0;
    for (std::size_t i = 0; i < len; ++i)
      data.push_back(static_cast<char>(binary ? rng() % 256 : rng() % 0x80));
    for (auto kind : {ExecEvent::kStdout, ExecEvent::kStderr}) {
      nlohmann::ordered_json j;
      j["type"] = kind == ExecEvent::kStdout ? "stdout" : "stderr";
      if (is_valid_utf8(data)) {
        j["data"] = data;
      } else {
        j["data_b64"] = base64_encode(data);
      }
      const std::string line = exec_output_json(kind, data);
      ASSERT_EQ(line, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
          << "round " << round;
      auto back = parse_exec_event(line);
      ASSERT_TRUE(back.has_value()) << back.error().message;
      EXPECT_EQ(back->kind, kind);
      EXPECT_EQ(back->data, data);
    }
  }
}

}  // namespace
}  // namespace corral::api
