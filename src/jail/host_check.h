// Host checks for `corral doctor`: every kernel feature the sandbox relies
// on, each with what to fix. `corral run` itself fails closed at the step
// that needs a missing feature; the doctor says it up front.
#pragma once

#include <string>
#include <vector>

namespace corral {

struct HostCheck {
  std::string name;
  bool ok = false;
  bool required = true;  // false: only some commands need it
  std::string detail;    // what was found
  std::string hint;      // what to do when !ok
};

std::vector<HostCheck> run_host_checks();

}  // namespace corral
