// SandboxRegistry: the daemon's live sandboxes by id, each with the share
// of the daemon's capacity it holds (a CapacityLedger::Reservation, taken
// at admission: REQUIREMENTS.md C2), and one lock per idempotency key
// whose create is in progress.
//
// One mutex guards the entries and the keys: lock 5 of
// docs/adr/0007-daemon-threads.md, held briefly, with only leaf locks
// (the ledger's) taken under it. SandboxService owns one; it depends on
// nothing else, so tests/unit/sandbox_registry_test.cc drives it without
// a daemon.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/capacity_ledger.h"
#include "daemon/sandbox_entry.h"

namespace corral::daemon {

class SandboxRegistry {
  // One idempotency key's lock and how many creates use it.
  struct KeySlot {
    std::mutex mu;
    std::size_t users = 0;  // guarded by SandboxRegistry::mu_
  };

 public:
  explicit SandboxRegistry(CapacityLedger::Bounds capacity) : capacity_(capacity) {}

  std::shared_ptr<SandboxEntry> find(std::string_view id);
  // The registered entry at this address, or null (the monitor's epoll
  // tokens carry addresses; an entry may have gone since).
  std::shared_ptr<SandboxEntry> find_by_address(const SandboxEntry* address);
  std::vector<std::shared_ptr<SandboxEntry>> all();
  std::size_t size();

  // Where a create reserves its share before anything else is done for it
  // (capacity().reserve()), and a re-adopted sandbox is counted (adopt()).
  CapacityLedger& capacity() { return capacity_; }
  // Registers `entry` under its id; it keeps `share` while registered.
  void add(const std::shared_ptr<SandboxEntry>& entry, CapacityLedger::Reservation share);
  // Unregisters `id`, if it is there, and gives its share back.
  void remove(const std::string& id);

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
  struct Registered {
    std::shared_ptr<SandboxEntry> entry;
    CapacityLedger::Reservation share;
  };
  CapacityLedger capacity_;  // before entries_: it outlives their shares
  std::mutex mu_;            // guards what follows (ADR 0007's lock 5)
  std::map<std::string, Registered, std::less<>> entries_;
  std::map<std::string, std::unique_ptr<KeySlot>, std::less<>> key_locks_;
};

}  // namespace corral::daemon
