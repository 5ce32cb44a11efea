// SandboxRegistry: the daemon's live sandboxes by id, the share of the
// daemon's capacity their limits hold (REQUIREMENTS.md C2: a create that
// does not fit is refused, never accepted and killed later), and one lock
// per idempotency key whose create is in progress.
//
// One mutex guards all of it: lock 5 of docs/adr/0007-daemon-threads.md,
// held briefly, with only leaf locks taken under it. SandboxService owns
// one; it depends on nothing else, so tests/unit/sandbox_registry_test.cc
// drives it without a daemon.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/api_result.h"
#include "daemon/sandbox_entry.h"

namespace corral::daemon {

class SandboxRegistry {
  // One idempotency key's lock and how many creates use it.
  struct KeySlot {
    std::mutex mu;
    std::size_t users = 0;  // guarded by SandboxRegistry::mu_
  };

 public:
  struct Capacity {
    std::uint64_t max_sandboxes = 256;
    std::uint64_t max_memory_bytes = 0;  // sum of the live sandboxes' memory limits; 0: no bound
    std::uint64_t max_disk_bytes = 0;    // sum of their disk limits; 0: no bound
  };
  explicit SandboxRegistry(Capacity capacity) : capacity_(capacity) {}

  std::shared_ptr<SandboxEntry> find(std::string_view id);
  // The registered entry at this address, or null (the monitor's epoll
  // tokens carry addresses; an entry may have gone since).
  std::shared_ptr<SandboxEntry> find_by_address(const SandboxEntry* address);
  std::vector<std::shared_ptr<SandboxEntry>> all();
  std::size_t size();

  // Whether one more sandbox with these limits fits now: over_capacity or
  // insufficient_storage with the numbers if not. Nothing is reserved: a
  // create checks before its store row and registers (add) after it.
  ApiResult<void> check_capacity(const Limits& limits);
  // Registers `entry` under its id and reserves its limits.
  void add(const std::shared_ptr<SandboxEntry>& entry);
  // Unregisters `id` and releases what `limits` reserved, if it is there.
  void remove(const std::string& id, const Limits& limits);
  // Memory and disk bytes reserved by the registered sandboxes (for tests).
  std::uint64_t reserved_memory();
  std::uint64_t reserved_disk();

  // Holds the lock of one idempotency key for a whole create, so that a
  // retry racing the original waits for it and then finds its sandbox.
  // The key's entry is erased when its last user lets go.
  class KeyLock {
   public:
    KeyLock(SandboxRegistry& registry, const std::string& key);
    ~KeyLock();
    KeyLock(const KeyLock&) = delete;
    KeyLock& operator=(const KeyLock&) = delete;

   private:
    SandboxRegistry& registry_;
    // std::map iterators stay valid while the entry lives (users > 0).
    std::map<std::string, std::unique_ptr<KeySlot>, std::less<>>::iterator it_;
  };
  // Keys with a create in progress: for tests and a gauge.
  std::size_t key_locks_held();

 private:
  const Capacity capacity_;
  std::mutex mu_;  // guards what follows (ADR 0007's lock 5)
  std::map<std::string, std::shared_ptr<SandboxEntry>, std::less<>> entries_;
  std::uint64_t reserved_memory_ = 0;
  std::uint64_t reserved_disk_ = 0;
  std::map<std::string, std::unique_ptr<KeySlot>, std::less<>> key_locks_;
};

}  // namespace corral::daemon
