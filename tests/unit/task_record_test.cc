// The task record (REQUIREMENTS.md D6): status and stage names, the
// transition table against the edges the docs promise, and
// first_differing_field on a class of cases and on random documents
// against a reference written another way.
#include "store/task_record.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "store/state_store.h"
#include "task_test_support.h"

namespace corral {
namespace {

using namespace task_test;  // NOLINT(google-build-using-namespace): the tests' helpers

// ---- the record: names and the transition table ----

TEST(TaskRecordTest, NamesRoundTripAndUnknownNamesAreRefused) {
  std::set<std::string_view> names;
  for (T s : kAllTaskStatuses) {
    EXPECT_EQ(parse_task_status(task_status_name(s)), s);
    names.insert(task_status_name(s));
  }
  EXPECT_EQ(names.size(), kAllTaskStatuses.size());
  for (std::string_view bad : {"", "Queued", "done", "timed-out", "queued ", "none"}) {
    EXPECT_FALSE(parse_task_status(bad)) << bad;
  }
  for (std::string_view bad : {"", "Create", "running", "exec", "done ", "queued"}) {
    EXPECT_FALSE(parse_task_stage(bad)) << bad;
  }
  for (std::string_view stage : {"none", "create", "initialize", "execute", "collect", "snapshot",
                                 "destroy", "cleanup", "done"}) {
    auto s = parse_task_stage(stage);
    ASSERT_TRUE(s) << stage;
    EXPECT_EQ(task_stage_name(*s), stage);
  }
  EXPECT_FALSE(is_finished(T::kQueued));
  EXPECT_FALSE(is_finished(T::kRunning));
  for (T s : {T::kSucceeded, T::kFailed, T::kTimedOut, T::kCancelled}) EXPECT_TRUE(is_finished(s));
}

// The edges the docs promise (docs/tasks.md), written out again here.
const std::set<std::pair<T, T>> kExpectedEdges = {
    {T::kQueued, T::kRunning},    {T::kQueued, T::kCancelled}, {T::kQueued, T::kFailed},
    {T::kRunning, T::kSucceeded}, {T::kRunning, T::kFailed},   {T::kRunning, T::kTimedOut},
    {T::kRunning, T::kCancelled}, {T::kFailed, T::kQueued},    {T::kRunning, T::kQueued},
};

TEST(TaskRecordTest, TransitionTableIsExactlyTheDocumentedEdges) {
  std::set<std::pair<T, T>> table;
  for (const TaskTransitionEdge& e : task_transition_table()) {
    EXPECT_TRUE(table.insert({e.from, e.to}).second) << "duplicate edge";
    EXPECT_FALSE(e.why.empty());
  }
  EXPECT_EQ(table, kExpectedEdges);
  for (T from : kAllTaskStatuses) {
    for (T to : kAllTaskStatuses) {
      EXPECT_EQ(task_transition_allowed(from, to), kExpectedEdges.count({from, to}) == 1)
          << task_status_name(from) << " -> " << task_status_name(to);
    }
  }
  // Nothing leaves succeeded, timed_out or cancelled; failed only by a retry.
  for (T to : kAllTaskStatuses) {
    EXPECT_FALSE(task_transition_allowed(T::kSucceeded, to));
    EXPECT_FALSE(task_transition_allowed(T::kTimedOut, to));
    EXPECT_FALSE(task_transition_allowed(T::kCancelled, to));
  }
}

// ---- first_differing_field ----

TEST(FirstDifferingField, NamesThePathOfTheFirstDifference) {
  struct Case {
    const char* a;
    const char* b;
    const char* want;
  };
  const Case cases[] = {
      // Equal, however spelled.
      {R"({"a":1,"b":[1,{"c":null}]})", R"( { "b" : [ 1 , { "c" : null } ] , "a" : 1 } )", ""},
      {"[]", "[ ]", ""},
      {"\"x\"", "\"x\"", ""},
      // Scalars at the root, and a root of another type.
      {"1", "2", "(document)"},
      {"{}", "[]", "(document)"},
      {"null", "{}", "(document)"},
      // Types and number spellings that differ in canonical form.
      {R"({"n":1})", R"({"n":1.0})", "n"},
      {R"({"n":1})", R"({"n":"1"})", "n"},
      {R"({"n":true})", R"({"n":1})", "n"},
      {R"({"n":null})", R"({})", "n"},
      {R"({"n":[]})", R"({"n":{}})", "n"},
      // -0 is 0 in canonical form too: the same request.
      {R"({"n":-0})", R"({"n":0})", ""},
      // Missing and extra keys, at any depth; sorted order decides.
      {R"({"b":1})", R"({"a":1,"b":1})", "a"},
      {R"({"a":{"x":1}})", R"({"a":{"x":1,"y":2}})", "a.y"},
      {R"({"a":{"y":1},"b":2})", R"({"a":{"y":1},"b":3})", "b"},
      {R"({"a":{"y":1},"b":2})", R"({"a":{"y":2},"b":3})", "a.y"},
      // Arrays: element by element, then the first element one lacks.
      {"[1,2]", "[1,2,3]", "[2]"},
      {"[1,2,3]", "[1,5]", "[1]"},
      {R"({"m":[[1,2],[3]]})", R"({"m":[[1,2],[3,4]]})", "m[1][1]"},
      {R"({"o":[{"p":"/a","s":1}]})", R"({"o":[{"p":"/a","s":2}]})", "o[0].s"},
      // Keys that are not plain names are quoted.
      {R"({"env":{"A.B":"1"}})", R"({"env":{"A.B":"2"}})", R"(env["A.B"])"},
      {R"({"a b":1})", R"({"a b":2})", R"(["a b"])"},
      {R"({"":1})", R"({"":2})", R"([""])"},
      {R"({"q\"":1})", R"({"q\"":2})", R"(["q\""])"},
      {R"({"ü":1})", R"({"ü":2})", R"(["\u00fc"])"},
      {"{\"\x7f\":1}", "{\"\x7f\":2}", R"(["\u007f"])"},
      {R"({"x":{"[0]":1}})", R"({"x":{"[0]":2}})", R"(x["[0]"])"},
      // Not JSON.
      {"{", "{}", "(document)"},
      {"{}", "", "(document)"},
      {"", "", "(document)"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(first_differing_field(c.a, c.b), c.want) << c.a << " vs " << c.b;
    EXPECT_EQ(first_differing_field(c.b, c.a), c.want) << c.b << " vs " << c.a;
  }
}

// A reference written another way: each document flattened into a map from
// path (a list of keys and indices) to what is there (a leaf's canonical
// text, or the kind of a container); the answer is the smallest path whose
// entries differ.
using Step = std::variant<std::size_t, std::string>;  // index, or key
using Flat = std::map<std::vector<Step>, std::string>;

void flatten(const nlohmann::json& j, std::vector<Step>& path, Flat& out) {
  if (j.is_object()) {
    out[path] = "{object}";
    for (const auto& item : j.items()) {
      path.emplace_back(item.key());
      flatten(item.value(), path, out);
      path.pop_back();
    }
  } else if (j.is_array()) {
    out[path] = "{array}";
    for (std::size_t i = 0; i < j.size(); ++i) {
      path.emplace_back(i);
      flatten(j[i], path, out);
      path.pop_back();
    }
  } else {
    out[path] = j.dump();
  }
}

std::string render(const std::vector<Step>& path) {
  if (path.empty()) return "(document)";
  static const std::regex kPlain("[A-Za-z0-9_-]+");
  std::string out;
  for (const Step& step : path) {
    if (const auto* i = std::get_if<std::size_t>(&step)) {
      out += "[" + std::to_string(*i) + "]";
    } else {
      const std::string& key = std::get<std::string>(step);
      if (std::regex_match(key, kPlain)) {
        out += (out.empty() ? "" : ".") + key;
      } else {
        out += "[" + nlohmann::json(key).dump(-1, ' ', /*ensure_ascii=*/true) + "]";
      }
    }
  }
  return out;
}

std::string reference_difference(const std::string& a_text, const std::string& b_text) {
  Flat a;
  Flat b;
  std::vector<Step> path;
  flatten(nlohmann::json::parse(a_text), path, a);
  flatten(nlohmann::json::parse(b_text), path, b);
  std::optional<std::vector<Step>> first;
  auto consider = [&](const std::vector<Step>& p) {
    if (!first || p < *first) first = p;
  };
  for (const auto& [p, v] : a) {
    auto it = b.find(p);
    if (it == b.end() || it->second != v) consider(p);
  }
  for (const auto& [p, v] : b) {
    if (a.find(p) == a.end()) consider(p);
  }
  return first ? render(*first) : "";
}

class RandomJson {
 public:
  explicit RandomJson(std::uint32_t seed) : rng_(seed) {}

  nlohmann::json value(int depth) {
    int kind = pick(depth > 0 ? 8 : 5);
    switch (kind) {
      case 0:
        return nullptr;
      case 1:
        return pick(2) == 0;
      case 2:
        return pick(3) == 0 ? nlohmann::json(1.0) : nlohmann::json(pick(3) - 1);
      case 3:
      case 4:
        return key();
      case 5:
      case 6: {
        nlohmann::json o = nlohmann::json::object();
        for (int i = pick(4); i > 0; --i) o[key()] = value(depth - 1);
        return o;
      }
      default: {
        nlohmann::json a = nlohmann::json::array();
        for (int i = pick(4); i > 0; --i) a.push_back(value(depth - 1));
        return a;
      }
    }
  }

  // One small change somewhere in `j`: a leaf replaced, a key added or
  // removed, an element added or removed.
  void mutate(nlohmann::json& j, int depth) {
    if (j.is_object() && !j.empty() && pick(3) != 0) {
      auto it = j.begin();
      std::advance(it, pick(static_cast<int>(j.size())));
      switch (pick(4)) {
        case 0:
          j.erase(it);
          return;
        case 1:
          j[key()] = value(1);
          return;
        default:
          mutate(it.value(), depth + 1);
          return;
      }
    }
    if (j.is_array() && !j.empty() && pick(3) != 0) {
      std::size_t i = static_cast<std::size_t>(pick(static_cast<int>(j.size())));
      switch (pick(4)) {
        case 0:
          j.erase(i);
          return;
        case 1:
          j.push_back(value(1));
          return;
        default:
          mutate(j[i], depth + 1);
          return;
      }
    }
    j = value(2);
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  std::string key() {
    static const char* const kKeys[] = {"a", "b", "B", "path", "A.B", "x y",
                                        "",  "0", "é", "a-b",  "\x7f"};
    return kKeys[pick(11)];
  }
  std::mt19937 rng_;
};

TEST(FirstDifferingField, AgreesWithAReferenceOnRandomDocuments) {
  RandomJson gen(20261202);
  int differing = 0;
  for (int n = 0; n < 4000; ++n) {
    nlohmann::json a = gen.value(4);
    nlohmann::json b = a;
    if (n % 5 == 0) {
      b = gen.value(4);  // unrelated
    } else {
      for (int k = n % 3; k >= 0; --k) gen.mutate(b, 0);
    }
    // Spelled differently from the canonical form: indented.
    std::string at = a.dump(2);
    std::string bt = b.dump();
    std::string got = first_differing_field(at, bt);
    ASSERT_EQ(got, reference_difference(at, bt)) << at << "\nvs\n" << bt;
    ASSERT_EQ(got, first_differing_field(bt, at));
    // Empty exactly when the canonical forms (what submit_task compares) are equal.
    ASSERT_EQ(got.empty(), a.dump() == b.dump()) << at << "\nvs\n" << bt;
    if (!got.empty()) ++differing;
  }
  EXPECT_GT(differing, 3000) << "the mutations rarely changed anything; the test proves little";
}

}  // namespace
}  // namespace corral

namespace corral {
namespace {

// The comparison recurses once per level: documents nested deeper than it
// takes are never equal and never parsed (a request's own reader stops at
// 32 levels long before).
TEST(FirstDiffDepth, DocumentsDeeperThanTheBoundAreRefusedWhole) {
  auto nested = [](int levels) { return std::string(levels, '[') + std::string(levels, ']'); };
  EXPECT_EQ(nesting_depth(nested(kMaxCompareDepth)), kMaxCompareDepth);
  EXPECT_EQ(nesting_depth(R"({"a":"[[[[","b":[1]})"), 2) << "brackets in strings do not count";
  EXPECT_EQ(first_differing_field(nested(kMaxCompareDepth), nested(kMaxCompareDepth)), "");
  EXPECT_EQ(first_differing_field(nested(kMaxCompareDepth + 1), nested(kMaxCompareDepth + 1)),
            "(document)");
  EXPECT_EQ(first_differing_field(nested(100000), "{}"), "(document)");
}

}  // namespace
}  // namespace corral
