// copy_stream: copies one fd into another until end of input, with bounded
// memory and a byte limit. It knows nothing about sandboxes or paths; its
// tests copy into a ConfinedRoot (tests/unit/confined_root_test.cc). The
// daemon's file API does not call it today: it writes HTTP body chunks
// itself (src/daemon/file_api.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/result.h"

namespace corral {

// The only userspace buffer copy_stream() ever allocates.
inline constexpr std::size_t kCopyBufferBytes = std::size_t{1} << 20;

struct CopyStats {
  std::uint64_t bytes = 0;
  std::size_t buffer_bytes = 0;  // userspace buffer allocated (0 or kCopyBufferBytes)
  std::string_view method;       // "copy_file_range", "splice" or "read/write"
};

// Copies from_fd to to_fd until end of input, with bounded memory (one
// kCopyBufferBytes buffer at most; copy_file_range or splice when the fds
// allow it, which use none). More than max_bytes of input stops the copy
// with kResourceExhausted (at most max_bytes are written); ENOSPC/EDQUOT
// while writing is kResourceExhausted "the sandbox's disk limit is full".
// Returns the number of bytes copied.
Result<std::uint64_t> copy_stream(int from_fd, int to_fd, std::uint64_t max_bytes,
                                  CopyStats* stats = nullptr);

}  // namespace corral
