#include "daemon/sandbox_registry.h"

#include <algorithm>

namespace corral::daemon {

std::shared_ptr<SandboxEntry> SandboxRegistry::find(std::string_view id) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : it->second;
}

std::shared_ptr<SandboxEntry> SandboxRegistry::find_by_address(const SandboxEntry* address) {
  std::lock_guard lock(mu_);
  for (auto& [id, candidate] : entries_) {
    if (candidate.get() == address) return candidate;
  }
  return nullptr;
}

std::vector<std::shared_ptr<SandboxEntry>> SandboxRegistry::all() {
  std::vector<std::shared_ptr<SandboxEntry>> out;
  std::lock_guard lock(mu_);
  for (auto& [id, e] : entries_) out.push_back(e);
  return out;
}

std::size_t SandboxRegistry::size() {
  std::lock_guard lock(mu_);
  return entries_.size();
}

ApiResult<void> SandboxRegistry::check_capacity(const Limits& limits) {
  std::lock_guard lock(mu_);
  if (entries_.size() >= capacity_.max_sandboxes)
    return api_fail(api::ApiErrorCode::kOverCapacity,
                    "the daemon already runs " + std::to_string(entries_.size()) +
                        " sandboxes, its limit (serve.capacity.max_sandboxes)",
                    "", "destroy sandboxes you no longer need, or raise the limit");
  if (capacity_.max_memory_bytes != 0 &&
      reserved_memory_ + limits.memory_bytes > capacity_.max_memory_bytes)
    return api_fail(api::ApiErrorCode::kOverCapacity,
                    "memory limit " + std::to_string(limits.memory_bytes) +
                        " bytes does not fit: " + std::to_string(reserved_memory_) + " of " +
                        std::to_string(capacity_.max_memory_bytes) +
                        " bytes are already promised to live sandboxes",
                    "limits.memory", "ask for less memory or destroy idle sandboxes");
  if (capacity_.max_disk_bytes != 0 &&
      reserved_disk_ + limits.disk_bytes > capacity_.max_disk_bytes)
    return api_fail(api::ApiErrorCode::kInsufficientStorage,
                    "disk limit " + std::to_string(limits.disk_bytes) +
                        " bytes does not fit: " + std::to_string(reserved_disk_) + " of " +
                        std::to_string(capacity_.max_disk_bytes) +
                        " bytes are already promised to live sandboxes",
                    "limits.disk", "ask for a smaller disk or destroy idle sandboxes");
  return {};
}

void SandboxRegistry::add(const std::shared_ptr<SandboxEntry>& entry) {
  std::lock_guard lock(mu_);
  entries_[entry->id] = entry;
  reserved_memory_ += entry->spec.limits.memory_bytes;
  reserved_disk_ += entry->spec.limits.disk_bytes;
}

void SandboxRegistry::remove(const std::string& id, const Limits& limits) {
  std::lock_guard lock(mu_);
  if (entries_.erase(id) > 0) {
    reserved_memory_ -= std::min(reserved_memory_, limits.memory_bytes);
    reserved_disk_ -= std::min(reserved_disk_, limits.disk_bytes);
  }
}

std::uint64_t SandboxRegistry::reserved_memory() {
  std::lock_guard lock(mu_);
  return reserved_memory_;
}

std::uint64_t SandboxRegistry::reserved_disk() {
  std::lock_guard lock(mu_);
  return reserved_disk_;
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
