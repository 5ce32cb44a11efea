// Failure snapshots kept in the object store (src/snapshot/snapshot_store.h,
// D4): ids, metadata as objects, retention and quota driven by an injected
// clock (no sleeping), eviction oldest first, a snapshot larger than the
// quota refused, every deletion reported with its why, a store failure
// leaving no object behind, paging, and load() after a restart.
#include "snapshot/snapshot_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <vector>

#include "base/fs.h"
#include "base/random.h"
#include "support/memory_object_store.h"
#include "support/tar_reader.h"

namespace corral::snapshot {
namespace {

constexpr std::int64_t kDay = 24LL * 3600 * 1000;

class SnapshotStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/corral-snapstore-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    layer_.reset(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    config_.scratch_dir = "/tmp";
    config_.limits.zstd_level = 1;
  }
  void TearDown() override { (void)remove_tree(dir_); }

  // Incompressible content, so archive sizes follow the file sizes.
  void write_file(const std::string& name, std::size_t size) {
    std::string data(size, '\0');
    fill_random(data.data(), data.size());
    int fd = openat(layer_.get(), name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(write_all(fd, data));
    close(fd);
  }

  std::unique_ptr<SnapshotStore> make_store() {
    SnapshotEvents events;
    events.created = [this](const SnapshotInfo& s) { created_.push_back(s.id); };
    events.deleted = [this](const SnapshotInfo& s, std::string_view why) {
      deleted_.push_back(s.id + ":" + std::string(why));
    };
    events.failed = [this](const SnapshotRequest&, const Error& e) { failed_.push_back(e.message); };
    return std::make_unique<SnapshotStore>(objects_, config_, [this] { return now_.load(); },
                                           events);
  }

  SnapshotRequest request(const std::string& task) {
    SnapshotRequest r;
    r.task = task;
    r.reason = "exit_code";
    r.sandbox = "sb-1";
    r.env_secret_names = {"API_TOKEN"};
    r.sources.push_back({layer_.get(), "rootfs/", {}});
    return r;
  }

  std::string dir_;
  UniqueFd layer_;
  SnapshotConfig config_;
  test::MemoryObjectStore objects_;
  std::atomic<std::int64_t> now_{1'800'000'000'000};
  std::vector<std::string> created_, deleted_, failed_;
};

TEST_F(SnapshotStoreTest, TakeStoresArchiveAndMetadata) {
  write_file("a", 1000);
  auto store = make_store();
  auto s = store->take(request("build-42"));
  ASSERT_TRUE(s.has_value()) << s.error().to_string();
  EXPECT_TRUE(valid_snapshot_id(s->id)) << s->id;
  EXPECT_EQ(s->task, "build-42");
  EXPECT_EQ(s->reason, "exit_code");
  EXPECT_EQ(s->created_ms, now_.load());
  EXPECT_EQ(s->expires_ms, now_.load() + 7 * kDay);  // the default retention
  std::string archive = objects_.bytes(archive_key(s->id));
  ASSERT_FALSE(archive.empty());
  EXPECT_EQ(s->size, archive.size());
  EXPECT_EQ(s->sha256, sha256_hex(archive));
  auto meta = snapshot_from_json(objects_.bytes(metadata_key(s->id)));
  ASSERT_TRUE(meta.has_value());
  EXPECT_EQ(meta->sha256, s->sha256);
  EXPECT_EQ(meta->env_secret_names, std::vector<std::string>{"API_TOKEN"});
  auto head = objects_.head(archive_key(s->id));
  EXPECT_EQ(head->metadata.at("task"), "build-42");
  EXPECT_EQ(created_, std::vector<std::string>{s->id});
  auto members = test::read_tar(archive);
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0].name, "rootfs/a");
  EXPECT_NE(members[1].content.find(R"("task":"build-42")"), std::string::npos);
}

TEST_F(SnapshotStoreTest, SweeperDeletesExpiredOnesByTheClock) {
  write_file("a", 100);
  config_.retention_ms = 2 * kDay;
  auto store = make_store();
  auto old_one = store->take(request("t1"));
  now_ += kDay;
  auto new_one = store->take(request("t2"));
  ASSERT_TRUE(old_one && new_one);
  EXPECT_EQ(store->sweep(), 0u);
  now_ += kDay;  // old_one's expiry is now
  EXPECT_EQ(store->sweep(), 1u);
  EXPECT_FALSE(store->get(old_one->id).has_value());
  EXPECT_TRUE(store->get(new_one->id).has_value());
  EXPECT_TRUE(objects_.bytes(archive_key(old_one->id)).empty());
  EXPECT_TRUE(objects_.bytes(metadata_key(old_one->id)).empty());
  EXPECT_EQ(deleted_, std::vector<std::string>{old_one->id + ":expired"});
  now_ += kDay;
  EXPECT_EQ(store->sweep(), 1u);
  EXPECT_EQ(objects_.size(), 0u);
  EXPECT_EQ(store->total_bytes(), 0u);
}

TEST_F(SnapshotStoreTest, QuotaEvictsOldestFirst) {
  write_file("a", 40000);
  config_.quota_bytes = 130000;  // room for three ~40 KB archives
  auto store = make_store();
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    now_ += 1000;
    auto s = store->take(request("t" + std::to_string(i)));
    ASSERT_TRUE(s.has_value()) << s.error().to_string();
    ids.push_back(s->id);
    EXPECT_LE(store->total_bytes(), config_.quota_bytes);
  }
  EXPECT_EQ(store->count(), 3u);
  EXPECT_EQ(deleted_, (std::vector<std::string>{ids[0] + ":quota", ids[1] + ":quota"}));
  for (int i = 2; i < 5; ++i) EXPECT_TRUE(store->get(ids[i]).has_value());
}

TEST_F(SnapshotStoreTest, ArchiveLargerThanTheQuotaIsRefusedAndNothingEvicted) {
  write_file("small", 100);
  config_.quota_bytes = 20000;
  auto store = make_store();
  auto kept = store->take(request("small"));
  ASSERT_TRUE(kept.has_value());
  write_file("big", 100000);
  auto big = store->take(request("big"));
  ASSERT_FALSE(big.has_value());
  EXPECT_EQ(big.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(big.error().message.find("snapshots.quota"), std::string::npos);
  EXPECT_TRUE(store->get(kept->id).has_value());
  EXPECT_TRUE(deleted_.empty());
  EXPECT_EQ(failed_.size(), 1u);
  EXPECT_EQ(objects_.size(), 2u);  // the kept one's two objects
}

TEST_F(SnapshotStoreTest, StoreFailureLeavesNoPartialObject) {
  write_file("a", 100);
  auto store = make_store();
  for (const char* which : {".tar.zst", ".json"}) {
    objects_.fail_next_put(which);
    auto s = store->take(request("t"));
    ASSERT_FALSE(s.has_value()) << which;
    EXPECT_EQ(s.error().code, ErrorCode::kResourceExhausted);
    EXPECT_EQ(objects_.size(), 0u) << which;
    EXPECT_EQ(store->count(), 0u);
  }
  EXPECT_EQ(failed_.size(), 2u);
  EXPECT_TRUE(created_.empty());
}

TEST_F(SnapshotStoreTest, RemoveByApiIsReportedAndUnknownIsNotFound) {
  write_file("a", 100);
  auto store = make_store();
  auto s = store->take(request("t"));
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(store->remove(s->id, "api").has_value());
  EXPECT_EQ(deleted_, std::vector<std::string>{s->id + ":api"});
  auto again = store->remove(s->id, "api");
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(objects_.size(), 0u);
}

TEST_F(SnapshotStoreTest, ListIsNewestFirstPagedAndFiltered) {
  write_file("a", 10);
  auto store = make_store();
  std::vector<std::string> ids;
  for (int i = 0; i < 7; ++i) {
    now_ += 1000;
    ids.push_back(store->take(request(i % 2 ? "odd" : "even"))->id);
  }
  std::vector<std::string> seen;
  std::string cursor;
  int pages = 0;
  do {
    auto page = store->list("", 3, cursor);
    ASSERT_TRUE(page.has_value());
    for (const auto& s : page->snapshots) seen.push_back(s.id);
    cursor = page->next_cursor;
    ++pages;
  } while (!cursor.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen, std::vector<std::string>(ids.rbegin(), ids.rend()));
  auto odd = store->list("odd", 100, "");
  ASSERT_TRUE(odd.has_value());
  EXPECT_EQ(odd->snapshots.size(), 3u);
  for (const auto& s : odd->snapshots) EXPECT_EQ(s.task, "odd");
  EXPECT_FALSE(store->list("", 0, "").has_value());
  EXPECT_FALSE(store->list("", 10, "garbage").has_value());
}

TEST_F(SnapshotStoreTest, LoadRebuildsTheIndexAndDropsOrphans) {
  write_file("a", 100);
  std::string id;
  {
    auto store = make_store();
    id = store->take(request("t"))->id;
  }
  // A take cut short by a crash: the archive without its metadata.
  std::string orphan = "snap-0123456789abcdef0123456789abcdef";
  ASSERT_TRUE(objects_.put_bytes(archive_key(orphan), "partial", {}).has_value());
  auto store = make_store();
  ASSERT_TRUE(store->load().has_value());
  EXPECT_TRUE(store->get(id).has_value());
  EXPECT_EQ(store->count(), 1u);
  EXPECT_TRUE(objects_.bytes(archive_key(orphan)).empty());
  EXPECT_EQ(store->total_bytes(), store->get(id)->size);
}

TEST_F(SnapshotStoreTest, DownloadStreamsTheArchive) {
  write_file("a", 5000);
  auto store = make_store();
  auto s = store->take(request("t"));
  std::string got;
  auto info = store->download(s->id, [&](std::span<const char> b) {
    got.append(b.data(), b.size());
    return ok();
  });
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(sha256_hex(got), s->sha256);
  EXPECT_FALSE(store->download("snap-ffffffffffffffffffffffffffffffff", [](auto) { return ok(); })
                   .has_value());
}

}  // namespace
}  // namespace corral::snapshot
