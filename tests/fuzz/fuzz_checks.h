// Checks shared by the fuzz targets: a broken promise traps, so libFuzzer
// (and the corpus replay in ctest) reports the input that broke it.
#pragma once

#include <string_view>

namespace corral::fuzz {

inline void require(bool condition) {
  if (!condition) __builtin_trap();
}

// Messages shown to users must be printable ASCII, whatever the input was.
inline bool printable(std::string_view text) {
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7e) return false;
  }
  return true;
}

}  // namespace corral::fuzz
