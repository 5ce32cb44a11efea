// An idempotency key held by a create that was never acknowledged (issue 14
// item 7, D6): the sandbox ended without ever being stored ready (its create
// failed, or the daemon died and reconcile destroyed it). A retry with the
// same request takes the key for a new sandbox, in the same transaction;
// a sandbox that was ever ready keeps its key after it ends (an answered
// create), one still being made keeps it too, and a different request is
// still refused (docs/api.md, Idempotency).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "jail/fs_util.h"
#include "store/state_store.h"

namespace corral {
namespace {

using S = SandboxState;

constexpr const char* kSpec = R"({"argv":["sh"],"cpus":1})";

class IdempotencyReleaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/corral-idem-unit-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto s = StateStore::open(dir_ + "/state.db");
    ASSERT_TRUE(s) << s.error().to_string();
    store_.emplace(std::move(*s));
  }
  void TearDown() override {
    store_.reset();
    (void)remove_tree(dir_);
  }

  // Creates `id` with key "k" and walks it through `path`.
  void make(const std::string& id, const std::vector<S>& path) {
    auto c = store_->create_sandbox(id, kSpec, "k", std::nullopt);
    ASSERT_TRUE(c) << c.error().to_string();
    ASSERT_TRUE(c->created);
    for (S to : path) ASSERT_TRUE(store_->transition(id, to, "test")) << sandbox_state_name(to);
  }

  // A retry with key "k" as `id`.
  CreateResult retry(const std::string& id, const char* spec = kSpec) {
    auto c = store_->create_sandbox(id, spec, "k", std::nullopt);
    EXPECT_TRUE(c) << c.error().to_string();
    return c ? *c : CreateResult{};
  }

  bool released(const std::string& id) {
    auto r = store_->get(id);
    EXPECT_TRUE(r);
    auto rel = store_->idempotency_key_released(*r);
    EXPECT_TRUE(rel) << rel.error().to_string();
    return rel && *rel;
  }

  std::string dir_;
  std::optional<StateStore> store_;
};

// Every way a create ends before `ready`: the key is free for a retry.
TEST_F(IdempotencyReleaseTest, ACreateThatEndedBeforeReadyGivesItsKeyToTheRetry) {
  const std::vector<std::vector<S>> never_ready = {
      {S::kFailed},                                 // failed at once (reconcile of `creating`)
      {S::kFailed, S::kDestroying, S::kCleaned},    // reconcile destroyed it
      {S::kInitializing, S::kFailed},               // setup failed (answered with an error)
      {S::kInitializing, S::kFailed, S::kDestroying},  // its teardown under way
      {S::kInitializing, S::kDestroying, S::kCleaned},  // deleted while it was made
  };
  int n = 0;
  for (const auto& path : never_ready) {
    SCOPED_TRACE("path " + std::to_string(n));
    const std::string dead = "sb-dead-" + std::to_string(n);
    const std::string fresh = "sb-new-" + std::to_string(n++);
    make(dead, path);
    EXPECT_TRUE(released(dead));
    CreateResult c = retry(fresh);
    EXPECT_TRUE(c.created) << "a new sandbox for the retry";
    EXPECT_EQ(c.sandbox.id, fresh);
    EXPECT_EQ(c.key_taken_from, dead);
    auto found = store_->find_by_idempotency_key("k");
    ASSERT_TRUE(found && *found);
    EXPECT_EQ((*found)->id, fresh);
    auto old = store_->get(dead);
    ASSERT_TRUE(old);
    EXPECT_FALSE(old->idempotency_key) << "the old sandbox no longer holds the key";
    EXPECT_EQ(old->state, path.back()) << "and is otherwise as it was";
    // The next retry finds the new one, being made: the same sandbox.
    CreateResult again = retry("sb-other");
    EXPECT_FALSE(again.created);
    EXPECT_EQ(again.sandbox.id, fresh);
    TearDown();  // the next round on a fresh database
    SetUp();
  }
}

// A create that was acknowledged (ready was stored) keeps its key after the
// sandbox ends, however it ends: a retry returns it (docs/api.md).
TEST_F(IdempotencyReleaseTest, ASandboxThatWasReadyKeepsItsKeyAfterItEnds) {
  const std::vector<std::vector<S>> answered = {
      {S::kInitializing, S::kReady, S::kDestroying, S::kCleaned},  // DELETE
      {S::kInitializing, S::kReady, S::kRunning, S::kFailed},      // init died
      {S::kInitializing, S::kReady, S::kFailed, S::kDestroying, S::kCleaned},
  };
  int n = 0;
  for (const auto& path : answered) {
    SCOPED_TRACE("path " + std::to_string(n));
    const std::string id = "sb-" + std::to_string(n++);
    make(id, path);
    EXPECT_FALSE(released(id));
    CreateResult c = retry("sb-retry");
    EXPECT_FALSE(c.created);
    EXPECT_EQ(c.sandbox.id, id);
    EXPECT_FALSE(c.key_taken_from);
    TearDown();
    SetUp();
  }
}

// Still being made (or left in a state reconcile has not ended yet): the
// key is held; a retry gets that sandbox.
TEST_F(IdempotencyReleaseTest, ACreateInProgressKeepsItsKey) {
  make("sb-1", {});
  EXPECT_FALSE(released("sb-1"));
  EXPECT_FALSE(retry("sb-2").created);
  ASSERT_TRUE(store_->transition("sb-1", S::kInitializing, "t"));
  EXPECT_FALSE(released("sb-1"));
  EXPECT_EQ(retry("sb-2").sandbox.id, "sb-1");
}

// A different request with the key of a dead, unanswered create is still
// refused: the key belongs to that request.
TEST_F(IdempotencyReleaseTest, ADifferentRequestIsRefusedEvenWhenTheKeyIsReleased) {
  make("sb-1", {S::kFailed, S::kDestroying, S::kCleaned});
  auto other = store_->create_sandbox("sb-2", R"({"argv":["sh"],"cpus":2})", "k", std::nullopt);
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, ErrorCode::kAlreadyExists);
  auto old = store_->get("sb-1");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->idempotency_key, "k") << "a refused retry moves nothing";
  EXPECT_FALSE(store_->get("sb-2"));
}

}  // namespace
}  // namespace corral
