// JSON text that never throws. nlohmann's dump() throws type_error.316 on a
// string that is not UTF-8, and corral's JSON often carries bytes it did not
// choose (paths, environment values, error messages that quote them): an
// exception there ends the process (the daemon, the sandbox factory, the
// CLI) in std::terminate. Every dump() in src/ goes through json_text()
// (tests/unit/json_text_test.cc checks the sources for a strict one).
// Bytes that are not UTF-8 become U+FFFD; where that would change what a
// value means (a path, an argv word, an environment value), refuse it with
// a clear error before it gets here (is_valid_utf8 in base/utf8.h).
//
// Templated on the JSON type so that this header needs no nlohmann include
// (json and ordered_json both work).
#pragma once

#include <string>

namespace corral {

template <typename Json>
std::string json_text(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

}  // namespace corral
