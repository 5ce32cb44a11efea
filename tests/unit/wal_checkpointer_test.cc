// The state store's checkpoints run on their own thread, never inside a
// commit (src/store/wal_checkpointer.h): a request's commit does not pay a
// checkpoint's copy and fsync, and the WAL still reaches the database file.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "store_test_support.h"
#include "task_test_support.h"

namespace corral {
namespace {

off_t file_size(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

TEST(WalCheckpointer, CommitsNeverCheckpointAndTheThreadCopiesTheWalIntoTheDatabase) {
  for (auto durability : {StateStore::Durability::kProcessCrash, StateStore::Durability::kPowerLoss}) {
    task_test::TempDir dir;
    const std::string path = dir.file("state.db");
    auto opened = StateStore::open(path, durability);
    ASSERT_TRUE(opened) << opened.error().to_string();
    StateStore store = std::move(*opened);
    EXPECT_EQ(store.pragma("wal_autocheckpoint").value_or("?"), "0");
    const off_t before = file_size(path);
    // 12 commits of 1 MiB each: ~3000 WAL pages, three times what wakes the
    // checkpointer (SQLite's own autocheckpoint would have run in commits).
    // (A request of 1 MiB: inline input bytes are files, not rows.)
    const std::string bytes(1 << 20, 'w');
    const std::string body = R"({"command":["true"],"pad":")" + bytes + R"("})";
    for (int i = 0; i < 12; ++i) {
      const std::string id = "ckpt-" + std::to_string(i);
      auto r = store.submit_task(task_test::request(id, body), {});
      ASSERT_TRUE(r) << r.error().to_string();
    }
    // The pages reach the database file without another commit or a close.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (file_size(path) < before + (8 << 20) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_GE(file_size(path), before + (8 << 20)) << "no checkpoint copied the WAL";
    // And every byte reads back.
    auto last = store.get_task("ckpt-11");
    ASSERT_TRUE(last) << last.error().to_string();
    EXPECT_NE(last->request_json.find(bytes), std::string::npos);
  }
}

}  // namespace
}  // namespace corral
