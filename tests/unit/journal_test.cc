// Journal (src/daemon/journal.h): writes in the order they were posted,
// flush() and flush(key), and writes held back (defer) that join the queue
// once due, unless cancelled, and that flush() writes at once.
#include "daemon/journal.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace corral::daemon {
namespace {

using namespace std::chrono_literals;

struct Log {
  std::mutex mu;
  std::vector<std::string> lines;
  void add(std::string s) {
    std::lock_guard lock(mu);
    lines.push_back(std::move(s));
  }
  std::vector<std::string> get() {
    std::lock_guard lock(mu);
    return lines;
  }
};

TEST(Journal, WritesInPostOrderAndFlushWaits) {
  Log log;
  Journal j;
  for (int i = 0; i < 100; ++i) j.post([&log, i] { log.add(std::to_string(i)); });
  j.flush();
  auto lines = log.get();
  ASSERT_EQ(lines.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(lines[i], std::to_string(i));
}

TEST(Journal, FlushOfAKeyWaitsForThatKeyOnly) {
  Log log;
  Journal j;
  std::atomic<bool> release{false};
  // An unkeyed write that holds the writer up: a key with nothing queued
  // does not wait for it; a key queued behind it does.
  j.post([&] {
    while (!release) std::this_thread::sleep_for(1ms);
    log.add("slow");
  });
  const auto t0 = std::chrono::steady_clock::now();
  j.flush("b");  // nothing queued under "b"
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 500ms);
  j.post("a", [&] { log.add("a"); });
  std::thread releaser([&] {
    std::this_thread::sleep_for(50ms);
    release = true;
  });
  j.flush("a");  // waits for "a", hence for the slow write before it
  EXPECT_EQ(log.get(), (std::vector<std::string>{"slow", "a"}));
  releaser.join();
}

TEST(Journal, DeferredWriteIsWrittenOnceDue) {
  Log log;
  Journal j;
  j.defer("sb-1", 300ms, [&] { log.add("idle"); });
  j.post("sb-1", [&] { log.add("now"); });
  j.flush("sb-1");  // waits for "now"; the held-back write stays held back
  EXPECT_EQ(log.get(), (std::vector<std::string>{"now"}));
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (log.get().size() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(log.get(), (std::vector<std::string>{"now", "idle"}));
  EXPECT_FALSE(j.cancel("sb-1"));  // already written
}

TEST(Journal, CancelDropsAHeldBackWrite) {
  Log log;
  Journal j;
  j.defer("sb-1", 50ms, [&] { log.add("idle"); });
  EXPECT_TRUE(j.cancel("sb-1"));
  EXPECT_FALSE(j.cancel("sb-1"));
  std::this_thread::sleep_for(150ms);
  j.flush();
  EXPECT_TRUE(log.get().empty());
}

TEST(Journal, DeferReplacesTheWriteUnderTheSameKey) {
  Log log;
  Journal j;
  j.defer("sb-1", 10s, [&] { log.add("first"); });
  j.defer("sb-1", 10s, [&] { log.add("second"); });
  j.flush();
  EXPECT_EQ(log.get(), (std::vector<std::string>{"second"}));
}

TEST(Journal, FlushWritesHeldBackWritesAtOnceAfterThePosted) {
  Log log;
  Journal j;
  j.defer("sb-1", 10s, [&] { log.add("idle 1"); });
  j.defer("sb-2", 10s, [&] { log.add("idle 2"); });
  j.post([&] { log.add("posted"); });
  const auto t0 = std::chrono::steady_clock::now();
  j.flush();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(log.get(), (std::vector<std::string>{"posted", "idle 1", "idle 2"}));
  EXPECT_FALSE(j.cancel("sb-1"));
}

TEST(Journal, DestructorWritesHeldBackWrites) {
  Log log;
  {
    Journal j;
    j.defer("sb-1", 10s, [&] { log.add("idle"); });
  }
  EXPECT_EQ(log.get(), (std::vector<std::string>{"idle"}));
}

// A write that holds the writer until open() is called: the queue behind
// it fills up.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open_ = false;
  bool entered = false;
  void wait() {
    std::unique_lock lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return open_; });
  }
  void wait_entered() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return entered; });
  }
  void open() {
    std::lock_guard lock(mu);
    open_ = true;
    cv.notify_all();
  }
};

TEST(Journal, DroppableWritesAreDroppedAndCountedOnceThreeQuartersFull) {
  Gate gate;
  std::atomic<int> written{0};
  Journal j(16);
  j.post([&] { gate.wait(); });
  gate.wait_entered();  // the writer is busy; nothing more is written
  int accepted = 0;
  for (int i = 0; i < 1000; ++i) accepted += j.try_post("sb", [&] { ++written; }) ? 1 : 0;
  EXPECT_EQ(accepted, 12) << "3/4 of 16";
  EXPECT_EQ(j.dropped(), 1000u - 12u);
  EXPECT_LE(j.queued(), 12u);
  // The last quarter stays for writes that must not be lost.
  for (int i = 0; i < 4; ++i) j.post([&] { ++written; });
  EXPECT_EQ(j.queued(), 16u);
  gate.open();
  j.flush();
  EXPECT_EQ(written.load(), 16);
}

TEST(Journal, APostIntoAFullQueueWaitsAndIsNeverLost) {
  Gate gate;
  std::atomic<int> written{0};
  std::atomic<bool> poster_done{false};
  Journal j(8);
  j.post([&] { gate.wait(); });
  gate.wait_entered();
  constexpr int kPosts = 50;
  std::thread poster([&] {
    for (int i = 0; i < kPosts; ++i) j.post([&] { ++written; });
    poster_done = true;
  });
  // The poster fills the queue to its bound and cannot go further.
  while (j.queued() < j.capacity()) std::this_thread::yield();
  EXPECT_EQ(j.queued(), j.capacity());
  EXPECT_FALSE(poster_done.load()) << "50 posts went into a queue of 8";
  EXPECT_FALSE(j.try_post("sb", [] {})) << "a full queue takes no droppable write";
  gate.open();
  poster.join();
  j.flush();
  EXPECT_EQ(written.load(), kPosts);
}

TEST(Journal, AWriteThatPostsIntoAFullQueueDoesNotDeadlock) {
  Gate gate;
  std::atomic<int> written{0};
  Journal j(4);
  j.post([&] {
    gate.wait();
    // On the writer thread, with the queue full: goes over by one.
    j.post([&] { ++written; });
  });
  gate.wait_entered();
  for (int i = 0; i < 4; ++i) j.post([&] { ++written; });
  gate.open();
  j.flush();
  j.flush();
  EXPECT_EQ(written.load(), 5);
}

}  // namespace
}  // namespace corral::daemon
