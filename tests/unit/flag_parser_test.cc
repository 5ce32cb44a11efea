// FlagParser (src/cli/flag_parser.h), the flag parser of every corral verb:
// values, the forms a value may take, what is refused and how, and the
// check that a verb's flags and its usage text agree.
#include "cli/flag_parser.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace corral::cli {
namespace {

constexpr const char* kUsage =
    "usage: corral thing [options] NAME...\n"
    "\n"
    "options:\n"
    "  -v, --verbose        say more\n"
    "  --size N             how big\n"
    "  --log PATH           where (also --log=PATH)\n"
    "  -n N                 how many (also -nN)\n";

struct Parsed {
  std::optional<int> status;
  std::vector<FlagError> errors;
  bool verbose = false;
  std::string size, log, n;
  std::vector<std::string> names;
};

Parsed parse(std::vector<std::string_view> args) {
  Parsed p;
  FlagParser parser(kUsage, [&p](const FlagError& e) {
    p.errors.push_back(e);
    return 7;
  });
  parser.flag({"-v", "--verbose"}, p.verbose);
  parser.option("--size", [&p](const std::string& v) -> Refusal {
    if (v == "huge") return refused("--size", Error{ErrorCode::kInvalidArgument, "too big", "", 0});
    p.size = v;
    return std::nullopt;
  });
  parser.option("--log",
                [&p](const std::string& v) -> Refusal {
                  p.log = v;
                  return std::nullopt;
                },
                {.missing = "--log needs a path", .attached = ValueForm::Attached::kAfterEquals});
  parser.option("-n",
                [&p](const std::string& v) -> Refusal {
                  p.n = v;
                  return std::nullopt;
                },
                {.attached = ValueForm::Attached::kGlued});
  parser.positional([&p](std::string_view a) -> Refusal {
    if (a == "bad") return "no bad names";
    p.names.emplace_back(a);
    return std::nullopt;
  });
  p.status = parser.parse(args);
  return p;
}

TEST(FlagParser, ReadsFlagsValuesAndPositionalsInOrder) {
  Parsed p = parse({"a", "--verbose", "--size", "-3", "b", "--log=/x", "-n5"});
  EXPECT_FALSE(p.status);
  EXPECT_TRUE(p.errors.empty());
  EXPECT_TRUE(p.verbose);
  EXPECT_EQ(p.size, "-3");  // a value is the next argument, whatever it looks like
  EXPECT_EQ(p.log, "/x");
  EXPECT_EQ(p.n, "5");
  EXPECT_EQ(p.names, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(parse({"-v"}).verbose);  // an alias
  EXPECT_EQ(parse({"--log", "/y"}).log, "/y");
  EXPECT_EQ(parse({"-n", "6"}).n, "6");
}

TEST(FlagParser, AttachedValuesOnlyWhereDeclared) {
  // --size takes no --size=; -n takes no -n=...; --log takes no --logX.
  for (std::string_view arg : {"--size=3", "--logX", "--log-x=1", "--n=3"}) {
    Parsed p = parse({arg});
    EXPECT_EQ(p.status, 7) << arg;
    ASSERT_EQ(p.errors.size(), 1u) << arg;
    EXPECT_EQ(p.errors[0].kind, FlagError::Kind::kUnknown) << arg;
    EXPECT_EQ(p.errors[0].message, "unknown option \"" + std::string(arg) + "\"");
  }
  EXPECT_EQ(parse({"-n=3"}).n, "=3");  // glued: all that follows -n
  EXPECT_EQ(parse({"--log="}).log, "");
}

TEST(FlagParser, RefusalsSayWhatAndOfWhichKind) {
  Parsed p = parse({"--size"});
  ASSERT_EQ(p.errors.size(), 1u);
  EXPECT_EQ(p.errors[0].kind, FlagError::Kind::kMissingValue);
  EXPECT_EQ(p.errors[0].message, "--size needs a value");
  EXPECT_EQ(p.errors[0].flag, "--size");
  p = parse({"--log"});
  ASSERT_EQ(p.errors.size(), 1u);
  EXPECT_EQ(p.errors[0].message, "--log needs a path");
  p = parse({"--size", "huge", "--bogus"});  // the first refusal ends the parse
  ASSERT_EQ(p.errors.size(), 1u);
  EXPECT_EQ(p.errors[0].kind, FlagError::Kind::kBadValue);
  EXPECT_EQ(p.errors[0].message, "--size: too big");
  p = parse({"bad"});
  ASSERT_EQ(p.errors.size(), 1u);
  EXPECT_EQ(p.errors[0].kind, FlagError::Kind::kMisuse);
  EXPECT_EQ(p.errors[0].message, "no bad names");
  p = parse({"-"});  // a lone dash is a flag unless the verb says otherwise
  ASSERT_EQ(p.errors.size(), 1u);
  EXPECT_EQ(p.errors[0].message, "unknown option \"-\"");
  p = parse({"--"});
  ASSERT_EQ(p.errors.size(), 1u);
  EXPECT_EQ(p.errors[0].message, "unknown option \"--\"");
}

TEST(FlagParser, HelpPrintsTheUsageAndEndsWithZero) {
  testing::internal::CaptureStdout();
  Parsed p = parse({"a", "--help", "--bogus"});
  EXPECT_EQ(testing::internal::GetCapturedStdout(), kUsage);
  EXPECT_EQ(p.status, 0);
  EXPECT_TRUE(p.errors.empty());
  testing::internal::CaptureStdout();
  EXPECT_EQ(parse({"-h"}).status, 0);
  (void)testing::internal::GetCapturedStdout();
  // After a value-taking option, -h is its value.
  EXPECT_EQ(parse({"--size", "-h"}).size, "-h");
}

TEST(FlagParser, StopsAtDoubleDashWhenAsked) {
  FlagParser parser("usage: x [--json] -- CMD\n", [](const FlagError&) { return 2; });
  bool json = false;
  parser.flag({"--json"}, json);
  parser.stop_at_double_dash();
  EXPECT_FALSE(parser.parse({"--json", "--", "ls", "--json", "-h"}));
  EXPECT_TRUE(json);
  ASSERT_TRUE(parser.after_double_dash());
  EXPECT_EQ(*parser.after_double_dash(), (std::vector<std::string_view>{"ls", "--json", "-h"}));
}

TEST(FlagParser, UnknownMessageAndLoneDashAreTheVerbs) {
  std::vector<std::string> got;
  std::string message;
  FlagParser parser("usage: x SRC DST\n", [&](const FlagError& e) {
    message = e.message;
    return 2;
  });
  parser.positional(
      [&](std::string_view a) -> Refusal {
        got.emplace_back(a);
        return std::nullopt;
      },
      /*lone_dash_is_positional=*/true);
  parser.unknown_message([](std::string_view a) { return "what is " + std::string(a) + "?"; });
  EXPECT_FALSE(parser.parse({"-", "b"}));
  EXPECT_EQ(got, (std::vector<std::string>{"-", "b"}));
  EXPECT_EQ(parser.parse({"-x"}), 2);
  EXPECT_EQ(message, "what is -x?");
}

TEST(FlagParser, AFirstPassTakesItsFlagsOutWhereverTheyStand) {
  std::vector<std::string_view> rest;
  std::string log;
  FlagParser parser("usage: x [--log PATH] [-n N]\n", [](const FlagError&) { return 2; });
  parser.option("--log", [&](const std::string& v) -> Refusal {
    log = v;
    return std::nullopt;
  });
  parser.positional(
      [&](std::string_view a) -> Refusal {
        rest.push_back(a);
        return std::nullopt;
      },
      /*lone_dash_is_positional=*/true);
  parser.others_are_positional();
  EXPECT_FALSE(parser.parse({"-n", "--log", "/x", "5", "--other", "-"}));
  EXPECT_EQ(log, "/x");
  EXPECT_EQ(rest, (std::vector<std::string_view>{"-n", "5", "--other", "-"}));
}

// The flags of a verb and its usage text cannot drift apart: a flag the
// usage does not show, or a usage line with a flag the verb does not take,
// is our bug.
TEST(FlagParserDeathTest, FlagsAndUsageTextMustAgree) {
  auto run = [](const char* usage, std::string_view flag) {
    FlagParser parser(usage, [](const FlagError&) { return 2; });
    parser.flag({flag}, [] {});
    (void)parser.parse({});
  };
  run("usage: x [--json]\n", "--json");  // agrees
  EXPECT_DEATH(run("usage: x [--json]\n", "--jsonl"), "the usage text lacks --jsonl");
  EXPECT_DEATH(run("usage: x [--json-lines]\n", "--json"), "the usage text lacks --json");
  EXPECT_DEATH(run("usage: x [--json]\n  --yaml    also\n", "--json"),
               "a flag the verb does not take: --yaml");
}

}  // namespace
}  // namespace corral::cli
