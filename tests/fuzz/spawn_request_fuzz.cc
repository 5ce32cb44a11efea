// Fuzz target for the spawn request decoder, which runs in a sandbox's
// zygote on bytes sent from outside (ADR 0004). Beyond "no crash", it checks
// that a decoded request meets every limit and encodes back to the very same
// bytes (the format has one encoding per request), and that errors are
// printable and named.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_checks.h"
#include "jail/spawn_request.h"

namespace {

using corral::fuzz::printable;
using corral::fuzz::require;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto request = corral::decode_spawn_request(bytes);
  if (!request) {
    const corral::Error& e = request.error();
    require(e.code == corral::ErrorCode::kInvalidArgument);
    require(e.message.starts_with("spawn request: "));
    require(printable(e.message) && printable(e.hint));
    return 0;
  }
  require(size <= corral::kSpawnMaxMessage);
  require(!request->argv.empty() && request->argv.size() <= corral::kSpawnMaxArgs);
  require(!request->argv[0].empty());
  require(request->env.size() <= corral::kSpawnMaxEnv);
  require(request->cwd.empty() || request->cwd.front() == '/');
  for (const auto& e : request->env) {
    std::size_t eq = e.find('=');
    require(eq != std::string::npos && eq > 0);
  }
  require(corral::validate_spawn_request(*request).has_value());
  auto again = corral::encode_spawn_request(*request);
  require(again.has_value());
  require(*again == bytes);
  return 0;
}
