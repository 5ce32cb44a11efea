// Journal: a single writer thread that applies bookkeeping writes (state
// store rows and audit records) in the order they were posted, so that the
// exec path does not wait for their fsyncs. A write posted here is durable
// a few milliseconds later; flush() waits until everything posted so far
// is written. Lifecycle writes that the API acknowledges (create, destroy,
// background process start) flush first and then write synchronously, so
// the records of one sandbox keep their order.
//
// A write can also be held back (defer): it joins the queue once its delay
// has passed, unless it is cancelled first. The daemon holds back a
// sandbox's `running -> ready` for a moment after its last process ended,
// so that a sandbox running one command after another is not stored as
// ready and running again for every command (sandbox_processes.cc).
//
// The queue is bounded (serve.audit.queue, docs/audit.md). Writes a
// sandbox can trigger on its own (try_post) are dropped and counted once
// the queue is three quarters full, so that a flood never takes the room
// of the rest. Every other write (post: what an acknowledged API operation
// writes) is never dropped: a post into a full queue waits until the
// writer has made room (backpressure on the API request), except on the
// writer thread itself, which could not make room while it waits.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace corral::daemon {

class Journal {
 public:
  static constexpr std::size_t kDefaultCapacity = 8192;
  explicit Journal(std::size_t capacity = kDefaultCapacity);
  ~Journal();  // writes what is queued and held back, then stops
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  void post(std::function<void()> write);
  // The same, for a write about `key` (a sandbox id): see flush(key).
  void post(const std::string& key, std::function<void()> write);
  // The same for a write that may be lost: false (not queued, counted in
  // dropped()) when the queue holds 3/4 of its capacity or more.
  bool try_post(const std::string& key, std::function<void()> write);
  std::uint64_t dropped() const;
  // Writes queued now (not the held-back ones).
  std::size_t queued() const;
  std::size_t capacity() const { return capacity_; }
  // Waits until everything posted so far is written, held-back writes
  // included (they are queued at once): a synchronous write that follows
  // comes after all of them.
  void flush();
  // Waits until the writes posted (or queued after being held back) under
  // `key` are written; other writes, and writes still held back, are not
  // waited for. For a record that only has to follow its sandbox's own.
  void flush(const std::string& key);

  // Holds `write` back for `delay` under `key` (replacing a held-back write
  // with the same key), then queues it like post().
  void defer(const std::string& key, std::chrono::milliseconds delay, std::function<void()> write);
  // Drops the held-back write under `key`: true if there was one (it will
  // never be written), false if there was none or it is already queued.
  bool cancel(const std::string& key);

 private:
  using Clock = std::chrono::steady_clock;
  struct Item {
    std::string key;
    std::function<void()> write;
  };
  struct Deferred {
    Clock::time_point due;
    std::function<void()> write;
  };
  void run();
  // Moves held-back writes to the queue: those due by `now`, or all.
  void promote(Clock::time_point now, bool all);                      // with mu_ held
  void enqueue(const std::string& key, std::function<void()> write);  // with mu_ held
  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  std::map<std::string, Deferred, std::less<>> deferred_;
  std::map<std::string, std::uint64_t, std::less<>> queued_by_key_;  // not yet written
  std::uint64_t posted_ = 0;
  std::uint64_t done_ = 0;
  std::uint64_t dropped_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace corral::daemon
