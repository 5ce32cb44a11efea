// corral_object_store_errors_total{op} (MeteredObjectStore, issue 15
// "Bad input and faults"; REQUIREMENTS.md D5): each operation counts the
// failures that are the store's, and only those, over a real local store.
#include "daemon/metered_object_store.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "objstore/local_object_store.h"
#include "support/temp_dir.h"

namespace corral::daemon {
namespace {

using corral::testing::TempDir;

double errors(const MetricsRegistry& m, const std::string& op) {
  const std::string sample = "corral_object_store_errors_total{op=\"" + op + "\"} ";
  const std::string text = m.render();
  auto at = text.find(sample);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + sample.size()));
}

struct Fixture {
  TempDir dir{"corral-metered-store-unit"};
  MetricsRegistry metrics;
  std::unique_ptr<MeteredObjectStore> store;
  Fixture() {
    auto local = objstore::LocalObjectStore::open(dir.file("objects"));
    EXPECT_TRUE(local.has_value());
    if (local) store = std::make_unique<MeteredObjectStore>(std::move(*local), metrics);
  }
};

TEST(MeteredObjectStore, EveryOperationIsThereAtZero) {
  Fixture f;
  ASSERT_TRUE(f.store);
  for (const char* op : {"put", "get", "head", "list", "delete"}) EXPECT_EQ(errors(f.metrics, op), 0) << op;
}

TEST(MeteredObjectStore, AnswersThatAreNotTheStoresFaultAreNotCounted) {
  Fixture f;
  ASSERT_TRUE(f.store);
  ASSERT_TRUE(f.store->put_bytes("a/b", "hello", {}));
  EXPECT_EQ(f.store->head("a/missing").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(f.store->get("a/missing", [](std::span<const char>) { return ok(); }).error().code,
            ErrorCode::kNotFound);
  objstore::PutOptions small;
  small.max_size = 2;
  auto over = f.store->put_bytes("a/c", "hello", small);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().sys_errno, objstore::kOverMaxSize);
  objstore::PutOptions wrong_hash;
  wrong_hash.expected_sha256 = std::string(64, '0');
  EXPECT_FALSE(f.store->put_bytes("a/d", "hello", wrong_hash));
  EXPECT_FALSE(f.store->put_bytes("../x", "hello", {}));
  // The reader refuses the bytes (a sandbox's disk full): its error, not the store's.
  auto stopped = f.store->get("a/b", [](std::span<const char>) -> Status {
    return make_error(ErrorCode::kResourceExhausted, "the reader is full");
  });
  ASSERT_FALSE(stopped);
  for (const char* op : {"put", "get", "head", "list", "delete"}) EXPECT_EQ(errors(f.metrics, op), 0) << op;
}

TEST(MeteredObjectStore, FailuresOfTheStoreAreCountedByOperation) {
  Fixture f;
  ASSERT_TRUE(f.store);
  ASSERT_TRUE(f.store->put_bytes("a/b", "hello", {}));
  // A file where the store needs a directory: puts under it fail.
  std::ofstream(f.dir.file("objects/blocked")) << "x";
  EXPECT_FALSE(f.store->put_bytes("blocked/x", "hello", {}));
  EXPECT_EQ(errors(f.metrics, "put"), 1);
  // The object corrupted at rest: its get fails its recorded sha256.
  const std::string content =
      f.dir.file("objects/a/b~2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
  ASSERT_TRUE(std::ofstream(content, std::ios::in | std::ios::out) << "HELLO") << content;
  auto got = f.store->get("a/b", [](std::span<const char>) { return ok(); });
  ASSERT_FALSE(got);
  EXPECT_EQ(errors(f.metrics, "get"), 1);
  EXPECT_EQ(errors(f.metrics, "head"), 0);
}

// A put begun early (a task's outputs) counts its failures as a put's,
// and its refusals by the caller's own limits not at all.
TEST(MeteredObjectStore, ABegunPutIsCountedAsAPut) {
  Fixture f;
  ASSERT_TRUE(f.store);
  objstore::PutOptions small;
  small.max_size = 2;
  auto over = f.store->begin_put("a/over", small);
  ASSERT_TRUE(over.has_value());
  int zero = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(zero, 0);
  EXPECT_EQ((*over)->put_fd(zero).error().sys_errno, objstore::kOverMaxSize);
  ::close(zero);
  EXPECT_EQ(errors(f.metrics, "put"), 0);
  // The source is a directory: reading it fails, and that is the put's failure.
  auto bad = f.store->begin_put("a/dir", {});
  ASSERT_TRUE(bad.has_value());
  int dir = ::open(f.dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dir, 0);
  EXPECT_FALSE((*bad)->put_fd(dir).has_value());
  ::close(dir);
  EXPECT_EQ(errors(f.metrics, "put"), 1);
  // A file where the store needs a directory: the begin itself fails.
  std::ofstream(f.dir.file("objects/blocked")) << "x";
  EXPECT_FALSE(f.store->begin_put("blocked/x", {}).has_value());
  EXPECT_EQ(errors(f.metrics, "put"), 2);
}

}  // namespace
}  // namespace corral::daemon
