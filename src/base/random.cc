#include "base/random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace corral {

void fill_random(void* buf, std::size_t size) {
  auto* p = static_cast<unsigned char*>(buf);
  while (size > 0) {
    const ssize_t n = ::getrandom(p, size, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "corral: getrandom: %s\n", std::strerror(errno));
      std::abort();
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

std::uint64_t random_u64() {
  std::uint64_t v = 0;
  fill_random(&v, sizeof v);
  return v;
}

std::uint64_t random_below(std::uint64_t bound) {
  if (bound == 0) return 0;
  // Reject the top partial range: every residue then has the same odds.
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  std::uint64_t v;
  do {
    v = random_u64();
  } while (v >= limit);
  return v % bound;
}

}  // namespace corral
