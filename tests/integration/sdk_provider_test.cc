// The C++ SDK (REQUIREMENTS.md P1, P2): one suite, run against every
// SandboxProvider: LocalProvider (in-process, no daemon) and RemoteProvider
// on a real `corral serve`, over its unix socket and over TCP with a key.
// The same calls must give the same results whichever provider is behind.
//
// LocalProvider forks its sandbox factory and must be opened while the
// process has one thread: a global test environment opens it before any
// test runs, and only when a Local case is selected (ctest runs each test
// in a process of its own).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "sdk/local_provider.h"
#include "sdk/remote_provider.h"
#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using sdk::SandboxProvider;

// ---- the process's LocalProvider ----------------------------------------------------

std::unique_ptr<sdk::LocalProvider> g_local;
std::string g_local_dir;
std::string g_local_error;

class LocalProviderEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (!local_case_selected()) return;
    g_local_dir = make_temp_dir("sdk-local");
    sdk::LocalOptions options;
    options.data_dir = g_local_dir + "/data";
    auto p = sdk::LocalProvider::open(options);
    if (!p) {
      g_local_error = p.error().to_string();
      return;
    }
    g_local = std::move(*p);
  }
  void TearDown() override {
    g_local.reset();  // destroys what is left, stops the service
    if (!g_local_dir.empty()) host_sh("rm -rf '" + g_local_dir + "'");
  }

 private:
  static bool local_case_selected() {
    const ::testing::UnitTest* unit = ::testing::UnitTest::GetInstance();
    for (int i = 0; i < unit->total_test_suite_count(); ++i) {
      const ::testing::TestSuite* suite = unit->GetTestSuite(i);
      if (std::string(suite->name()).find("SdkProvider") == std::string::npos) continue;
      for (int j = 0; j < suite->total_test_count(); ++j) {
        const ::testing::TestInfo* t = suite->GetTestInfo(j);
        if (t->should_run() && std::string(t->name()).ends_with("/Local")) return true;
      }
    }
    return false;
  }
};

[[maybe_unused]] ::testing::Environment* const kLocalEnvironment =
    ::testing::AddGlobalTestEnvironment(new LocalProviderEnvironment);

// ---- fixture ------------------------------------------------------------------------

class SdkProvider : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string& kind = GetParam();
    if (kind == "Local") {
      ASSERT_TRUE(g_local) << "LocalProvider::open failed: " << g_local_error;
      provider_ = g_local.get();
      return;
    }
    daemon_ = std::make_unique<TestDaemon>();
    ASSERT_TRUE(daemon_->ready()) << daemon_->output();
    sdk::RemoteOptions options;
    options.url = kind == "RemoteUnix" ? daemon_->unix_url() : daemon_->tcp_url();
    if (kind == "RemoteTcp") options.api_key = daemon_->api_key();
    options.timeout = std::chrono::seconds(120);
    auto p = sdk::RemoteProvider::open(options);
    ASSERT_TRUE(p) << p.error().to_string();
    remote_ = std::move(*p);
    provider_ = remote_.get();
  }

  void TearDown() override {
    // Every test destroys what it made; a leftover is a failure (and is
    // then destroyed here, so nothing outlives the test).
    if (provider_ != nullptr) {
      auto list = provider_->list(false);
      ASSERT_TRUE(list) << list.error().to_string();
      for (const auto& s : *list) {
        ADD_FAILURE() << "sandbox " << s.id << " left " << s.state;
        (void)provider_->destroy_sandbox(s.id);
      }
    }
    remote_.reset();
    daemon_.reset();
  }

  std::string create() {
    auto id = provider_->create({});
    EXPECT_TRUE(id) << id.error().to_string();
    return id ? *id : std::string();
  }

  api::ExecResult run(const std::string& id, std::vector<std::string> argv,
                      std::string stdin_data = {}) {
    api::ExecRequest r;
    r.argv = std::move(argv);
    r.stdin_data = std::move(stdin_data);
    auto result = provider_->exec(id, r);
    EXPECT_TRUE(result) << result.error().to_string();
    return result ? *result : api::ExecResult{};
  }

  api::ExecResult sh(const std::string& id, const std::string& cmd) {
    api::ExecRequest r;
    r.cmd = cmd;
    auto result = provider_->exec(id, r);
    EXPECT_TRUE(result) << result.error().to_string();
    return result ? *result : api::ExecResult{};
  }

  // The audit records of `type` about sandbox `id`, from the data dir of
  // whichever provider this is.
  std::vector<nlohmann::json> audit_of(const std::string& type, const std::string& id) const {
    const std::string path = (daemon_ ? daemon_->data_dir() : g_local_dir + "/data") + "/audit.log";
    std::vector<nlohmann::json> out;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.value("type", "") == type && j.value("sandbox", "") == id)
        out.push_back(j);
    }
    return out;
  }

  SandboxProvider* provider_ = nullptr;
  std::unique_ptr<TestDaemon> daemon_;
  std::unique_ptr<sdk::RemoteProvider> remote_;
};

std::string random_bytes(std::size_t n, std::uint64_t seed) {
  std::string data(n, '\0');
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    std::uint64_t v = rng();
    std::memcpy(data.data() + i, &v, 8);
  }
  return data;
}

// ---- the five calls ---------------------------------------------------------------

TEST_P(SdkProvider, CreateExecDestroy) {
  std::string id = create();
  ASSERT_FALSE(id.empty());
  EXPECT_TRUE(id.starts_with("sb-")) << id;

  auto info = provider_->inspect(id);
  ASSERT_TRUE(info) << info.error().to_string();
  EXPECT_EQ(info->id, id);
  EXPECT_EQ(info->state, "ready");
  EXPECT_TRUE(info->usage.has_value());

  api::ExecResult r = run(id, {"echo", "hello", "world"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_FALSE(r.signal);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.stdout_data, "hello world\n");
  EXPECT_EQ(r.stderr_data, "");
  EXPECT_TRUE(r.process_id.starts_with("p-")) << r.process_id;

  // It is listed while it lives.
  auto list = provider_->list(false);
  ASSERT_TRUE(list) << list.error().to_string();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, id);

  auto destroyed = provider_->destroy(id);
  ASSERT_TRUE(destroyed) << destroyed.error().to_string();
  info = provider_->inspect(id);
  ASSERT_TRUE(info) << info.error().to_string();
  EXPECT_EQ(info->state, "cleaned");
  EXPECT_TRUE(info->residue.empty());
  // A second destroy is fine; work after the end is refused.
  EXPECT_TRUE(provider_->destroy(id));
  api::ExecRequest again;
  again.argv = {"true"};
  auto late = provider_->exec(id, again);
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, ErrorCode::kUnavailable) << late.error().to_string();
  auto all = provider_->list(true);
  ASSERT_TRUE(all);
  bool listed = false;
  for (const auto& s : *all) {
    if (s.id != id) continue;
    listed = true;
    EXPECT_EQ(s.state, "cleaned");
  }
  EXPECT_TRUE(listed) << "list(true) does not show the destroyed sandbox";
}

TEST_P(SdkProvider, ExitCodesSignalsTimeouts) {
  std::string id = create();
  ASSERT_FALSE(id.empty());

  api::ExecResult r = sh(id, "echo out; echo err >&2; exit 3");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(sdk::exit_status_of(r), 3);
  EXPECT_EQ(r.stdout_data, "out\n");
  EXPECT_EQ(r.stderr_data, "err\n");

  r = run(id, {"corral-no-such-command-xyz"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_EQ(sdk::exit_status_of(r), 127);
  EXPECT_NE(r.stderr_data.find("corral-no-such-command-xyz"), std::string::npos) << r.stderr_data;

  r = sh(id, "kill -TERM $$");
  EXPECT_EQ(r.signal, 15);
  EXPECT_EQ(sdk::exit_status_of(r), 143);

  api::ExecRequest slow;
  slow.argv = {"sleep", "30"};
  slow.timeout_ms = 500;
  const auto t0 = std::chrono::steady_clock::now();
  auto timed = provider_->exec(id, slow);
  ASSERT_TRUE(timed) << timed.error().to_string();
  EXPECT_TRUE(timed->timed_out);
  EXPECT_EQ(sdk::exit_status_of(*timed), 124);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(15));

  // The sandbox still works after all that.
  EXPECT_EQ(run(id, {"true"}).exit_code, 0);
  EXPECT_TRUE(provider_->destroy(id));
}

TEST_P(SdkProvider, EnvCwdStdinAndOutputCap) {
  std::string id = create();
  ASSERT_FALSE(id.empty());
  api::ExecRequest r;
  r.cmd = "echo \"$GREETING\"; pwd";
  r.env = {{"GREETING", "hi there"}};
  r.cwd = "/tmp";
  auto out = provider_->exec(id, r);
  ASSERT_TRUE(out) << out.error().to_string();
  EXPECT_EQ(out->stdout_data, "hi there\n/tmp\n");

  // stdin with every byte value comes back unchanged.
  std::string input = random_bytes(256 * 1024, 7);
  api::ExecResult cat = run(id, {"cat"}, input);
  EXPECT_EQ(cat.exit_code, 0);
  EXPECT_TRUE(cat.stdout_data == input) << "cat returned " << cat.stdout_data.size() << " bytes";

  api::ExecRequest big;
  big.cmd = "head -c 100000 /dev/zero";
  big.max_output_bytes = 1000;
  auto capped = provider_->exec(id, big);
  ASSERT_TRUE(capped) << capped.error().to_string();
  EXPECT_EQ(capped->stdout_data.size(), 1000u);
  EXPECT_TRUE(capped->stdout_truncated);
  EXPECT_FALSE(capped->stderr_truncated);

  // A bad request is refused the same way by both providers.
  api::ExecRequest bad_env;
  bad_env.argv = {"true"};
  bad_env.env = {{"1BAD", "x"}};
  auto refused = provider_->exec(id, bad_env);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument) << refused.error().to_string();
  EXPECT_TRUE(provider_->destroy(id));
}

TEST_P(SdkProvider, StreamedExecDeliversOutputWhileItRuns) {
  std::string id = create();
  ASSERT_FALSE(id.empty());
  api::ExecRequest r;
  r.cmd = "echo first; echo warn >&2; sleep 2; echo second";
  const auto t0 = std::chrono::steady_clock::now();
  std::string out, err;
  std::optional<std::chrono::steady_clock::duration> first_at;
  auto result = provider_->exec_stream(id, r, [&](api::ExecEvent::Kind kind, std::string_view d) {
    if (kind == api::ExecEvent::kStdout) {
      if (!first_at) first_at = std::chrono::steady_clock::now() - t0;
      out.append(d);
    } else {
      err.append(d);
    }
  });
  const auto total = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(result) << result.error().to_string();
  EXPECT_EQ(result->exit_code, 0);
  EXPECT_EQ(out, "first\nsecond\n");
  EXPECT_EQ(err, "warn\n");
  EXPECT_TRUE(result->stdout_data.empty());
  ASSERT_TRUE(first_at);
  // "first" arrived while the command was still sleeping.
  EXPECT_LT(*first_at + std::chrono::milliseconds(1500), total)
      << "first chunk after "
      << std::chrono::duration_cast<std::chrono::milliseconds>(*first_at).count() << " ms of "
      << std::chrono::duration_cast<std::chrono::milliseconds>(total).count();
  EXPECT_TRUE(provider_->destroy(id));
}

// ---- files --------------------------------------------------------------------------

TEST_P(SdkProvider, PutExecGetRoundTrip) {
  std::string id = create();
  ASSERT_FALSE(id.empty());

  auto put = provider_->put_file(id, "/workspace/hello.txt", "hello from the host\n");
  ASSERT_TRUE(put) << put.error().to_string();
  EXPECT_EQ(put->bytes, 20u);
  EXPECT_EQ(put->sha256, sha256_hex("hello from the host\n"));
  api::ExecResult r = run(id, {"cat", "/workspace/hello.txt"});
  EXPECT_EQ(r.stdout_data, "hello from the host\n");
  // Owned by the sandbox's user, who can change it.
  r = sh(id, "stat -c '%u %a' /workspace/hello.txt && echo more >> /workspace/hello.txt");
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, "1000 644\n");
  auto back = provider_->get_file(id, "/workspace/hello.txt");
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(*back, "hello from the host\nmore\n");

  // 8 MiB of binary data: up, hashed inside, down, byte for byte.
  const std::string blob = random_bytes(std::size_t{8} << 20, 42);
  put = provider_->put_file(id, "/workspace/blob.bin", blob, 0600);
  ASSERT_TRUE(put) << put.error().to_string();
  EXPECT_EQ(put->bytes, blob.size());
  EXPECT_EQ(put->sha256, sha256_hex(blob));
  r = sh(id, "sha256sum /workspace/blob.bin | cut -d' ' -f1; stat -c %a /workspace/blob.bin");
  EXPECT_EQ(r.stdout_data, sha256_hex(blob) + "\n600\n");
  back = provider_->get_file(id, "/workspace/blob.bin");
  ASSERT_TRUE(back) << back.error().to_string();
  ASSERT_EQ(back->size(), blob.size());
  EXPECT_TRUE(*back == blob) << "downloaded bytes differ";

  // A file made inside, streamed to a host fd.
  r = sh(
      id,
      "head -c 3000000 /dev/urandom > /workspace/made; sha256sum /workspace/made | cut -d' ' -f1");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  std::string dir = make_temp_dir("sdk-get");
  const std::string local = dir + "/made";
  int fd = ::open(local.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  auto n = provider_->get_file_to_fd(id, "/workspace/made", fd);
  ::close(fd);
  ASSERT_TRUE(n) << n.error().to_string();
  EXPECT_EQ(*n, 3000000u);
  EXPECT_EQ(host_sh("sha256sum '" + local + "' | cut -d' ' -f1"), r.stdout_data);
  host_sh("rm -rf '" + dir + "'");

  // get_file's memory bound.
  auto too_big = provider_->get_file(id, "/workspace/blob.bin", 1024);
  ASSERT_FALSE(too_big);
  EXPECT_EQ(too_big.error().code, ErrorCode::kResourceExhausted);

  // Streamed upload of unknown length.
  std::size_t produced = 0;
  sdk::ByteSource source = [&](char* buf, std::size_t cap) -> Result<std::size_t> {
    std::size_t k = std::min<std::size_t>(cap, 1000000 - produced);
    std::memset(buf, 'x', k);
    produced += k;
    return k;
  };
  auto streamed = provider_->put_file_from(id, "/workspace/xs", source, std::nullopt, 0644);
  ASSERT_TRUE(streamed) << streamed.error().to_string();
  EXPECT_EQ(streamed->bytes, 1000000u);
  EXPECT_EQ(sh(id, "wc -c < /workspace/xs").stdout_data, "1000000\n");

  EXPECT_TRUE(provider_->destroy(id));
}

TEST_P(SdkProvider, FileErrors) {
  std::string id = create();
  ASSERT_FALSE(id.empty());
  auto missing = provider_->get_file(id, "/workspace/nope");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound) << missing.error().to_string();
  // Paths that climb out are refused, not resolved against the host.
  auto escape = provider_->get_file(id, "/../../../etc/hostname");
  ASSERT_FALSE(escape);
  EXPECT_NE(escape.error().code, ErrorCode::kNotFound) << escape.error().to_string();
  auto escape_put = provider_->put_file(id, "../x", "data");
  EXPECT_FALSE(escape_put);
  // A missing parent directory is an error, not created on the fly.
  auto no_parent = provider_->put_file(id, "/workspace/a/b/c.txt", "data");
  EXPECT_FALSE(no_parent);
  // Both providers audit the refusals alike (X1), with the API's codes.
  auto reads = audit_of("file.read", id);
  ASSERT_EQ(reads.size(), 2u);
  EXPECT_EQ(reads[0].value("error", ""), "not_found") << reads[0].dump();
  EXPECT_EQ(reads[1].value("error", ""), "path_escape") << reads[1].dump();
  auto writes = audit_of("file.write", id);
  ASSERT_EQ(writes.size(), 2u);
  for (const auto& w : writes) {
    EXPECT_EQ(w.value("outcome", ""), "refused") << w.dump();
    EXPECT_FALSE(w.value("reason", "").empty()) << w.dump();
  }
  EXPECT_EQ(writes[0].value("error", ""), "path_escape") << writes[0].dump();
  EXPECT_EQ(writes[1].value("error", ""), "not_found") << writes[1].dump();
  EXPECT_TRUE(provider_->destroy(id));
}

// ---- errors and idempotency -------------------------------------------------------

TEST_P(SdkProvider, UnknownIdIsNotFound) {
  const std::string id = "sb-000000000000";
  api::ExecRequest r;
  r.argv = {"true"};
  auto e = provider_->exec(id, r);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, ErrorCode::kNotFound) << e.error().to_string();
  auto s = provider_->exec_stream(id, r, nullptr);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kNotFound) << s.error().to_string();
  auto put = provider_->put_file(id, "/workspace/x", "x");
  ASSERT_FALSE(put);
  EXPECT_EQ(put.error().code, ErrorCode::kNotFound) << put.error().to_string();
  auto get = provider_->get_file(id, "/workspace/x");
  ASSERT_FALSE(get);
  EXPECT_EQ(get.error().code, ErrorCode::kNotFound) << get.error().to_string();
  auto info = provider_->inspect(id);
  ASSERT_FALSE(info);
  EXPECT_EQ(info.error().code, ErrorCode::kNotFound) << info.error().to_string();
  auto gone = provider_->destroy(id);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::kNotFound) << gone.error().to_string();
}

TEST_P(SdkProvider, BadSpecAndIdempotencyKey) {
  api::CreateSandboxRequest bad;
  bad.spec.limits.memory_bytes = 1024;  // below the minimum
  auto refused = provider_->create(bad);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument) << refused.error().to_string();

  api::CreateSandboxRequest req;
  req.spec.limits.memory_bytes = 256ull << 20;
  req.spec.env = {{"ROLE", "worker"}};
  auto a = provider_->create_sandbox(req, "sdk-test-key-1");
  ASSERT_TRUE(a) << a.error().to_string();
  auto b = provider_->create_sandbox(req, "sdk-test-key-1");
  ASSERT_TRUE(b) << b.error().to_string();
  EXPECT_EQ(a->id, b->id);
  EXPECT_EQ(a->spec.limits.memory_bytes, 256ull << 20);
  EXPECT_EQ(sh(a->id, "echo $ROLE").stdout_data, "worker\n");
  EXPECT_TRUE(provider_->destroy(a->id));
}

INSTANTIATE_TEST_SUITE_P(Providers, SdkProvider,
                         ::testing::Values("Local", "RemoteUnix", "RemoteTcp"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace corral::testing
