// The nodes of a fleet in the state store (issue 18, store/node_record.h),
// on both backends: registration and heartbeats; sandboxes and tasks owned
// by the node that made them; a silent node marked lost by another, its
// sandboxes reported lost, its tasks run elsewhere once (not started) or
// failed node_lost (started); claims that give each queued task to one
// node; a second daemon with a live node's id refused. On PostgreSQL
// alone: three nodes claiming 60 tasks at once, and a cordoned node that
// claims none.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "store/state_store.h"
#include "support/store_backend.h"

namespace corral::testing {
namespace {

class NodeTable : public StoreBackendTest {
 protected:
  static NodeRegistration reg(const std::string& id) {
    return NodeRegistration{id, id + ".test:7070", R"({"sandboxes":4})", R"({"zone":"a"})",
                            R"(["py"])"};
  }
  static TaskRecord task(const std::string& id) {
    TaskRecord t;
    t.id = id;
    t.request_json = R"({"command":["true"],"n":")" + id + "\"}";
    return t;
  }
  static TaskUpdate to(TaskStatus status, std::optional<TaskStage> stage = std::nullopt) {
    TaskUpdate u;
    u.status = status;
    u.stage = stage;
    u.reason_for_transition = "test";
    return u;
  }
};

TEST_P(NodeTable, NodesRegisterHeartbeatAndLeave) {
  auto a = open();
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->node(), "local") << "a store writes for node local until told otherwise";
  for (const char* bad : {"", "Upper", "-edge", "edge-", "a_b", "a.b", "x/y"}) {
    auto st = a->set_node(bad);
    ASSERT_FALSE(st) << bad;
    EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(a->set_node(std::string(64, 'n')));
  ASSERT_TRUE(a->set_node("node-a"));
  EXPECT_EQ(a->register_node(reg("node-b")).error().code, ErrorCode::kInvalidArgument)
      << "a store registers its own node only";
  for (auto [field, value] : std::vector<std::pair<int, std::string>>{
           {0, "[]"}, {1, R"({"k":1})"}, {2, R"([1])"}, {2, "not json"}}) {
    NodeRegistration r = reg("node-a");
    (field == 0 ? r.capacity_json : field == 1 ? r.labels_json : r.pools_json) = value;
    auto bad = a->register_node(r);
    ASSERT_FALSE(bad) << value;
    EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument) << value;
  }
  EXPECT_EQ(a->heartbeat().error().code, ErrorCode::kPermissionDenied) << "never registered";

  auto first = a->register_node(reg("node-a"));
  ASSERT_TRUE(first) << first.error().to_string();
  EXPECT_EQ(first->state, NodeState::kLive);
  EXPECT_EQ(first->incarnation, 1);
  EXPECT_EQ(first->address, "node-a.test:7070");
  EXPECT_EQ(first->pools_json, R"(["py"])");
  ASSERT_TRUE(a->heartbeat());
  auto again = a->register_node(reg("node-a"));
  ASSERT_TRUE(again) << again.error().to_string();
  EXPECT_EQ(again->incarnation, 2) << "a restart is the next incarnation";
  ASSERT_TRUE(a->leave());
  EXPECT_EQ(a->get_node("node-a")->state, NodeState::kLeft);
  auto refused = a->heartbeat();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(a->get_node("node-z").error().code, ErrorCode::kNotFound);
  auto all = a->list_nodes();
  ASSERT_TRUE(all) << all.error().to_string();
  EXPECT_EQ(all->size(), 1u);
}

TEST_P(NodeTable, EachNodeReconcilesAndExpiresItsOwnSandboxesOnly) {
  auto a = open("node-a");
  auto b = open("node-b");
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->create_sandbox("sb-a", "{}", std::nullopt, 1000));
  ASSERT_TRUE(b->create_sandbox("sb-b", "{}", std::nullopt, 1000));
  EXPECT_EQ(a->get("sb-b")->node, "node-b") << "every node reads every sandbox";
  auto mine = a->sandboxes_to_reconcile();
  ASSERT_TRUE(mine) << mine.error().to_string();
  ASSERT_EQ(mine->size(), 1u);
  EXPECT_EQ(mine->front().id, "sb-a");
  auto expired = b->expired(2000);
  ASSERT_TRUE(expired);
  ASSERT_EQ(expired->size(), 1u);
  EXPECT_EQ(expired->front().id, "sb-b");
  EXPECT_EQ(a->list()->size(), 2u);
}

// Two daemons given one node id (a copied config, two hosts of one name)
// would each reconcile the other's sandboxes as their own: the second is
// refused while the first is live, with what to do; the same daemon
// restarted (its data dir's instance token) is not; once the first one's
// heartbeat is older than lost_after, or it left, the id is free.
TEST_P(NodeTable, AnotherDaemonWithTheSameIdIsRefusedWhileTheFirstIsLive) {
  auto first = open("node-a");
  auto second = open("node-a");
  ASSERT_TRUE(first && second);
  auto as = [](const std::string& instance, std::int64_t live_within_ms) {
    NodeRegistration r = reg("node-a");
    r.instance = instance;
    r.live_within_ms = live_within_ms;
    return r;
  };
  ASSERT_TRUE(first->register_node(as("aaaa", 60'000)));
  auto refused = second->claim_node(as("bbbb", 60'000));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kAlreadyExists);
  EXPECT_NE(refused.error().message.find("another daemon is node node-a (address node-a.test:7070"),
            std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().hint.find("serve.node.id"), std::string::npos) << refused.error().hint;
  auto registered = second->register_node(as("bbbb", 60'000));
  ASSERT_FALSE(registered);
  EXPECT_EQ(registered.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(first->get_node("node-a")->incarnation, 1) << "the refused one wrote nothing";
  // The same data dir restarted is the same node.
  ASSERT_TRUE(second->claim_node(as("aaaa", 60'000)));
  auto restarted = second->register_node(as("aaaa", 60'000));
  ASSERT_TRUE(restarted) << restarted.error().to_string();
  EXPECT_EQ(restarted->incarnation, 2);
  // Its heartbeat older than lost_after: gone, the id is free.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(second->claim_node(as("bbbb", 10)));
  // Left (a drained stop): free at once.
  ASSERT_TRUE(first->leave());
  auto taken = second->register_node(as("bbbb", 60'000));
  ASSERT_TRUE(taken) << taken.error().to_string();
  // An old registration (no instance) is never judged.
  ASSERT_TRUE(first->claim_node(as("", 60'000)));
}

// A daemon that reconciles for longer than live_within_ms keeps its
// claim by renewing it (StateStore::renew_claim, daemon/node_claim_keeper):
// a second daemon with the id is refused while the renewals come, takes
// the id once they stop for live_within_ms, and the first one's next
// renewal then says the claim is no longer its own.
TEST_P(NodeTable, ARenewedClaimOutlivesALongReconcile) {
  auto first = open("node-a");
  auto second = open("node-a");
  ASSERT_TRUE(first && second);
  auto as = [](const std::string& instance) {
    NodeRegistration r = reg("node-a");
    r.instance = instance;
    r.live_within_ms = 1'000;
    return r;
  };
  ASSERT_TRUE(first->claim_node(as("aaaa")));
  // 1.8 s of "reconcile", renewed every 300 ms: never 1 s without one.
  for (int i = 0; i < 6; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto renewed = first->renew_claim(as("aaaa"));
    ASSERT_TRUE(renewed) << renewed.error().to_string();
  }
  auto refused = second->claim_node(as("bbbb"));
  ASSERT_FALSE(refused) << "the renewed claim was taken over";
  EXPECT_EQ(refused.error().code, ErrorCode::kAlreadyExists);
  // The first daemon registers: its claim held.
  ASSERT_TRUE(first->register_node(as("aaaa")));
  ASSERT_TRUE(first->leave());
  // Renewals that stop: after live_within_ms the id is another's, and a
  // late renewal says so.
  ASSERT_TRUE(first->claim_node(as("aaaa")));
  std::this_thread::sleep_for(std::chrono::milliseconds(1'200));
  ASSERT_TRUE(second->claim_node(as("bbbb")));
  auto late = first->renew_claim(as("aaaa"));
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, ErrorCode::kAlreadyExists);
  EXPECT_NE(late.error().message.find("another daemon claimed node node-a"), std::string::npos)
      << late.error().message;
}

// Eight daemons with one node id start at once (issue 18: each would
// reconcile the others' sandboxes as its own): exactly one claims the id,
// the others are refused before they reconcile, and none of them can
// register. A claim whose daemon outlives live_within_ms before it
// registers can be taken over, and then that daemon cannot register.
TEST_P(NodeTable, DaemonsStartingAtOnceWithOneIdOnlyOneClaimsIt) {
  constexpr int kDaemons = 8;
  std::vector<std::unique_ptr<StateStore>> daemons;
  for (int i = 0; i < kDaemons; ++i) {
    auto s = open("node-a");
    ASSERT_TRUE(s);
    daemons.push_back(std::move(s));
  }
  auto as = [](int i, std::int64_t live_within_ms) {
    NodeRegistration r = reg("node-a");
    r.instance = "instance-" + std::to_string(i);
    r.live_within_ms = live_within_ms;
    return r;
  };
  std::vector<Status> claimed(kDaemons, ok());
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kDaemons; ++i)
    threads.emplace_back([&, i] {
      ++ready;
      while (ready < kDaemons) std::this_thread::yield();  // all claim together
      claimed[static_cast<std::size_t>(i)] =
          daemons[static_cast<std::size_t>(i)]->claim_node(as(i, 60'000));
    });
  for (auto& t : threads) t.join();
  int winner = -1;
  for (int i = 0; i < kDaemons; ++i) {
    const Status& st = claimed[static_cast<std::size_t>(i)];
    if (st) {
      EXPECT_EQ(winner, -1) << "daemons " << winner << " and " << i << " both claimed node-a";
      winner = i;
      continue;
    }
    EXPECT_EQ(st.error().code, ErrorCode::kAlreadyExists) << st.error().to_string();
    EXPECT_NE(st.error().message.find("another daemon is starting as node node-a"),
              std::string::npos)
        << st.error().message;
  }
  ASSERT_NE(winner, -1) << "no daemon claimed node-a";
  for (int i = 0; i < kDaemons; ++i) {
    if (i == winner) continue;
    auto refused = daemons[static_cast<std::size_t>(i)]->register_node(as(i, 60'000));
    ASSERT_FALSE(refused) << "daemon " << i << " registered while " << winner << " holds the id";
    EXPECT_EQ(refused.error().code, ErrorCode::kAlreadyExists);
  }
  auto registered = daemons[static_cast<std::size_t>(winner)]->register_node(as(winner, 60'000));
  ASSERT_TRUE(registered) << registered.error().to_string();
  EXPECT_EQ(registered->incarnation, 1);
  // A left node's id is free at once, its claim with it.
  ASSERT_TRUE(daemons[static_cast<std::size_t>(winner)]->leave());
  const int next = (winner + 1) % kDaemons;
  ASSERT_TRUE(daemons[static_cast<std::size_t>(next)]->claim_node(as(next, 60'000)));
  // Its claim stale before it registers (a reconcile longer than
  // live_within_ms): another daemon takes the id over, and the first can
  // no longer register.
  ASSERT_TRUE(daemons[static_cast<std::size_t>(next)]->claim_node(as(next, 10)));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const int other = (winner + 2) % kDaemons;
  ASSERT_TRUE(daemons[static_cast<std::size_t>(other)]->claim_node(as(other, 10)));
  auto late = daemons[static_cast<std::size_t>(next)]->register_node(as(next, 10));
  ASSERT_FALSE(late);
  EXPECT_NE(late.error().message.find("another daemon claimed node node-a while this one was "
                                      "starting"),
            std::string::npos)
      << late.error().message;
  ASSERT_TRUE(daemons[static_cast<std::size_t>(other)]->register_node(as(other, 10)));
}

TEST_P(NodeTable, ASilentNodeIsLostAndWhatItHeldIsHandedOn) {
  auto a = open("node-a");
  auto b = open("node-b");
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->register_node(reg("node-a")));
  ASSERT_TRUE(b->register_node(reg("node-b")));
  ASSERT_TRUE(a->create_sandbox("sb-a", "{}", std::nullopt, std::nullopt));
  ASSERT_TRUE(a->create_sandbox("sb-gone", "{}", std::nullopt, std::nullopt));
  ASSERT_TRUE(a->transition("sb-gone", SandboxState::kDestroying, "test"));
  ASSERT_TRUE(a->transition("sb-gone", SandboxState::kCleaned, "test"));
  // On node a: one queued, one in its create stage, one whose command runs,
  // one finished.
  for (const char* id : {"queued", "creating", "executing", "finished"})
    ASSERT_TRUE(a->submit_task(task(id)));
  ASSERT_TRUE(a->update_task("creating", to(TaskStatus::kRunning, TaskStage::kCreate)));
  ASSERT_TRUE(a->update_task("executing", to(TaskStatus::kRunning, TaskStage::kExecute)));
  ASSERT_TRUE(a->update_task("finished", to(TaskStatus::kRunning, TaskStage::kExecute)));
  ASSERT_TRUE(a->update_task("finished", to(TaskStatus::kSucceeded, TaskStage::kDone)));

  const std::int64_t now = StateStore::now_ms();
  auto quiet = b->sweep_lost_nodes(now, 60'000);
  ASSERT_TRUE(quiet) << quiet.error().to_string();
  EXPECT_TRUE(quiet->nodes_lost.empty()) << "heartbeats are fresh";
  auto self = a->sweep_lost_nodes(now + 120'000, 60'000);
  ASSERT_TRUE(self);
  EXPECT_EQ(self->nodes_lost, std::vector<std::string>{"node-b"})
      << "a node never marks itself lost";
  // Back for the rest of the test (what it held when lost stays lost).
  ASSERT_TRUE(b->register_node(reg("node-b")));
  ASSERT_TRUE(b->create_sandbox("sb-b", "{}", std::nullopt, std::nullopt));

  // Marked at the real time (a's last heartbeat is a few ms old, the limit
  // 1 ms), so that what a makes afterwards is newer than the mark.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto sweep = b->sweep_lost_nodes(StateStore::now_ms(), 1);
  ASSERT_TRUE(sweep) << sweep.error().to_string();
  EXPECT_EQ(sweep->nodes_lost, std::vector<std::string>{"node-a"});
  EXPECT_EQ(sweep->sandboxes_lost, 1u) << "sb-a; sb-gone was cleaned already";
  std::vector<std::string> requeued = sweep->tasks_requeued;
  std::sort(requeued.begin(), requeued.end());
  EXPECT_EQ(requeued, (std::vector<std::string>{"creating", "queued"}));
  EXPECT_EQ(sweep->tasks_failed, std::vector<std::string>{"executing"});

  EXPECT_EQ(b->get_node("node-a")->state, NodeState::kLost);
  EXPECT_TRUE(b->get("sb-a")->lost_at_ms.has_value());
  EXPECT_FALSE(b->get("sb-b")->lost_at_ms.has_value());
  EXPECT_FALSE(b->get("sb-gone")->lost_at_ms.has_value());
  auto creating = b->get_task("creating");
  EXPECT_EQ(creating->status, TaskStatus::kQueued);
  EXPECT_EQ(creating->attempt, 2) << "a started attempt is not resumed: the next one runs";
  EXPECT_FALSE(creating->node.has_value());
  EXPECT_EQ(b->get_task("queued")->attempt, 1);
  auto executing = b->get_task("executing");
  EXPECT_EQ(executing->status, TaskStatus::kFailed);
  EXPECT_EQ(executing->reason, std::string(kNodeLostReason));
  EXPECT_EQ(b->get_task("finished")->status, TaskStatus::kSucceeded);
  // A second sweep finds nothing more to do.
  auto twice = b->sweep_lost_nodes(now + 130'000, 60'000);
  ASSERT_TRUE(twice);
  EXPECT_TRUE(twice->nodes_lost.empty());
  EXPECT_TRUE(twice->tasks_requeued.empty() && twice->tasks_failed.empty());
  EXPECT_EQ(twice->sandboxes_lost, 0u);

  // Its runner of "creating" fell behind: attempt 1 was superseded, and
  // nothing it writes lands (not even the move to running a claim takes).
  TaskUpdate stale = to(TaskStatus::kRunning, TaskStage::kExecute);
  stale.attempt = 1;
  auto behind = a->update_task("creating", stale);
  ASSERT_FALSE(behind);
  EXPECT_EQ(behind.error().code, ErrorCode::kPermissionDenied) << behind.error().to_string();
  // A sandbox the lost node makes before it learns it is lost is not
  // caught by a later sweep (only what it held when it was marked is).
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(a->create_sandbox("sb-late", "{}", std::nullopt, std::nullopt));
  ASSERT_TRUE(b->sweep_lost_nodes(StateStore::now_ms(), 1));
  EXPECT_FALSE(b->get("sb-late")->lost_at_ms.has_value());
  // The lost node learns it from its next heartbeat, and runs nothing more.
  EXPECT_EQ(a->heartbeat().error().code, ErrorCode::kPermissionDenied);
  EXPECT_TRUE(a->unfinished_tasks()->empty());
  // Another node claims the requeued tasks, once.
  auto claimed = b->claim_queued_tasks(10);
  ASSERT_TRUE(claimed) << claimed.error().to_string();
  std::sort(claimed->begin(), claimed->end());
  EXPECT_EQ(*claimed, (std::vector<std::string>{"creating", "queued"}));
  EXPECT_TRUE(b->claim_queued_tasks(10)->empty());
  EXPECT_TRUE(a->claim_queued_tasks(10)->empty());
  auto stolen = a->update_task("queued", to(TaskStatus::kRunning, TaskStage::kCreate));
  ASSERT_FALSE(stolen) << "only the node holding a task runs it";
  EXPECT_EQ(stolen.error().code, ErrorCode::kPermissionDenied);
  ASSERT_TRUE(b->update_task("queued", to(TaskStatus::kRunning, TaskStage::kCreate)));
  EXPECT_EQ(b->unfinished_tasks()->size(), 2u);
  // The failed one runs again when its caller submits it again.
  auto retry = b->submit_task(task("executing"));
  ASSERT_TRUE(retry) << retry.error().to_string();
  EXPECT_TRUE(retry->retried);
  EXPECT_EQ(retry->task.node, std::optional<std::string>("node-b"));

  // The node comes back: live again, its lost sandbox still in its own
  // reconcile list (to be destroyed), marked lost.
  auto back = a->register_node(reg("node-a"));
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(back->incarnation, 2);
  EXPECT_FALSE(back->lost_at_ms.has_value());
  ASSERT_TRUE(a->heartbeat());
  auto mine = a->sandboxes_to_reconcile();
  ASSERT_TRUE(mine);
  ASSERT_EQ(mine->size(), 2u);
  EXPECT_EQ(mine->front().id, "sb-a");
  EXPECT_TRUE(mine->front().lost_at_ms.has_value());
  EXPECT_FALSE(mine->back().lost_at_ms.has_value()) << mine->back().id;
}

INSTANTIATE_TEST_SUITE_P(, NodeTable, ::testing::Values(StoreKind::kSqlite, StoreKind::kPostgres),
                         store_kind_name);

// Three nodes claim 60 queued tasks at once, five claims of up to 4 at a
// time each: every task goes to exactly one node.
TEST(NodeTableOnPostgres, ConcurrentClaimsGiveEachTaskToOneNode) {
  std::string url;
  CORRAL_FRESH_PG_DATABASE(url);
  std::vector<std::unique_ptr<StateStore>> nodes;
  for (const char* id : {"gone", "n1", "n2", "n3"}) {
    auto s = StateStore::open(url);
    ASSERT_TRUE(s) << s.error().to_string();
    ASSERT_TRUE(s->set_node(id));
    ASSERT_TRUE(s->register_node(NodeRegistration{id, "", "{}", "{}", "[]"}));
    nodes.push_back(std::make_unique<StateStore>(std::move(*s)));
  }
  // Tasks submitted on a node that is then lost are queued for anyone.
  constexpr int kTasks = 60;
  for (int i = 0; i < kTasks; ++i) {
    TaskRecord t;
    t.id = "t-" + std::to_string(i);
    t.request_json = "{}";
    ASSERT_TRUE(nodes[0]->submit_task(t));
  }
  auto sweep = nodes[1]->sweep_lost_nodes(StateStore::now_ms() + 60'000, 1'000);
  ASSERT_TRUE(sweep) << sweep.error().to_string();
  // n2 and n3 have not heartbeaten either; bring them back.
  for (int i = 2; i <= 3; ++i)
    ASSERT_TRUE(nodes[static_cast<std::size_t>(i)]->register_node(
        NodeRegistration{nodes[static_cast<std::size_t>(i)]->node(), "", "{}", "{}", "[]"}));
  ASSERT_EQ(sweep->tasks_requeued.size(), static_cast<std::size_t>(kTasks));

  std::mutex mu;
  std::map<std::string, std::vector<std::string>> owners;  // task -> claimers
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  std::atomic<int> ready{0};
  for (int n = 1; n <= 3; ++n) {
    for (int twice = 0; twice < 2; ++twice) {
      threads.emplace_back([&, n] {
        StateStore& s = *nodes[static_cast<std::size_t>(n)];
        ++ready;
        while (ready < 6) std::this_thread::yield();  // all start together
        for (int round = 0; round < 8; ++round) {
          auto got = s.claim_queued_tasks(4);
          if (!got) {
            if (++errors == 1) ADD_FAILURE() << got.error().to_string();
            return;
          }
          std::lock_guard lock(mu);
          for (const auto& id : *got) owners[id].push_back(s.node());
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(owners.size(), static_cast<std::size_t>(kTasks));
  std::set<std::string> claimers;
  for (const auto& [id, by] : owners) {
    EXPECT_EQ(by.size(), 1u) << id << " claimed more than once";
    claimers.insert(by.front());
    EXPECT_EQ(nodes[1]->get_task(id)->node, std::optional<std::string>(by.front()));
  }
  EXPECT_GE(claimers.size(), 2u) << "the claims were spread over the nodes";
}

// A cordon (StateStore::set_node_cordoned, docs/fleet.md): the cordoned
// node's claims take none of the queued tasks no node holds, another
// node's take them all; its heartbeat reads the cordon, its next
// incarnation keeps it, and lifting it lets it claim again. An unknown or
// malformed id is refused. PostgreSQL only: on SQLite (a fleet of one)
// the one node adopts every task, and a cordon is refused.
TEST(NodeTableOnPostgres, ACordonedNodeClaimsNoQueuedTasks) {
  std::string url;
  CORRAL_FRESH_PG_DATABASE(url);
  auto open = [&](const std::string& node) -> std::unique_ptr<StateStore> {
    auto s = StateStore::open(url);
    if (!s || !s->set_node(node)) return nullptr;
    return std::make_unique<StateStore>(std::move(*s));
  };
  auto reg = [](const std::string& id) { return NodeRegistration{id, "", "{}", "{}", "[]"}; };
  auto task = [](const std::string& id) {
    TaskRecord t;
    t.id = id;
    t.request_json = R"({"command":["true"]})";
    return t;
  };
  auto gone = open("gone");
  ASSERT_NE(gone, nullptr);
  ASSERT_TRUE(gone->register_node(reg("gone")));
  for (const char* id : {"t1", "t2", "t3", "t4"}) ASSERT_TRUE(gone->submit_task(task(id)));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto a = open("node-a");
  ASSERT_TRUE(a && a->register_node(reg("node-a")));
  auto sweep = a->sweep_lost_nodes(StateStore::now_ms(), 1);
  ASSERT_TRUE(sweep) << sweep.error().to_string();
  ASSERT_EQ(sweep->tasks_requeued.size(), 4u) << "gone's tasks are for any node to claim";
  // No sweep after this one: node-b's heartbeats need not be fresh.
  auto b = open("node-b");
  ASSERT_TRUE(b && b->register_node(reg("node-b")));

  auto cordoned = a->set_node_cordoned("node-b", true);
  ASSERT_TRUE(cordoned) << cordoned.error().to_string();
  EXPECT_TRUE(cordoned->cordoned);
  EXPECT_TRUE(a->get_node("node-b")->cordoned);
  EXPECT_FALSE(a->get_node("node-a")->cordoned);
  auto beat = b->heartbeat();
  ASSERT_TRUE(beat) << beat.error().to_string();
  EXPECT_TRUE(beat->cordoned) << "node-b's heartbeat reads its cordon";
  auto a_beat = a->heartbeat();
  ASSERT_TRUE(a_beat) << a_beat.error().to_string();
  EXPECT_FALSE(a_beat->cordoned);
  auto none = b->claim_queued_tasks(10);
  ASSERT_TRUE(none) << none.error().to_string();
  EXPECT_TRUE(none->empty()) << "a cordoned node claims nothing";
  // Restarted (a new incarnation), still cordoned.
  auto again = b->register_node(reg("node-b"));
  ASSERT_TRUE(again) << again.error().to_string();
  EXPECT_EQ(again->incarnation, 2);
  EXPECT_TRUE(again->cordoned);
  EXPECT_TRUE(b->claim_queued_tasks(10)->empty());
  auto three = a->claim_queued_tasks(3);
  ASSERT_TRUE(three);
  EXPECT_EQ(*three, (std::vector<std::string>{"t1", "t2", "t3"}))
      << "the node that is not cordoned takes them, oldest first";

  auto lifted = a->set_node_cordoned("node-b", false);
  ASSERT_TRUE(lifted) << lifted.error().to_string();
  EXPECT_FALSE(lifted->cordoned);
  auto b_beat = b->heartbeat();
  ASSERT_TRUE(b_beat) << b_beat.error().to_string();
  EXPECT_FALSE(b_beat->cordoned);
  EXPECT_EQ(b->claim_queued_tasks(10).value_or(std::vector<std::string>{}),
            std::vector<std::string>{"t4"});

  EXPECT_EQ(a->set_node_cordoned("node-z", true).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(a->set_node_cordoned("Node_B", true).error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace corral::testing
