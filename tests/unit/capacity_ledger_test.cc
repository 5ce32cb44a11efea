// CapacityLedger (src/daemon/capacity_ledger.h, REQUIREMENTS.md C2): a
// reservation is checked and taken in one step, refused with the
// documented code and the numbers when it does not fit, given back exactly
// once however its Reservation ends (destroyed, released, moved over), and
// threads that reserve at once never hold more than a bound allows.
#include "daemon/capacity_ledger.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>
#include <vector>

namespace corral::daemon {
namespace {

Limits limits(std::uint64_t memory, std::uint64_t disk) {
  Limits l;
  l.memory_bytes = memory;
  l.disk_bytes = disk;
  return l;
}

TEST(CapacityLedger, RefusesWhatDoesNotFitWithTheDocumentedCodeAndTheNumbers) {
  CapacityLedger ledger({2, 1000, 500});
  auto a = ledger.reserve(limits(600, 100));
  ASSERT_TRUE(a);
  // Exactly up to a bound fits.
  EXPECT_TRUE(ledger.reserve(limits(400, 400)));  // given back at once

  auto memory = ledger.reserve(limits(401, 1));
  ASSERT_FALSE(memory);
  EXPECT_TRUE(memory.error().is(api::ApiErrorCode::kOverCapacity)) << memory.error().code;
  EXPECT_EQ(memory.error().field, "limits.memory");
  EXPECT_EQ(memory.error().message,
            "memory limit 401 bytes does not fit: 600 of 1000 bytes are already promised to "
            "other sandboxes (serve.capacity.memory)");

  auto disk = ledger.reserve(limits(1, 401));
  ASSERT_FALSE(disk);
  EXPECT_TRUE(disk.error().is(api::ApiErrorCode::kInsufficientStorage)) << disk.error().code;
  EXPECT_EQ(disk.error().field, "limits.disk");

  auto b = ledger.reserve(limits(1, 1));
  ASSERT_TRUE(b);
  auto count = ledger.reserve(limits(1, 1));
  ASSERT_FALSE(count);
  EXPECT_TRUE(count.error().is(api::ApiErrorCode::kOverCapacity)) << count.error().code;
  EXPECT_EQ(count.error().field, "");
  EXPECT_EQ(count.error().message,
            "the daemon already holds 2 sandboxes (live or being created), its limit "
            "(serve.capacity.max_sandboxes)");
  // A refusal took nothing.
  EXPECT_EQ(ledger.reserved().sandboxes, 2u);
  EXPECT_EQ(ledger.reserved().memory_bytes, 601u);
  EXPECT_EQ(ledger.reserved().disk_bytes, 101u);
}

TEST(CapacityLedger, AReservationGivesItsShareBackExactlyOnce) {
  CapacityLedger ledger({4, 1000, 1000});
  {
    auto a = ledger.reserve(limits(100, 10));
    ASSERT_TRUE(a);
    EXPECT_TRUE(a->held());
    EXPECT_EQ(ledger.reserved().memory_bytes, 100u);
  }  // destroyed: given back
  EXPECT_EQ(ledger.reserved().sandboxes, 0u);
  EXPECT_EQ(ledger.reserved().memory_bytes, 0u);

  auto b = ledger.reserve(limits(200, 20));
  ASSERT_TRUE(b);
  CapacityLedger::Reservation moved = std::move(*b);
  EXPECT_FALSE(b->held());  // the moved-from one gives nothing back
  b->release();
  EXPECT_EQ(ledger.reserved().memory_bytes, 200u);
  moved.release();
  moved.release();  // twice: once
  EXPECT_EQ(ledger.reserved().memory_bytes, 0u);
  EXPECT_EQ(ledger.reserved().disk_bytes, 0u);

  // Moving over a held one gives the overwritten share back.
  auto c = ledger.reserve(limits(300, 30));
  auto d = ledger.reserve(limits(400, 40));
  ASSERT_TRUE(c && d);
  *c = std::move(*d);
  EXPECT_EQ(ledger.reserved().sandboxes, 1u);
  EXPECT_EQ(ledger.reserved().memory_bytes, 400u);
  c->release();
  EXPECT_EQ(ledger.reserved().sandboxes, 0u);
}

TEST(CapacityLedger, ZeroMemoryAndDiskBoundsMeanNoBoundAndHugeLimitsDoNotWrap) {
  CapacityLedger unbounded({5, 0, 0});
  auto a = unbounded.reserve(limits(1ULL << 62, 1ULL << 62));
  ASSERT_TRUE(a);
  EXPECT_TRUE(unbounded.reserve(limits(1ULL << 62, 1ULL << 62)));

  // A limit so large that the sum would wrap around is refused, not let in.
  CapacityLedger bounded({5, 1000, 1000});
  auto b = bounded.reserve(limits(10, 10));
  ASSERT_TRUE(b);
  EXPECT_FALSE(bounded.reserve(limits(UINT64_MAX - 5, 1)));
  EXPECT_FALSE(bounded.reserve(limits(1, UINT64_MAX - 5)));
}

TEST(CapacityLedger, AdoptedSharesCountWhetherTheyFitOrNot) {
  CapacityLedger ledger({1, 100, 100});
  auto a = ledger.adopt(limits(500, 50));
  auto b = ledger.adopt(limits(10, 10));
  EXPECT_EQ(ledger.reserved().sandboxes, 2u);
  EXPECT_EQ(ledger.reserved().memory_bytes, 510u);
  EXPECT_FALSE(ledger.reserve(limits(1, 1)));
  a.release();
  b.release();
  EXPECT_TRUE(ledger.reserve(limits(1, 1)));
}

// Many threads reserve and give back at once: no moment holds more than a
// bound, and everything comes back. Each bound is the binding one for
// some of the requests (count for the small ones, memory or disk for the
// large ones).
TEST(CapacityLedger, ConcurrentReservationsNeverExceedABound) {
  const CapacityLedger::Bounds bounds{4, 1000, 600};
  CapacityLedger ledger(bounds);
  std::atomic<std::uint64_t> sandboxes{0}, memory{0}, disk{0};
  std::atomic<std::uint64_t> most_sandboxes{0}, most_memory{0}, most_disk{0};
  std::atomic<int> admitted{0}, refused{0};
  auto raise = [](std::atomic<std::uint64_t>& most, std::uint64_t now) {
    std::uint64_t seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      const Limits mine = t % 3 == 0   ? limits(450, 50)    // memory binds
                          : t % 3 == 1 ? limits(100, 250)   // disk binds
                                       : limits(100, 50);   // the count binds
      for (int i = 0; i < 2000; ++i) {
        auto share = ledger.reserve(mine);
        if (!share) {
          ++refused;
          continue;
        }
        ++admitted;
        // Counted by the test while the share is held, before it goes.
        raise(most_sandboxes, ++sandboxes);
        raise(most_memory, memory += mine.memory_bytes);
        raise(most_disk, disk += mine.disk_bytes);
        std::this_thread::yield();
        --sandboxes;
        memory -= mine.memory_bytes;
        disk -= mine.disk_bytes;
        share->release();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(most_sandboxes.load(), bounds.max_sandboxes);
  EXPECT_LE(most_memory.load(), bounds.max_memory_bytes);
  EXPECT_LE(most_disk.load(), bounds.max_disk_bytes);
  EXPECT_GT(admitted.load(), 0);
  EXPECT_GT(refused.load(), 0) << "the threads never competed: the test proves nothing";
  EXPECT_EQ(ledger.reserved().sandboxes, 0u);
  EXPECT_EQ(ledger.reserved().memory_bytes, 0u);
  EXPECT_EQ(ledger.reserved().disk_bytes, 0u);
}

}  // namespace
}  // namespace corral::daemon
