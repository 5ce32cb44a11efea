// The one source of randomness: the kernel's CSPRNG through getrandom(2)
// (what libsodium's randombytes_buf and OpenSSL's seeding use on Linux
// too). Query ids, tokens, keys, start points of slot searches: anything
// that must not be guessed by a sandbox, and anything that merely must not
// repeat, comes from here.
#pragma once

#include <cstddef>
#include <cstdint>

namespace corral {

// Fills `size` bytes. Never fails: getrandom(2) without flags blocks only
// until the pool is initialised at boot, and is retried on EINTR. A kernel
// without getrandom (before 3.17) is refused by `corral doctor` long
// before; should it still fail, the process aborts rather than use bytes
// that are not random.
void fill_random(void* buf, std::size_t size);

std::uint64_t random_u64();

// Uniform in [0, bound) without modulo bias; bound 0 gives 0.
std::uint64_t random_below(std::uint64_t bound);

}  // namespace corral
