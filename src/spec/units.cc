#include "spec/units.h"

#include <array>
#include <charconv>
#include <limits>
#include <string>
#include <system_error>

#include "base/strings.h"
#include "spec/sandbox_spec.h"

namespace corral {
namespace {

// Exact arithmetic for "number times unit": wide enough for any 64-bit
// whole part times the largest multiplier, plus a fraction.
using Wide = unsigned __int128;

// Fraction digits past this many cannot change a whole byte or millisecond
// (the largest multipliers are below 10^13); they are checked, then dropped.
constexpr std::size_t kMaxFractionDigits = 18;

constexpr std::string_view kSizeExpected =
    "expected a number with an optional unit (512Mi, 2Gi, 1G)";
constexpr std::string_view kSizeHint =
    "units are case-sensitive: Ki Mi Gi Ti (powers of 1024), k M G T (powers of 1000), "
    "no unit for bytes";
constexpr std::string_view kDurationExpected =
    "expected a number of seconds (300) or h/m/s/ms components (1h30m, 5m, 300s, 250ms)";
constexpr std::string_view kCpusExpected =
    "expected a number of cores (2, 1.5) or millicores (500m)";
constexpr std::string_view kCountExpected = "expected a whole number greater than zero";

constexpr double kMaxCpus = 1024.0;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A decimal number at the start of some text: digits, optionally followed
// by '.' and more digits. Signs, exponents, "inf" and the like are not
// numbers here.
struct Decimal {
  std::uint64_t whole = 0;
  std::uint64_t fraction = 0;  // the first `fraction_digits` digits
  std::uint32_t fraction_digits = 0;
  bool has_point = false;
  bool whole_overflow = false;  // the whole part does not fit 64 bits
  std::size_t length = 0;       // characters consumed; 0 = no number
};

Decimal scan_decimal(std::string_view text) {
  Decimal d;
  std::size_t i = 0;
  while (i < text.size() && is_digit(text[i])) ++i;
  if (i == 0) return d;
  auto [end, ec] = std::from_chars(text.data(), text.data() + i, d.whole);
  (void)end;
  if (ec == std::errc::result_out_of_range) d.whole_overflow = true;
  std::size_t consumed = i;
  if (i < text.size() && text[i] == '.') {
    std::size_t j = i + 1;
    while (j < text.size() && is_digit(text[j])) {
      if (d.fraction_digits < kMaxFractionDigits) {
        d.fraction = d.fraction * 10 + static_cast<std::uint64_t>(text[j] - '0');
        ++d.fraction_digits;
      }
      ++j;
    }
    // "1." is not a number: a point needs digits on both sides. Leave the
    // point unconsumed so that the caller reports it as garbage.
    if (j > i + 1) {
      d.has_point = true;
      consumed = j;
    }
  }
  d.length = consumed;
  return d;
}

Wide pow10(std::uint32_t n) {
  Wide r = 1;
  for (std::uint32_t i = 0; i < n; ++i) r *= 10;
  return r;
}

// whole.fraction * multiplier, rounded down. The caller has checked that
// `whole` did not overflow.
Wide scale(const Decimal& d, std::uint64_t multiplier) {
  Wide value = static_cast<Wide>(d.whole) * multiplier;
  if (d.fraction_digits > 0) {
    value += static_cast<Wide>(d.fraction) * multiplier / pow10(d.fraction_digits);
  }
  return value;
}

tl::unexpected<Error> invalid(std::string_view what, std::string_view text, std::string_view why,
                              std::string_view hint = {}) {
  std::string msg;
  msg.append("invalid ").append(what).append(" ").append(quote_for_message(text));
  msg.append(": ").append(why);
  return make_error(ErrorCode::kInvalidArgument, std::move(msg), std::string(hint));
}

struct SizeUnit {
  std::string_view suffix;
  std::uint64_t multiplier;
};

constexpr std::uint64_t kTiB = 1024 * kGiB;
constexpr std::array<SizeUnit, 20> kSizeUnits{{
    {"", 1},
    {"B", 1},
    {"Ki", kKiB},
    {"KiB", kKiB},
    {"Mi", kMiB},
    {"MiB", kMiB},
    {"Gi", kGiB},
    {"GiB", kGiB},
    {"Ti", kTiB},
    {"TiB", kTiB},
    {"k", 1000},
    {"K", 1000},
    {"kB", 1000},
    {"KB", 1000},
    {"M", 1000'000},
    {"MB", 1000'000},
    {"G", 1000'000'000},
    {"GB", 1000'000'000},
    {"T", 1000'000'000'000},
    {"TB", 1000'000'000'000},
}};

const SizeUnit* find_size_unit(std::string_view suffix) {
  for (const auto& u : kSizeUnits) {
    if (u.suffix == suffix) return &u;
  }
  return nullptr;
}

template <typename T>
Result<T> parse_positive_integer(std::string_view text) {
  if (text.empty()) return invalid("count", text, kCountExpected);
  if (text.front() == '-') return invalid("count", text, "must be greater than zero");
  for (char c : text) {
    if (!is_digit(c)) return invalid("count", text, kCountExpected);
  }
  T value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  (void)end;
  if (ec == std::errc::result_out_of_range) {
    return invalid("count", text,
                   "too large (at most " + std::to_string(std::numeric_limits<T>::max()) + ")");
  }
  if (ec != std::errc()) return invalid("count", text, kCountExpected);
  if (value == 0) return invalid("count", text, "must be greater than zero");
  return value;
}

}  // namespace

Result<std::uint64_t> parse_size(std::string_view text) {
  if (text.empty()) return invalid("size", text, kSizeExpected, kSizeHint);
  if (text.front() == '-') return invalid("size", text, "must be greater than zero");
  Decimal d = scan_decimal(text);
  if (d.length == 0) return invalid("size", text, kSizeExpected, kSizeHint);
  const SizeUnit* unit = find_size_unit(text.substr(d.length));
  if (unit == nullptr) return invalid("size", text, kSizeExpected, kSizeHint);
  if (d.has_point && unit->suffix.empty()) {
    return invalid("size", text,
                   "a fraction needs a unit (1.5Gi); a number without a unit is whole bytes",
                   kSizeHint);
  }
  if (d.has_point && unit->multiplier == 1) {
    return invalid("size", text, "bytes must be a whole number", kSizeHint);
  }
  Wide value = d.whole_overflow ? 0 : scale(d, unit->multiplier);
  if (d.whole_overflow || value > std::numeric_limits<std::uint64_t>::max()) {
    return invalid("size", text, "too large (at most 2^64-1 bytes)");
  }
  if (value == 0) {
    return invalid(
        "size", text,
        d.whole == 0 && d.fraction == 0 ? "must be greater than zero" : "must be at least 1 byte");
  }
  return static_cast<std::uint64_t>(value);
}

Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  using Rep = std::chrono::milliseconds::rep;
  if (text.empty()) return invalid("duration", text, kDurationExpected);
  if (text.front() == '-') return invalid("duration", text, "must be greater than zero");

  // A bare number is seconds.
  Decimal bare = scan_decimal(text);
  bool overflow = false;
  Wide total = 0;
  if (bare.length != 0 && bare.length == text.size()) {
    overflow = bare.whole_overflow;
    if (!overflow) total = scale(bare, 1000);
  } else {
    // Components in the order h, m, s, ms, each at most once.
    struct Component {
      std::string_view unit;
      std::uint64_t ms;
    };
    static constexpr std::array<Component, 4> kComponents{{
        {"h", 3600'000},
        {"m", 60'000},
        {"s", 1000},
        {"ms", 1},
    }};
    std::size_t next_allowed = 0;  // index into kComponents
    std::string_view rest = text;
    while (!rest.empty()) {
      Decimal d = scan_decimal(rest);
      if (d.length == 0) return invalid("duration", text, kDurationExpected);
      rest.remove_prefix(d.length);
      std::size_t letters = 0;
      while (letters < rest.size() && !is_digit(rest[letters]) && rest[letters] != '.') ++letters;
      std::string_view unit = rest.substr(0, letters);
      rest.remove_prefix(letters);
      std::size_t index = kComponents.size();
      for (std::size_t i = 0; i < kComponents.size(); ++i) {
        if (kComponents[i].unit == unit) index = i;
      }
      if (index == kComponents.size()) {
        return invalid("duration", text,
                       unit.empty() ? std::string(kDurationExpected) +
                                          " (a number inside a "
                                          "duration needs a unit)"
                                    : std::string(kDurationExpected));
      }
      if (index < next_allowed) {
        return invalid("duration", text,
                       "components must appear once each, in the order h, m, s, ms");
      }
      next_allowed = index + 1;
      if (d.whole_overflow) {
        overflow = true;
        break;
      }
      total += scale(d, kComponents[index].ms);
    }
  }
  if (overflow || total > static_cast<Wide>(std::numeric_limits<Rep>::max())) {
    return invalid("duration", text, "too long");
  }
  if (total == 0) return invalid("duration", text, "must be at least 1ms");
  return std::chrono::milliseconds(static_cast<Rep>(total));
}

Result<double> parse_cpus(std::string_view text) {
  constexpr std::string_view kRange = "must be more than 0 and at most 1024";
  if (text.empty()) return invalid("CPU count", text, kCpusExpected);
  if (text.front() == '-') return invalid("CPU count", text, kRange);
  Decimal d = scan_decimal(text);
  if (d.length == 0) return invalid("CPU count", text, kCpusExpected);
  std::string_view suffix = text.substr(d.length);
  double cpus = 0;
  if (suffix == "m") {
    if (d.has_point) return invalid("CPU count", text, "millicores must be a whole number");
    if (d.whole_overflow || d.whole > static_cast<std::uint64_t>(kMaxCpus) * 1000) {
      return invalid("CPU count", text, kRange);
    }
    cpus = static_cast<double>(d.whole) / 1000.0;
  } else if (suffix.empty()) {
    // The text is known to be digits[.digits] here, which from_chars reads
    // without any locale.
    auto [end, ec] =
        std::from_chars(text.data(), text.data() + text.size(), cpus, std::chars_format::fixed);
    if (ec == std::errc::result_out_of_range) return invalid("CPU count", text, kRange);
    if (ec != std::errc() || end != text.data() + text.size()) {
      return invalid("CPU count", text, kCpusExpected);
    }
  } else {
    return invalid("CPU count", text, kCpusExpected);
  }
  if (!(cpus > 0.0) || cpus > kMaxCpus) return invalid("CPU count", text, kRange);
  return cpus;
}

Result<std::uint32_t> parse_count(std::string_view text) {
  return parse_positive_integer<std::uint32_t>(text);
}

Result<std::uint64_t> parse_count64(std::string_view text) {
  return parse_positive_integer<std::uint64_t>(text);
}

std::string format_size(std::uint64_t bytes) {
  struct Unit {
    std::uint64_t multiplier;
    const char* suffix;
  };
  static constexpr std::array<Unit, 4> kUnits{{
      {kTiB, "Ti"},
      {kGiB, "Gi"},
      {kMiB, "Mi"},
      {kKiB, "Ki"},
  }};
  if (bytes == 0) return "0";
  for (const auto& u : kUnits) {
    if (bytes % u.multiplier == 0) return std::to_string(bytes / u.multiplier) + u.suffix;
  }
  return std::to_string(bytes);
}

}  // namespace corral
