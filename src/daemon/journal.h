// Journal: a single writer thread that applies bookkeeping writes (state
// store rows and audit records) in the order they were posted, so that the
// exec path does not wait for their fsyncs. A write posted here is durable
// a few milliseconds later; flush() waits until everything posted so far
// is written. Lifecycle writes that the API acknowledges (create, destroy,
// background process start) flush first and then write synchronously, so
// the records of one sandbox keep their order.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace corral::daemon {

class Journal {
 public:
  Journal();
  ~Journal();  // writes what is queued, then stops
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  void post(std::function<void()> write);
  void flush();

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::uint64_t posted_ = 0;
  std::uint64_t done_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace corral::daemon
