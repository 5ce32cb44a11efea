#include "spec/yaml_reader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include "config_test_support.h"
#include "spec/units.h"

namespace corral {
namespace {

// Reads `yaml` (named "t.yaml") and hands its root to `walk`; the error's
// message, or "" when it was accepted.
std::string walk_error(std::string_view yaml,
                       const std::function<Status(const YamlReader&, const YAML::Node&)>& walk) {
  const YamlReader reader("t.yaml");
  Status st = read_yaml_document(yaml, "t.yaml", [&](const YAML::Node& root, const std::string&) {
    return walk(reader, root);
  });
  return st ? std::string() : st.error().message;
}

// The entries of the root map, as for_each_entry sees them.
std::vector<YamlEntry> entries_of(std::string_view yaml) {
  std::vector<YamlEntry> out;
  std::string error = walk_error(yaml, [&](const YamlReader& r, const YAML::Node& root) {
    return r.for_each_entry(root, "top", [&](const YamlEntry& e) {
      out.push_back(e);
      return ok();
    });
  });
  EXPECT_EQ(error, "") << yaml;
  return out;
}

// The error of applying `read` to the one entry of `yaml`.
std::string entry_error(std::string_view yaml,
                        const std::function<Status(const YamlReader&, const YamlEntry&)>& read) {
  return walk_error(yaml, [&](const YamlReader& r, const YAML::Node& root) {
    return r.for_each_entry(root, "", [&](const YamlEntry& e) { return read(r, e); });
  });
}

// ---- read_yaml_document ---------------------------------------------------------------

TEST(YamlReader, EmptyDocumentsApplyNothing) {
  for (std::string_view text : {"", "# only a comment\n", "---\n", "---\n...\n---\n"}) {
    int calls = 0;
    Status st = read_yaml_document(text, "t.yaml", [&](const YAML::Node&, const std::string&) {
      ++calls;
      return ok();
    });
    EXPECT_TRUE(st.has_value()) << text;
    EXPECT_EQ(calls, 0) << text;
  }
}

TEST(YamlReader, TheDocumentWithContentIsApplied) {
  std::string seen_text;
  int value = 0;
  const std::string text = "# leading comment\n---\na: 7\n";
  Status st = read_yaml_document(text, "t.yaml", [&](const YAML::Node& root, const std::string& t) {
    seen_text = t;
    value = root["a"].as<int>();
    return ok();
  });
  ASSERT_TRUE(st.has_value()) << st.error().message;
  EXPECT_EQ(value, 7);
  EXPECT_EQ(seen_text, text);
}

TEST(YamlReader, ApplyErrorsPassThrough) {
  Status st = read_yaml_document("a: 1\n", "t.yaml", [](const YAML::Node&, const std::string&) {
    return Status(make_error(ErrorCode::kAlreadyExists, "mine", "my hint"));
  });
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(st.error().message, "mine");
  EXPECT_EQ(st.error().hint, "my hint");
}

TEST(YamlReader, ASecondDocumentIsRefused) {
  Status st = read_yaml_document("a: 1\n---\nb: 2\n", "t.yaml",
                                 [](const YAML::Node&, const std::string&) { return ok(); });
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(st.error().message, "t.yaml:2: a second YAML document; a config file holds one");
}

TEST(YamlReader, StrayCommaBetweenDocumentsEnds) {
  // yaml-cpp 0.7 reports endless empty documents here.
  for (std::string_view text : {",", "a: 1\n---\n,\n", "\n\n  ,\n"}) {
    Status st = read_yaml_document(text, "t.yaml",
                                   [](const YAML::Node&, const std::string&) { return ok(); });
    ASSERT_FALSE(st.has_value()) << text;
    EXPECT_NE(st.error().message.find("invalid YAML: unexpected character at column"),
              std::string::npos)
        << st.error().message;
  }
  Status st = read_yaml_document("\n\n  ,\n", "t.yaml",
                                 [](const YAML::Node&, const std::string&) { return ok(); });
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().message, "t.yaml:3: invalid YAML: unexpected character at column 3");
}

TEST(YamlReader, SyntaxErrorsNameTheLineAndTakeAHint) {
  const std::string text = "a: 1\nb: [x\n";
  auto none = [](const YAML::Node&, const std::string&) { return ok(); };
  Status plain = read_yaml_document(text, "t.yaml", none);
  ASSERT_FALSE(plain.has_value());
  EXPECT_EQ(plain.error().message, "t.yaml:2: invalid YAML: end of sequence flow not found");
  EXPECT_EQ(plain.error().hint, "check the YAML syntax near that line");

  // The hint callback sees the text of the line the error is on: for an
  // unclosed list at the end, its own line (not the empty one after it).
  std::string line_seen;
  Status hinted = read_yaml_document("a: 1\nb: [x, y\n", "t.yaml", none,
                                     [&](std::string_view line) -> std::string {
                                       line_seen = std::string(line);
                                       return "close the list";
                                     });
  ASSERT_FALSE(hinted.has_value());
  EXPECT_EQ(hinted.error().hint, "close the list");
  EXPECT_EQ(line_seen, "b: [x, y");
  EXPECT_EQ(hinted.error().message, "t.yaml:2: invalid YAML: end of sequence flow not found");
  // An empty answer keeps the usual hint.
  Status fallback =
      read_yaml_document(text, "t.yaml", none, [](std::string_view) { return std::string(); });
  ASSERT_FALSE(fallback.has_value());
  EXPECT_EQ(fallback.error().hint, "check the YAML syntax near that line");
}

TEST(YamlReader, WhatApplyThrowsBecomesAnError) {
  // A yaml-cpp exception carries the line of the node.
  Status bad_conversion = read_yaml_document("a: 1\nb: text\n", "t.yaml",
                                             [](const YAML::Node& root, const std::string&) {
                                               (void)root["b"].as<int>();
                                               return ok();
                                             });
  ASSERT_FALSE(bad_conversion.has_value());
  EXPECT_EQ(bad_conversion.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad_conversion.error().message.rfind("t.yaml:2: invalid YAML: ", 0), 0u)
      << bad_conversion.error().message;

  Status other = read_yaml_document("a: 1\n", "t.yaml", [](const YAML::Node&, const std::string&) {
    throw std::runtime_error("boom\x1b");
    return ok();
  });
  ASSERT_FALSE(other.has_value());
  EXPECT_EQ(other.error().code, ErrorCode::kInternal);
  EXPECT_EQ(other.error().message, "t.yaml: reading the YAML failed: boom\\x1b");

  Status anything =
      read_yaml_document("a: 1\n", "t.yaml", [](const YAML::Node&, const std::string&) {
        throw 42;
        return ok();
      });
  ASSERT_FALSE(anything.has_value());
  EXPECT_EQ(anything.error().message, "t.yaml: reading the YAML failed");
}

// ---- read_config_text -----------------------------------------------------------------

TEST(YamlReader, ReadConfigText) {
  config_test::TempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  const std::string path = tmp.write("c.yaml", "a: 1\n");
  auto text = read_config_text(path, "reading it", "too big");
  ASSERT_TRUE(text.has_value()) << text.error().message;
  EXPECT_EQ(*text, "a: 1\n");

  auto missing = read_config_text(tmp.path() + "/absent", "reading it", "too big");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(missing.error().message.rfind("reading it: open(" + tmp.path() + "/absent)", 0), 0u)
      << missing.error().message;
  EXPECT_EQ(missing.error().hint, "check the path given to --config");

  auto dir = read_config_text(tmp.path(), "reading it", "too big");
  ASSERT_FALSE(dir.has_value());
  EXPECT_EQ(dir.error().message, "reading it: \"" + tmp.path() + "\" is not a regular file");
  EXPECT_EQ(dir.error().hint, "give the path of a YAML file");

  const std::string fifo = tmp.path() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto from_fifo = read_config_text(fifo, "reading it", "too big");  // must not block
  ASSERT_FALSE(from_fifo.has_value());
  EXPECT_NE(from_fifo.error().message.find("is not a regular file"), std::string::npos);

  const std::string big = tmp.write("big.yaml", std::string(kMiB + 1, '#'));
  auto too_big = read_config_text(big, "reading it", "a few settings");
  ASSERT_FALSE(too_big.has_value());
  EXPECT_EQ(too_big.error().message, "reading it: \"" + big + "\" is larger than 1 MiB");
  EXPECT_EQ(too_big.error().hint, "a few settings");

  const std::string edge = tmp.write("edge.yaml", std::string(kMiB, '#'));
  auto at_limit = read_config_text(edge, "reading it", "too big");
  ASSERT_TRUE(at_limit.has_value()) << at_limit.error().message;
  EXPECT_EQ(at_limit->size(), kMiB);
}

// ---- key names and paths --------------------------------------------------------------

TEST(YamlReader, NearestKey) {
  std::vector<KeySuggestion> keys;
  constexpr std::array<std::string_view, 3> kKeys = {"memory_limit", "listen", "disk"};
  add_suggestions(keys, kKeys);
  keys.push_back({"bind", "listen (bind is spelled listen)"});
  EXPECT_EQ(nearest_key("memroy_limit", keys), "memory_limit");  // a swap is one edit
  EXPECT_EQ(nearest_key("memory_limt", keys), "memory_limit");
  EXPECT_EQ(nearest_key("Memory-Limit", keys), "memory_limit");  // case and '-' ignored
  EXPECT_EQ(nearest_key("memory", keys), "memory_limit");        // a prefix
  EXPECT_EQ(nearest_key("lisen", keys), "listen");
  EXPECT_EQ(nearest_key("bind", keys), "listen (bind is spelled listen)");
  EXPECT_EQ(nearest_key("dsk", keys), "disk");
  EXPECT_EQ(nearest_key("me", keys), std::nullopt);  // too short for a prefix
  EXPECT_EQ(nearest_key("zzzzzz", keys), std::nullopt);
  EXPECT_EQ(nearest_key("", keys), std::nullopt);
  EXPECT_EQ(nearest_key(std::string(65, 'm'), keys), std::nullopt);

  std::vector<KeySuggestion> prefixed;
  add_suggestions(prefixed, kKeys, "serve.");
  EXPECT_EQ(nearest_key("listne", prefixed), "serve.listen");
}

TEST(YamlReader, PathsAndDescriptions) {
  constexpr std::array<std::string_view, 3> kKeys = {"a", "b", "c"};
  EXPECT_EQ(join_keys(kKeys), "a, b, c");
  EXPECT_EQ(join_keys(std::span<const std::string_view>()), "");
  EXPECT_EQ(join_key_path("", "listen"), "listen");
  EXPECT_EQ(join_key_path("serve", "max-upload_2"), "serve.max-upload_2");
  EXPECT_EQ(join_key_path("env", "my var"), "env.\"my var\"");
  EXPECT_EQ(join_key_path("", "a\nb"), "\"a\\x0ab\"");
  EXPECT_EQ(join_key_path("", std::string(65, 'k')), "\"" + std::string(65, 'k') + "\"");
  EXPECT_EQ(item_path("serve.api_keys.files", 3), "serve.api_keys.files[3]");

  std::string error = walk_error("n:\ns: x\nl: [1]\nm: {a: 1}\n",
                                 [](const YamlReader&, const YAML::Node& root) -> Status {
                                   EXPECT_EQ(describe_node(root["n"]), "no value");
                                   EXPECT_EQ(describe_node(root["s"]), "the value \"x\"");
                                   EXPECT_EQ(describe_node(root["l"]), "a list");
                                   EXPECT_EQ(describe_node(root["m"]), "a map");
                                   EXPECT_EQ(describe_node(YAML::Node()), "no value");
                                   return ok();
                                 });
  EXPECT_EQ(error, "");
}

// ---- YamlReader -----------------------------------------------------------------------

TEST(YamlReader, FailFormatsSourceLineAndPath) {
  const YamlReader reader("dir/c.yaml");
  EXPECT_EQ(reader.source(), "dir/c.yaml");
  EXPECT_EQ(reader.fail(0, "a.b", "bad").value().message, "dir/c.yaml:1: a.b: bad");
  EXPECT_EQ(reader.fail(4, "", "bad").value().message, "dir/c.yaml:5: bad");
  EXPECT_EQ(reader.fail(-1, "a", "bad").value().message, "dir/c.yaml: a: bad");
  auto with_hint = reader.fail(0, "a", "bad", "do this").value();
  EXPECT_EQ(with_hint.code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(with_hint.hint, "do this");
  Error cause{ErrorCode::kNotFound, "invalid size \"x\"", "use 2Gi", 0};
  auto wrapped = reader.fail(2, "memory", cause).value();
  EXPECT_EQ(wrapped.message, "dir/c.yaml:3: memory: invalid size \"x\"");
  EXPECT_EQ(wrapped.hint, "use 2Gi");
  EXPECT_EQ(wrapped.code, ErrorCode::kInvalidArgument);
}

TEST(YamlReader, UnknownKeySuggestsOrListsTheKeys) {
  const YamlReader reader("c.yaml");
  constexpr std::array<std::string_view, 2> kKnown = {"listen", "socket"};
  std::vector<KeySuggestion> candidates;
  add_suggestions(candidates, kKnown);
  Error guessed = reader.unknown_key(1, "serve.lisen", "lisen", candidates, kKnown).value();
  EXPECT_EQ(guessed.message, "c.yaml:2: serve.lisen: unknown key (did you mean listen?)");
  EXPECT_EQ(guessed.hint, "");
  Error listed = reader.unknown_key(1, "serve.zzz", "zzz", candidates, kKnown).value();
  EXPECT_EQ(listed.message, "c.yaml:2: serve.zzz: unknown key");
  EXPECT_EQ(listed.hint, "the keys allowed here are: listen, socket");

  // For an entry: the known keys and other names for them.
  Status aliased;
  auto unknown = [&](const YamlReader& r, const YamlEntry& e) -> Status {
    aliased = r.unknown_key(e, kKnown, {{"bind", "listen"}});
    return aliased;
  };
  EXPECT_EQ(entry_error("\nbnd: 1\n", unknown),
            "t.yaml:2: bnd: unknown key (did you mean listen?)");
  EXPECT_EQ(entry_error("sockt: 1\n", unknown),
            "t.yaml:1: sockt: unknown key (did you mean socket?)");
  EXPECT_EQ(entry_error("zzz: 1\n", unknown), "t.yaml:1: zzz: unknown key");
  ASSERT_FALSE(aliased.has_value());
  EXPECT_EQ(aliased.error().hint, "the keys allowed here are: listen, socket");
}

TEST(YamlReader, ForEachEntryWalksInOrderWithLinesAndPaths) {
  std::vector<YamlEntry> e = entries_of("first: 1\nsecond:\n  3\nthird: [x]\n\"odd key\": {}\n");
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].name, "first");
  EXPECT_EQ(e[0].path, "top.first");
  EXPECT_EQ(e[0].line, 0);
  EXPECT_EQ(e[0].value_line, 0);
  // A single value on its own line: messages about it point there.
  EXPECT_EQ(e[1].line, 1);
  EXPECT_EQ(e[1].value_line, 2);
  EXPECT_EQ(e[1].value.Scalar(), "3");
  // Lists and maps: at the key.
  EXPECT_EQ(e[2].line, 3);
  EXPECT_EQ(e[2].value_line, 3);
  EXPECT_EQ(e[3].name, "odd key");
  EXPECT_EQ(e[3].path, "top.\"odd key\"");
}

TEST(YamlReader, ForEachEntryRefusesOddAndDuplicateKeys) {
  auto walk_top = [](std::string_view parent) {
    return [parent](const YamlReader& r, const YAML::Node& root) {
      return r.for_each_entry(root, parent, [](const YamlEntry&) { return ok(); });
    };
  };
  EXPECT_EQ(walk_error("[a]: 1\n", walk_top("")),
            "t.yaml:1: (top level): keys must be plain names, found a list");
  EXPECT_EQ(walk_error("a: 1\n{b: 1}: 2\n", walk_top("serve")),
            "t.yaml:2: serve: keys must be plain names, found a map");
  EXPECT_EQ(walk_error("a: 1\nb: 2\na: 3\n", walk_top("serve")),
            "t.yaml:3: serve.a: duplicate key (each key may appear once in a map)");
  // The first error from `visit` ends the walk.
  int visited = 0;
  std::string error =
      walk_error("a: 1\nb: 2\nc: 3\n", [&](const YamlReader& r, const YAML::Node& root) {
        return r.for_each_entry(root, "", [&](const YamlEntry& e) -> Status {
          ++visited;
          if (e.name == "b") return r.fail(e.line, e.path, "stop");
          return ok();
        });
      });
  EXPECT_EQ(error, "t.yaml:2: b: stop");
  EXPECT_EQ(visited, 2);
}

TEST(YamlReader, ScalarsChoicesAndBooleans) {
  auto scalar = [](const YamlReader& r, const YamlEntry& e) -> Status {
    auto text = r.scalar(e, "a name");
    if (!text) return tl::unexpected<Error>(text.error());
    EXPECT_EQ(*text, "x y");
    return ok();
  };
  EXPECT_EQ(entry_error("k: x y\n", scalar), "");
  EXPECT_EQ(entry_error("k: [1]\n", scalar), "t.yaml:1: k: expected a name, found a list");
  EXPECT_EQ(entry_error("\nk:\n", scalar), "t.yaml:2: k: expected a name, found no value");

  constexpr std::array<std::string_view, 2> kChoices = {"deny", "allow"};
  auto choice = [&](const YamlReader& r, const YamlEntry& e) -> Status {
    auto text = r.one_of(e, kChoices, "deny or allow");
    if (!text) return tl::unexpected<Error>(text.error());
    return ok();
  };
  EXPECT_EQ(entry_error("k: allow\n", choice), "");
  EXPECT_EQ(entry_error("k:\n  maybe\n", choice),
            "t.yaml:2: k: expected deny or allow, found \"maybe\"");
  EXPECT_EQ(entry_error("k: {}\n", choice), "t.yaml:1: k: expected deny or allow, found a map");

  struct Flag {
    std::string_view text;
    bool value;
  };
  for (const Flag& f : {Flag{"true", true}, Flag{"True", true}, Flag{"TRUE", true},
                        Flag{"false", false}, Flag{"False", false}, Flag{"FALSE", false}}) {
    bool out = !f.value;
    EXPECT_EQ(
        entry_error("k: " + std::string(f.text) + "\n",
                    [&](const YamlReader& r, const YamlEntry& e) { return r.read_bool(e, out); }),
        "")
        << f.text;
    EXPECT_EQ(out, f.value) << f.text;
  }
  bool untouched = true;
  auto boolean = [&](const YamlReader& r, const YamlEntry& e) { return r.read_bool(e, untouched); };
  EXPECT_EQ(entry_error("k: yes\n", boolean), "t.yaml:1: k: expected true or false, found \"yes\"");
  EXPECT_EQ(entry_error("k: 1\n", boolean), "t.yaml:1: k: expected true or false, found \"1\"");
  EXPECT_EQ(entry_error("k: [true]\n", boolean),
            "t.yaml:1: k: expected true or false, found a list");
  EXPECT_TRUE(untouched);
}

TEST(YamlReader, ReadIntoUsesTheParserAndItsMessage) {
  std::uint64_t bytes = 0;
  auto size = [&](const YamlReader& r, const YamlEntry& e) {
    return r.read_into(e, "a size (2Gi)", parse_size, bytes);
  };
  EXPECT_EQ(entry_error("k: 2Gi\n", size), "");
  EXPECT_EQ(bytes, 2 * kGiB);
  EXPECT_EQ(entry_error("k: [2Gi]\n", size), "t.yaml:1: k: expected a size (2Gi), found a list");
  // The parser's message at the value's line; `out` is left as it was.
  bytes = 5;
  std::string msg = entry_error("k:\n  2GG\n", size);
  EXPECT_EQ(msg.rfind("t.yaml:2: k: invalid size \"2GG\"", 0), 0u) << msg;
  EXPECT_EQ(bytes, 5u);
}

TEST(YamlReader, ScalarLists) {
  std::vector<std::string> got;
  auto read = [&](const YamlItemCheck& check, std::size_t max_items) {
    return [&got, check, max_items](const YamlReader& r, const YamlEntry& e) -> Status {
      auto list = r.scalar_list(e, "names", check, max_items);
      if (!list) return tl::unexpected<Error>(list.error());
      got = std::move(*list);
      return ok();
    };
  };
  const auto no_limit = std::numeric_limits<std::size_t>::max();
  EXPECT_EQ(entry_error("k: [a, b]\n", read({}, no_limit)), "");
  EXPECT_EQ(got, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(entry_error("k: []\n", read({}, no_limit)), "");
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(entry_error("k: a\n", read({}, no_limit)),
            "t.yaml:1: k: expected a list of names (use [] for none), found the value \"a\"");
  EXPECT_EQ(entry_error("k:\n  - a\n  - [b]\n", read({}, no_limit)),
            "t.yaml:3: k[1]: expected names, found a list");
  // A missing item points at the key.
  EXPECT_EQ(entry_error("k:\n  -\n", read({}, no_limit)),
            "t.yaml:1: k[0]: expected names, found no value");
  EXPECT_EQ(entry_error("k: [a, b, c]\n", read({}, 2)),
            "t.yaml:1: k[2]: too many entries (at most 2)");

  // The check may rewrite items, and its message goes with the item's path
  // and line; it runs once every item is known to be a single value.
  auto upper = [](std::string& item) -> Status {
    if (item == "bad") return make_error(ErrorCode::kNotFound, "\"bad\" is bad", "use good");
    for (char& c : item) c = static_cast<char>(c - 'a' + 'A');
    return ok();
  };
  EXPECT_EQ(entry_error("k: [a, b]\n", read(upper, no_limit)), "");
  EXPECT_EQ(got, (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(entry_error("k:\n  - a\n  - bad\n", read(upper, no_limit)),
            "t.yaml:3: k[1]: \"bad\" is bad");
  EXPECT_EQ(entry_error("k:\n  - bad\n  - [x]\n", read(upper, no_limit)),
            "t.yaml:3: k[1]: expected names, found a list");
}

TEST(YamlReader, ExpectMap) {
  auto map = [](const YamlReader& r, const YamlEntry& e) {
    return r.expect_map(e, "a map (a, b)");
  };
  EXPECT_EQ(entry_error("k: {a: 1}\n", map), "");
  EXPECT_EQ(entry_error("k: [1]\n", map), "t.yaml:1: k: expected a map (a, b), found a list");
  EXPECT_EQ(entry_error("k:\n", map), "t.yaml:1: k: expected a map (a, b), found no value");
}

}  // namespace
}  // namespace corral
