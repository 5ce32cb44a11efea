#include "daemon/journal.h"

namespace corral::daemon {

Journal::Journal() : thread_([this] { run(); }) {}

Journal::~Journal() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Journal::post(std::function<void()> write) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(write));
    ++posted_;
  }
  cv_.notify_all();
}

void Journal::flush() {
  std::unique_lock lock(mu_);
  const std::uint64_t target = posted_;
  cv_.wait(lock, [&] { return done_ >= target; });
}

void Journal::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) {
      if (stop_) return;
      continue;
    }
    auto write = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    write();
    lock.lock();
    ++done_;
    cv_.notify_all();
  }
}

}  // namespace corral::daemon
