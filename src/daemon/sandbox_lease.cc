#include "daemon/sandbox_lease.h"

#include <sys/socket.h>

#include "daemon/sandbox_entry.h"

namespace corral::daemon {

SandboxLease& SandboxLease::operator=(SandboxLease&& o) noexcept {
  if (this != &o) {
    release();
    sandbox_ = std::move(o.sandbox_);
    number_ = o.number_;
  }
  return *this;
}

void SandboxLease::settle() {
  if (!sandbox_) return;
  std::lock_guard lock(sandbox_->mu);
  if (auto it = sandbox_->leases.find(number_); it != sandbox_->leases.end()) it->second = -1;
}

void SandboxLease::release() {
  if (!sandbox_) return;
  {
    std::lock_guard lock(sandbox_->mu);
    sandbox_->leases.erase(number_);
  }
  sandbox_->leases_gone.notify_all();
  sandbox_.reset();
}

std::size_t drain_leases(SandboxEntry& sandbox, std::chrono::milliseconds limit) {
  std::unique_lock lock(sandbox.mu);
  // Under mu, a lease's connection is still open: its request ends (and
  // its connection may close) only after release(), which takes mu.
  // shutdown() wakes the request's poll: its next read or write fails, it
  // closes its files and lets go.
  for (auto& [number, connection] : sandbox.leases) {
    if (connection >= 0) (void)::shutdown(connection, SHUT_RDWR);
    connection = -1;
  }
  sandbox.leases_gone.wait_for(lock, limit, [&] { return sandbox.leases.empty(); });
  return sandbox.leases.size();
}

}  // namespace corral::daemon
