#include "daemon/capacity_ledger.h"

#include <algorithm>
#include <string>
#include <utility>

namespace corral::daemon {

namespace {

// Whether `more` fits beside `held` under `bound` (0: no bound), without
// overflowing on huge limits.
bool fits(std::uint64_t held, std::uint64_t more, std::uint64_t bound) {
  return bound == 0 || (held <= bound && more <= bound - held);
}

}  // namespace

CapacityLedger::Reservation::Reservation(Reservation&& other) noexcept
    : ledger_(std::exchange(other.ledger_, nullptr)), share_(other.share_) {}

CapacityLedger::Reservation& CapacityLedger::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    release();
    ledger_ = std::exchange(other.ledger_, nullptr);
    share_ = other.share_;
  }
  return *this;
}

void CapacityLedger::Reservation::release() {
  if (CapacityLedger* ledger = std::exchange(ledger_, nullptr)) ledger->give_back(share_);
}

ApiResult<CapacityLedger::Reservation> CapacityLedger::reserve(const Limits& limits) {
  const Totals share = share_of(limits);
  std::lock_guard lock(mu_);
  if (!fits(reserved_.sandboxes, share.sandboxes, bounds_.max_sandboxes))
    return api_fail(api::ApiErrorCode::kOverCapacity,
                    "the daemon already holds " + std::to_string(reserved_.sandboxes) +
                        " sandboxes (live or being created), its limit "
                        "(serve.capacity.max_sandboxes)",
                    "", "destroy sandboxes you no longer need, or raise the limit");
  if (!fits(reserved_.memory_bytes, share.memory_bytes, bounds_.max_memory_bytes))
    return api_fail(api::ApiErrorCode::kOverCapacity,
                    "memory limit " + std::to_string(share.memory_bytes) +
                        " bytes does not fit: " + std::to_string(reserved_.memory_bytes) + " of " +
                        std::to_string(bounds_.max_memory_bytes) +
                        " bytes are already promised to other sandboxes "
                        "(serve.capacity.memory)",
                    "limits.memory", "ask for less memory or destroy idle sandboxes");
  if (!fits(reserved_.disk_bytes, share.disk_bytes, bounds_.max_disk_bytes))
    return api_fail(api::ApiErrorCode::kInsufficientStorage,
                    "disk limit " + std::to_string(share.disk_bytes) +
                        " bytes does not fit: " + std::to_string(reserved_.disk_bytes) + " of " +
                        std::to_string(bounds_.max_disk_bytes) +
                        " bytes are already promised to other sandboxes (serve.capacity.disk)",
                    "limits.disk", "ask for a smaller disk or destroy idle sandboxes");
  reserved_.sandboxes += share.sandboxes;
  reserved_.memory_bytes += share.memory_bytes;
  reserved_.disk_bytes += share.disk_bytes;
  return Reservation(this, share);
}

CapacityLedger::Reservation CapacityLedger::adopt(const Limits& limits) {
  const Totals share = share_of(limits);
  std::lock_guard lock(mu_);
  reserved_.sandboxes += share.sandboxes;
  reserved_.memory_bytes += share.memory_bytes;
  reserved_.disk_bytes += share.disk_bytes;
  return Reservation(this, share);
}

CapacityLedger::Totals CapacityLedger::reserved() {
  std::lock_guard lock(mu_);
  return reserved_;
}

void CapacityLedger::give_back(const Totals& share) {
  std::lock_guard lock(mu_);
  // Each share was added once and is given back once (Reservation); the
  // clamps only keep a bug from wrapping the totals around.
  reserved_.sandboxes -= std::min(reserved_.sandboxes, share.sandboxes);
  reserved_.memory_bytes -= std::min(reserved_.memory_bytes, share.memory_bytes);
  reserved_.disk_bytes -= std::min(reserved_.disk_bytes, share.disk_bytes);
}

}  // namespace corral::daemon
