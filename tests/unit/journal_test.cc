// Journal (src/daemon/journal.h): writes in the order they were posted,
// flush() and flush(key), and writes held back (defer) that join the queue
// once due, unless cancelled, and that flush() writes at once.
#include "daemon/journal.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
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

}  // namespace
}  // namespace corral::daemon
