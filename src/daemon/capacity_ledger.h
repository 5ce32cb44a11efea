// CapacityLedger: how much of the daemon's capacity (serve.capacity) is
// promised, and the Reservations that hold it (REQUIREMENTS.md C2: a
// create that does not fit is refused, never accepted and killed later).
//
// A create reserves at admission: one check-and-take under the ledger's
// lock counts the sandbox, its memory limit and its disk limit together,
// so concurrent creates can never all pass the check before one of them
// is counted (issue 14: 16 simultaneous creates left up to 17 of 4 live).
// The Reservation is an RAII handle: dropped on any failure path of the
// create it gives everything back; on success it moves into the registry
// with the sandbox, and goes when the sandbox leaves the registry (after
// its teardown). A sandbox re-adopted after a restart is counted with
// adopt(), without a check: it runs already.
//
// A warm pool (C4, not built yet) would reserve() once per sandbox it
// fills and keep the Reservation with the pooled sandbox until it is
// handed out (moved into the registry) or discarded (dropped): pooled
// sandboxes then count against the same bounds as live ones, and a create
// never finds capacity a pool already holds.
//
// The ledger's mutex is a leaf (docs/adr/0007-daemon-threads.md): nothing
// is taken under it, and SandboxRegistry drops Reservations under its own.
#pragma once

#include <cstdint>
#include <mutex>

#include "daemon/api_result.h"
#include "spec/sandbox_spec.h"

namespace corral::daemon {

class CapacityLedger {
 public:
  // serve.capacity; 0 for memory or disk: no bound.
  struct Bounds {
    std::uint64_t max_sandboxes = 256;
    std::uint64_t max_memory_bytes = 0;  // sum of the sandboxes' memory limits
    std::uint64_t max_disk_bytes = 0;    // sum of their disk limits (RAM-backed layers)
  };
  // What is promised now, or what one sandbox holds.
  struct Totals {
    std::uint64_t sandboxes = 0;
    std::uint64_t memory_bytes = 0;
    std::uint64_t disk_bytes = 0;
  };

  // One sandbox's share, given back when it is destroyed or release()d.
  // Movable, not copyable; an empty one (default, moved-from) holds nothing.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept;
    Reservation& operator=(Reservation&& other) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation() { release(); }

    // Gives the share back now; a second call does nothing.
    void release();
    bool held() const { return ledger_ != nullptr; }

   private:
    friend class CapacityLedger;
    Reservation(CapacityLedger* ledger, Totals share) : ledger_(ledger), share_(share) {}
    CapacityLedger* ledger_ = nullptr;
    Totals share_;
  };

  explicit CapacityLedger(Bounds bounds) : bounds_(bounds) {}
  // Reservations point here: the ledger must outlive them.
  CapacityLedger(const CapacityLedger&) = delete;
  CapacityLedger& operator=(const CapacityLedger&) = delete;

  // One more sandbox with `limits`, if it fits beside everything reserved:
  // 429 over_capacity (count, then memory) or 507 insufficient_storage
  // (disk) with the numbers if not. Takes the share in the same step.
  ApiResult<Reservation> reserve(const Limits& limits);
  // Counts a sandbox that runs already (re-adopted after a restart),
  // whether it fits or not: what runs is what the host carries. A later
  // reserve() sees it.
  Reservation adopt(const Limits& limits);

  Totals reserved();
  const Bounds& bounds() const { return bounds_; }

 private:
  static Totals share_of(const Limits& limits) {
    return Totals{1, limits.memory_bytes, limits.disk_bytes};
  }
  void give_back(const Totals& share);

  const Bounds bounds_;
  std::mutex mu_;  // guards reserved_; a leaf lock
  Totals reserved_;
};

}  // namespace corral::daemon
