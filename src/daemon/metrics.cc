#include "daemon/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace corral {
namespace {

// A mistake in the daemon's own metric definitions: stop with the reason.
[[noreturn]] void metrics_bug(const std::string& what) {
  std::fprintf(stderr, "corral: metrics registry: %s\n", what.c_str());
  std::abort();
}

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Appends `text` with the escapes of the exposition format: backslash and
// newline always, the double quote when `quote` (label values). A byte
// sequence that is not well-formed UTF-8 becomes U+FFFD, so the output is
// always valid UTF-8 whatever a label value holds.
void append_escaped(std::string& out, std::string_view text, bool quote) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c == '\\') {
        out.append("\\\\");
      } else if (c == '\n') {
        out.append("\\n");
      } else if (c == '"' && quote) {
        out.append("\\\"");
      } else {
        out.push_back(static_cast<char>(c));
      }
      ++i;
      continue;
    }
    // Length and valid range of the second byte (Unicode table 3-7).
    std::size_t len = 0;
    unsigned char lo = 0x80;
    unsigned char hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // no overlong forms
      if (c == 0xED) hi = 0x9F;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // no overlong forms
      if (c == 0xF4) hi = 0x8F;  // at most U+10FFFF
    }
    bool ok = len > 0 && i + len <= text.size();
    for (std::size_t k = 1; ok && k < len; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    }
    if (ok) {
      out.append(text.substr(i, len));
      i += len;
    } else {
      out.append(kReplacement);
      ++i;
    }
  }
}

// `a="x",b="y"` (no braces); empty for no labels.
std::string render_labels(const MetricLabels& labels) {
  std::string out;
  for (const auto& [name, value] : labels) {
    if (!out.empty()) out.push_back(',');
    out.append(name).append("=\"");
    append_escaped(out, value, true);
    out.push_back('"');
  }
  return out;
}

MetricLabels sorted(MetricLabels labels) {
  std::sort(labels.begin(), labels.end());
  return labels;
}

void append_sample(std::string& out, std::string_view name, std::string_view labels,
                   std::string_view extra_label, double value) {
  out.append(name);
  if (!labels.empty() || !extra_label.empty()) {
    out.push_back('{');
    out.append(labels);
    if (!labels.empty() && !extra_label.empty()) out.push_back(',');
    out.append(extra_label);
    out.push_back('}');
  }
  out.push_back(' ');
  out.append(format_metric_value(value));
  out.push_back('\n');
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string out;
  append_escaped(out, value, true);
  return out;
}

std::string escape_help(std::string_view help) {
  std::string out;
  append_escaped(out, help, false);
  return out;
}

std::string format_metric_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  if (res.ec != std::errc()) metrics_bug("to_chars failed");  // 64 bytes always suffice
  return std::string(buf, res.ptr);
}

// ---- Counter, Histogram ------------------------------------------------

void Counter::add(double amount) {
  if (!(amount >= 0)) return;  // negative or NaN: a counter never goes down
  value_.fetch_add(amount, std::memory_order_relaxed);
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      counts_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1)) {}

void Histogram::observe(double v) {
  if (std::isnan(v)) return;
  // The first bound with v <= le; past the end is the +Inf bucket.
  auto index = static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) -
                                        bounds_.begin());
  counts_[index].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot snap;
  snap.upper_bounds = bounds_;
  snap.cumulative.reserve(bounds_.size() + 1);
  std::uint64_t running = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    snap.cumulative.push_back(running);
  }
  snap.count = running;
  snap.sum = sum_.load(std::memory_order_relaxed);
  return snap;
}

// ---- MetricsRegistry ----------------------------------------------------

struct MetricsRegistry::Series {
  MetricLabels labels;         // as first registered
  MetricLabels sorted_labels;  // identity of the series
  std::string label_text;      // rendered once
  std::unique_ptr<Counter> counter;
  std::unique_ptr<Gauge> gauge;
  std::unique_ptr<Histogram> histogram;
  bool is_fn = false;        // registered by gauge_fn
  mutable std::mutex fn_mu;  // guards fn (replaced by a second gauge_fn)
  std::function<double()> fn;
};

struct MetricsRegistry::Family {
  std::string name;
  std::string help;
  Type type = Type::kCounter;
  std::vector<double> buckets;  // histograms
  std::vector<std::unique_ptr<Series>> series;
};

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

bool MetricsRegistry::valid_metric_name(std::string_view name) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = is_alpha(c) || c == '_' || c == ':' || (i > 0 && is_digit(c));
    if (!ok) return false;
  }
  return true;
}

bool MetricsRegistry::valid_label_name(std::string_view name) {
  if (name.empty() || name.starts_with("__")) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = is_alpha(c) || c == '_' || (i > 0 && is_digit(c));
    if (!ok) return false;
  }
  return true;
}

MetricsRegistry::Series& MetricsRegistry::series(std::string_view name, std::string_view help,
                                                 Type type, std::function<double()>* fn,
                                                 const MetricLabels& labels,
                                                 const std::vector<double>* buckets) {
  const std::string n(name);
  if (!valid_metric_name(name)) metrics_bug("invalid metric name \"" + n + "\"");
  MetricLabels key = sorted(labels);
  for (std::size_t i = 0; i < key.size(); ++i) {
    const std::string& label = key[i].first;
    if (!valid_label_name(label)) metrics_bug(n + ": invalid label name \"" + label + "\"");
    if (i > 0 && key[i - 1].first == label) metrics_bug(n + ": label \"" + label + "\" twice");
    if (type == Type::kHistogram && label == "le") {
      metrics_bug(n + ": a histogram can't have a label named le");
    }
  }

  std::lock_guard lock(mu_);
  Family* family = nullptr;
  for (auto& f : families_) {
    if (f->name == name) {
      family = f.get();
      continue;
    }
    // A histogram's name_bucket / name_sum / name_count belong to it.
    auto clashes = [](std::string_view hist, std::string_view other) {
      for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
        if (other.size() == hist.size() + suffix.size() && other.starts_with(hist) &&
            other.ends_with(suffix)) {
          return true;
        }
      }
      return false;
    };
    if ((f->type == Type::kHistogram && clashes(f->name, name)) ||
        (type == Type::kHistogram && clashes(name, f->name))) {
      metrics_bug(n + ": clashes with the samples of histogram " +
                  (f->type == Type::kHistogram ? f->name : n));
    }
  }
  if (family == nullptr) {
    auto created = std::make_unique<Family>();
    created->name = n;
    created->help = std::string(help);
    created->type = type;
    if (buckets != nullptr) created->buckets = *buckets;
    family = created.get();
    families_.push_back(std::move(created));
  } else {
    if (family->type != type) metrics_bug(n + ": registered again with another type");
    if (family->help != help) metrics_bug(n + ": registered again with another help text");
    if (buckets != nullptr && family->buckets != *buckets) {
      metrics_bug(n + ": registered again with other buckets");
    }
  }

  const bool callback = fn != nullptr;
  for (auto& s : family->series) {
    if (s->sorted_labels != key) continue;
    if (callback != s->is_fn) {
      metrics_bug(n + ": the same labels as a plain series and as a function");
    }
    if (callback) {
      std::lock_guard fn_lock(s->fn_mu);
      s->fn = std::move(*fn);
    }
    return *s;
  }
  auto s = std::make_unique<Series>();
  s->is_fn = callback;
  if (callback) s->fn = std::move(*fn);  // not yet visible to render()
  s->labels = labels;
  s->sorted_labels = std::move(key);
  s->label_text = render_labels(labels);
  switch (type) {
    case Type::kCounter:
      if (!callback) s->counter = std::make_unique<Counter>();
      break;
    case Type::kGauge:
      if (!callback) s->gauge = std::make_unique<Gauge>();
      break;
    case Type::kHistogram:
      s->histogram = std::make_unique<Histogram>(family->buckets);
      break;
  }
  family->series.push_back(std::move(s));
  return *family->series.back();
}

void MetricsRegistry::counter_fn(std::string_view name, std::string_view help,
                                 std::function<double()> fn, const MetricLabels& labels) {
  if (!fn) metrics_bug(std::string(name) + ": counter_fn without a function");
  series(name, help, Type::kCounter, &fn, labels, nullptr);
}

Counter& MetricsRegistry::counter(std::string_view name, std::string_view help,
                                  const MetricLabels& labels) {
  return *series(name, help, Type::kCounter, nullptr, labels, nullptr).counter;
}

Gauge& MetricsRegistry::gauge(std::string_view name, std::string_view help,
                              const MetricLabels& labels) {
  return *series(name, help, Type::kGauge, nullptr, labels, nullptr).gauge;
}

Histogram& MetricsRegistry::histogram(std::string_view name, std::string_view help,
                                      std::vector<double> buckets, const MetricLabels& labels) {
  if (!buckets.empty() && std::isinf(buckets.back()) && buckets.back() > 0) buckets.pop_back();
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    if (!std::isfinite(buckets[i])) {
      metrics_bug(std::string(name) + ": histogram bucket bounds must be finite");
    }
    if (i > 0 && !(buckets[i - 1] < buckets[i])) {
      metrics_bug(std::string(name) + ": histogram bucket bounds must increase strictly");
    }
  }
  return *series(name, help, Type::kHistogram, nullptr, labels, &buckets).histogram;
}

void MetricsRegistry::gauge_fn(std::string_view name, std::string_view help,
                               std::function<double()> fn, const MetricLabels& labels) {
  if (!fn) metrics_bug(std::string(name) + ": gauge_fn without a function");
  series(name, help, Type::kGauge, &fn, labels, nullptr);
}

std::string MetricsRegistry::render() const {
  // Take the structure under the lock; read values (and call gauge
  // functions) without it. Families and series are never removed, so the
  // pointers stay valid.
  std::vector<std::pair<const Family*, std::vector<const Series*>>> view;
  {
    std::lock_guard lock(mu_);
    view.reserve(families_.size());
    for (const auto& f : families_) {
      std::vector<const Series*> series;
      series.reserve(f->series.size());
      for (const auto& s : f->series) series.push_back(s.get());
      view.emplace_back(f.get(), std::move(series));
    }
  }

  std::string out;
  for (const auto& [family, series] : view) {
    if (series.empty()) continue;
    const std::string& name = family->name;
    if (!family->help.empty()) {
      out.append("# HELP ").append(name).push_back(' ');
      append_escaped(out, family->help, false);
      out.push_back('\n');
    }
    out.append("# TYPE ").append(name).push_back(' ');
    switch (family->type) {
      case Type::kCounter:
        out.append("counter\n");
        break;
      case Type::kGauge:
        out.append("gauge\n");
        break;
      case Type::kHistogram:
        out.append("histogram\n");
        break;
    }
    for (const Series* s : series) {
      if (s->counter) {
        append_sample(out, name, s->label_text, {}, s->counter->value());
      } else if (s->gauge) {
        append_sample(out, name, s->label_text, {}, s->gauge->value());
      } else if (s->histogram) {
        Histogram::Snapshot snap = s->histogram->snapshot();
        const std::string bucket = name + "_bucket";
        for (std::size_t i = 0; i < snap.cumulative.size(); ++i) {
          std::string le = "le=\"";
          le.append(i < snap.upper_bounds.size() ? format_metric_value(snap.upper_bounds[i])
                                                 : std::string("+Inf"));
          le.push_back('"');
          append_sample(out, bucket, s->label_text, le, static_cast<double>(snap.cumulative[i]));
        }
        append_sample(out, name + "_sum", s->label_text, {}, snap.sum);
        append_sample(out, name + "_count", s->label_text, {}, static_cast<double>(snap.count));
      } else {
        std::function<double()> fn;
        {
          std::lock_guard lock(s->fn_mu);
          fn = s->fn;
        }
        append_sample(out, name, s->label_text, {}, fn());
      }
    }
  }
  return out;
}

}  // namespace corral
