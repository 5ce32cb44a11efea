// objstore/local_object_store.h (REQUIREMENTS D5): the embedded object
// store. Round trips with metadata and sha256; the class of hostile keys;
// symlinks planted inside the store never followed out; a sha256 mismatch
// or an object over max_size stores nothing; a killed put leaves the old
// object; readers racing a writer see one whole object; corruption at rest
// is detected on get; listing by prefix in key order.
#include "objstore/local_object_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "base/sha256.h"

namespace corral::objstore {
namespace {

namespace stdfs = std::filesystem;

class LocalObjectStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/corral-objstore-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    root_ = dir_ + "/data/objects";
    auto store = LocalObjectStore::open(root_);
    ASSERT_TRUE(store.has_value()) << store.error().to_string();
    store_ = std::move(*store);
  }
  void TearDown() override {
    store_.reset();
    stdfs::remove_all(dir_);
  }

  std::string get_bytes(std::string_view key, Result<ObjectInfo>* result = nullptr) {
    std::string got;
    auto r = store_->get(key, [&](std::span<const char> chunk) {
      got.append(chunk.data(), chunk.size());
      return ok();
    });
    if (result != nullptr) *result = r;
    return got;
  }

  std::size_t tmp_entries() const {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : stdfs::directory_iterator(root_ + "/~tmp")) ++n;
    return n;
  }

  // A child process opens the store (`power_loss_durable` as given), runs
  // `first` (an _exit code, 0 to go on), then puts `key` from a pipe and is
  // killed with SIGKILL well into that put. False if it ended otherwise.
  bool kill_during_a_put(bool power_loss_durable, const std::string& key,
                         const std::function<int(LocalObjectStore&)>& first = {}) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return false;
    pid_t child = ::fork();
    if (child < 0) return false;
    if (child == 0) {
      ::close(p[1]);
      auto store = LocalObjectStore::open(root_, power_loss_durable);
      if (!store) ::_exit(2);
      if (first)
        if (int code = first(**store); code != 0) ::_exit(code);
      (void)(*store)->put_fd(key, p[0], {});  // waits for bytes that never come
      ::_exit(0);
    }
    ::close(p[0]);
    // Much more than a pipe holds: once this is written, the child is well
    // into its put, and it waits for more that never comes.
    std::string chunk(1 << 20, 'n');
    bool wrote = true;
    for (int i = 0; i < 4 && wrote; ++i) wrote = ::write(p[1], chunk.data(), chunk.size()) > 0;
    ::kill(child, SIGKILL);
    int status = 0;
    const bool reaped = ::waitpid(child, &status, 0) == child;
    ::close(p[1]);
    EXPECT_TRUE(wrote && reaped && WIFSIGNALED(status)) << "the child ended before the kill: " << status;
    return wrote && reaped && WIFSIGNALED(status);
  }

  std::string dir_;
  std::string root_;
  std::unique_ptr<LocalObjectStore> store_;
};

TEST_F(LocalObjectStoreTest, OpenCreatesTheDirectoryPrivate) {
  struct stat st {};
  ASSERT_EQ(::stat(root_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(store_->kind(), "local");
  EXPECT_EQ(store_->describe(), root_);
  EXPECT_FALSE(LocalObjectStore::open("relative/objects").has_value());
}

TEST_F(LocalObjectStoreTest, PutGetHeadRoundTripWithMetadata) {
  PutOptions options;
  options.metadata = {{"task", "build-42"}, {"reason", "exit code 1"}};
  auto put = store_->put_bytes("tasks/build-42/1/outputs/0", "hello", options);
  ASSERT_TRUE(put.has_value()) << put.error().to_string();
  EXPECT_EQ(put->size, 5u);
  EXPECT_EQ(put->sha256, sha256_hex("hello"));

  Result<ObjectInfo> got_info;
  EXPECT_EQ(get_bytes("tasks/build-42/1/outputs/0", &got_info), "hello");
  ASSERT_TRUE(got_info.has_value()) << got_info.error().to_string();
  EXPECT_EQ(got_info->sha256, sha256_hex("hello"));
  EXPECT_EQ(got_info->metadata, options.metadata);

  auto head = store_->head("tasks/build-42/1/outputs/0");
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->size, 5u);
  EXPECT_EQ(head->metadata.at("task"), "build-42");
  EXPECT_GT(head->modified_ms, 0);

  // An empty object is an object.
  ASSERT_TRUE(store_->put_bytes("empty", "", {}).has_value());
  Result<ObjectInfo> empty;
  EXPECT_EQ(get_bytes("empty", &empty), "");
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(empty->sha256, sha256_hex(""));
}

TEST_F(LocalObjectStoreTest, MissingKeyIsNotFound) {
  auto head = store_->head("no/such/key");
  ASSERT_FALSE(head.has_value());
  EXPECT_EQ(head.error().code, ErrorCode::kNotFound);
  Result<ObjectInfo> got;
  get_bytes("nokey", &got);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code, ErrorCode::kNotFound);
  EXPECT_NE(got.error().message.find("nokey"), std::string::npos);
  EXPECT_TRUE(store_->remove("no/such/key").has_value());
}

TEST_F(LocalObjectStoreTest, PutFdStoresFromTheCurrentOffsetToTheEnd) {
  std::string path = dir_ + "/src";
  std::ofstream(path) << "skip-this|keep this";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::lseek(fd, 10, SEEK_SET), 10);
  auto put = store_->put_fd("k", fd, {});
  ::close(fd);
  ASSERT_TRUE(put.has_value()) << put.error().to_string();
  EXPECT_EQ(get_bytes("k"), "keep this");
}

// A put's chunks after the first are written around the page cache where
// the file system allows it, and the last partial one through it: every
// size around the chunk boundaries reads back whole, with its sha256,
// whether the bytes come from a file or from a pipe in odd-sized pieces.
TEST_F(LocalObjectStoreTest, LargePutsReadBackWholeAtEveryChunkBoundary) {
  constexpr std::size_t kMiB = 1 << 20;
  std::string bytes(5 * kMiB + 4096, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<char>((i * 2654435761u) >> 13);
  const std::size_t sizes[] = {kMiB - 1,     kMiB,         kMiB + 1,         2 * kMiB,
                               3 * kMiB - 1, 3 * kMiB + 512, 5 * kMiB + 4096};
  const std::string path = dir_ + "/src";
  for (std::size_t size : sizes) {
    SCOPED_TRACE("size " + std::to_string(size));
    const std::string_view content(bytes.data(), size);
    const std::string sha = sha256_hex(content);
    {
      std::ofstream(path, std::ios::binary | std::ios::trunc).write(content.data(), size);
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      ASSERT_GE(fd, 0);
      auto put = store_->put_fd("from/file", fd, {});
      ::close(fd);
      ASSERT_TRUE(put.has_value()) << put.error().to_string();
      EXPECT_EQ(put->size, size);
      EXPECT_EQ(put->sha256, sha);
      Result<ObjectInfo> got;
      EXPECT_TRUE(get_bytes("from/file", &got) == content);
      ASSERT_TRUE(got.has_value()) << got.error().to_string();
      EXPECT_EQ(got->sha256, sha);
    }
    {
      int p[2];
      ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
      std::thread writer([&, w = p[1]] {
        // 61 KiB and 3 bytes at a time: reads that never fill a chunk.
        for (std::size_t off = 0; off < size;) {
          std::size_t n = std::min<std::size_t>(size - off, off % 2 ? 3 : 61 * 1024);
          ssize_t wrote = ::write(w, content.data() + off, n);
          if (wrote <= 0) break;
          off += static_cast<std::size_t>(wrote);
        }
        ::close(w);
      });
      auto put = store_->put_fd("from/pipe", p[0], {});
      writer.join();
      ::close(p[0]);
      ASSERT_TRUE(put.has_value()) << put.error().to_string();
      EXPECT_EQ(put->sha256, sha);
      EXPECT_TRUE(get_bytes("from/pipe") == content);
    }
    auto bytes_put = store_->put_bytes("from/bytes", content, {});
    ASSERT_TRUE(bytes_put.has_value()) << bytes_put.error().to_string();
    EXPECT_EQ(bytes_put->sha256, sha);
    EXPECT_TRUE(get_bytes("from/bytes") == content);
  }
  EXPECT_EQ(tmp_entries(), 0u);
}

// begin_put (a task's outputs while its command runs): the key's
// directories and the temp files exist at once, the object only after its
// put_fd; a pending put dropped unused takes its temp files and the
// directories it made (while empty) with it.
TEST_F(LocalObjectStoreTest, ABegunPutStoresOnlyWhenItsBytesComeAndADroppedOneLeavesNothing) {
  PutOptions options;
  options.metadata = {{"task", "t"}};
  auto pending = store_->begin_put("tasks/t/1/outputs/0", options);
  ASSERT_TRUE(pending.has_value()) << pending.error().to_string();
  EXPECT_TRUE(stdfs::is_directory(root_ + "/tasks/t/1/outputs"));
  EXPECT_EQ(tmp_entries(), 2u);  // the content's and the meta's
  EXPECT_EQ(store_->head("tasks/t/1/outputs/0").error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(store_->list("tasks/").value().empty());

  const std::string path = dir_ + "/src";
  std::ofstream(path) << "output bytes";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto put = (*pending)->put_fd(fd);
  ASSERT_TRUE(put.has_value()) << put.error().to_string();
  EXPECT_EQ(put->sha256, sha256_hex("output bytes"));
  EXPECT_EQ(get_bytes("tasks/t/1/outputs/0"), "output bytes");
  EXPECT_EQ(store_->head("tasks/t/1/outputs/0")->metadata.at("task"), "t");
  EXPECT_EQ(tmp_entries(), 0u);
  // Once only.
  auto again = (*pending)->put_fd(fd);
  ::close(fd);
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code, ErrorCode::kInvalidArgument);
  pending->reset();
  EXPECT_EQ(get_bytes("tasks/t/1/outputs/0"), "output bytes");

  // Dropped unused: nothing stored, nothing left, the store's other
  // directories kept.
  {
    auto dropped = store_->begin_put("tasks/u/1/outputs/0", {});
    ASSERT_TRUE(dropped.has_value());
    EXPECT_TRUE(stdfs::is_directory(root_ + "/tasks/u/1/outputs"));
  }
  EXPECT_FALSE(stdfs::exists(root_ + "/tasks/u"));
  EXPECT_TRUE(stdfs::is_directory(root_ + "/tasks/t/1/outputs"));
  EXPECT_EQ(tmp_entries(), 0u);

  // A failed put_fd (over its max_size) stores nothing and leaves nothing.
  PutOptions small;
  small.max_size = 4;
  {
    auto over = store_->begin_put("tasks/v/0", small);
    ASSERT_TRUE(over.has_value());
    int z = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(z, 0);
    auto refused = (*over)->put_fd(z);
    ::close(z);
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().sys_errno, kOverMaxSize);
  }
  EXPECT_EQ(store_->head("tasks/v/0").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(tmp_entries(), 0u);

  // Refused at once: a hostile key, bad metadata.
  EXPECT_EQ(store_->begin_put("../x", {}).error().code, ErrorCode::kInvalidArgument);
  PutOptions bad;
  bad.metadata = {{"Not Valid", "x"}};
  EXPECT_FALSE(store_->begin_put("k", bad).has_value());
  EXPECT_EQ(tmp_entries(), 0u);
}

// The directories a begun put made may be pruned by the remove of another
// key before its bytes come (they are empty until then): its put makes
// them again.
TEST_F(LocalObjectStoreTest, ABegunPutWhoseDirectoriesWerePrunedMeanwhileStillStores) {
  auto pending = store_->begin_put("a/b/c", {});
  ASSERT_TRUE(pending.has_value());
  ASSERT_TRUE(store_->put_bytes("a/b/d", "other", {}).has_value());
  ASSERT_TRUE(store_->remove("a/b/d").has_value());
  EXPECT_FALSE(stdfs::exists(root_ + "/a"));
  const std::string path = dir_ + "/src";
  std::ofstream(path) << "late";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto put = (*pending)->put_fd(fd);
  ::close(fd);
  ASSERT_TRUE(put.has_value()) << put.error().to_string();
  EXPECT_EQ(get_bytes("a/b/c"), "late");
}

TEST_F(LocalObjectStoreTest, HostileKeysAreRefusedByEveryOperation) {
  std::vector<std::string> hostile = {
      "", ".", "..", "../x", "a/../b", "a/..", "/abs", "/etc/passwd", "a//b", "a/", "./a",
      "a/./b", std::string("a\0b", 3), std::string(513, 'k'), "a\\b", "a b", "\xc3\xa4",
      "a~meta", "~tmp/x", "a\nb", "%2e%2e/x"};
  for (const auto& key : hostile) {
    SCOPED_TRACE(::testing::PrintToString(key));
    auto put = store_->put_bytes(key, "x", {});
    ASSERT_FALSE(put.has_value());
    EXPECT_EQ(put.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(store_->head(key).error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(store_->remove(key).error().code, ErrorCode::kInvalidArgument);
    Result<ObjectInfo> got;
    get_bytes(key, &got);
    EXPECT_EQ(got.error().code, ErrorCode::kInvalidArgument);
  }
  // Nothing was written anywhere, in the store or beside it.
  EXPECT_EQ(tmp_entries(), 0u);
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : stdfs::recursive_directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 3u);  // data, data/objects, data/objects/~tmp
  // The longest key is fine.
  std::string longest;
  for (int i = 0; i < 256; ++i) longest += (i ? "/k" : "kk");
  ASSERT_EQ(longest.size(), 512u);
  EXPECT_TRUE(store_->put_bytes(longest, "deep", {}).has_value());
  EXPECT_EQ(get_bytes(longest), "deep");
}

TEST_F(LocalObjectStoreTest, SymlinksPlantedInsideTheStoreAreNeverFollowed) {
  std::string outside = dir_ + "/outside";
  stdfs::create_directories(outside);
  std::ofstream(outside + "/secret") << "host secret";
  // A directory of the store replaced by a symlink out of it.
  ASSERT_TRUE(store_->put_bytes("evil/first", "1", {}).has_value());
  stdfs::remove_all(root_ + "/evil");
  stdfs::create_directory_symlink(outside, root_ + "/evil");
  // An object's files planted outside, as they would look in the store.
  ASSERT_TRUE(store_->put_bytes("model", "planted", {}).has_value());
  for (const auto& e : stdfs::directory_iterator(root_)) {
    std::string name = e.path().filename();
    if (name.rfind("model~", 0) == 0) {
      std::string renamed = "secret" + name.substr(5);
      stdfs::copy_file(e.path(), outside + "/" + renamed);
    }
  }
  // The copied meta names key "model", so fix it to name "evil/secret".
  {
    std::ifstream in(outside + "/secret~meta");
    std::string meta((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    meta.replace(meta.find("\"model\""), 7, "\"evil/secret\"");
    std::ofstream(outside + "/secret~meta", std::ios::trunc) << meta;
  }

  auto put = store_->put_bytes("evil/new", "x", {});
  ASSERT_FALSE(put.has_value());
  EXPECT_EQ(put.error().code, ErrorCode::kPermissionDenied) << put.error().to_string();
  EXPECT_FALSE(stdfs::exists(outside + "/new~meta"));
  Result<ObjectInfo> got;
  EXPECT_EQ(get_bytes("evil/secret", &got), "");
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code, ErrorCode::kPermissionDenied);
  EXPECT_FALSE(store_->head("evil/secret").has_value());
  auto listed = store_->list("");
  ASSERT_TRUE(listed.has_value()) << listed.error().to_string();
  for (const auto& info : *listed) EXPECT_NE(info.key.rfind("evil/", 0), 0u) << info.key;
  auto listed_evil = store_->list("evil/");
  EXPECT_FALSE(listed_evil.has_value() && !listed_evil->empty());
  EXPECT_FALSE(store_->remove("evil/secret").has_value());
  EXPECT_TRUE(stdfs::exists(outside + "/secret~meta"));

  // A meta file replaced by a symlink to a file outside.
  ASSERT_TRUE(store_->put_bytes("linked", "mine", {}).has_value());
  stdfs::remove(root_ + "/linked~meta");
  stdfs::create_symlink(outside + "/secret~meta", root_ + "/linked~meta");
  EXPECT_FALSE(store_->head("linked").has_value());
  // And the temp dir replaced by a symlink: the store refuses to open.
  store_.reset();
  stdfs::remove_all(root_ + "/~tmp");
  stdfs::create_directory_symlink(outside, root_ + "/~tmp");
  EXPECT_FALSE(LocalObjectStore::open(root_).has_value());
  EXPECT_TRUE(stdfs::exists(outside + "/secret"));
}

TEST_F(LocalObjectStoreTest, Sha256MismatchStoresNothingAndKeepsTheOldObject) {
  PutOptions wrong;
  wrong.expected_sha256 = sha256_hex("something else");
  auto put = store_->put_bytes("k", "content", wrong);
  ASSERT_FALSE(put.has_value());
  EXPECT_EQ(put.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(put.error().message.find(sha256_hex("content")), std::string::npos);
  EXPECT_EQ(store_->head("k").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(tmp_entries(), 0u);

  ASSERT_TRUE(store_->put_bytes("k", "old", {}).has_value());
  EXPECT_FALSE(store_->put_bytes("k", "new", wrong).has_value());
  EXPECT_EQ(get_bytes("k"), "old");

  PutOptions right;
  right.expected_sha256 = sha256_hex("new");
  for (char& c : *right.expected_sha256) c = static_cast<char>(std::toupper(c));  // case-blind
  EXPECT_TRUE(store_->put_bytes("k", "new", right).has_value());
  EXPECT_EQ(get_bytes("k"), "new");

  PutOptions malformed;
  malformed.expected_sha256 = "abc";
  EXPECT_EQ(store_->put_bytes("k", "new", malformed).error().code, ErrorCode::kInvalidArgument);
}

TEST_F(LocalObjectStoreTest, MaxSizeRefusesLargerContentAndStoresNothing) {
  PutOptions options;
  options.max_size = 4;
  EXPECT_TRUE(store_->put_bytes("fits", "1234", options).has_value());
  auto over = store_->put_bytes("over", "12345", options);
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(store_->head("over").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(tmp_entries(), 0u);
  // Streamed from an fd that would never end: the put stops at the limit.
  int fd = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  options.max_size = 3 << 20;
  auto endless = store_->put_fd("endless", fd, options);
  ::close(fd);
  ASSERT_FALSE(endless.has_value());
  EXPECT_EQ(endless.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(tmp_entries(), 0u);
}

TEST_F(LocalObjectStoreTest, MetadataIsChecked) {
  std::vector<std::map<std::string, std::string>> bad = {
      {{"Upper", "v"}},
      {{"", "v"}},
      {{std::string(65, 'n'), "v"}},
      {{"under_score", "v"}},
      {{"ctl", "a\nb"}},
      {{"utf8", "\xc3\xa4"}},
      {{"big", std::string(2100, 'v')}},
  };
  for (const auto& metadata : bad) {
    PutOptions options;
    options.metadata = metadata;
    auto put = store_->put_bytes("k", "x", options);
    ASSERT_FALSE(put.has_value());
    EXPECT_EQ(put.error().code, ErrorCode::kInvalidArgument);
  }
  EXPECT_EQ(store_->head("k").error().code, ErrorCode::kNotFound);
}

TEST_F(LocalObjectStoreTest, AKilledPutLeavesTheOldObjectAndItsTempIsSweptOnOpen) {
  ASSERT_TRUE(store_->put_bytes("victim", "old content", {}).has_value());
  ASSERT_TRUE(kill_during_a_put(/*power_loss_durable=*/true, "victim"));
  EXPECT_EQ(get_bytes("victim"), "old content");
  EXPECT_GE(tmp_entries(), 1u);  // the cut put's temp file
  auto reopened = LocalObjectStore::open(root_);
  ASSERT_TRUE(reopened.has_value());
  EXPECT_EQ(tmp_entries(), 0u);
}

// serve.durability: process (the default): no fsync, and still every put
// that returned survives a SIGKILL of its process right after, and a put
// cut short leaves the old object (renames are atomic; the page cache
// keeps the bytes).
TEST_F(LocalObjectStoreTest, AProcessDurableStoreKeepsWhatItAcknowledgedThroughAKill) {
  ASSERT_TRUE(store_->put_bytes("cut", "old content", {}).has_value());
  ASSERT_TRUE(kill_during_a_put(/*power_loss_durable=*/false, "cut", [](LocalObjectStore& store) {
    for (int i = 0; i < 20; ++i) {
      const std::string key = "acked/" + std::to_string(i);
      if (!store.put_bytes(key, std::string(1000 + i, char('a' + i)), {})) return 3;
    }
    return 0;
  }));
  auto reopened = LocalObjectStore::open(root_, false);
  ASSERT_TRUE(reopened.has_value());
  store_ = std::move(*reopened);
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(get_bytes("acked/" + std::to_string(i)), std::string(1000 + i, char('a' + i))) << i;
  EXPECT_EQ(get_bytes("cut"), "old content");
  EXPECT_EQ(tmp_entries(), 0u);
}

TEST_F(LocalObjectStoreTest, ReadersRacingAWriterSeeOneWholeObject) {
  const std::string a(300 * 1024, 'a');
  const std::string b(200 * 1024, 'b');
  ASSERT_TRUE(store_->put_bytes("raced", a, {}).has_value());
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::atomic<int> reads{0};
  std::thread writer([&] {
    for (int i = 0; i < 60; ++i) {
      if (!store_->put_bytes("raced", (i % 2) ? a : b, {})) bad++;
    }
    done = true;
  });
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      while (!done) {
        std::string got;
        auto r = store_->get("raced", [&](std::span<const char> chunk) {
          got.append(chunk.data(), chunk.size());
          return ok();
        });
        if (!r || (got != a && got != b)) bad++;
        reads++;
      }
    });
  }
  writer.join();
  for (auto& r : readers) r.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(reads.load(), 0);
  // Replacing an object leaves one content file, not one per put.
  std::size_t files = 0;
  for (const auto& e : stdfs::directory_iterator(root_)) {
    if (e.path().filename().string().rfind("raced~", 0) == 0) ++files;
  }
  EXPECT_EQ(files, 2u);  // raced~meta and raced~<sha256>
}

TEST_F(LocalObjectStoreTest, CorruptionAtRestIsDetectedOnGet) {
  ASSERT_TRUE(store_->put_bytes("k", "original", {}).has_value());
  std::string data = root_ + "/k~" + sha256_hex("original");
  ASSERT_TRUE(stdfs::exists(data));
  std::ofstream(data, std::ios::trunc) << "0riginal";  // same size, one byte flipped
  Result<ObjectInfo> got;
  get_bytes("k", &got);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(got.error().message.find("corrupted"), std::string::npos);

  std::ofstream(data, std::ios::trunc) << "short";
  get_bytes("k", &got);
  EXPECT_EQ(got.error().code, ErrorCode::kInvalidArgument);
  std::ofstream(root_ + "/k~meta", std::ios::trunc) << "{not json";
  EXPECT_EQ(store_->head("k").error().code, ErrorCode::kInvalidArgument);
}

TEST_F(LocalObjectStoreTest, ASinkErrorStopsTheGet) {
  ASSERT_TRUE(store_->put_bytes("k", std::string(1 << 20, 'x'), {}).has_value());
  int calls = 0;
  auto r = store_->get("k", [&](std::span<const char>) -> Status {
    ++calls;
    return make_error(ErrorCode::kSystem, "client went away");
  });
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message, "client went away");
  EXPECT_EQ(calls, 1);
}

TEST_F(LocalObjectStoreTest, ListByPrefixInKeyOrder) {
  for (const char* key : {"ab", "a/b", "a", "a.c", "a-b", "b/c/d", "a/b/c", "snapshots/s1.tar.zst"}) {
    ASSERT_TRUE(store_->put_bytes(key, key, {}).has_value()) << key;
  }
  auto keys = [&](std::string_view prefix) {
    std::vector<std::string> out;
    auto listed = store_->list(prefix);
    EXPECT_TRUE(listed.has_value()) << listed.error().to_string();
    if (listed) {
      for (const auto& info : *listed) {
        EXPECT_EQ(info.size, info.key.size());
        EXPECT_EQ(info.sha256, sha256_hex(info.key));
        out.push_back(info.key);
      }
    }
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(keys(""), (V{"a", "a-b", "a.c", "a/b", "a/b/c", "ab", "b/c/d", "snapshots/s1.tar.zst"}));
  EXPECT_EQ(keys("a"), (V{"a", "a-b", "a.c", "a/b", "a/b/c", "ab"}));
  EXPECT_EQ(keys("a/"), (V{"a/b", "a/b/c"}));
  EXPECT_EQ(keys("a/b/"), (V{"a/b/c"}));
  EXPECT_EQ(keys("b/c"), (V{"b/c/d"}));
  EXPECT_EQ(keys("snap"), (V{"snapshots/s1.tar.zst"}));
  EXPECT_EQ(keys("zz/"), V{});
  EXPECT_EQ(keys("a/b/c/d/"), V{});
  for (const char* bad : {"../", "/a", "a//", "./x", "a\\"}) {
    auto listed = store_->list(bad);
    ASSERT_FALSE(listed.has_value()) << bad;
    EXPECT_EQ(listed.error().code, ErrorCode::kInvalidArgument);
  }
}

TEST_F(LocalObjectStoreTest, RemoveDeletesTheObjectAndPrunesEmptyDirectories) {
  ASSERT_TRUE(store_->put_bytes("b/c/d", "x", {}).has_value());
  ASSERT_TRUE(store_->put_bytes("b/e", "y", {}).has_value());
  ASSERT_TRUE(store_->remove("b/c/d").has_value());
  EXPECT_EQ(store_->head("b/c/d").error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(stdfs::exists(root_ + "/b/c"));
  EXPECT_TRUE(stdfs::exists(root_ + "/b"));  // b/e is still there
  ASSERT_TRUE(store_->remove("b/e").has_value());
  EXPECT_FALSE(stdfs::exists(root_ + "/b"));
  EXPECT_TRUE(store_->remove("b/e").has_value());  // absent: fine
  // Nothing but the temp dir is left.
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : stdfs::directory_iterator(root_)) ++entries;
  EXPECT_EQ(entries, 1u);
}

TEST_F(LocalObjectStoreTest, PutsOfDifferentKeysRunInParallelWithRemoves) {
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        std::string key = "tasks/t" + std::to_string(i % 5) + "/" + std::to_string(t) + "/o";
        if (!store_->put_bytes(key, key, {})) bad++;
        if (!store_->remove(key)) bad++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  auto listed = store_->list("");
  ASSERT_TRUE(listed.has_value());
  EXPECT_TRUE(listed->empty());
}

}  // namespace
}  // namespace corral::objstore
