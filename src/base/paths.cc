#include "base/paths.h"

#include <cstdlib>

namespace corral {

namespace {
std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && v[0] == '/') ? std::string(v) : std::string(fallback);
}
}  // namespace

std::string data_dir() { return env_or("CORRAL_DATA_DIR", "/var/lib/corral"); }
std::string run_dir() { return env_or("CORRAL_RUN_DIR", "/run/corral"); }

}  // namespace corral
