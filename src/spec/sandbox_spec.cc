#include "spec/sandbox_spec.h"

namespace corral {

namespace {
constexpr std::uint64_t kBytesPerInode = 8 * kKiB;
constexpr std::uint64_t kMinInodes = 4096;
}  // namespace

std::uint64_t effective_inodes(const Limits& limits) {
  if (limits.inodes != 0) return limits.inodes;
  std::uint64_t derived = limits.disk_bytes / kBytesPerInode;
  return derived < kMinInodes ? kMinInodes : derived;
}

}  // namespace corral
