// The C++ SDK's E2bProvider (REQUIREMENTS.md P2, issue 17) against a real
// `corral serve` through its E2B facade: the same business code runs on
// RemoteProvider (corral's own API) and on E2bProvider (E2B's protocol),
// chosen by configuration alone.
#include <gtest/gtest.h>

#include <csignal>
#include <memory>
#include <random>
#include <string>

#include "base/sha256.h"
#include "sdk/e2b_provider.h"
#include "sdk/remote_provider.h"
#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

const char* kConfig =
    "serve:\n  e2b:\n    network: none\nsandbox:\n  disk_limit: 256Mi\n  memory_limit: 512Mi\n";

std::unique_ptr<sdk::E2bProvider> e2b_provider(const TestDaemon& d, std::string key) {
  sdk::E2bOptions o;
  o.api_url = d.tcp_url() + "/e2b";
  o.sandbox_url = d.tcp_url() + "/e2b/envd";
  o.api_key = std::move(key);
  auto p = sdk::E2bProvider::open(o);
  EXPECT_TRUE(p) << p.error().to_string();
  return p ? std::move(*p) : nullptr;
}

std::string random_bytes(std::size_t n) {
  std::string s(n, '\0');
  std::mt19937_64 rng(42);
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// Business code that knows nothing of the back-end behind `p`.
void business(sdk::SandboxProvider& p) {
  api::CreateSandboxRequest req;
  req.spec.env = {{"STAGE", "prod"}};
  req.spec.metadata = {{"job", "report"}};
  req.spec.limits.max_lifetime = std::chrono::seconds(120);
  req.spec.network.mode = "none";
  auto info = p.create_sandbox(req, std::nullopt);
  ASSERT_TRUE(info) << info.error().to_string();
  const std::string id = info->id;
  api::ExecRequest run;
  run.argv = {"/bin/sh", "-c", "echo \"stage=$STAGE\"; echo warn >&2; exit 4"};
  auto r = p.exec(id, run);
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->exit_code, 4);
  EXPECT_EQ(r->stdout_data, "stage=prod\n");
  EXPECT_EQ(r->stderr_data, "warn\n");
  const std::string blob = random_bytes(1 << 20);
  auto put = p.put_file(id, "/tmp/blob", blob);
  ASSERT_TRUE(put) << put.error().to_string();
  EXPECT_EQ(put->bytes, blob.size());
  auto back = p.get_file(id, "/tmp/blob");
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(sha256_hex(*back), sha256_hex(blob));
  api::ExecRequest cat;
  cat.argv = {"sha256sum", "/tmp/blob"};
  auto sum = p.exec(id, cat);
  ASSERT_TRUE(sum) << sum.error().to_string();
  EXPECT_EQ(sum->stdout_data.substr(0, 64), sha256_hex(blob));
  auto seen = p.inspect(id);
  ASSERT_TRUE(seen) << seen.error().to_string();
  EXPECT_EQ(seen->spec.metadata.at("job"), "report");
  ASSERT_TRUE(p.destroy(id));
}

TEST(SdkE2bProvider, TheSameBusinessCodeRunsOnBothProviders) {
  TestDaemon d({}, kConfig);
  ASSERT_TRUE(d.ready()) << d.output();
  sdk::RemoteOptions ro;
  ro.url = d.tcp_url();
  ro.api_key = d.api_key();
  auto remote = sdk::RemoteProvider::open(ro);
  ASSERT_TRUE(remote) << remote.error().to_string();
  {
    SCOPED_TRACE("RemoteProvider");
    business(**remote);
  }
  auto e2b = e2b_provider(d, d.api_key());
  ASSERT_TRUE(e2b);
  {
    SCOPED_TRACE("E2bProvider");
    business(*e2b);
  }
}

TEST(SdkE2bProvider, StdinStreamsSignalsTimeoutsAndErrors) {
  TestDaemon d({}, kConfig);
  ASSERT_TRUE(d.ready()) << d.output();
  auto p = e2b_provider(d, d.api_key());
  ASSERT_TRUE(p);
  auto id = p->create({});
  ASSERT_TRUE(id) << id.error().to_string();

  api::ExecRequest with_stdin;
  with_stdin.argv = {"cat"};
  with_stdin.stdin_data = "from stdin\n";
  auto r = p->exec(*id, with_stdin);
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->stdout_data, "from stdin\n");

  std::string streamed;
  api::ExecRequest chatty;
  chatty.argv = {"/bin/sh", "-c", "for i in 1 2 3; do echo $i; done"};
  auto s = p->exec_stream(*id, chatty, [&](api::ExecEvent::Kind k, std::string_view data) {
    if (k == api::ExecEvent::kStdout) streamed.append(data);
  });
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_EQ(streamed, "1\n2\n3\n");
  EXPECT_EQ(s->exit_code, 0);

  api::ExecRequest killed;
  killed.argv = {"/bin/sh", "-c", "kill -9 $$"};
  auto k = p->exec(*id, killed);
  ASSERT_TRUE(k) << k.error().to_string();
  EXPECT_FALSE(k->exit_code);
  EXPECT_EQ(k->signal, SIGKILL);

  api::ExecRequest slow;
  slow.argv = {"sleep", "30"};
  slow.timeout_ms = 500;
  const auto t0 = std::chrono::steady_clock::now();
  auto t = p->exec(*id, slow);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  if (t) {
    EXPECT_NE(t->exit_code, std::optional<int>(0));
  }

  auto missing = p->get_file(*id, "/tmp/none");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);

  api::CreateSandboxRequest keyed;
  EXPECT_FALSE(p->create_sandbox(keyed, std::string("k1")));  // no idempotency in E2B's protocol

  ASSERT_TRUE(p->destroy(*id));
  auto again = p->destroy_sandbox(*id);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kNotFound);
  api::ExecRequest after;
  after.argv = {"true"};
  EXPECT_FALSE(p->exec(*id, after));

  auto wrong = e2b_provider(d, "e2b_" + std::string(64, '0'));
  ASSERT_TRUE(wrong);
  auto refused = wrong->create({});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kPermissionDenied);
}

}  // namespace
}  // namespace corral::testing
