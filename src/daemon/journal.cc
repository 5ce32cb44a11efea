#include "daemon/journal.h"

#include <algorithm>
#include <vector>

namespace corral::daemon {

Journal::Journal(std::size_t capacity)
    : capacity_(std::max<std::size_t>(capacity, 4)), thread_([this] { run(); }) {}

Journal::~Journal() {
  {
    std::lock_guard lock(mu_);
    promote(Clock::now(), true);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Journal::post(std::function<void()> write) { post(std::string(), std::move(write)); }

void Journal::enqueue(const std::string& key, std::function<void()> write) {
  if (!key.empty()) ++queued_by_key_[key];
  queue_.push_back(Item{key, std::move(write)});
  ++posted_;
}

void Journal::post(const std::string& key, std::function<void()> write) {
  {
    std::unique_lock lock(mu_);
    // Backpressure, never loss. The writer thread posting from a write
    // cannot wait for itself: it goes over the bound by that one write.
    if (std::this_thread::get_id() != thread_.get_id())
      cv_.wait(lock, [&] { return stop_ || queue_.size() < capacity_; });
    enqueue(key, std::move(write));
  }
  cv_.notify_all();
}

bool Journal::try_post(const std::string& key, std::function<void()> write) {
  {
    std::lock_guard lock(mu_);
    if (queue_.size() >= capacity_ - capacity_ / 4) {
      ++dropped_;
      return false;
    }
    enqueue(key, std::move(write));
  }
  cv_.notify_all();
  return true;
}

std::uint64_t Journal::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

std::size_t Journal::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

void Journal::flush() {
  std::unique_lock lock(mu_);
  if (!deferred_.empty()) {
    promote(Clock::now(), true);
    cv_.notify_all();
  }
  const std::uint64_t target = posted_;
  cv_.wait(lock, [&] { return done_ >= target; });
}

void Journal::flush(const std::string& key) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !queued_by_key_.contains(key); });
}

void Journal::defer(const std::string& key, std::chrono::milliseconds delay,
                    std::function<void()> write) {
  {
    std::lock_guard lock(mu_);
    deferred_[key] = Deferred{Clock::now() + delay, std::move(write)};
  }
  cv_.notify_all();  // the writer may have to wake earlier
}

bool Journal::cancel(const std::string& key) {
  std::lock_guard lock(mu_);
  return deferred_.erase(key) != 0;
}

void Journal::promote(Clock::time_point now, bool all) {
  std::vector<std::map<std::string, Deferred>::iterator> due;
  for (auto it = deferred_.begin(); it != deferred_.end(); ++it) {
    if (all || it->second.due <= now) due.push_back(it);
  }
  // In the order they fell due, after everything posted before.
  std::sort(due.begin(), due.end(), [](auto a, auto b) { return a->second.due < b->second.due; });
  // Held-back writes are one per key at most: they join even a full queue.
  for (auto it : due) {
    enqueue(it->first, std::move(it->second.write));
    deferred_.erase(it);
  }
}

void Journal::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (queue_.empty() && !deferred_.empty()) {
      Clock::time_point next = Clock::time_point::max();
      for (const auto& [key, d] : deferred_) next = std::min(next, d.due);
      // Woken early by a post, a defer or stop: the loop looks again.
      if (!stop_) cv_.wait_until(lock, next);
      promote(Clock::now(), stop_);
    } else {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty() || !deferred_.empty(); });
    }
    if (queue_.empty()) {
      if (stop_ && deferred_.empty()) return;
      continue;
    }
    Item item = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    item.write();
    lock.lock();
    if (!item.key.empty()) {
      auto it = queued_by_key_.find(item.key);
      if (it != queued_by_key_.end() && --it->second == 0) queued_by_key_.erase(it);
    }
    ++done_;
    cv_.notify_all();
  }
}

}  // namespace corral::daemon
