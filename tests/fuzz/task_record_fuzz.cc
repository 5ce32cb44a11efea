// Fuzz target for first_differing_field (src/store/task_record.cc), which
// reads two task requests: the stored one and a repeat POST's body, straight
// from the network. The input is split at its first newline into the two
// documents. Beyond "no crash, no throw", it checks that the answer is ""
// exactly when the canonical forms are equal (what submit_task compares),
// that it is the same both ways round, that a document equals itself and
// its re-spelling, and that the path it names is printable ASCII and bounded.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "fuzz_checks.h"
#include "store/task_record.h"

namespace {

using corral::first_differing_field;
using corral::fuzz::require;
using Json = nlohmann::json;

std::string canonical(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::size_t nl = input.find('\n');
  std::string_view a_text = input.substr(0, nl);
  std::string_view b_text =
      nl == std::string_view::npos ? std::string_view() : input.substr(nl + 1);
  // Deeper than the comparison takes: refused whole, before any parse.
  if (corral::nesting_depth(a_text) > corral::kMaxCompareDepth ||
      corral::nesting_depth(b_text) > corral::kMaxCompareDepth) {
    require(first_differing_field(a_text, b_text) == "(document)");
    return 0;
  }
  Json a = Json::parse(a_text.begin(), a_text.end(), nullptr, /*allow_exceptions=*/false);
  Json b = Json::parse(b_text.begin(), b_text.end(), nullptr, /*allow_exceptions=*/false);

  std::string ab = first_differing_field(a_text, b_text);
  std::string ba = first_differing_field(b_text, a_text);
  require(ab == ba);
  if (a.is_discarded() || b.is_discarded()) {
    require(ab == "(document)");
    return 0;
  }
  require(ab.empty() == (canonical(a) == canonical(b)));
  // A path is never longer than the two documents' text allows (each step
  // names at most a whole key, quoted and escaped, or an index).
  require(ab.size() <= 16 + 6 * (a_text.size() + b_text.size()));
  require(corral::fuzz::printable(ab));
  require(first_differing_field(a_text, a_text).empty());
  require(first_differing_field(a_text, a.dump(1)).empty());
  require(first_differing_field(canonical(b), b_text).empty());
  return 0;
}
