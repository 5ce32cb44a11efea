// Keeps a daemon's claim on its node id fresh from the moment it claims
// the id until it registers (StateStore::renew_claim, every heartbeat
// interval): a reconcile that takes longer than serve.node.lost_after is
// then not mistaken for a daemon that died, and no second daemon with the
// same id can take the id over meanwhile (docs/fleet.md, "Known limits").
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "store/state_store.h"

namespace corral::daemon {

class NodeClaimKeeper {
 public:
  NodeClaimKeeper(StateStore& store, NodeRegistration claim, std::chrono::milliseconds every);
  ~NodeClaimKeeper();
  NodeClaimKeeper(const NodeClaimKeeper&) = delete;
  NodeClaimKeeper& operator=(const NodeClaimKeeper&) = delete;
  // Stops renewing (the node registered, or the daemon gives up).
  void stop();

 private:
  void run();
  StateStore& store_;
  const NodeRegistration claim_;
  const std::chrono::milliseconds every_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace corral::daemon
