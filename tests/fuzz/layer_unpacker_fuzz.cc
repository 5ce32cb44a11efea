// Fuzz target for the failure snapshot's reader (src/snapshot/layer_unpacker.cc),
// which a replay (T2) runs on an archive whose names a sandbox chose and
// which comes back from an object store. Beyond "no crash, no throw", it
// checks that every path given out is safe to join under a sandbox's "/"
// (relative, no empty, "." or ".." component, bounded), that a file's
// content never exceeds the byte bound, that the entry bound holds, and
// that a failure is one of the documented codes.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/unique_fd.h"
#include "fuzz_checks.h"
#include "snapshot/layer_unpacker.h"

namespace {

using corral::fuzz::require;
namespace snapshot = corral::snapshot;

bool safe_relative(std::string_view p) {
  if (p.empty() || p.size() > 4096 || p.front() == '/') return false;
  std::size_t start = 0;
  for (;;) {
    std::size_t slash = p.find('/', start);
    std::string_view part = p.substr(start, slash == std::string_view::npos ? p.npos : slash - start);
    if (part.empty() || part == "." || part == ".." || part.size() > 255) return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  corral::UniqueFd fd(open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd) return 0;
  std::size_t off = 0;
  while (off < size) {
    ssize_t n = write(fd.get(), data + off, size - off);
    if (n <= 0) return 0;
    off += static_cast<std::size_t>(n);
  }
  lseek(fd.get(), 0, SEEK_SET);
  snapshot::UnpackLimits limits;
  limits.max_entries = 64;
  limits.max_total_bytes = 1 << 20;
  std::uint64_t entries = 0, bytes = 0;
  auto report = snapshot::unpack_layer(
      fd.get(), limits,
      [&](const snapshot::UnpackedEntry& e, const snapshot::ContentReader& read) -> corral::Status {
        require(safe_relative(e.path));
        require(e.mode <= 0777);
        ++entries;
        return read([&](std::span<const char> chunk) -> corral::Status {
          bytes += chunk.size();
          return corral::ok();
        });
      });
  require(entries <= limits.max_entries);
  require(bytes <= limits.max_total_bytes);
  if (report) {
    require(report->entries == entries);
    require(report->content_bytes == bytes);
  } else {
    const auto code = report.error().code;
    require(code == corral::ErrorCode::kInvalidArgument ||
            code == corral::ErrorCode::kResourceExhausted);
  }
  return 0;
}
