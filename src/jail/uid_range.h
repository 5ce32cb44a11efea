// Each sandbox gets its own block of 65536 unprivileged host uids and gids
// (uid 0 inside = block base on the host), so two sandboxes never share an
// owner on the host. A block is held by an flock on a slot file under
// <run_dir>/uids/; the lock dies with the holder, so a crashed launcher
// never leaks a block.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "base/result.h"
#include "base/unique_fd.h"

namespace corral {

inline constexpr std::uint32_t kUidBlockSize = 65536;
// Far above any real account and above the usual /etc/subuid ranges.
inline constexpr std::uint32_t kUidBlockBase = 1'000'000'000;
inline constexpr std::uint32_t kUidBlockSlots = 4096;

class UidRange {
 public:
  static Result<UidRange> acquire();

  uid_t host_base() const { return base_; }
  uid_t to_host(uid_t inside) const { return base_ + inside; }
  std::uint32_t slot() const { return slot_; }
  // The flock that reserves the block: whoever holds it keeps the block.
  int lock_fd() const { return lock_.get(); }

 private:
  UidRange(UniqueFd lock, std::uint32_t slot)
      : lock_(std::move(lock)), slot_(slot), base_(kUidBlockBase + slot * kUidBlockSize) {}
  UniqueFd lock_;
  std::uint32_t slot_;
  uid_t base_;
};

}  // namespace corral
