#include "daemon/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace corral {
namespace {

// ---- a strict reader of exposition format 0.0.4 --------------------------
// Parses render()'s output back, line by line, and fails the test at the
// first line that the format does not allow.

struct Sample {
  std::string name;
  MetricLabels labels;
  double value = 0;
};

struct Family {
  std::string name;
  std::optional<std::string> help;
  std::string type;
  std::vector<Sample> samples;
};

bool metric_name_ok(std::string_view s) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

bool label_name_ok(std::string_view s) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// Reverses the escapes; nullopt for an escape the format does not define.
std::optional<std::string> unescape(std::string_view s, bool quote_allowed) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out.push_back(s[i]);
      continue;
    }
    if (++i == s.size()) return std::nullopt;
    if (s[i] == '\\') {
      out.push_back('\\');
    } else if (s[i] == 'n') {
      out.push_back('\n');
    } else if (s[i] == '"' && quote_allowed) {
      out.push_back('"');
    } else {
      return std::nullopt;
    }
  }
  return out;
}

std::optional<double> parse_value(const std::string& s) {
  if (s == "+Inf") return HUGE_VAL;
  if (s == "-Inf") return -HUGE_VAL;
  if (s == "NaN") return std::nan("");
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80         ? 1
                      : (c >> 5) == 6  ? 2
                      : (c >> 4) == 14 ? 3
                      : (c >> 3) == 30 ? 4
                                       : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    }
    i += len;
  }
  return true;
}

// The family a sample name belongs to, given the family's type.
bool sample_belongs(const Family& f, const std::string& sample) {
  if (f.type != "histogram") return sample == f.name;
  return sample == f.name + "_bucket" || sample == f.name + "_sum" || sample == f.name + "_count";
}

// ASSERTs need a void function; parse_exposition() below wraps this.
void parse_into(const std::string& text, std::vector<Family>& families) {
  EXPECT_TRUE(valid_utf8(text));
  if (text.empty()) return;
  EXPECT_EQ(text.back(), '\n') << "the last line must end with a newline";
  std::set<std::string> declared;
  std::set<std::string> seen_series;
  std::size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    SCOPED_TRACE("line " + std::to_string(line_no) + ": " + line);
    EXPECT_FALSE(line.empty()) << "no empty lines";

    if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
      const bool help = line[2] == 'H';
      std::string rest = line.substr(7);
      std::size_t sp = rest.find(' ');
      EXPECT_NE(sp, std::string::npos);
      if (sp == std::string::npos) continue;
      std::string name = rest.substr(0, sp);
      std::string payload = rest.substr(sp + 1);
      EXPECT_TRUE(metric_name_ok(name)) << name;
      if (families.empty() || families.back().name != name) {
        EXPECT_TRUE(declared.insert(name).second) << "HELP/TYPE of " << name << " twice";
        families.push_back(Family{name, std::nullopt, "", {}});
      }
      Family& f = families.back();
      EXPECT_TRUE(f.samples.empty()) << "HELP/TYPE after samples";
      if (help) {
        EXPECT_FALSE(f.help.has_value()) << "second HELP";
        EXPECT_TRUE(f.type.empty()) << "HELP after TYPE";
        auto text_help = unescape(payload, false);
        EXPECT_TRUE(text_help.has_value()) << "bad escape in HELP";
        f.help = text_help.value_or("");
      } else {
        EXPECT_TRUE(f.type.empty()) << "second TYPE";
        static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary",
                                                     "untyped"};
        EXPECT_TRUE(kTypes.count(payload)) << payload;
        f.type = payload;
      }
      continue;
    }
    EXPECT_NE(line.front(), '#') << "unknown comment line";

    // name{labels} value
    Sample s;
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    EXPECT_TRUE(metric_name_ok(s.name)) << s.name;
    std::set<std::string> label_names;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        std::size_t eq = line.find('=', i);
        ASSERT_NE(eq, std::string::npos);
        std::string label = line.substr(i, eq - i);
        EXPECT_TRUE(label_name_ok(label)) << label;
        EXPECT_TRUE(label_names.insert(label).second) << "label twice: " << label;
        ASSERT_LT(eq + 1, line.size());
        ASSERT_EQ(line[eq + 1], '"');
        std::size_t j = eq + 2;
        std::string raw;
        while (j < line.size() && line[j] != '"') {
          if (line[j] == '\\' && j + 1 < line.size()) raw.push_back(line[j++]);
          raw.push_back(line[j++]);
        }
        ASSERT_LT(j, line.size()) << "unterminated label value";
        auto value = unescape(raw, true);
        EXPECT_TRUE(value.has_value()) << "bad escape in label value";
        s.labels.emplace_back(label, value.value_or(""));
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ASSERT_LT(i, line.size());
      ++i;  // '}'
    }
    ASSERT_LT(i, line.size());
    ASSERT_EQ(line[i], ' ');
    std::string value_text = line.substr(i + 1);
    EXPECT_EQ(value_text.find(' '), std::string::npos) << "no timestamps here";
    auto value = parse_value(value_text);
    EXPECT_TRUE(value.has_value()) << value_text;
    s.value = value.value_or(0);

    EXPECT_FALSE(families.empty()) << "a sample before any TYPE";
    if (families.empty()) continue;
    Family& f = families.back();
    EXPECT_FALSE(f.type.empty()) << "a sample before its TYPE";
    EXPECT_TRUE(sample_belongs(f, s.name)) << s.name << " inside family " << f.name;
    std::string id = s.name;
    for (const auto& [k, v] : s.labels) id += "|" + k + "=" + v;
    EXPECT_TRUE(seen_series.insert(id).second) << "series twice";
    f.samples.push_back(std::move(s));
  }
}

std::vector<Family> parse_exposition(const std::string& text) {
  std::vector<Family> families;
  parse_into(text, families);
  return families;
}

std::optional<std::string> label(const Sample& s, std::string_view name) {
  for (const auto& [k, v] : s.labels) {
    if (k == name) return v;
  }
  return std::nullopt;
}

MetricLabels without(const MetricLabels& labels, std::string_view name) {
  MetricLabels out;
  for (const auto& kv : labels) {
    if (kv.first != name) out.push_back(kv);
  }
  return out;
}

// Checks a histogram family: per series, buckets in increasing `le` ending
// in +Inf, cumulative counts, then _sum and _count with count == +Inf.
void check_histogram(const Family& f) {
  ASSERT_EQ(f.type, "histogram");
  std::map<MetricLabels, std::vector<const Sample*>> by_series;
  for (const Sample& s : f.samples) {
    MetricLabels key = s.name == f.name + "_bucket" ? without(s.labels, "le") : s.labels;
    by_series[key].push_back(&s);
  }
  for (const auto& [labels, samples] : by_series) {
    ASSERT_GE(samples.size(), 3u);
    double previous_le = -HUGE_VAL;
    double previous_count = 0;
    std::size_t i = 0;
    for (; i < samples.size() && samples[i]->name == f.name + "_bucket"; ++i) {
      auto le_text = label(*samples[i], "le");
      ASSERT_TRUE(le_text.has_value());
      auto le = parse_value(*le_text);
      ASSERT_TRUE(le.has_value()) << *le_text;
      EXPECT_GT(*le, previous_le);
      EXPECT_GE(samples[i]->value, previous_count) << "buckets must be cumulative";
      previous_le = *le;
      previous_count = samples[i]->value;
    }
    EXPECT_TRUE(std::isinf(previous_le) && previous_le > 0) << "last bucket must be +Inf";
    ASSERT_EQ(samples.size(), i + 2);
    EXPECT_EQ(samples[i]->name, f.name + "_sum");
    EXPECT_EQ(samples[i + 1]->name, f.name + "_count");
    EXPECT_EQ(samples[i + 1]->value, previous_count) << "_count must equal the +Inf bucket";
  }
}

const Family* find(const std::vector<Family>& families, std::string_view name) {
  for (const Family& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// ---- tests ---------------------------------------------------------------

TEST(Metrics, EmptyRegistryRendersNothing) {
  MetricsRegistry reg;
  EXPECT_EQ(reg.render(), "");
}

TEST(Metrics, CounterAndGaugeExactText) {
  MetricsRegistry reg;
  reg.counter("corral_requests_total", "HTTP requests.", {{"code", "200"}}).inc();
  reg.counter("corral_requests_total", "HTTP requests.", {{"code", "404"}}).add(2);
  reg.counter("corral_requests_total", "HTTP requests.", {{"code", "200"}}).inc();
  Gauge& g = reg.gauge("corral_live", "Live sandboxes.");
  g.set(5);
  g.dec();
  g.inc(0.5);
  EXPECT_EQ(reg.render(),
            "# HELP corral_requests_total HTTP requests.\n"
            "# TYPE corral_requests_total counter\n"
            "corral_requests_total{code=\"200\"} 2\n"
            "corral_requests_total{code=\"404\"} 2\n"
            "# HELP corral_live Live sandboxes.\n"
            "# TYPE corral_live gauge\n"
            "corral_live 4.5\n");
  parse_exposition(reg.render());
}

TEST(Metrics, SameNameDifferentLabelsShareHelpAndType) {
  MetricsRegistry reg;
  for (const char* r : {"ok", "failed", "refused"}) {
    reg.counter("corral_creates_total", "Creates.", {{"result", r}, {"image", "deb"}}).inc();
  }
  reg.counter("corral_other_total", "Other.").inc();
  auto families = parse_exposition(reg.render());
  ASSERT_EQ(families.size(), 2u);
  EXPECT_EQ(families[0].name, "corral_creates_total");
  EXPECT_EQ(families[0].samples.size(), 3u);
  EXPECT_EQ(families[0].help, "Creates.");
  EXPECT_EQ(families[0].type, "counter");
  EXPECT_EQ(families[1].samples.size(), 1u);
}

TEST(Metrics, RegistrationIsGetOrCreate) {
  MetricsRegistry reg;
  Counter& a = reg.counter("c_total", "C.", {{"a", "1"}, {"b", "2"}});
  Counter& b = reg.counter("c_total", "C.", {{"b", "2"}, {"a", "1"}});  // other order
  Counter& c = reg.counter("c_total", "C.", {{"a", "1"}, {"b", "3"}});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &c);
  Histogram& h1 = reg.histogram("h", "H.", {1, 2});
  Histogram& h2 = reg.histogram("h", "H.", {1, 2});
  EXPECT_EQ(&h1, &h2);
  // Labels render in the order of the first registration.
  EXPECT_NE(reg.render().find("c_total{a=\"1\",b=\"2\"} 0\n"), std::string::npos);
}

TEST(Metrics, CounterIgnoresNegativeAndNaN) {
  MetricsRegistry reg;
  Counter& c = reg.counter("c_total", "C.");
  c.add(3);
  c.add(-1);
  c.add(std::nan(""));
  c.add(0.25);
  EXPECT_DOUBLE_EQ(c.value(), 3.25);
}

TEST(Metrics, LabelValuesAndHelpAreEscaped) {
  MetricsRegistry reg;
  const std::string nasty = "a\\b\"c\nd}e,f=g";
  reg.counter("esc_total", "Help with \\ backslash\nand newline \"quotes\" kept.",
              {{"v", nasty}, {"empty", ""}})
      .inc();
  const std::string text = reg.render();
  EXPECT_NE(text.find("# HELP esc_total Help with \\\\ backslash\\nand newline \"quotes\" kept.\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("v=\"a\\\\b\\\"c\\nd}e,f=g\""), std::string::npos) << text;
  auto families = parse_exposition(text);
  ASSERT_EQ(families.size(), 1u);
  EXPECT_EQ(families[0].help, "Help with \\ backslash\nand newline \"quotes\" kept.");
  ASSERT_EQ(families[0].samples.size(), 1u);
  EXPECT_EQ(label(families[0].samples[0], "v"), nasty);
  EXPECT_EQ(label(families[0].samples[0], "empty"), "");
}

TEST(Metrics, InvalidUtf8BecomesReplacementCharacter) {
  EXPECT_EQ(escape_label_value("ok \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "ok \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  EXPECT_EQ(escape_label_value("a\xFF"
                               "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(escape_label_value("\xC3"), "\xEF\xBF\xBD");                  // cut short
  EXPECT_EQ(escape_label_value("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong
  EXPECT_EQ(escape_label_value("\xED\xA0\x80"),                           // surrogate
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(escape_help("\xF4\x90\x80\x80"),  // > U+10FFFF
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  MetricsRegistry reg;
  reg.gauge("g", "bad \xFE help", {{"l", "bad \x80 value"}}).set(1);
  parse_exposition(reg.render());  // checks the whole output is UTF-8
}

TEST(Metrics, HistogramBucketsSumCount) {
  MetricsRegistry reg;
  Histogram& h = reg.histogram("corral_start_seconds", "Start time.", {0.01, 0.1, 1});
  for (double v : {0.005, 0.01, 0.05, 0.1, 0.5, 2.0}) h.observe(v);
  h.observe(HUGE_VAL);      // counted in +Inf only
  h.observe(std::nan(""));  // ignored
  const std::string text = reg.render();
  const std::string expected_buckets =
      "corral_start_seconds_bucket{le=\"0.01\"} 2\n"
      "corral_start_seconds_bucket{le=\"0.1\"} 4\n"
      "corral_start_seconds_bucket{le=\"1\"} 5\n"
      "corral_start_seconds_bucket{le=\"+Inf\"} 7\n"
      "corral_start_seconds_sum +Inf\n"
      "corral_start_seconds_count 7\n";
  EXPECT_NE(text.find("# TYPE corral_start_seconds histogram\n" + expected_buckets),
            std::string::npos)
      << text;
  auto families = parse_exposition(text);
  ASSERT_EQ(families.size(), 1u);
  check_histogram(families[0]);
}

TEST(Metrics, HistogramWithLabelsAndTrailingInf) {
  MetricsRegistry reg;
  const std::vector<double> buckets = {0.5, 1, HUGE_VAL};
  Histogram& a = reg.histogram("exec_seconds", "Exec.", buckets, {{"result", "ok"}});
  Histogram& b = reg.histogram("exec_seconds", "Exec.", buckets, {{"result", "timeout"}});
  a.observe(0.25);
  a.observe(0.75);
  b.observe(30);
  Histogram::Snapshot snap = a.snapshot();
  EXPECT_EQ(snap.upper_bounds, (std::vector<double>{0.5, 1}));
  EXPECT_EQ(snap.cumulative, (std::vector<std::uint64_t>{1, 2, 2}));
  EXPECT_DOUBLE_EQ(snap.sum, 1.0);
  EXPECT_EQ(snap.count, 2u);
  const std::string text = reg.render();
  EXPECT_NE(text.find("exec_seconds_bucket{result=\"ok\",le=\"0.5\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("exec_seconds_bucket{result=\"timeout\",le=\"+Inf\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("exec_seconds_sum{result=\"timeout\"} 30\n"), std::string::npos);
  auto families = parse_exposition(text);
  ASSERT_EQ(families.size(), 1u);
  EXPECT_EQ(std::count(text.begin(), text.end(), '#'), 2);  // one HELP, one TYPE
  check_histogram(families[0]);
}

TEST(Metrics, GaugeFunctionEvaluatedAtRenderTime) {
  MetricsRegistry reg;
  double live = 3;
  reg.gauge_fn("corral_live", "Live.", [&] { return live; });
  reg.gauge_fn("corral_pool", "Pool.", [] { return 1.0; }, {{"image", "deb"}});
  EXPECT_NE(reg.render().find("corral_live 3\n"), std::string::npos);
  live = 7;
  EXPECT_NE(reg.render().find("corral_live 7\n"), std::string::npos);
  // A second registration replaces the function.
  reg.gauge_fn("corral_live", "Live.", [] { return 42.0; });
  const std::string text = reg.render();
  EXPECT_NE(text.find("corral_live 42\n"), std::string::npos);
  EXPECT_NE(text.find("corral_pool{image=\"deb\"} 1\n"), std::string::npos);
  parse_exposition(text);
}

TEST(Metrics, GaugeFunctionMayUseTheRegistry) {
  // Called outside the registry's lock: it may read and even register.
  MetricsRegistry reg;
  Counter& c = reg.counter("c_total", "C.");
  c.add(5);
  reg.gauge_fn("twice_c", "Twice c.", [&] {
    reg.counter("from_callback_total", "Registered while rendering.").inc();
    return 2 * reg.counter("c_total", "C.").value();
  });
  EXPECT_NE(reg.render().find("twice_c 10\n"), std::string::npos);
  EXPECT_NE(reg.render().find("from_callback_total"), std::string::npos);
}

TEST(Metrics, ValuesFormat) {
  EXPECT_EQ(format_metric_value(0), "0");
  EXPECT_EQ(format_metric_value(42), "42");
  EXPECT_EQ(format_metric_value(-3.5), "-3.5");
  EXPECT_EQ(format_metric_value(0.1), "0.1");
  EXPECT_EQ(format_metric_value(9007199254740993.0), "9007199254740992");
  EXPECT_EQ(format_metric_value(1e21), "1e+21");
  EXPECT_EQ(format_metric_value(HUGE_VAL), "+Inf");
  EXPECT_EQ(format_metric_value(-HUGE_VAL), "-Inf");
  EXPECT_EQ(format_metric_value(std::nan("")), "NaN");
  for (double v : {0.1, 1.0 / 3, 123456.789, 5e-324, 1.7976931348623157e308}) {
    EXPECT_EQ(std::strtod(format_metric_value(v).c_str(), nullptr), v);
  }
}

TEST(Metrics, NameRules) {
  for (const char* ok : {"a", "_a", ":a", "corral_sandboxes_total", "a:b_c9", "A"}) {
    EXPECT_TRUE(MetricsRegistry::valid_metric_name(ok)) << ok;
  }
  for (const char* bad : {"", "9a", "a-b", "a b", "a.b", "é", "a{"}) {
    EXPECT_FALSE(MetricsRegistry::valid_metric_name(bad)) << bad;
  }
  for (const char* ok : {"a", "_a", "image", "le", "a9"}) {
    EXPECT_TRUE(MetricsRegistry::valid_label_name(ok)) << ok;
  }
  for (const char* bad : {"", "9a", "a:b", "__name__", "__x", "a-b"}) {
    EXPECT_FALSE(MetricsRegistry::valid_label_name(bad)) << bad;
  }
}

TEST(MetricsDeathTest, DefinitionMistakesAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  MetricsRegistry reg;
  reg.counter("c_total", "C.");
  reg.histogram("h", "H.", {1, 2});
  EXPECT_DEATH(reg.counter("bad-name", "X."), "invalid metric name");
  EXPECT_DEATH(reg.counter("x_total", "X.", {{"bad-label", "v"}}), "invalid label name");
  EXPECT_DEATH(reg.counter("x_total", "X.", {{"a", "1"}, {"a", "2"}}), "twice");
  EXPECT_DEATH(reg.gauge("c_total", "C."), "another type");
  EXPECT_DEATH(reg.counter("c_total", "Other help."), "another help");
  EXPECT_DEATH(reg.histogram("h", "H.", {1, 3}), "other buckets");
  EXPECT_DEATH(reg.histogram("h2", "H.", {2, 1}), "increase strictly");
  EXPECT_DEATH(reg.histogram("h3", "H.", {std::nan("")}), "finite");
  EXPECT_DEATH(reg.histogram("h4", "H.", {1}, {{"le", "x"}}), "label named le");
  EXPECT_DEATH(reg.counter("h_count", "X."), "clashes");
  EXPECT_DEATH(reg.gauge_fn("f", "F.", nullptr), "without a function");
  reg.gauge("g", "G.", {{"a", "1"}});
  EXPECT_DEATH(reg.gauge_fn("g", "G.", [] { return 1.0; }, {{"a", "1"}}), "as a function");
}

TEST(Metrics, ConcurrentUpdatesRegistrationAndRender) {
  MetricsRegistry reg;
  constexpr int kThreads = 8;
  constexpr int kIterations = 20000;
  Counter& shared = reg.counter("shared_total", "Shared.");
  Gauge& gauge = reg.gauge("gauge", "Gauge.");
  Histogram& hist = reg.histogram("lat", "Latency.", {1, 10, 100});
  std::atomic<bool> stop{false};
  std::thread renderer([&] {
    while (!stop.load()) {
      auto families = parse_exposition(reg.render());
      for (const Family& f : families) {
        if (f.type == "histogram") check_histogram(f);
      }
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIterations; ++i) {
        shared.inc();
        gauge.inc();
        hist.observe(i % 200);
        if (i % 1000 == 0) {
          reg.counter("per_thread_total", "Per thread.", {{"t", std::to_string(t)}}).inc();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  stop = true;
  renderer.join();
  EXPECT_DOUBLE_EQ(shared.value(), kThreads * kIterations);
  EXPECT_DOUBLE_EQ(gauge.value(), kThreads * kIterations);
  Histogram::Snapshot snap = hist.snapshot();
  EXPECT_EQ(snap.count, static_cast<std::uint64_t>(kThreads * kIterations));
  // i % 200 in 0..199: 2 values <= 1, 11 <= 10, 101 <= 100 per 200.
  EXPECT_EQ(snap.cumulative[0], static_cast<std::uint64_t>(kThreads * kIterations / 200 * 2));
  EXPECT_EQ(snap.cumulative[1], static_cast<std::uint64_t>(kThreads * kIterations / 200 * 11));
  EXPECT_EQ(snap.cumulative[2], static_cast<std::uint64_t>(kThreads * kIterations / 200 * 101));
  auto families = parse_exposition(reg.render());
  const Family* per_thread = find(families, "per_thread_total");
  ASSERT_NE(per_thread, nullptr);
  EXPECT_EQ(per_thread->samples.size(), static_cast<std::size_t>(kThreads));
  for (const Sample& s : per_thread->samples) EXPECT_EQ(s.value, kIterations / 1000);
}

}  // namespace
}  // namespace corral
