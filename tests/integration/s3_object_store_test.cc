// objstore/s3_object_store.h against a real S3-compatible server on
// loopback (REQUIREMENTS D5): tests/npm's @20minutes/s3rver, which checks
// SigV4 signatures. What corral stores is read back with a second,
// independent client (curl --aws-sigv4). Also: a wrong secret key refused,
// sha256 checked both ways, list pagination, a 20 MiB object streamed, a
// server that is down or stalls (kUnavailable, bounded by the timeout), and
// 5xx answers retried a bounded number of times (a scripted server).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "base/random.h"
#include "base/sha256.h"
#include "objstore/object_store_config.h"
#include "objstore/s3_object_store.h"
#include "support/s3_test_server.h"
#include "support/sandbox_harness.h"
#include "support/skip.h"

namespace corral::objstore {
namespace {

using corral::testing::S3TestServer;

class S3ObjectStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto started = S3TestServer::start("corral-test");
    if (!started) {
      skip_reason_ = new std::string(started.error().to_string());
      return;
    }
    server_ = started->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete skip_reason_;
    skip_reason_ = nullptr;
  }
  void SetUp() override {
    if (server_ == nullptr) {
      CORRAL_SKIP_OR_FAIL("no S3 test server: " + (skip_reason_ ? *skip_reason_ : ""));
    }
    dir_ = corral::testing::make_temp_dir("s3-client");
    // Each test its own prefix, so that they do not see each other's keys.
    prefix_ = "t" + std::to_string(random_u64() % 1000000000) + "/";
    store_ = make_store(S3TestServer::kSecretKey);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<S3ObjectStore> make_store(const std::string& secret, S3Config config = {}) {
    if (config.endpoint.empty()) config.endpoint = server_->endpoint();
    config.bucket = server_->bucket();
    config.prefix = prefix_;
    config.spool_dir = dir_;
    auto store = S3ObjectStore::open(config, S3Credentials(S3TestServer::kAccessKey, secret));
    EXPECT_TRUE(store.has_value()) << store.error().to_string();
    return store ? std::move(*store) : nullptr;
  }

  std::string get_bytes(ObjectStore& store, std::string_view key, Result<ObjectInfo>* out = nullptr) {
    std::string got;
    auto r = store.get(key, [&](std::span<const char> chunk) {
      got.append(chunk.data(), chunk.size());
      return ok();
    });
    if (out != nullptr) *out = r;
    return got;
  }

  // The object as the independent client sees it.
  S3TestServer::CurlResult curl_get(const std::string& key, const std::string& method = "GET") {
    return server_->curl(method, "/" + server_->bucket() + "/" + prefix_ + key);
  }

  static S3TestServer* server_;
  static std::string* skip_reason_;
  std::string dir_;
  std::string prefix_;
  std::unique_ptr<S3ObjectStore> store_;
};
S3TestServer* S3ObjectStoreTest::server_ = nullptr;
std::string* S3ObjectStoreTest::skip_reason_ = nullptr;

TEST_F(S3ObjectStoreTest, RoundTripReadBackByAnIndependentClient) {
  ASSERT_TRUE(store_->probe().has_value());
  PutOptions options;
  options.metadata = {{"task", "build-42"}, {"reason", "exit code 1"}};
  options.expected_sha256 = sha256_hex("hello object");
  auto put = store_->put_bytes("tasks/build-42/1/outputs/0", "hello object", options);
  ASSERT_TRUE(put.has_value()) << put.error().to_string();
  EXPECT_EQ(put->sha256, sha256_hex("hello object"));

  // curl --aws-sigv4: the bytes, and the sha256 recorded as metadata.
  auto read = curl_get("tasks/build-42/1/outputs/0");
  ASSERT_EQ(read.status, 200) << read.body;
  EXPECT_EQ(read.body, "hello object");
  EXPECT_EQ(sha256_hex(read.body), put->sha256);
  EXPECT_NE(read.headers.find("x-amz-meta-sha256: " + put->sha256), std::string::npos)
      << read.headers;
  EXPECT_NE(read.headers.find("x-amz-meta-task: build-42"), std::string::npos);

  auto head = store_->head("tasks/build-42/1/outputs/0");
  ASSERT_TRUE(head.has_value()) << head.error().to_string();
  EXPECT_EQ(head->size, 12u);
  EXPECT_EQ(head->sha256, put->sha256);
  EXPECT_EQ(head->metadata, options.metadata);
  EXPECT_GT(head->modified_ms, 0);
  Result<ObjectInfo> got;
  EXPECT_EQ(get_bytes(*store_, "tasks/build-42/1/outputs/0", &got), "hello object");
  ASSERT_TRUE(got.has_value()) << got.error().to_string();
  EXPECT_EQ(got->sha256, put->sha256);

  ASSERT_TRUE(store_->remove("tasks/build-42/1/outputs/0").has_value());
  EXPECT_EQ(curl_get("tasks/build-42/1/outputs/0", "HEAD").status, 404);
  EXPECT_EQ(store_->head("tasks/build-42/1/outputs/0").error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(store_->remove("tasks/build-42/1/outputs/0").has_value());  // absent: fine
  Result<ObjectInfo> missing;
  get_bytes(*store_, "no/such", &missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

TEST_F(S3ObjectStoreTest, AWrongSecretKeyIsRefusedAndStoresNothing) {
  auto wrong = make_store("not-the-secret");
  ASSERT_NE(wrong, nullptr);
  auto probe = wrong->probe();
  ASSERT_FALSE(probe.has_value());
  EXPECT_EQ(probe.error().code, ErrorCode::kPermissionDenied);
  auto put = wrong->put_bytes("refused", "x", {});
  ASSERT_FALSE(put.has_value());
  EXPECT_EQ(put.error().code, ErrorCode::kPermissionDenied) << put.error().to_string();
  EXPECT_NE(put.error().message.find("SignatureDoesNotMatch"), std::string::npos);
  EXPECT_NE(put.error().message.find("refused"), std::string::npos);  // the key
  EXPECT_NE(put.error().message.find(server_->endpoint()), std::string::npos);
  EXPECT_EQ(put.error().message.find("not-the-secret"), std::string::npos);
  EXPECT_EQ(curl_get("refused", "HEAD").status, 404);
  // And the independent client with the wrong key is refused the same way.
  EXPECT_EQ(server_->curl("HEAD", "/" + server_->bucket(), "", {}, "not-the-secret").status, 403);
}

TEST_F(S3ObjectStoreTest, AMissingBucketIsASettingToFix) {
  S3Config config;
  config.endpoint = server_->endpoint();
  config.bucket = "no-such-bucket";
  auto store = S3ObjectStore::open(config, S3Credentials(S3TestServer::kAccessKey,
                                                         S3TestServer::kSecretKey));
  ASSERT_TRUE(store.has_value());
  auto probe = (*store)->probe();
  ASSERT_FALSE(probe.has_value());
  EXPECT_EQ(probe.error().code, ErrorCode::kNotFound);
  EXPECT_NE(probe.error().message.find("NoSuchBucket"), std::string::npos) << probe.error().message;
  // For a task it is the store being unusable, not a missing object.
  auto put = (*store)->put_bytes("k", "x", {});
  ASSERT_FALSE(put.has_value());
  EXPECT_EQ(put.error().code, ErrorCode::kUnavailable) << put.error().to_string();
}

TEST_F(S3ObjectStoreTest, Sha256MismatchAndMaxSizeStoreNothing) {
  PutOptions wrong;
  wrong.expected_sha256 = sha256_hex("other");
  auto put = store_->put_bytes("k", "content", wrong);
  ASSERT_FALSE(put.has_value());
  EXPECT_EQ(put.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(curl_get("k", "HEAD").status, 404);
  PutOptions small;
  small.max_size = 3;
  auto over = store_->put_bytes("k", "content", small);
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(curl_get("k", "HEAD").status, 404);
  PutOptions reserved;
  reserved.metadata = {{"sha256", "mine"}};
  EXPECT_EQ(store_->put_bytes("k", "content", reserved).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(store_->put_bytes("../k", "content", {}).error().code, ErrorCode::kInvalidArgument);
}

TEST_F(S3ObjectStoreTest, AnObjectChangedAtRestFailsItsGet) {
  ASSERT_TRUE(store_->put_bytes("k", "original", {}).has_value());
  // Replaced behind corral's back, keeping the old recorded sha256.
  std::string other = dir_ + "/other";
  std::ofstream(other) << "tampered";
  auto put = server_->curl("PUT", "/" + server_->bucket() + "/" + prefix_ + "k", other,
                           {"x-amz-meta-sha256: " + sha256_hex("original")});
  ASSERT_EQ(put.status, 200) << put.body;
  Result<ObjectInfo> got;
  get_bytes(*store_, "k", &got);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(got.error().message.find("corrupted"), std::string::npos);
}

TEST_F(S3ObjectStoreTest, ListPagesThroughManyKeysInKeyOrder) {
  S3Config config;
  config.list_page_size = 7;  // 25 keys: four pages
  auto paged = make_store(S3TestServer::kSecretKey, config);
  ASSERT_NE(paged, nullptr);
  std::vector<std::string> expected;
  for (int i = 0; i < 25; ++i) {
    char key[32];
    snprintf(key, sizeof key, "p/k%03d", (i * 7) % 25);  // stored out of order
    PutOptions options;
    options.metadata = {{"n", std::to_string(i)}};
    ASSERT_TRUE(paged->put_bytes(key, key, options).has_value()) << key;
    expected.push_back(key);
  }
  ASSERT_TRUE(paged->put_bytes("q/other", "x", {}).has_value());
  std::sort(expected.begin(), expected.end());
  auto listed = paged->list("p/");
  ASSERT_TRUE(listed.has_value()) << listed.error().to_string();
  std::vector<std::string> keys;
  for (const auto& info : *listed) {
    keys.push_back(info.key);
    EXPECT_EQ(info.sha256, sha256_hex(info.key));
    EXPECT_EQ(info.size, info.key.size());
    EXPECT_EQ(info.metadata.count("n"), 1u);
  }
  EXPECT_EQ(keys, expected);
  auto all = paged->list("");
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(all->size(), 26u);
  EXPECT_EQ(all->back().key, "q/other");
  auto none = paged->list("zz/");
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(paged->list("../").error().code, ErrorCode::kInvalidArgument);
}

TEST_F(S3ObjectStoreTest, ALargeObjectIsStreamedBothWays) {
  std::string path = dir_ + "/large";
  std::string chunk(1 << 20, '\0');
  {
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 20; ++i) {
      fill_random(chunk.data(), chunk.size());
      out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    }
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto put = store_->put_fd("large", fd, {});
  ::close(fd);
  ASSERT_TRUE(put.has_value()) << put.error().to_string();
  EXPECT_EQ(put->size, 20u << 20);
  // The sink sees many chunks, none near the whole: nothing buffers it all.
  Sha256 hasher;
  std::uint64_t total = 0;
  std::size_t largest = 0;
  int chunks = 0;
  auto got = store_->get("large", [&](std::span<const char> c) {
    hasher.update(c.data(), c.size());
    total += c.size();
    largest = std::max(largest, c.size());
    ++chunks;
    return ok();
  });
  ASSERT_TRUE(got.has_value()) << got.error().to_string();
  EXPECT_EQ(total, 20u << 20);
  EXPECT_EQ(Sha256::hex(hasher.final()), put->sha256);
  EXPECT_GT(chunks, 20);
  EXPECT_LE(largest, 1u << 20);
  auto read = curl_get("large");
  ASSERT_EQ(read.status, 200);
  EXPECT_EQ(sha256_hex(read.body), put->sha256);
}

TEST_F(S3ObjectStoreTest, APutFromAPipeIsSpooledThenSent) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  std::string data(300000, 'z');
  std::thread writer([&] {
    (void)!::write(p[1], data.data(), data.size());
    ::close(p[1]);
  });
  auto put = store_->put_fd("piped", p[0], {});
  writer.join();
  ::close(p[0]);
  ASSERT_TRUE(put.has_value()) << put.error().to_string();
  EXPECT_EQ(curl_get("piped").body, data);
}

// The default begin_put: nothing happens at the server until the bytes
// come; a pending put dropped unused leaves no object.
TEST_F(S3ObjectStoreTest, ABegunPutSendsOnlyWhenItsBytesCome) {
  auto pending = store_->begin_put("begun/0", {});
  ASSERT_TRUE(pending.has_value()) << pending.error().to_string();
  EXPECT_EQ(store_->head("begun/0").error().code, ErrorCode::kNotFound);
  std::string path = dir_ + "/begun";
  std::ofstream(path) << "begun bytes";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto put = (*pending)->put_fd(fd);
  ::close(fd);
  ASSERT_TRUE(put.has_value()) << put.error().to_string();
  EXPECT_EQ(curl_get("begun/0").body, "begun bytes");
  EXPECT_EQ((*pending)->put_fd(0).error().code, ErrorCode::kInvalidArgument);  // once
  {
    auto dropped = store_->begin_put("begun/1", {});
    ASSERT_TRUE(dropped.has_value());
  }
  EXPECT_EQ(store_->head("begun/1").error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(store_->begin_put("../x", {}).has_value());
}

TEST_F(S3ObjectStoreTest, FactoryTakesTheCredentialsFromTheSecretStoreByName) {
  ObjectStoreConfig config;
  config.kind = ObjectStoreConfig::Kind::kS3;
  config.endpoint = server_->endpoint();
  config.bucket = server_->bucket();
  config.prefix = prefix_;
  config.access_key_secret = "s3_id";
  config.secret_key_secret = "s3_key";
  std::map<std::string, std::string> secrets = {{"s3_id", S3TestServer::kAccessKey}};
  SecretLookup lookup = [&](std::string_view name) -> std::optional<std::string> {
    auto it = secrets.find(std::string(name));
    if (it == secrets.end()) return std::nullopt;
    return it->second;
  };
  auto missing = make_object_store(config, dir_, lookup);
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message.find("s3_key"), std::string::npos) << missing.error().message;
  secrets["s3_key"] = S3TestServer::kSecretKey;
  auto made = make_object_store(config, dir_, lookup);
  ASSERT_TRUE(made.has_value()) << made.error().to_string();
  EXPECT_EQ((*made)->kind(), "s3");
  ASSERT_TRUE((*made)->put_bytes("via-factory", "f", {}).has_value());
  EXPECT_EQ(curl_get("via-factory").body, "f");
}

// A port on 127.0.0.1 that nothing listens on.
int closed_port() {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

// A loopback HTTP server that answers each request with the next of
// `answers` (the last one repeats), and counts the requests.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::vector<std::string> answers) : answers_(std::move(answers)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::listen(fd_, 16);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_; }

 private:
  void serve() {
    while (!stop_) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      std::string head;
      char buf[4096];
      while (head.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        head.append(buf, static_cast<std::size_t>(n));
      }
      int i = requests_++;
      const std::string& answer = answers_[std::min<std::size_t>(i, answers_.size() - 1)];
      (void)!::write(c, answer.data(), answer.size());
      ::close(c);
    }
  }
  std::vector<std::string> answers_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> requests_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::unique_ptr<S3ObjectStore> store_at(const std::string& endpoint, int attempts = 3,
                                        std::int64_t timeout_ms = 30'000) {
  S3Config config;
  config.endpoint = endpoint;
  config.bucket = "bkt";
  config.max_attempts = attempts;
  config.retry_base_ms = 10;
  config.timeout_ms = timeout_ms;
  auto store = S3ObjectStore::open(config, S3Credentials("id", "very-secret-key"));
  EXPECT_TRUE(store.has_value());
  return store ? std::move(*store) : nullptr;
}

std::string answer(const std::string& status, const std::string& body) {
  return "HTTP/1.1 " + status + "\r\nContent-Type: application/xml\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}
const std::string k503 = answer(
    "503 Service Unavailable",
    "<Error><Code>SlowDown</Code><Message>Reduce your rate</Message></Error>");

TEST(S3ObjectStoreFaults, AServerThatIsDownIsUnavailable) {
  auto store = store_at("http://127.0.0.1:" + std::to_string(closed_port()));
  ASSERT_NE(store, nullptr);
  auto put = store->put_bytes("k", "x", {});
  ASSERT_FALSE(put.has_value());
  EXPECT_EQ(put.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(put.error().message.find("k in S3 store http://127.0.0.1:"), std::string::npos)
      << put.error().message;
  EXPECT_EQ(put.error().message.find("very-secret-key"), std::string::npos);
  EXPECT_EQ(store->head("k").error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(store->remove("k").error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(store->list("").error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(store->probe().error().code, ErrorCode::kUnavailable);
}

TEST(S3ObjectStoreFaults, AServerThatNeverAnswersFailsAfterTheTimeout) {
  // Connections are accepted by the kernel's backlog, then nothing: only
  // the timeout (1 s here) ends the wait.
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ASSERT_EQ(::listen(s, 16), 0);
  auto store = store_at("http://127.0.0.1:" + std::to_string(ntohs(a.sin_port)), 1, 1000);
  ASSERT_NE(store, nullptr);
  auto head = store->head("k");
  ASSERT_FALSE(head.has_value());
  EXPECT_EQ(head.error().code, ErrorCode::kUnavailable) << head.error().message;
  Result<ObjectInfo> got = store->get("k", [](std::span<const char>) { return ok(); });
  EXPECT_EQ(got.error().code, ErrorCode::kUnavailable);
  ::close(s);
}

TEST(S3ObjectStoreFaults, ServerErrorsAreRetriedABoundedNumberOfTimes) {
  ScriptedServer always({k503});
  auto store = store_at(always.endpoint(), 3);
  auto head = store->head("k");
  ASSERT_FALSE(head.has_value());
  EXPECT_EQ(head.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(head.error().message.find("HTTP 503"), std::string::npos) << head.error().message;
  EXPECT_NE(head.error().message.find("after 3 attempts"), std::string::npos);
  EXPECT_EQ(always.requests(), 3);

  const std::string sha = sha256_hex("hello");
  ScriptedServer flaky({k503, k503,
                        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nx-amz-meta-sha256: " + sha +
                            "\r\nx-amz-meta-task: t1\r\nConnection: close\r\n\r\n"});
  auto recovering = store_at(flaky.endpoint(), 3);
  auto ok_head = recovering->head("k");
  ASSERT_TRUE(ok_head.has_value()) << ok_head.error().to_string();
  EXPECT_EQ(ok_head->size, 5u);
  EXPECT_EQ(ok_head->sha256, sha);
  EXPECT_EQ(ok_head->metadata.at("task"), "t1");
  EXPECT_EQ(flaky.requests(), 3);

  // A 4xx is an answer, not a fault: never retried.
  ScriptedServer denied({"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"});
  auto refused = store_at(denied.endpoint(), 3);
  EXPECT_EQ(refused->head("k").error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(denied.requests(), 1);
}

TEST(S3ObjectStoreFaults, SettingsAreChecked) {
  auto open = [](S3Config c) { return S3ObjectStore::open(c, S3Credentials("id", "key")); };
  S3Config good;
  good.endpoint = "https://s3.example.com/";
  good.bucket = "corral-data";
  good.prefix = "prod";
  auto store = open(good);
  ASSERT_TRUE(store.has_value());
  EXPECT_EQ((*store)->describe(), "https://s3.example.com/corral-data/prod");
  for (const char* endpoint : {"s3.example.com", "ftp://x", "https://user:pw@host",
                               "https://host/path", "https://host?q", "http://"}) {
    S3Config c = good;
    c.endpoint = endpoint;
    EXPECT_FALSE(open(c).has_value()) << endpoint;
  }
  for (const char* bucket : {"", "ab", "UPPER", "-x-", "a_b"}) {
    S3Config c = good;
    c.bucket = bucket;
    EXPECT_FALSE(open(c).has_value()) << bucket;
  }
  for (const char* prefix : {"/abs", "../x/", "a//"}) {
    S3Config c = good;
    c.prefix = prefix;
    EXPECT_FALSE(open(c).has_value()) << prefix;
  }
  EXPECT_FALSE(S3ObjectStore::open(good, S3Credentials("", "key")).has_value());
  EXPECT_FALSE(S3ObjectStore::open(good, S3Credentials("id", "with\nnewline")).has_value());
}

}  // namespace
}  // namespace corral::objstore
