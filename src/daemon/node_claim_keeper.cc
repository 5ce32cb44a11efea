#include "daemon/node_claim_keeper.h"

#include <cstdio>

namespace corral::daemon {

NodeClaimKeeper::NodeClaimKeeper(StateStore& store, NodeRegistration claim,
                                 std::chrono::milliseconds every)
    : store_(store), claim_(std::move(claim)), every_(every) {
  thread_ = std::thread([this] { run(); });
}

NodeClaimKeeper::~NodeClaimKeeper() { stop(); }

void NodeClaimKeeper::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void NodeClaimKeeper::run() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, every_, [this] { return stopping_; })) {
    lock.unlock();
    auto st = store_.renew_claim(claim_);
    lock.lock();
    if (!st && st.error().code == ErrorCode::kAlreadyExists) {
      // Taken over: registering will refuse this daemon and say why.
      fprintf(stderr, "corral serve: %s\n", st.error().message.c_str());
      return;
    }
    // Another failure (the store away a moment): the next round tries again.
  }
}

}  // namespace corral::daemon
