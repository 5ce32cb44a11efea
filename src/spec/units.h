// Parsing of the quantities users write: sizes ("512Mi", "2Gi", "1G"),
// durations ("300s", "5m", "1h30m", "250ms", bare "300" = seconds) and
// CPU counts ("1.5", "2", "500m" = 0.5). Errors say what was expected.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace corral {

// Binary suffixes Ki Mi Gi Ti (also KiB...), decimal k/K M G T (also KB...),
// plain bytes. Fractions allowed with a suffix ("1.5Gi"). Must be > 0.
Result<std::uint64_t> parse_size(std::string_view text);
// Components h, m, s, ms; bare number = seconds. Must be > 0.
Result<std::chrono::milliseconds> parse_duration(std::string_view text);
// Cores, fractional allowed, or millicores "500m". Range (0, 1024].
Result<double> parse_cpus(std::string_view text);
// Positive integer that fits in 32 bits (pids, inodes use parse_count64).
Result<std::uint32_t> parse_count(std::string_view text);
Result<std::uint64_t> parse_count64(std::string_view text);

// "2Gi", "512Mi", "1536Ki", "17" (bytes): the shortest exact binary form.
std::string format_size(std::uint64_t bytes);


}  // namespace corral
