// SandboxRegistry (src/daemon/sandbox_registry.h): capacity is counted
// from the registered sandboxes' limits and given back when they go, a
// create that does not fit is refused with the numbers, and an
// idempotency key's lock serialises its creates and is forgotten when the
// last one ends.
#include "daemon/sandbox_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

namespace corral::daemon {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<SandboxEntry> entry(const std::string& id, std::uint64_t memory,
                                    std::uint64_t disk) {
  auto e = std::make_shared<SandboxEntry>();
  e->id = id;
  e->spec.limits.memory_bytes = memory;
  e->spec.limits.disk_bytes = disk;
  return e;
}

Limits limits(std::uint64_t memory, std::uint64_t disk) {
  Limits l;
  l.memory_bytes = memory;
  l.disk_bytes = disk;
  return l;
}

TEST(SandboxRegistry, ReservesTheLimitsOfWhatItHoldsAndGivesThemBack) {
  SandboxRegistry registry({10, 1000, 500});
  auto a = entry("sb-a", 300, 100);
  registry.add(a);
  registry.add(entry("sb-b", 200, 50));
  EXPECT_EQ(registry.size(), 2u);
  EXPECT_EQ(registry.reserved_memory(), 500u);
  EXPECT_EQ(registry.reserved_disk(), 150u);
  EXPECT_EQ(registry.find("sb-a"), a);
  EXPECT_EQ(registry.find_by_address(a.get()), a);
  EXPECT_EQ(registry.find("sb-c"), nullptr);

  registry.remove("sb-a", a->spec.limits);
  EXPECT_EQ(registry.size(), 1u);
  EXPECT_EQ(registry.reserved_memory(), 200u);
  EXPECT_EQ(registry.reserved_disk(), 50u);
  EXPECT_EQ(registry.find_by_address(a.get()), nullptr);
  // A second remove of the same id gives nothing back twice.
  registry.remove("sb-a", a->spec.limits);
  EXPECT_EQ(registry.reserved_memory(), 200u);
}

TEST(SandboxRegistry, RefusesWhatDoesNotFitWithTheNumbers) {
  SandboxRegistry registry({2, 1000, 500});
  registry.add(entry("sb-a", 600, 100));
  EXPECT_TRUE(registry.check_capacity(limits(400, 400)));

  auto memory = registry.check_capacity(limits(401, 1));
  ASSERT_FALSE(memory);
  EXPECT_TRUE(memory.error().is(api::ApiErrorCode::kOverCapacity)) << memory.error().code;
  EXPECT_EQ(memory.error().field, "limits.memory");
  EXPECT_EQ(memory.error().message,
            "memory limit 401 bytes does not fit: 600 of 1000 bytes are already promised to "
            "live sandboxes");

  auto disk = registry.check_capacity(limits(1, 401));
  ASSERT_FALSE(disk);
  EXPECT_TRUE(disk.error().is(api::ApiErrorCode::kInsufficientStorage)) << disk.error().code;
  EXPECT_EQ(disk.error().field, "limits.disk");

  registry.add(entry("sb-b", 1, 1));
  auto count = registry.check_capacity(limits(1, 1));
  ASSERT_FALSE(count);
  EXPECT_TRUE(count.error().is(api::ApiErrorCode::kOverCapacity)) << count.error().code;
  EXPECT_EQ(count.error().message,
            "the daemon already runs 2 sandboxes, its limit (serve.capacity.max_sandboxes)");
}

TEST(SandboxRegistry, ZeroMemoryAndDiskCapacityMeanNoBound) {
  SandboxRegistry registry({5, 0, 0});
  registry.add(entry("sb-a", 1ULL << 40, 1ULL << 40));
  EXPECT_TRUE(registry.check_capacity(limits(1ULL << 40, 1ULL << 40)));
}

TEST(SandboxRegistry, AKeyLockSerialisesItsCreatesAndIsForgottenAfterTheLast) {
  SandboxRegistry registry({});
  std::atomic<int> inside{0};
  std::atomic<int> most{0};
  auto create = [&] {
    SandboxRegistry::KeyLock lock(registry, "key-1");
    int now = ++inside;
    most = std::max(most.load(), now);
    std::this_thread::sleep_for(20ms);
    --inside;
  };
  std::thread t1, t2;
  {
    SandboxRegistry::KeyLock held(registry, "key-1");
    SandboxRegistry::KeyLock other(registry, "key-2");  // another key: not blocked
    EXPECT_EQ(registry.key_locks_held(), 2u);
    t1 = std::thread(create);
    t2 = std::thread(create);
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(inside.load(), 0);  // both wait for `held`
  }
  t1.join();
  t2.join();
  EXPECT_EQ(most.load(), 1);
  EXPECT_EQ(registry.key_locks_held(), 0u);
}

}  // namespace
}  // namespace corral::daemon
