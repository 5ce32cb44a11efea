// Fuzz target for the streaming redactor (src/secrets/redactor.h): the
// output of a sandbox, which its code fully controls. The first input byte
// seeds the chunking; the rest is the stream. Beyond "no crash", it checks
// the promises of redactor.h: the stream fed in any chunks gives the same
// output as fed at once, never holds more than max_hold() bytes, holds
// nothing after finish(), and no value or encoded form of a secret of the
// set survives in the output.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_checks.h"
#include "secrets/redactor.h"
#include "secrets/secret_encodings.h"

namespace {

using corral::fuzz::require;
namespace secrets = corral::secrets;

// Fixed values (the corpus holds them and their forms). None holds '[' or
// ']', so no occurrence can straddle a placeholder.
const std::vector<std::string>& values() {
  static const std::vector<std::string> v = {
      "fuzzSecretValue0001",
      "p@ss/word+with space&more=",
      std::string("\x00\x01\xfe\xff"
                  "bin\x00ary",
                  11),
      "abababab",
      "babababa",
      "fuzzSecretValue0001-and-longer-than-sixteen",
  };
  return v;
}

const std::shared_ptr<const secrets::RedactionSet>& set() {
  static const std::shared_ptr<const secrets::RedactionSet> s = [] {
    std::vector<secrets::NamedValue> named;
    for (std::size_t i = 0; i < values().size(); ++i) {
      named.push_back({"FUZZ_" + std::to_string(i), values()[i]});
    }
    auto built = secrets::RedactionSet::build(named);
    require(built.has_value());
    return *built;
  }();
  return s;
}

const std::vector<std::string>& forms() {
  static const std::vector<std::string> f = [] {
    std::vector<std::string> all;
    for (const auto& v : values()) {
      for (auto& form : secrets::redaction_forms(v)) all.push_back(form);
    }
    return all;
  }();
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t seed = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  const std::string whole = secrets::redact(*set(), text);
  for (const auto& f : forms()) require(whole.find(f) == std::string::npos);

  secrets::RedactStream stream(set());
  std::string out;
  std::size_t at = 0, k = 0;
  while (at < text.size()) {
    // Chunk sizes from 1 to 32, driven by the seed and the bytes themselves.
    const std::size_t n =
        1 + ((seed + k * 7 + static_cast<unsigned char>(text[(at * 13) % text.size()])) % 32);
    const std::string_view piece = text.substr(at, n);
    stream.feed(piece, out);
    at += piece.size();
    ++k;
    require(stream.held() <= set()->max_hold());
    require(out.size() <= whole.size() && whole.compare(0, out.size(), out) == 0);
  }
  stream.finish(out);
  require(stream.held() == 0);
  require(out == whole);
  return 0;
}
