// SandboxLease: a request's hold on a live sandbox while it keeps fds into
// the sandbox's root or writable layer (the file API, a background
// process's output). A teardown waits for the leases to go before it wipes
// the layer (an open file keeps its bytes allocated: residue), after
// shutting down the connections of the transfers among them so that a
// stalled client cannot hold the wipe up (issue 14). A sandbox that is
// being destroyed grants no new lease (409 conflict).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace corral::daemon {

struct SandboxEntry;

class SandboxLease {
 public:
  SandboxLease() = default;
  SandboxLease(std::shared_ptr<SandboxEntry> sandbox, std::uint64_t number)
      : sandbox_(std::move(sandbox)), number_(number) {}
  ~SandboxLease() { release(); }
  SandboxLease(SandboxLease&& o) noexcept : sandbox_(std::move(o.sandbox_)), number_(o.number_) {}
  SandboxLease& operator=(SandboxLease&& o) noexcept;
  SandboxLease(const SandboxLease&) = delete;
  SandboxLease& operator=(const SandboxLease&) = delete;

  const std::shared_ptr<SandboxEntry>& sandbox() const { return sandbox_; }
  // The transfer is over (its last byte sent or received): a teardown from
  // now on waits for the rest (the audit record) without cutting the
  // connection, whose response is complete or about to be.
  void settle();
  // Ends the lease (the destructor does it): the fds into the sandbox must
  // be closed by then.
  void release();

 private:
  std::shared_ptr<SandboxEntry> sandbox_;
  std::uint64_t number_ = 0;
};

// For a teardown: shuts down the connections of the sandbox's transfers and
// waits, bounded by `limit`, until no lease is left. The sandbox must
// already refuse new leases (tearing_down set). Returns the leases still
// held when the time ran out (0: all gone).
std::size_t drain_leases(SandboxEntry& sandbox, std::chrono::milliseconds limit);

}  // namespace corral::daemon
