// What corral's YAML config readers share: the sandbox config
// (spec/config_file.cc) and the daemon's (daemon/daemon_config_yaml.cc).
//
// - read_config_text: the file, refused when it is not a regular file or
//   larger than 1 MiB.
// - read_yaml_document: the one document of a text, loaded only after
//   yaml-cpp's event parser has walked every document (which builds no
//   nodes), so that a second document, or yaml-cpp 0.7's endless empty
//   documents at a stray ',', are refused before YAML::LoadAll runs.
// - YamlReader: walks maps and values with messages that name the file, the
//   line and the key path ("serve.yaml:3: serve.capacity.memory: invalid
//   size ..."), and suggest the key that was meant ("unknown key (did you
//   mean memory_limit?)").
//
// yaml-cpp reports errors by throwing. read_yaml_document calls `apply`
// inside its try block and turns what yaml-cpp throws into an Error with the
// line; YamlReader's methods may throw, so call them only from `apply`.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace corral {

// The text of the config file at `path`: a regular file of at most 1 MiB
// (opening a FIFO does not block). `context` starts every message
// ("reading daemon config: ..."); `too_big_hint` is the hint for a larger
// file.
Result<std::string> read_config_text(const std::string& path, std::string_view context,
                                     std::string_view too_big_hint);

// What read_yaml_document does with the document that holds something:
// `text` is the whole text (one copy, shared).
using YamlApply = std::function<Status(const YAML::Node& root, const std::string& text)>;
// A better hint for a syntax error on the line `line_text`, or "" for the
// usual "check the YAML syntax near that line".
using YamlSyntaxHint = std::function<std::string(std::string_view line_text)>;

// Parses `text` and calls `apply` with its document, if one holds anything
// (an empty text, or only comments, calls nothing). A second document with
// content, invalid YAML or anything thrown from `apply` becomes an Error
// naming `source_name` and, where known, the line.
Status read_yaml_document(std::string_view text, std::string_view source_name,
                          const YamlApply& apply, const YamlSyntaxHint& syntax_hint = {});

// A key the user may have meant: `name` is compared with the typed key,
// `display` is what the message shows ("memory" -> serve.capacity.memory).
struct KeySuggestion {
  std::string name;
  std::string display;
};

// Appends one suggestion per key, shown as `display_prefix` + key.
void add_suggestions(std::vector<KeySuggestion>& out, std::span<const std::string_view> keys,
                     std::string_view display_prefix = {});

// The display of the suggestion closest to `typed` (case and '-'/'_'
// ignored), if it is a likely typo: a few edits away (a swap of neighbours
// is one edit), or `typed` is a prefix of three letters or more.
std::optional<std::string> nearest_key(std::string_view typed,
                                       const std::vector<KeySuggestion>& candidates);

// "a, b, c".
std::string join_keys(std::span<const std::string_view> keys);

// `parent`.`key`, with the key as written when it is a plain name, else
// quoted and escaped (a key may hold any text). An empty parent: the key.
std::string join_key_path(std::string_view parent, std::string_view key);
// `path`[`index`].
std::string item_path(std::string_view path, std::size_t index);

// "no value", "the value \"x\"", "a list", "a map": what a message says
// was found.
std::string describe_node(const YAML::Node& node);

// One entry of a map that YamlReader::for_each_entry walks.
struct YamlEntry {
  YAML::Node key;
  YAML::Node value;
  std::string name;  // the key's text
  std::string path;  // the key path of the value ("serve.listen")
  int line = -1;     // the key's line, 0-based
  // The value's line when it is a single value (it may be on a line of its
  // own), else the key's: where a message about the value points.
  int value_line = -1;
};

// Checks one item of a list (and may rewrite it); an error's message and
// hint go into the message about that item.
using YamlItemCheck = std::function<Status(std::string& item)>;

class YamlReader {
 public:
  // `source` (the file name) starts every message; it must outlive the
  // reader.
  explicit YamlReader(std::string_view source) : source_(source) {}

  std::string_view source() const { return source_; }

  // "<source>:<line>: <path>: <what>"; `line` is yaml-cpp's 0-based line
  // (-1 when unknown), an empty `path` is left out.
  tl::unexpected<Error> fail(int line, std::string_view path, std::string_view what,
                             std::string hint = {}) const;
  // The same with a parser's message and hint as `what` and hint.
  tl::unexpected<Error> fail(int line, std::string_view path, const Error& cause) const;
  // "unknown key (did you mean X?)", or "unknown key" with the `known` keys
  // in the hint.
  tl::unexpected<Error> unknown_key(int line, std::string_view path, std::string_view key,
                                    const std::vector<KeySuggestion>& candidates,
                                    std::span<const std::string_view> known) const;
  // The same for `entry`, whose likely meanings are the `known` keys and
  // `aliases` (other names for them: {"bind", "listen"}).
  tl::unexpected<Error> unknown_key(const YamlEntry& entry, std::span<const std::string_view> known,
                                    std::vector<KeySuggestion> aliases = {}) const;

  // Calls `visit` with each entry of `map` in order, after checking that
  // its key is a plain name that appears once; the first error ends the
  // walk. `parent` is the key path of the map ("" at the top level).
  Status for_each_entry(const YAML::Node& map, std::string_view parent,
                        const std::function<Status(const YamlEntry&)>& visit) const;

  // The value of a key that takes a single value; else "expected
  // <expected>, found ...".
  Result<std::string> scalar(const YamlEntry& entry, std::string_view expected) const;
  // One of `choices`; else "expected <expected>, found \"<text>\"".
  Result<std::string> one_of(const YamlEntry& entry, std::span<const std::string_view> choices,
                             std::string_view expected) const;
  // true / True / TRUE, false / False / FALSE, into `out`.
  Status read_bool(const YamlEntry& entry, bool& out) const;

  // A single value read by `parse` (a function of std::string_view that
  // returns a Result) into `out`; the parser's message names the key and
  // the value's line.
  template <typename Parse, typename T>
  Status read_into(const YamlEntry& entry, std::string_view expected, Parse parse, T& out) const {
    auto text = scalar(entry, expected);
    if (!text) return tl::unexpected<Error>(std::move(text.error()));
    auto value = parse(std::string_view(*text));
    if (!value) return fail(entry.value_line, entry.path, value.error());
    out = std::move(*value);
    return ok();
  }

  // A list of single values ("expected a list of <item_expected> (use []
  // for none), ..."), of at most `max_items`. Once every item is known to
  // be a single value, `check` (if given) sees each in order.
  Result<std::vector<std::string>> scalar_list(
      const YamlEntry& entry, std::string_view item_expected, const YamlItemCheck& check = {},
      std::size_t max_items = std::numeric_limits<std::size_t>::max()) const;

  // A map, or "expected <expected>, found ..." at the key's line.
  Status expect_map(const YamlEntry& entry, std::string_view expected) const;

 private:
  std::string_view source_;
};

}  // namespace corral
