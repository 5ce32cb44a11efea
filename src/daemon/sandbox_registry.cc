#include "daemon/sandbox_registry.h"

#include <utility>

namespace corral::daemon {

std::shared_ptr<SandboxEntry> SandboxRegistry::find(std::string_view id) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : it->second.entry;
}

std::shared_ptr<SandboxEntry> SandboxRegistry::find_by_address(const SandboxEntry* address) {
  std::lock_guard lock(mu_);
  for (auto& [id, registered] : entries_) {
    if (registered.entry.get() == address) return registered.entry;
  }
  return nullptr;
}

std::vector<std::shared_ptr<SandboxEntry>> SandboxRegistry::all() {
  std::vector<std::shared_ptr<SandboxEntry>> out;
  std::lock_guard lock(mu_);
  for (auto& [id, registered] : entries_) out.push_back(registered.entry);
  return out;
}

std::size_t SandboxRegistry::size() {
  std::lock_guard lock(mu_);
  return entries_.size();
}

void SandboxRegistry::add(const std::shared_ptr<SandboxEntry>& entry,
                          CapacityLedger::Reservation share) {
  std::lock_guard lock(mu_);
  entries_[entry->id] = Registered{entry, std::move(share)};
}

void SandboxRegistry::remove(const std::string& id) {
  std::lock_guard lock(mu_);
  entries_.erase(id);  // its Reservation gives the share back (the ledger's lock is a leaf)
}

// ---- idempotency keys ----------------------------------------------------------

SandboxRegistry::KeyLock::KeyLock(SandboxRegistry& registry, const std::string& key)
    : registry_(registry) {
  {
    std::lock_guard lock(registry_.mu_);
    auto& slot = registry_.key_locks_[key];
    if (!slot) slot = std::make_unique<KeySlot>();
    ++slot->users;
    it_ = registry_.key_locks_.find(key);
  }
  // Not under mu_: a create holds this for its whole length.
  it_->second->mu.lock();
}

SandboxRegistry::KeyLock::~KeyLock() {
  it_->second->mu.unlock();
  std::lock_guard lock(registry_.mu_);
  if (--it_->second->users == 0) registry_.key_locks_.erase(it_);
}

std::size_t SandboxRegistry::key_locks_held() {
  std::lock_guard lock(mu_);
  return key_locks_.size();
}

}  // namespace corral::daemon
