// MetricsRegistry: the daemon's metrics (C3), rendered in the Prometheus
// text exposition format 0.0.4 for GET /metrics. Our own small code, no
// client library.
//
// A metric is a family (name, help, type) with one series per label set:
//
//   MetricsRegistry reg;
//   Counter& created = reg.counter("corral_sandboxes_created_total",
//                                  "Sandboxes created.", {{"result", "ok"}});
//   created.inc();
//   Histogram& start = reg.histogram("corral_cold_start_seconds", "Cold start time.",
//                                    {0.01, 0.05, 0.1, 0.5, 1});
//   start.observe(0.032);
//   reg.gauge_fn("corral_sandboxes_live", "Live sandboxes.", [&] { return live(); });
//   std::string text = reg.render();
//
// Registering is get-or-create: the same name and label set give the same
// object, so callers may keep the reference (it lives as long as the
// registry) or look it up again. Series of one name share the HELP and
// TYPE lines. Updates are lock-free atomics; registering and rendering take
// the registry's mutex. Gauge callbacks run during render(), outside the
// registry's mutex, so they may read other metrics; they must be cheap.
//
// Names, label names, a second registration of a name with another type or
// help text, and bad histogram buckets are the daemon's own code, not user
// input: getting them wrong is a bug, and the registry aborts with a
// message. Label values may be anything (user-chosen image names...): they
// are escaped, and bytes that are not UTF-8 become U+FFFD.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace corral {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// Only goes up. inc()/add() of a negative or NaN amount is ignored.
class Counter {
 public:
  void inc() { add(1.0); }
  void add(double amount);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void inc(double amount = 1.0) { value_.fetch_add(amount, std::memory_order_relaxed); }
  void dec(double amount = 1.0) { value_.fetch_sub(amount, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Cumulative buckets with upper bounds `le` (a value v falls in every bucket
// with v <= le), plus the implicit +Inf bucket. Observations are a few
// relaxed atomic adds; a render that runs concurrently may see an
// observation in _sum before _count, never a _count different from the
// +Inf bucket (both come from the same per-bucket counts).
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // validated by the registry

  // NaN observations are ignored.
  void observe(double v);

  struct Snapshot {
    std::vector<double> upper_bounds;       // without +Inf
    std::vector<std::uint64_t> cumulative;  // one per bound, then +Inf
    double sum = 0;
    std::uint64_t count = 0;  // == cumulative.back()
  };
  Snapshot snapshot() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;  // per bucket, not cumulative; +Inf last
  std::atomic<double> sum_{0.0};
};

class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  Counter& counter(std::string_view name, std::string_view help, const MetricLabels& labels = {});
  Gauge& gauge(std::string_view name, std::string_view help, const MetricLabels& labels = {});
  // `buckets`: finite, strictly increasing upper bounds; a trailing +Inf is
  // allowed and dropped (it is always there). Series of one histogram name
  // must use the same buckets.
  Histogram& histogram(std::string_view name, std::string_view help, std::vector<double> buckets,
                       const MetricLabels& labels = {});
  // A gauge read at render time. Registering the same name and labels again
  // replaces the function.
  void gauge_fn(std::string_view name, std::string_view help, std::function<double()> fn,
                const MetricLabels& labels = {});
  // A counter kept elsewhere (a subsystem's own tally), read at render
  // time; `fn` must never decrease.
  void counter_fn(std::string_view name, std::string_view help, std::function<double()> fn,
                  const MetricLabels& labels = {});

  // The exposition text (Content-Type: text/plain; version=0.0.4;
  // charset=utf-8), families in registration order, series in registration
  // order within a family.
  std::string render() const;

  // Prometheus name rules: metric [a-zA-Z_:][a-zA-Z0-9_:]*, label
  // [a-zA-Z_][a-zA-Z0-9_]* and not starting with "__".
  static bool valid_metric_name(std::string_view name);
  static bool valid_label_name(std::string_view name);

  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  struct Family;
  struct Series;
  enum class Type { kCounter, kGauge, kHistogram };
  // Get-or-create under mu_. `fn`: a gauge_fn series, whose function is
  // (re)placed; `buckets`: a histogram's.
  Series& series(std::string_view name, std::string_view help, Type type,
                 std::function<double()>* fn, const MetricLabels& labels,
                 const std::vector<double>* buckets);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Family>> families_;
};

// Text helpers, exposed for tests and for anyone writing exposition lines.
// Label value: \ -> \\, " -> \", newline -> \n; invalid UTF-8 -> U+FFFD.
std::string escape_label_value(std::string_view value);
// HELP text: \ -> \\, newline -> \n; invalid UTF-8 -> U+FFFD.
std::string escape_help(std::string_view help);
// Sample value: shortest text that reads back as the same double; "+Inf",
// "-Inf", "NaN".
std::string format_metric_value(double v);

}  // namespace corral
