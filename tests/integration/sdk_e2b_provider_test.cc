// The C++ SDK's E2bProvider (REQUIREMENTS.md P2, issue 17) against a real
// `corral serve` through its E2B facade: the same business code runs on
// RemoteProvider (corral's own API) and on E2bProvider (E2B's protocol),
// chosen by configuration alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "base/sha256.h"
#include "sdk/e2b_provider.h"
#include "sdk/remote_provider.h"
#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"
#include "support/skip.h"
#include "support/tls_front.h"

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

// A command's stdin (sent on a second exchange while the first one reads
// the events) comes back whole, and a command's lines reach the sink as a
// stream; `pause` goes between the lines.
void stdin_and_stream(sdk::SandboxProvider& p, const std::string& id, const std::string& input,
                      const std::string& pause) {
  api::ExecRequest with_stdin;
  with_stdin.argv = {"cat"};
  with_stdin.stdin_data = input;
  auto r = p.exec(id, with_stdin);
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->stdout_data, input);
  std::string streamed;
  api::ExecRequest chatty;
  chatty.argv = {"/bin/sh", "-c", "for i in 1 2 3; do echo $i; " + pause + "done"};
  auto s = p.exec_stream(id, chatty, [&](api::ExecEvent::Kind k, std::string_view data) {
    if (k == api::ExecEvent::kStdout) streamed.append(data);
  });
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_EQ(streamed, "1\n2\n3\n");
  EXPECT_EQ(s->exit_code, 0);
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

  stdin_and_stream(*p, *id, "from stdin\n", "");

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

// The provider as it meets a hosted service: https (HTTP/2 when offered),
// the control plane at api.<domain>, each sandbox's envd at its own host
// 49983-<id>.<domain>, no URL but the domain configured.
std::unique_ptr<sdk::E2bProvider> hosted_provider(const TlsFront& front, std::string key,
                                                  std::string ca_file) {
  sdk::E2bOptions o;
  o.domain = front.domain();
  o.api_key = std::move(key);
  o.ca_file = std::move(ca_file);
  auto p = sdk::E2bProvider::open(o);
  EXPECT_TRUE(p) << p.error().to_string();
  return p ? std::move(*p) : nullptr;
}

TEST(SdkE2bProvider, DrivesAHostedServiceOverHttpsByItsDomainAlone) {
  TestDaemon d({}, kConfig);
  ASSERT_TRUE(d.ready()) << d.output();
  auto front = TlsFront::start(d.tcp_url());
  if (!front) CORRAL_SKIP_OR_FAIL(front.error().to_string());
  auto p = hosted_provider(**front, d.api_key(), (*front)->ca_file());
  ASSERT_TRUE(p);
  business(*p);

  // Streams, stdin (a second exchange while the first one reads) and an
  // upload streamed without a length, over the same front.
  auto id = p->create({});
  ASSERT_TRUE(id) << id.error().to_string();
  stdin_and_stream(*p, *id, "through the front\n", "sleep 0.05; ");
  const std::string big = random_bytes(8 << 20);
  std::size_t offset = 0;
  auto put = p->put_file_from(
      *id, "/tmp/big",
      [&](char* buf, std::size_t cap) -> Result<std::size_t> {
        const std::size_t n = std::min(cap, big.size() - offset);
        std::memcpy(buf, big.data() + offset, n);
        offset += n;
        return n;
      },
      std::nullopt, 0644);
  ASSERT_TRUE(put) << put.error().to_string();
  EXPECT_EQ(put->bytes, big.size());
  EXPECT_EQ(put->sha256, sha256_hex(big));
  api::ExecRequest sum;
  sum.argv = {"sha256sum", "/tmp/big"};
  auto summed = p->exec(*id, sum);
  ASSERT_TRUE(summed) << summed.error().to_string();
  EXPECT_EQ(summed->stdout_data.substr(0, 64), sha256_hex(big));
  auto listed = p->list(false);
  ASSERT_TRUE(listed) << listed.error().to_string();
  EXPECT_TRUE(
      std::any_of(listed->begin(), listed->end(), [&](const auto& i) { return i.id == *id; }));
  ASSERT_TRUE(p->destroy(*id));
  api::ExecRequest after;
  after.argv = {"true"};
  EXPECT_FALSE(p->exec(*id, after));
}

TEST(SdkE2bProvider, AnEnvdOlderThan057GetsMultipartUploads) {
  // The service reports envd 0.5.2: the provider must not send the raw
  // uploads that came with 0.5.7, and the multipart ones must arrive whole.
  TestDaemon d({}, kConfig);
  ASSERT_TRUE(d.ready()) << d.output();
  auto front = TlsFront::start(d.tcp_url(), "0.5.2");
  if (!front) CORRAL_SKIP_OR_FAIL(front.error().to_string());
  auto p = hosted_provider(**front, d.api_key(), (*front)->ca_file());
  ASSERT_TRUE(p);
  business(*p);
}

TEST(SdkE2bProvider, AnUntrustedCertificateStopsTheFirstRequest) {
  TestDaemon d({}, kConfig);
  ASSERT_TRUE(d.ready()) << d.output();
  auto front = TlsFront::start(d.tcp_url());
  if (!front) CORRAL_SKIP_OR_FAIL(front.error().to_string());
  // The system's CA bundle does not know the front's certificate.
  auto p = hosted_provider(**front, d.api_key(), "");
  ASSERT_TRUE(p);
  auto refused = p->create({});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(refused.error().hint.find("certificate"), std::string::npos)
      << refused.error().to_string();
  // Nothing reached the daemon: no sandbox was made.
  sdk::RemoteOptions ro;
  ro.url = d.tcp_url();
  ro.api_key = d.api_key();
  auto remote = sdk::RemoteProvider::open(ro);
  ASSERT_TRUE(remote) << remote.error().to_string();
  auto all = (*remote)->list(false);
  ASSERT_TRUE(all) << all.error().to_string();
  EXPECT_TRUE(all->empty());
}

TEST(SdkE2bProvider, EnvdUrlsFollowTheSdksRulesAndRefuseWhatIsNotAHost) {
  sdk::E2bOptions o;  // domain e2b.app
  EXPECT_EQ(*sdk::e2b_envd_url(o, "abc123", ""), "https://sandbox.e2b.app");
  EXPECT_EQ(*sdk::e2b_envd_url(o, "abc123", "e2b.dev"), "https://sandbox.e2b.dev");
  EXPECT_EQ(*sdk::e2b_envd_url(o, "abc123", "corral.example.com"),
            "https://49983-abc123.corral.example.com");
  o.domain = "sbx.localhost:8443";
  EXPECT_EQ(*sdk::e2b_envd_url(o, "i50b", ""), "https://49983-i50b.sbx.localhost:8443");
  o.sandbox_url = "http://127.0.0.1:7070/e2b/envd/";
  EXPECT_EQ(*sdk::e2b_envd_url(o, "anything", "ignored.example"), "http://127.0.0.1:7070/e2b/envd");
  o.sandbox_url.clear();
  // A service's answer cannot steer the provider's URLs elsewhere.
  for (const char* domain :
       {"evil.example/x", "a@b.example", "b.example?x", "b.example#x", "b.example:99999999",
        "b.example:", ".b.example", "b..example", "b example", "b.example\r\nX-Injected: 1"}) {
    auto url = sdk::e2b_envd_url(o, "abc", domain);
    EXPECT_FALSE(url) << domain << " gave " << (url ? *url : "");
  }
  for (const char* id : {"", "a/b", "a.b", "a@b", "a b", "a:1"}) {
    auto url = sdk::e2b_envd_url(o, id, "");
    EXPECT_FALSE(url) << id << " gave " << (url ? *url : "");
  }
  sdk::E2bOptions bad;
  bad.api_key = "k";
  bad.domain = "evil.example/x";
  EXPECT_FALSE(sdk::E2bProvider::open(bad));
  bad.domain = "e2b.app";
  bad.api_url = "ftp://api.e2b.app";
  EXPECT_FALSE(sdk::E2bProvider::open(bad));
}

}  // namespace
}  // namespace corral::testing
