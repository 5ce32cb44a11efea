#include "spec/units.h"

#include <gtest/gtest.h>

#include <string>

#include "base/strings.h"
#include "spec/sandbox_spec.h"

namespace corral {
namespace {

using std::chrono::milliseconds;

constexpr std::uint64_t kTiB = 1024 * kGiB;

// The error of a failed parse, or a test failure when it did not fail.
template <typename T>
Error error_of(const Result<T>& r) {
  EXPECT_FALSE(r.has_value()) << "expected a parse error";
  return r.has_value() ? Error{} : r.error();
}

// --- sizes ---

TEST(units, ParseSizeBinaryUnits) {
  EXPECT_EQ(parse_size("512Mi").value(), 512 * kMiB);
  EXPECT_EQ(parse_size("2Gi").value(), 2 * kGiB);
  EXPECT_EQ(parse_size("1Ki").value(), kKiB);
  EXPECT_EQ(parse_size("3Ti").value(), 3 * kTiB);
  EXPECT_EQ(parse_size("512MiB").value(), 512 * kMiB);
  EXPECT_EQ(parse_size("2GiB").value(), 2 * kGiB);
  EXPECT_EQ(parse_size("4KiB").value(), 4 * kKiB);
  EXPECT_EQ(parse_size("1TiB").value(), kTiB);
}

TEST(units, ParseSizeDecimalUnits) {
  EXPECT_EQ(parse_size("1G").value(), 1000'000'000u);
  EXPECT_EQ(parse_size("1GB").value(), 1000'000'000u);
  EXPECT_EQ(parse_size("5k").value(), 5000u);
  EXPECT_EQ(parse_size("5K").value(), 5000u);
  EXPECT_EQ(parse_size("5kB").value(), 5000u);
  EXPECT_EQ(parse_size("5KB").value(), 5000u);
  EXPECT_EQ(parse_size("7M").value(), 7000'000u);
  EXPECT_EQ(parse_size("7MB").value(), 7000'000u);
  EXPECT_EQ(parse_size("2T").value(), 2000'000'000'000u);
  EXPECT_EQ(parse_size("2TB").value(), 2000'000'000'000u);
}

TEST(units, ParseSizeBareNumberIsBytes) {
  EXPECT_EQ(parse_size("17").value(), 17u);
  EXPECT_EQ(parse_size("2147483648").value(), 2 * kGiB);
  EXPECT_EQ(parse_size("0017").value(), 17u);
  EXPECT_EQ(parse_size("100B").value(), 100u);
  EXPECT_EQ(parse_size("18446744073709551615").value(), 18446744073709551615u);
}

TEST(units, ParseSizeFractionsWithUnit) {
  EXPECT_EQ(parse_size("1.5Gi").value(), 3 * kGiB / 2);
  EXPECT_EQ(parse_size("0.5Ki").value(), 512u);
  EXPECT_EQ(parse_size("0.1G").value(), 100'000'000u);
  EXPECT_EQ(parse_size("2.25Mi").value(), 2 * kMiB + kMiB / 4);
  // Rounded down to a whole byte.
  EXPECT_EQ(parse_size("1.1Ki").value(), 1126u);
  // Digits beyond what can matter are accepted.
  EXPECT_EQ(parse_size("1.50000000000000000000000001Gi").value(), 3 * kGiB / 2);
}

TEST(units, ParseSizeEmptyIsAnError) {
  Error e = error_of(parse_size(""));
  EXPECT_EQ(e.code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(e.message,
            "invalid size \"\": expected a number with an optional unit (512Mi, 2Gi, 1G)");
}

TEST(units, ParseSizeGarbageSuffix) {
  Error e = error_of(parse_size("2GG"));
  EXPECT_EQ(e.code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(e.message,
            "invalid size \"2GG\": expected a number with an optional unit (512Mi, 2Gi, 1G)");
  EXPECT_NE(e.hint.find("Ki Mi Gi Ti"), std::string::npos);
  for (const char* bad : {"2gi", "2 Gi", " 2Gi", "2Gi ", "Gi", "2Gix", "2mb", "1e9", "0x10", "+5",
                          "1.Gi", ".5Gi", "1..5Gi", "inf", "nan", "2Pi", "2 "}) {
    EXPECT_FALSE(parse_size(bad).has_value()) << bad;
  }
}

TEST(units, ParseSizeNegative) {
  Error e = error_of(parse_size("-1Gi"));
  EXPECT_EQ(e.code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(e.message, "invalid size \"-1Gi\": must be greater than zero");
  EXPECT_FALSE(parse_size("-0").has_value());
}

TEST(units, ParseSizeZero) {
  EXPECT_EQ(error_of(parse_size("0")).message, "invalid size \"0\": must be greater than zero");
  EXPECT_FALSE(parse_size("0Gi").has_value());
  EXPECT_FALSE(parse_size("0.0Mi").has_value());
  // A fraction that rounds to nothing.
  EXPECT_EQ(error_of(parse_size("0.0001Ki")).message,
            "invalid size \"0.0001Ki\": must be at least 1 byte");
}

TEST(units, ParseSizeFractionWithoutUnitIsRefused) {
  Error e = error_of(parse_size("1.5"));
  EXPECT_EQ(e.code, ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message.find("invalid size \"1.5\": a fraction needs a unit"), std::string::npos)
      << e.message;
  EXPECT_FALSE(parse_size("1.5B").has_value());
}

TEST(units, ParseSizeOverflow) {
  Error e = error_of(parse_size("18446744073709551616"));
  EXPECT_EQ(e.message, "invalid size \"18446744073709551616\": too large (at most 2^64-1 bytes)");
  EXPECT_FALSE(parse_size("16777216Ti").has_value());  // exactly 2^64
  EXPECT_EQ(parse_size("16777215Ti").value(), 16777215 * kTiB);
  EXPECT_FALSE(parse_size("99999999999999999999999999Gi").has_value());
  EXPECT_FALSE(parse_size("18446744073709551615.5Ki").has_value());
}

TEST(units, ParseSizeLongOrBinaryInputIsQuotedSafely) {
  std::string long_text(500, '7');
  long_text += "X";
  Error e = error_of(parse_size(long_text));
  EXPECT_LT(e.message.size(), 300u);
  EXPECT_NE(e.message.find("...\""), std::string::npos);
  Error nul = error_of(parse_size(std::string_view("1\0Gi", 4)));
  EXPECT_NE(nul.message.find("\\x00"), std::string::npos) << nul.message;
}

// --- durations ---

TEST(units, ParseDurationComponents) {
  EXPECT_EQ(parse_duration("300s").value(), milliseconds(300'000));
  EXPECT_EQ(parse_duration("5m").value(), milliseconds(300'000));
  EXPECT_EQ(parse_duration("1h30m").value(), milliseconds(5400'000));
  EXPECT_EQ(parse_duration("250ms").value(), milliseconds(250));
  EXPECT_EQ(parse_duration("1h").value(), milliseconds(3600'000));
  EXPECT_EQ(parse_duration("2m30s").value(), milliseconds(150'000));
  EXPECT_EQ(parse_duration("1h2m3s4ms").value(), milliseconds(3723'004));
  EXPECT_EQ(parse_duration("1s500ms").value(), milliseconds(1500));
  EXPECT_EQ(parse_duration("1.5s").value(), milliseconds(1500));
  EXPECT_EQ(parse_duration("0.5h").value(), milliseconds(1800'000));
}

TEST(units, ParseDurationBareNumberIsSeconds) {
  EXPECT_EQ(parse_duration("300").value(), milliseconds(300'000));
  EXPECT_EQ(parse_duration("600").value(), milliseconds(600'000));
  EXPECT_EQ(parse_duration("1").value(), milliseconds(1000));
  EXPECT_EQ(parse_duration("0.25").value(), milliseconds(250));
}

TEST(units, ParseDurationErrors) {
  Error e = error_of(parse_duration(""));
  EXPECT_EQ(e.code, ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message.find("invalid duration \"\": expected"), std::string::npos);

  EXPECT_EQ(error_of(parse_duration("-5s")).message,
            "invalid duration \"-5s\": must be greater than zero");
  EXPECT_EQ(error_of(parse_duration("0")).message, "invalid duration \"0\": must be at least 1ms");
  EXPECT_FALSE(parse_duration("0s").has_value());
  EXPECT_FALSE(parse_duration("0h0m").has_value());
  EXPECT_FALSE(parse_duration("0.0001s").has_value());  // below a millisecond

  Error garbage = error_of(parse_duration("5x"));
  EXPECT_NE(garbage.message.find("invalid duration \"5x\": expected"), std::string::npos);
  for (const char* bad : {"5 m", "1h30", "m", "5d", "1.s", "s5", "5S", "1m1h", "1s1s", "30s5m",
                          "5mss", "1e3", "+5s", " 5s", "5s "}) {
    EXPECT_FALSE(parse_duration(bad).has_value()) << bad;
  }
  EXPECT_NE(error_of(parse_duration("1m1h")).message.find("in the order h, m, s, ms"),
            std::string::npos);
}

TEST(units, ParseDurationOverflow) {
  EXPECT_EQ(error_of(parse_duration("99999999999999999999")).message,
            "invalid duration \"99999999999999999999\": too long");
  EXPECT_FALSE(parse_duration("9999999999999999h").has_value());
  EXPECT_FALSE(parse_duration("9223372036854775808ms").has_value());
  EXPECT_EQ(parse_duration("9223372036854775807ms").value(), milliseconds(9223372036854775807LL));
}

// --- CPUs ---

TEST(units, ParseCpusValues) {
  EXPECT_DOUBLE_EQ(parse_cpus("1.5").value(), 1.5);
  EXPECT_DOUBLE_EQ(parse_cpus("2").value(), 2.0);
  EXPECT_DOUBLE_EQ(parse_cpus("500m").value(), 0.5);
  EXPECT_DOUBLE_EQ(parse_cpus("1500m").value(), 1.5);
  EXPECT_DOUBLE_EQ(parse_cpus("0.25").value(), 0.25);
  EXPECT_DOUBLE_EQ(parse_cpus("1024").value(), 1024.0);
  EXPECT_DOUBLE_EQ(parse_cpus("1024000m").value(), 1024.0);
}

TEST(units, ParseCpusErrors) {
  Error e = error_of(parse_cpus("abc"));
  EXPECT_EQ(e.code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(e.message,
            "invalid CPU count \"abc\": expected a number of cores (2, 1.5) or millicores (500m)");
  EXPECT_EQ(error_of(parse_cpus("0")).message,
            "invalid CPU count \"0\": must be more than 0 and at most 1024");
  EXPECT_EQ(error_of(parse_cpus("1025")).message,
            "invalid CPU count \"1025\": must be more than 0 and at most 1024");
  for (const char* bad : {"", "-1", "0m", "0.0", "1024.5", "1024001m", "1.5m", "2 ", "2x", "inf",
                          "nan", "1e2", ".5", "1.", "+1", "99999999999999999999999m"}) {
    EXPECT_FALSE(parse_cpus(bad).has_value()) << bad;
  }
}

// --- counts ---

TEST(units, ParseCountValues) {
  EXPECT_EQ(parse_count("256").value(), 256u);
  EXPECT_EQ(parse_count("4294967295").value(), 4294967295u);
  EXPECT_EQ(parse_count64("4294967296").value(), 4294967296u);
}

TEST(units, ParseCountErrors) {
  EXPECT_EQ(error_of(parse_count("0")).message, "invalid count \"0\": must be greater than zero");
  EXPECT_EQ(error_of(parse_count("4294967296")).message,
            "invalid count \"4294967296\": too large (at most 4294967295)");
  EXPECT_EQ(error_of(parse_count("12a")).message,
            "invalid count \"12a\": expected a whole number greater than zero");
  for (const char* bad : {"", "-1", "1.5", "+3", " 3", "3k"}) {
    EXPECT_FALSE(parse_count(bad).has_value()) << bad;
    EXPECT_FALSE(parse_count64(bad).has_value()) << bad;
  }
  EXPECT_FALSE(parse_count64("18446744073709551616").has_value());
}

// --- formatting ---

TEST(units, FormatSizeShortestExactBinaryForm) {
  EXPECT_EQ(format_size(2 * kGiB), "2Gi");
  EXPECT_EQ(format_size(512 * kMiB), "512Mi");
  EXPECT_EQ(format_size(1536 * kKiB), "1536Ki");
  EXPECT_EQ(format_size(17), "17");
  EXPECT_EQ(format_size(kTiB), "1Ti");
  EXPECT_EQ(format_size(0), "0");
  EXPECT_EQ(format_size(1000'000'000), "1000000000");
  EXPECT_EQ(format_size(1000 * kKiB), "1000Ki");
}

TEST(units, FormatSizeRoundTrips) {
  for (std::uint64_t v : {std::uint64_t{1}, std::uint64_t{1023}, kKiB, 3 * kMiB + kKiB, 2 * kGiB,
                          5 * kTiB, std::uint64_t{18446744073709551615u}}) {
    EXPECT_EQ(parse_size(format_size(v)).value(), v) << v;
  }
}

TEST(units, QuoteForMessageEscapesAndTruncates) {
  EXPECT_EQ(quote_for_message("abc"), "\"abc\"");
  EXPECT_EQ(quote_for_message("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(quote_for_message("\n\x7f"), "\"\\x0a\\x7f\"");
  std::string quoted = quote_for_message(std::string(200, 'x'));
  EXPECT_EQ(quoted, "\"" + std::string(80, 'x') + "...\"");
}

// --- effective_inodes (sandbox_spec.h) ---

TEST(units, EffectiveInodesExplicitDerivedAndMinimum) {
  Limits limits;
  EXPECT_EQ(effective_inodes(limits), 2 * kGiB / (8 * kKiB));  // 262144 for the 2Gi default
  limits.inodes = 1000;
  EXPECT_EQ(effective_inodes(limits), 1000u);
  limits.inodes = 0;
  limits.disk_bytes = 1 * kMiB;  // would be 128
  EXPECT_EQ(effective_inodes(limits), 4096u);
  limits.disk_bytes = 0;
  EXPECT_EQ(effective_inodes(limits), 4096u);
}

}  // namespace
}  // namespace corral
