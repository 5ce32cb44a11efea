// Placement of creates across the nodes of a fleet in the state store
// (issue 18, store/placement.h), on both backends: the node with the most
// free room for its size first, which fills nodes in proportion to their
// capacity; never past a node's capacity, counting the sandboxes it holds
// and the placements still pending on it; labels, a named node, warm pools,
// nodes that refused, lost nodes. On PostgreSQL alone: three nodes placing
// at once never promise a slot twice.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "store/state_store.h"
#include "support/store_backend.h"

namespace corral::testing {
namespace {

// Specs in these tests are {"mem": N}: the share is N bytes of memory.
SandboxShare test_share(std::string_view spec_json) {
  SandboxShare s;
  const std::string text(spec_json);
  auto at = text.find("\"mem\":");
  if (at != std::string::npos) s.memory_bytes = std::stoull(text.substr(at + 6));
  return s;
}

class Placement : public StoreBackendTest {
 protected:
  // A node registered with `sandboxes` slots (and memory, if not 0).
  std::unique_ptr<StateStore> node(const std::string& id, int sandboxes,
                                   const std::string& labels = "{}",
                                   const std::string& pools = "[]", std::uint64_t memory = 0) {
    auto s = open(id);
    if (!s) return nullptr;
    std::string cap = R"({"sandboxes":)" + std::to_string(sandboxes);
    if (memory != 0) cap += R"(,"memory_bytes":)" + std::to_string(memory);
    cap += "}";
    auto r = s->register_node(NodeRegistration{id, "127.0.0.1:1", cap, labels, pools});
    EXPECT_TRUE(r) << r.error().to_string();
    return s;
  }
  // Places from `from`, then stores the sandbox on the chosen node, as a
  // daemon does; returns the node ("" when none was chosen).
  std::string place_and_create(StateStore& from, std::map<std::string, StateStore*>& stores,
                               const PlacementRequest& req = {}, const std::string& spec = "{}") {
    auto p = from.place_sandbox(req, test_share);
    EXPECT_TRUE(p) << p.error().to_string();
    if (!p || p->id.empty()) return "";
    StateStore* there = stores.at(p->node);
    auto c = there->create_sandbox("sb-" + std::to_string(++made_), spec, std::nullopt,
                                   std::nullopt, p->id);
    EXPECT_TRUE(c) << c.error().to_string();
    return p->node;
  }
  int made_ = 0;
};

TEST_P(Placement, CreatesFillNodesInProportionToTheirCapacityAndNeverPastIt) {
  auto a = node("node-a", 2);
  auto b = node("node-b", 4);
  auto c = node("node-c", 6);
  ASSERT_TRUE(a && b && c);
  std::map<std::string, StateStore*> stores{
      {"node-a", a.get()}, {"node-b", b.get()}, {"node-c", c.get()}};
  std::map<std::string, int> on;
  for (int i = 0; i < 6; ++i) ++on[place_and_create(*a, stores)];
  EXPECT_EQ(on, (std::map<std::string, int>{{"node-a", 1}, {"node-b", 2}, {"node-c", 3}}))
      << "half of every node's room is taken";
  for (int i = 0; i < 6; ++i) ++on[place_and_create(*b, stores)];
  EXPECT_EQ(on, (std::map<std::string, int>{{"node-a", 2}, {"node-b", 4}, {"node-c", 6}}));
  auto full = c->place_sandbox({}, test_share);
  ASSERT_TRUE(full) << full.error().to_string();
  EXPECT_TRUE(full->id.empty());
  EXPECT_TRUE(full->full) << "only capacity stood in the way";
  EXPECT_EQ(describe_refusals(full->refused),
            "node-a: full (2 of 2 sandboxes); node-b: full (4 of 4 sandboxes); node-c: full (6 "
            "of 6 sandboxes)");
  // A destroyed sandbox gives its slot back once cleaned, not before.
  ASSERT_TRUE(a->transition("sb-1", SandboxState::kDestroying, "test"));
  EXPECT_TRUE(c->place_sandbox({}, test_share)->id.empty()) << "destroying still holds it";
  ASSERT_TRUE(a->transition("sb-1", SandboxState::kCleaned, "test"));
  auto again = c->place_sandbox({}, test_share);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->node, "node-a");
}

TEST_P(Placement, PendingPlacementsHoldTheirRoomUntilStoredReleasedOrExpired) {
  auto a = node("node-a", 1, "{}", "[]", 1000);
  ASSERT_TRUE(a);
  PlacementRequest req;
  req.share.memory_bytes = 600;
  auto first = a->place_sandbox(req, test_share);
  ASSERT_TRUE(first && !first->id.empty());
  auto second = a->place_sandbox(req, test_share);
  ASSERT_TRUE(second);
  EXPECT_TRUE(second->id.empty()) << "the pending placement holds the only slot";
  ASSERT_TRUE(a->release_placement(first->id));
  ASSERT_TRUE(a->release_placement(first->id)) << "releasing twice is no error";
  auto third = a->place_sandbox(req, test_share);
  ASSERT_TRUE(third && !third->id.empty());
  // Stored: the sandbox holds the slot, the placement is gone (counted once).
  ASSERT_TRUE(a->create_sandbox("sb-1", R"({"mem":600})", std::nullopt, std::nullopt, third->id));
  ASSERT_TRUE(a->transition("sb-1", SandboxState::kDestroying, "test"));
  ASSERT_TRUE(a->transition("sb-1", SandboxState::kCleaned, "test"));
  auto fourth = a->place_sandbox(req, test_share);
  ASSERT_TRUE(fourth);
  EXPECT_FALSE(fourth->id.empty()) << "the stored sandbox was not counted a second time";
  // Memory: 600 of 1000 pending; 500 more does not fit even with a slot.
  auto bigger = node("node-b", 5, "{}", "[]", 1000);
  ASSERT_TRUE(bigger);
  req.node = "node-b";
  ASSERT_FALSE(a->place_sandbox(req, test_share)->id.empty());
  req.share.memory_bytes = 500;
  auto no_memory = a->place_sandbox(req, test_share);
  ASSERT_TRUE(no_memory);
  EXPECT_TRUE(no_memory->id.empty());
  EXPECT_TRUE(no_memory->full);
  EXPECT_NE(describe_refusals(no_memory->refused).find("node-b: not enough memory (400 of 1000"),
            std::string::npos)
      << describe_refusals(no_memory->refused);
  // A placing node that died: its placement expires.
  PlacementRequest brief;
  brief.node = "node-a";
  brief.hold_ms = 1;
  ASSERT_TRUE(a->release_placement(fourth->id));
  ASSERT_FALSE(a->place_sandbox(brief, test_share)->id.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(a->place_sandbox(brief, test_share)->id.empty()) << "the first one expired";
}

TEST_P(Placement, LabelsNamedNodesPoolsRefusalsAndLostNodesChooseTheNode) {
  auto a = node("node-a", 4, R"({"zone":"eu","gpu":"no"})", R"(["py"])");
  auto b = node("node-b", 4, R"({"zone":"us"})", R"(["py","node"])");
  auto c = node("node-c", 4, R"({"zone":"eu"})", "[]");
  ASSERT_TRUE(a && b && c);
  auto place = [&](const PlacementRequest& req) {
    auto p = a->place_sandbox(req, test_share);
    EXPECT_TRUE(p) << p.error().to_string();
    if (p && !p->id.empty()) {
      EXPECT_TRUE(a->release_placement(p->id));
    }
    return p ? *p : corral::Placement{};
  };
  PlacementRequest req;
  EXPECT_EQ(place(req).node, "node-a") << "a tie goes to the placing node: no hop";
  req.labels = {{"zone", "us"}};
  EXPECT_EQ(place(req).node, "node-b");
  req.labels = {{"zone", "eu"}, {"gpu", "yes"}};
  auto none = place(req);
  EXPECT_TRUE(none.id.empty());
  EXPECT_FALSE(none.full) << "no node matched: not a capacity refusal";
  EXPECT_NE(describe_refusals(none.refused).find("node-c: labels do not match (gpu=yes wanted)"),
            std::string::npos)
      << describe_refusals(none.refused);
  req.labels.clear();
  req.node = "node-c";
  EXPECT_EQ(place(req).node, "node-c");
  req.node = "node-z";
  auto unknown = place(req);
  EXPECT_TRUE(unknown.id.empty());
  EXPECT_NE(describe_refusals(unknown.refused).find("node-z: is not a live node"),
            std::string::npos);
  req.node = "Bad Id";
  EXPECT_EQ(a->place_sandbox(req, test_share).error().code, ErrorCode::kInvalidArgument);
  req.node.clear();
  req.exclude = {"node-a", "node-c"};
  EXPECT_EQ(place(req).node, "node-b") << "nodes that refused this create are left out";
  req.exclude = {"node-a", "node-b", "node-c"};
  EXPECT_TRUE(place(req).full) << "only refusals stood in the way: the fleet is full";
  req.exclude.clear();

  // Pools: only nodes that serve it; a node with an unclaimed sandbox of it first.
  req.pool = "node";
  req.warm_key_prefix = "corral-pool:node:";
  EXPECT_EQ(place(req).node, "node-b");
  req.pool = "py";
  req.warm_key_prefix = "corral-pool:py:";
  EXPECT_EQ(place(req).node, "node-a") << "no warm sandbox yet: the most room, no hop";
  ASSERT_TRUE(b->create_sandbox("sb-warm", "{}", std::string("corral-pool:py:x1"), std::nullopt));
  EXPECT_EQ(place(req).node, "node-a") << "creating: not claimable yet";
  ASSERT_TRUE(b->transition("sb-warm", SandboxState::kInitializing, "test"));
  ASSERT_TRUE(b->transition("sb-warm", SandboxState::kReady, "test"));
  auto warm = a->place_sandbox(req, test_share);
  ASSERT_TRUE(warm);
  EXPECT_EQ(warm->node, "node-b");
  EXPECT_TRUE(warm->warm);
  auto after = a->place_sandbox(req, test_share);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->node, "node-a") << "the one warm sandbox is promised to the first create";
  EXPECT_FALSE(after->warm);
  ASSERT_TRUE(a->release_placement(warm->id));
  ASSERT_TRUE(a->release_placement(after->id));
  req.pool = "ruby";
  req.warm_key_prefix = "corral-pool:ruby:";
  auto no_pool = place(req);
  EXPECT_TRUE(no_pool.id.empty());
  EXPECT_FALSE(no_pool.full);
  req.pool.clear();
  req.warm_key_prefix.clear();

  // A lost node is never chosen; its sandboxes no longer count anywhere.
  ASSERT_TRUE(a->heartbeat());
  ASSERT_TRUE(c->heartbeat());
  auto sweep = c->sweep_lost_nodes(StateStore::now_ms() + 60'000, 30'000);
  ASSERT_TRUE(sweep) << sweep.error().to_string();
  ASSERT_TRUE(a->register_node(NodeRegistration{"node-a", "127.0.0.1:1", R"({"sandboxes":4})",
                                                R"({"zone":"eu","gpu":"no"})", R"(["py"])"}));
  ASSERT_TRUE(c->register_node(
      NodeRegistration{"node-c", "127.0.0.1:1", R"({"sandboxes":4})", R"({"zone":"eu"})", "[]"}));
  req.node = "node-b";
  auto lost = place(req);
  EXPECT_TRUE(lost.id.empty()) << "node-b was marked lost";
  EXPECT_NE(describe_refusals(lost.refused).find("node-b: is not a live node"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(, Placement, ::testing::Values(StoreKind::kSqlite, StoreKind::kPostgres),
                         store_kind_name);

// Three nodes of 5 slots each place 60 creates at once, two threads per
// node: exactly 15 are placed, 5 on each node, none twice.
TEST(PlacementOnPostgres, ConcurrentPlacementsNeverPromiseASlotTwice) {
  std::string url;
  CORRAL_FRESH_PG_DATABASE(url);
  std::vector<std::unique_ptr<StateStore>> nodes;
  for (const char* id : {"n1", "n2", "n3"}) {
    for (int twice = 0; twice < 2; ++twice) {  // one connection per thread
      auto s = StateStore::open(url);
      ASSERT_TRUE(s) << s.error().to_string();
      ASSERT_TRUE(s->set_node(id));
      ASSERT_TRUE(s->register_node(NodeRegistration{id, "", R"({"sandboxes":5})", "{}", "[]"}));
      nodes.push_back(std::make_unique<StateStore>(std::move(*s)));
    }
  }
  std::mutex mu;
  std::map<std::string, int> placed;  // node -> placements it was given
  std::atomic<int> errors{0};
  std::atomic<int> refused{0};
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (auto& n : nodes) {
    threads.emplace_back([&, s = n.get()] {
      ++ready;
      while (ready < 6) std::this_thread::yield();  // all start together
      for (int i = 0; i < 10; ++i) {
        auto p = s->place_sandbox({}, test_share);
        if (!p) {
          if (++errors == 1) ADD_FAILURE() << p.error().to_string();
          return;
        }
        if (p->id.empty()) {
          ++refused;
          continue;
        }
        std::lock_guard lock(mu);
        ++placed[p->node];
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(placed, (std::map<std::string, int>{{"n1", 5}, {"n2", 5}, {"n3", 5}}));
  EXPECT_EQ(refused, 45);
}

}  // namespace
}  // namespace corral::testing
