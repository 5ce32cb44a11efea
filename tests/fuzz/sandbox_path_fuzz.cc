// Fuzz target for the file API's path splitter (split_sandbox_path in
// src/fs/confined_root.cc): every path an API client names is split here
// before anything is resolved under the sandbox's root.
// Properties, beyond "no crash": an accepted path gives components that are
// never empty, ".", ".." or over NAME_MAX, and hold no '/' or NUL; they are
// exactly the path's non-empty, non-"." pieces in order; and a path is
// refused exactly when it is empty, over PATH_MAX, holds a NUL, a ".."
// piece or a piece over NAME_MAX, with a message free of control bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fs/confined_root.h"
#include "fuzz_checks.h"

namespace {

using corral::fuzz::require;

// The path's pieces between '/', without the empty ones and ".".
std::vector<std::string_view> pieces(std::string_view path) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (pos <= path.size()) {
    std::size_t slash = path.find('/', pos);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view p = path.substr(pos, slash - pos);
    if (!p.empty() && p != ".") out.push_back(p);
    pos = slash + 1;
  }
  return out;
}

bool no_control_bytes(std::string_view text) {
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view path(reinterpret_cast<const char*>(data), size);
  auto parts = corral::split_sandbox_path(path);
  auto expected = pieces(path);

  bool refuse = path.empty() || path.size() > corral::kMaxSandboxPathBytes ||
                path.find('\0') != std::string_view::npos;
  for (auto p : expected) refuse |= p == ".." || p.size() > corral::kMaxSandboxNameBytes;

  if (!parts) {
    require(refuse);
    const auto& e = parts.error();
    require(e.code == corral::ErrorCode::kInvalidArgument ||
            e.code == corral::ErrorCode::kPermissionDenied);
    require(!e.message.empty() && no_control_bytes(e.message) && no_control_bytes(e.hint));
    // Quoted paths are cut short: a message never grows with the input.
    require(e.message.size() < 1200);
    return 0;
  }
  require(!refuse);
  require(parts->size() == expected.size());
  for (std::size_t i = 0; i < parts->size(); ++i) {
    const std::string& c = (*parts)[i];
    require(c == expected[i]);
    require(!c.empty() && c != "." && c != ".." && c.size() <= corral::kMaxSandboxNameBytes);
    require(c.find('/') == std::string::npos && c.find('\0') == std::string::npos);
  }
  return 0;
}
