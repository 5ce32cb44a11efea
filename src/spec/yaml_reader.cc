// The YAML reading that spec/config_file.cc and daemon/daemon_config_yaml.cc
// share. Every call into yaml-cpp is made from inside read_yaml_document's
// try block (YamlReader's methods run from its `apply`).
#include "spec/yaml_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <exception>
#include <iterator>
#include <set>
#include <sstream>

#include "base/strings.h"
#include "base/unique_fd.h"
#include "spec/sandbox_spec.h"
#include "spec/units.h"

namespace corral {
namespace {

constexpr std::size_t kMaxConfigBytes = 1 * kMiB;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c == '-') c = '_';
  }
  return out;
}

// Edit distance counting a swap of neighbours as one edit ("memroy").
std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size();
  const std::size_t m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1, 0));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

// A key as it appears in a message's key path: as written when it is a
// plain name, else quoted and escaped.
std::string path_part(std::string_view key) {
  constexpr std::size_t kMaxPlainBytes = 64;
  bool plain = !key.empty() && key.size() <= kMaxPlainBytes &&
               std::all_of(key.begin(), key.end(), [](char c) {
                 return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '_' || c == '-';
               });
  return plain ? std::string(key) : quote_for_message(key);
}

// yaml-cpp's own message, made safe to print (it may quote input bytes).
std::string printable(std::string_view text) {
  std::string quoted = quote_for_message(text);
  return quoted.substr(1, quoted.size() - 2);
}

// Line `index` (0-based) of `text`.
std::string_view line_of(std::string_view text, int index) {
  std::size_t start = 0;
  for (int i = 0; i < index; ++i) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) return {};
    start = nl + 1;
  }
  std::size_t end = text.find('\n', start);
  return text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
}

// Walks the documents of a text through yaml-cpp's event interface, to
// count the ones that hold something, before any node is built. This also
// guards against a yaml-cpp 0.7 bug: at a stray ',' between documents the
// parser reports an empty document without consuming anything, over and
// over, so that YAML::LoadAll never returns (and YAML::Load silently stops
// there). Such a document starts where the previous one did.
class DocumentScan : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    start_ = mark;
    content_ = false;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { content_ = true; }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {
    content_ = true;
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    content_ = true;
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    content_ = true;
  }
  void OnMapEnd() override {}

  const YAML::Mark& start() const { return start_; }
  bool has_content() const { return content_; }

 private:
  YAML::Mark start_;
  bool content_ = false;
};

}  // namespace

Result<std::string> read_config_text(const std::string& path, std::string_view context,
                                     std::string_view too_big_hint) {
  const std::string quoted = quote_for_message(path);
  // O_NONBLOCK: opening a FIFO must not hang; it is refused below anyway.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) {
    return tl::unexpected<Error>(
        errno_error("open(" + path + ")", errno, "check the path given to --config")
            .value()
            .wrap(context));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return tl::unexpected<Error>(errno_error("fstat(" + path + ")").value().wrap(context));
  }
  if (!S_ISREG(st.st_mode)) {
    return make_error(ErrorCode::kInvalidArgument,
                      std::string(context) + ": " + quoted + " is not a regular file",
                      "give the path of a YAML file");
  }
  auto too_big = [&] {
    return make_error(ErrorCode::kInvalidArgument,
                      std::string(context) + ": " + quoted + " is larger than 1 MiB",
                      std::string(too_big_hint));
  };
  if (static_cast<std::uint64_t>(st.st_size) > kMaxConfigBytes) return too_big();

  // Read at most one byte past the limit: the file may grow after fstat.
  std::string text(kMaxConfigBytes + 1, '\0');
  std::size_t used = 0;
  while (used < text.size()) {
    ssize_t n = ::read(fd.get(), text.data() + used, text.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return tl::unexpected<Error>(errno_error("read(" + path + ")").value().wrap(context));
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  if (used > kMaxConfigBytes) return too_big();
  text.resize(used);
  return text;
}

Status read_yaml_document(std::string_view yaml_text, std::string_view source_name,
                          const YamlApply& apply, const YamlSyntaxHint& syntax_hint) {
  auto located = [&](const YAML::Mark& raw_mark, std::string_view what) {
    std::string msg(source_name);
    YAML::Mark mark = raw_mark;
    // An error found at the end of the text (an unclosed list) is marked on
    // the empty line after it: name the last line that has something.
    while (!mark.is_null() && mark.line > 0 && line_of(yaml_text, mark.line).empty()) --mark.line;
    const bool known = !mark.is_null() && mark.line >= 0;
    if (known) msg.append(":").append(std::to_string(mark.line + 1));
    msg.append(": ").append(what);
    std::string hint;
    if (known && syntax_hint) hint = syntax_hint(line_of(yaml_text, mark.line));
    if (hint.empty()) hint = "check the YAML syntax near that line";
    return make_error(ErrorCode::kInvalidArgument, std::move(msg), std::move(hint));
  };
  try {
    const std::string text(yaml_text);
    std::optional<std::size_t> content_index;  // the document that holds the settings
    {
      std::istringstream in(text);
      YAML::Parser parser(in);
      DocumentScan scan;
      std::size_t index = 0;
      int previous_start = -1;
      while (parser.HandleNextDocument(scan)) {
        if (index > 0 && scan.start().pos == previous_start) {
          return located(scan.start(), "invalid YAML: unexpected character at column " +
                                           std::to_string(scan.start().column + 1));
        }
        previous_start = scan.start().pos;
        if (scan.has_content()) {
          if (content_index) {
            return located(scan.start(), "a second YAML document; a config file holds one");
          }
          content_index = index;
        }
        ++index;
      }
    }
    if (!content_index) return ok();  // empty, or only comments
    // The scan above has shown that every document ends, so LoadAll does.
    std::vector<YAML::Node> docs = YAML::LoadAll(text);
    if (*content_index >= docs.size()) {
      return make_error(ErrorCode::kInternal,
                        std::string(source_name) + ": YAML documents changed between reads");
    }
    return apply(docs[*content_index], text);
  } catch (const YAML::Exception& e) {
    return located(e.mark, "invalid YAML: " + printable(e.msg));
  } catch (const std::exception& e) {
    return make_error(
        ErrorCode::kInternal,
        std::string(source_name) + ": reading the YAML failed: " + printable(e.what()));
  } catch (...) {
    return make_error(ErrorCode::kInternal, std::string(source_name) + ": reading the YAML failed");
  }
}

void add_suggestions(std::vector<KeySuggestion>& out, std::span<const std::string_view> keys,
                     std::string_view display_prefix) {
  for (std::string_view k : keys) {
    out.push_back({std::string(k), std::string(display_prefix) + std::string(k)});
  }
}

std::optional<std::string> nearest_key(std::string_view typed,
                                       const std::vector<KeySuggestion>& candidates) {
  constexpr std::size_t kMaxTypedBytes = 64;  // longer keys are not typos
  if (typed.empty() || typed.size() > kMaxTypedBytes) return std::nullopt;
  const std::string t = lower(typed);
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (const KeySuggestion& c : candidates) {
    const std::string name = lower(c.name);
    std::size_t dist = edit_distance(t, name);
    std::size_t allowed = std::clamp<std::size_t>(name.size() / 3, 1, 3);
    // "memory" for "memory_limit": a prefix of three or more letters.
    bool prefix = t.size() >= 3 && name.starts_with(t);
    if (dist > allowed && !prefix) continue;
    if (prefix && dist > allowed) dist = allowed;
    if (!best || dist < best_distance) {
      best = c.display;
      best_distance = dist;
    }
  }
  return best;
}

std::string join_keys(std::span<const std::string_view> keys) {
  std::string out;
  for (std::string_view k : keys) {
    if (!out.empty()) out.append(", ");
    out.append(k);
  }
  return out;
}

std::string join_key_path(std::string_view parent, std::string_view key) {
  std::string path(parent);
  if (!path.empty()) path.push_back('.');
  path.append(path_part(key));
  return path;
}

std::string item_path(std::string_view path, std::size_t index) {
  return std::string(path) + "[" + std::to_string(index) + "]";
}

std::string describe_node(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "no value";
    case YAML::NodeType::Scalar:
      return "the value " + quote_for_message(node.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

tl::unexpected<Error> YamlReader::fail(int line, std::string_view path, std::string_view what,
                                       std::string hint) const {
  std::string msg(source_);
  if (line >= 0) msg.append(":").append(std::to_string(line + 1));
  msg.append(": ");
  if (!path.empty()) msg.append(path).append(": ");
  msg.append(what);
  return make_error(ErrorCode::kInvalidArgument, std::move(msg), std::move(hint));
}

tl::unexpected<Error> YamlReader::fail(int line, std::string_view path, const Error& cause) const {
  return fail(line, path, cause.message, cause.hint);
}

tl::unexpected<Error> YamlReader::unknown_key(int line, std::string_view path, std::string_view key,
                                              const std::vector<KeySuggestion>& candidates,
                                              std::span<const std::string_view> known) const {
  if (auto guess = nearest_key(key, candidates)) {
    return fail(line, path, "unknown key (did you mean " + *guess + "?)");
  }
  return fail(line, path, "unknown key", "the keys allowed here are: " + join_keys(known));
}

tl::unexpected<Error> YamlReader::unknown_key(const YamlEntry& entry,
                                              std::span<const std::string_view> known,
                                              std::vector<KeySuggestion> aliases) const {
  std::vector<KeySuggestion> candidates;
  add_suggestions(candidates, known);
  candidates.insert(candidates.end(), std::make_move_iterator(aliases.begin()),
                    std::make_move_iterator(aliases.end()));
  return unknown_key(entry.line, entry.path, entry.name, candidates, known);
}

Status YamlReader::for_each_entry(const YAML::Node& map, std::string_view parent,
                                  const std::function<Status(const YamlEntry&)>& visit) const {
  std::set<std::string> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    YamlEntry entry;
    entry.key = it->first;
    entry.value = it->second;
    entry.line = entry.key.Mark().line;
    // A map key must be a plain scalar that appears once.
    if (!entry.key.IsScalar()) {
      return fail(entry.line, parent.empty() ? std::string_view("(top level)") : parent,
                  "keys must be plain names, found " + describe_node(entry.key));
    }
    entry.name = entry.key.Scalar();
    entry.path = join_key_path(parent, entry.name);
    if (!seen.insert(entry.name).second) {
      return fail(entry.line, entry.path, "duplicate key (each key may appear once in a map)");
    }
    entry.value_line = entry.value.IsScalar() ? entry.value.Mark().line : entry.line;
    CORRAL_TRY(visit(entry));
  }
  return ok();
}

Result<std::string> YamlReader::scalar(const YamlEntry& entry, std::string_view expected) const {
  if (!entry.value.IsScalar()) {
    return fail(entry.line, entry.path,
                "expected " + std::string(expected) + ", found " + describe_node(entry.value));
  }
  return entry.value.Scalar();
}

Result<std::string> YamlReader::one_of(const YamlEntry& entry,
                                       std::span<const std::string_view> choices,
                                       std::string_view expected) const {
  auto text = scalar(entry, expected);
  if (!text) return text;
  if (std::find(choices.begin(), choices.end(), *text) == choices.end()) {
    return fail(entry.value_line, entry.path,
                "expected " + std::string(expected) + ", found " + quote_for_message(*text));
  }
  return text;
}

Status YamlReader::read_bool(const YamlEntry& entry, bool& out) const {
  static constexpr std::string_view kChoices[] = {"true",  "True",  "TRUE",
                                                  "false", "False", "FALSE"};
  auto text = one_of(entry, kChoices, "true or false");
  if (!text) return tl::unexpected<Error>(std::move(text.error()));
  out = text->front() == 't' || text->front() == 'T';
  return ok();
}

Result<std::vector<std::string>> YamlReader::scalar_list(const YamlEntry& entry,
                                                         std::string_view item_expected,
                                                         const YamlItemCheck& check,
                                                         std::size_t max_items) const {
  if (!entry.value.IsSequence()) {
    return fail(entry.line, entry.path,
                "expected a list of " + std::string(item_expected) + " (use [] for none), found " +
                    describe_node(entry.value));
  }
  std::vector<std::string> items;
  std::vector<int> lines;
  for (auto it = entry.value.begin(); it != entry.value.end(); ++it) {
    const YAML::Node item = *it;
    const std::size_t index = items.size();
    if (index >= max_items) {
      return fail(item.Mark().line, item_path(entry.path, index),
                  "too many entries (at most " + std::to_string(max_items) + ")");
    }
    if (!item.IsScalar()) {
      int line = item.IsNull() ? entry.line : item.Mark().line;
      return fail(line, item_path(entry.path, index),
                  "expected " + std::string(item_expected) + ", found " + describe_node(item));
    }
    items.push_back(item.Scalar());
    lines.push_back(item.Mark().line);
  }
  if (check) {
    for (std::size_t index = 0; index < items.size(); ++index) {
      if (Status st = check(items[index]); !st) {
        return fail(lines[index], item_path(entry.path, index), st.error());
      }
    }
  }
  return items;
}

Status YamlReader::expect_map(const YamlEntry& entry, std::string_view expected) const {
  if (entry.value.IsMap()) return ok();
  return fail(entry.line, entry.path,
              "expected " + std::string(expected) + ", found " + describe_node(entry.value));
}

}  // namespace corral
