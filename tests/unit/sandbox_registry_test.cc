// SandboxRegistry (src/daemon/sandbox_registry.h): a registered sandbox
// holds its capacity share until it is removed (the ledger itself is
// tests/unit/capacity_ledger_test.cc), and an idempotency key's lock
// serialises its creates and is forgotten when the last one ends.
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

// Registers `e` with the share a create would have reserved for it.
void admit(SandboxRegistry& registry, const std::shared_ptr<SandboxEntry>& e) {
  auto share = registry.capacity().reserve(e->spec.limits);
  ASSERT_TRUE(share) << share.error().message;
  registry.add(e, std::move(*share));
}

TEST(SandboxRegistry, AnEntryHoldsItsShareUntilItIsRemoved) {
  SandboxRegistry registry({10, 1000, 500});
  auto a = entry("sb-a", 300, 100);
  admit(registry, a);
  admit(registry, entry("sb-b", 200, 50));
  EXPECT_EQ(registry.size(), 2u);
  EXPECT_EQ(registry.capacity().reserved().sandboxes, 2u);
  EXPECT_EQ(registry.capacity().reserved().memory_bytes, 500u);
  EXPECT_EQ(registry.capacity().reserved().disk_bytes, 150u);
  EXPECT_EQ(registry.find("sb-a"), a);
  EXPECT_EQ(registry.find_by_address(a.get()), a);
  EXPECT_EQ(registry.find("sb-c"), nullptr);

  registry.remove("sb-a");
  EXPECT_EQ(registry.size(), 1u);
  EXPECT_EQ(registry.capacity().reserved().sandboxes, 1u);
  EXPECT_EQ(registry.capacity().reserved().memory_bytes, 200u);
  EXPECT_EQ(registry.capacity().reserved().disk_bytes, 50u);
  EXPECT_EQ(registry.find_by_address(a.get()), nullptr);
  // A second remove of the same id gives nothing back twice.
  registry.remove("sb-a");
  EXPECT_EQ(registry.capacity().reserved().memory_bytes, 200u);
  // The entry may outlive its registration (a request still holds it):
  // its share went with the registration, not with the last holder.
  EXPECT_EQ(a.use_count(), 1);
}

// A re-adopted sandbox is counted whether it fits or not, and a create
// then sees it.
TEST(SandboxRegistry, AReadoptedEntryCountsEvenOverTheBounds) {
  SandboxRegistry registry({1, 1000, 500});
  auto a = entry("sb-a", 2000, 100);
  registry.add(a, registry.capacity().adopt(a->spec.limits));
  auto b = entry("sb-b", 10, 10);
  registry.add(b, registry.capacity().adopt(b->spec.limits));
  EXPECT_EQ(registry.capacity().reserved().sandboxes, 2u);
  EXPECT_EQ(registry.capacity().reserved().memory_bytes, 2010u);
  EXPECT_FALSE(registry.capacity().reserve(b->spec.limits));
  registry.remove("sb-a");
  registry.remove("sb-b");
  EXPECT_TRUE(registry.capacity().reserve(b->spec.limits));
}

TEST(SandboxRegistry, AKeyLockSerialisesItsCreatesAndIsForgottenAfterTheLast) {
  SandboxRegistry registry(CapacityLedger::Bounds{});
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
