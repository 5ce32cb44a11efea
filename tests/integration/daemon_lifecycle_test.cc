// The daemon's lifecycle against a real `corral serve` (issue 3): create,
// exec, destroy with verified cleanup; 50 concurrent creates; the three
// timeouts with their own codes; idempotency; streamed exec; background
// processes that outlive their request.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

void expect_cleaned(TestDaemon& d, const std::string& id) {
  auto info = d.request("GET", "/v1/sandboxes/" + id).json();
  EXPECT_EQ(info.value("state", ""), "cleaned") << info.dump();
  json report{{"sandbox_id", id}, {"residue_bytes", 0}, {"residue", json::array()}};
  expect_sandbox_cleaned_up(report, id);
}

TEST(DaemonLifecycle, CreateExecDestroyLeavesNothing) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  HttpReply created;
  std::string id = d.create_sandbox(R"({"limits": {"memory": "256Mi", "pids": 64}})", &created);
  ASSERT_FALSE(id.empty()) << created.status << " " << created.body;
  EXPECT_EQ(created.status, 201);
  EXPECT_EQ(created.json().value("state", ""), "ready");

  auto r = d.exec(id, "echo hello; id -u; echo err >&2; exit 3");
  EXPECT_EQ(r.value("exit_code", -1), 3) << r.dump();
  EXPECT_EQ(r.value("stdout", ""), "hello\n1000\n");
  EXPECT_EQ(r.value("stderr", ""), "err\n");

  auto info = d.request("GET", "/v1/sandboxes/" + id).json();
  ASSERT_TRUE(info.contains("usage")) << info.dump();
  EXPECT_GT(info["usage"].value("memory_bytes", 0), 0);
  EXPECT_GE(info["usage"].value("pids", 0), 2);  // init and the zygote

  auto del = d.request("DELETE", "/v1/sandboxes/" + id);
  EXPECT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(del.json().value("residue_bytes", 1), 0);
  EXPECT_TRUE(del.json()["residue"].empty()) << del.body;
  expect_cleaned(d, id);
  // Deleting again is not an error: it reports the end state.
  EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
}

TEST(DaemonLifecycle, FiftyConcurrentCreatesAllSucceedAndAreCleaned) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  constexpr int kCount = 50;
  std::vector<std::string> ids(kCount);
  std::vector<std::string> errors(kCount);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCount; ++i) {
    threads.emplace_back([&, i] {
      HttpReply r;
      ids[i] = d.create_sandbox(R"({"limits": {"memory": "64Mi", "disk": "16Mi"}})", &r);
      if (ids[i].empty()) errors[i] = std::to_string(r.status) + " " + r.body;
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kCount; ++i)
    ASSERT_FALSE(ids[i].empty()) << "create " << i << ": " << errors[i];
  // Each one works.
  for (int i = 0; i < kCount; i += 7) {
    auto r = d.exec(ids[i], "echo $HOSTNAME");
    EXPECT_EQ(r.value("exit_code", -1), 0) << r.dump();
  }
  threads.clear();
  for (int i = 0; i < kCount; ++i) {
    threads.emplace_back([&, i] { d.request("DELETE", "/v1/sandboxes/" + ids[i]); });
  }
  for (auto& t : threads) t.join();
  for (const auto& id : ids) expect_cleaned(d, id);
}

TEST(DaemonLifecycle, CommandTimeoutKillsTheProcessTreeWithExitCode124) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  std::string id = d.create_sandbox();
  ASSERT_FALSE(id.empty());
  const auto t0 = std::chrono::steady_clock::now();
  json body{{"cmd", "sleep 100 & sleep 100; echo never"}, {"timeout", "1s"}};
  auto r = d.request("POST", "/v1/sandboxes/" + id + "/exec", body.dump()).json();
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.value("exit_code", -1), 124) << r.dump();
  EXPECT_TRUE(r.value("timed_out", false));
  EXPECT_LT(took, 10s);
  // The whole group went: nothing of it is left in the sandbox.
  auto ps = d.exec(id, "ps -eo args | grep -c '^sleep 100' || true");
  EXPECT_EQ(ps.value("stdout", ""), "0\n") << ps.dump();
}

TEST(DaemonLifecycle, LifetimeEndsTheSandboxWithItsOwnCode) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  std::string id = d.create_sandbox(R"({"max_lifetime": "60s"})");
  ASSERT_FALSE(id.empty());
  // A background process is killed with the sandbox. The short lifetime is
  // set once it runs: counted from the create, it could end before a slow
  // build (TSan) got the process started.
  auto p = d.request("POST", "/v1/sandboxes/" + id + "/processes", R"({"cmd": "sleep 600"})");
  EXPECT_EQ(p.status, 201) << p.body;
  auto t = d.request("POST", "/v1/sandboxes/" + id + "/timeout", R"({"max_lifetime": "2s"})");
  EXPECT_EQ(t.status, 200) << t.body;
  std::string state;
  for (int i = 0; i < 200 && state != "cleaned"; ++i) {
    std::this_thread::sleep_for(100ms);
    state = d.request("GET", "/v1/sandboxes/" + id).json().value("state", "");
  }
  EXPECT_EQ(state, "cleaned");
  auto r = d.request("POST", "/v1/sandboxes/" + id + "/exec", R"({"cmd": "true"})");
  EXPECT_EQ(r.status, 410) << r.body;
  EXPECT_EQ(r.json()["error"].value("code", ""), "sandbox_expired");
  expect_cleaned(d, id);
}

TEST(DaemonLifecycle, ExtendingTheLifetimeKeepsTheSandbox) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  // The short lifetime is set after the create, which a slow build (TSan)
  // can take longer than 2 s for.
  std::string id = d.create_sandbox();
  ASSERT_FALSE(id.empty());
  auto s = d.request("POST", "/v1/sandboxes/" + id + "/timeout", R"({"max_lifetime": "2s"})");
  EXPECT_EQ(s.status, 200) << s.body;
  auto r = d.request("POST", "/v1/sandboxes/" + id + "/timeout", R"({"max_lifetime": "60s"})");
  EXPECT_EQ(r.status, 200) << r.body;
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(d.exec(id, "echo alive").value("stdout", ""), "alive\n");
}

TEST(DaemonLifecycle, RequestTimeoutHasItsOwnCode) {
  TestDaemon d({}, "serve:\n  request_timeout: 1s\n");
  ASSERT_TRUE(d.ready()) << d.output();
  // Announce a body and send only its first byte (a raw socket: a
  // well-behaved client cannot be made to stall).
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof addr.sun_path, "%s", d.socket_path().c_str());
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string head =
      "POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: 100\r\n\r\n{";
  ASSERT_EQ(write(fd, head.data(), head.size()), static_cast<ssize_t>(head.size()));
  const auto t0 = std::chrono::steady_clock::now();
  std::string reply;
  char buf[4096];
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 8s);
  EXPECT_EQ(reply.rfind("HTTP/1.1 408", 0), 0u) << reply;
  EXPECT_NE(reply.find("request_timeout"), std::string::npos) << reply;
}

TEST(DaemonLifecycle, IdempotencyKeyReturnsTheSameSandbox) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  http::Headers key = {{"idempotency-key", "task-42"}};
  auto a =
      d.request("POST", "/v1/sandboxes", R"({"limits": {"memory": "128Mi"}})", false, true, key);
  auto b =
      d.request("POST", "/v1/sandboxes", R"({"limits": {"memory": "128Mi"}})", false, true, key);
  EXPECT_EQ(a.status, 201) << a.body;
  EXPECT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(a.json().value("id", "a"), b.json().value("id", "b"));
  auto c =
      d.request("POST", "/v1/sandboxes", R"({"limits": {"memory": "256Mi"}})", false, true, key);
  EXPECT_EQ(c.status, 409) << c.body;
  EXPECT_EQ(c.json()["error"].value("code", ""), "idempotency_mismatch");
}

TEST(DaemonLifecycle, StreamedExecDeliversOutputBeforeTheCommandEnds) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  std::string id = d.create_sandbox();
  ASSERT_FALSE(id.empty());
  auto endpoint = http::Endpoint::parse(d.unix_url());
  auto client = http::Client::connect(*endpoint);
  ASSERT_TRUE(client);
  const auto t0 = std::chrono::steady_clock::now();
  auto head =
      client->send("POST", "/v1/sandboxes/" + id + "/exec",
                   {{"content-type", "application/json"}, {"accept", "application/x-ndjson"}},
                   R"({"cmd": "echo first; sleep 2; echo second"})");
  ASSERT_TRUE(head);
  ASSERT_EQ(head->status, 200);
  std::string got;
  std::chrono::steady_clock::duration first_at{};
  char buf[4096];
  while (true) {
    auto n = client->read_body(buf, sizeof buf);
    ASSERT_TRUE(n) << n.error().message;
    if (*n == 0) break;
    got.append(buf, *n);
    if (first_at == decltype(first_at){} && got.find("first") != std::string::npos)
      first_at = std::chrono::steady_clock::now() - t0;
  }
  const auto total = std::chrono::steady_clock::now() - t0;
  EXPECT_NE(got.find("\"type\":\"exit\""), std::string::npos) << got;
  EXPECT_NE(got.find("second"), std::string::npos) << got;
  EXPECT_GT(total, 2s);
  EXPECT_LT(first_at, total - 1s) << "the first line came only at the end";
}

TEST(DaemonLifecycle, BackgroundProcessOutlivesItsRequest) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  std::string id = d.create_sandbox();
  ASSERT_FALSE(id.empty());
  auto started = d.request(
      "POST", "/v1/sandboxes/" + id + "/processes",
      R"({"cmd": "i=0; while read line; do i=$((i+1)); echo \"got $line\"; done; echo done $i"})");
  ASSERT_EQ(started.status, 201) << started.body;
  std::string pid = started.json().value("id", "");
  EXPECT_EQ(started.json().value("state", ""), "running");
  std::this_thread::sleep_for(500ms);
  auto info = d.request("GET", "/v1/sandboxes/" + id + "/processes/" + pid).json();
  EXPECT_EQ(info.value("state", ""), "running") << info.dump();
  auto w = d.request("POST", "/v1/sandboxes/" + id + "/processes/" + pid + "/stdin?close=true",
                     "a\nb\n", false, true, {{"content-type", "application/octet-stream"}});
  EXPECT_EQ(w.status, 200) << w.body;
  auto waited = d.request("POST", "/v1/sandboxes/" + id + "/processes/" + pid + "/wait?timeout=10");
  EXPECT_EQ(waited.status, 200) << waited.body;
  EXPECT_EQ(waited.json().value("exit_code", -1), 0);
  auto out = d.request("GET", "/v1/sandboxes/" + id + "/processes/" + pid + "/output");
  EXPECT_EQ(out.body, "got a\ngot b\ndone 2\n");
  auto tail = d.request("GET", "/v1/sandboxes/" + id + "/processes/" + pid + "/output?offset=6");
  EXPECT_EQ(tail.body, "got b\ndone 2\n");
}

// Finished background processes stay listed but keep no daemon fds: many
// short ones cannot run the daemon out of them.
TEST(DaemonLifecycle, FinishedBackgroundProcessesKeepNoFds) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  std::string id = d.create_sandbox();
  ASSERT_FALSE(id.empty());
  // What a process could keep: its pidfd, pipes, files. Not what the
  // daemon itself grows under load (client connections it has not seen
  // close yet, its threads' epoll, event and timer fds), which a slow run
  // (ASan on a loaded machine) shows.
  auto fds = [&] {
    std::multiset<std::string> kinds;
    for (const auto& e :
         std::filesystem::directory_iterator("/proc/" + std::to_string(d.pid()) + "/fd")) {
      std::error_code ec;
      const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
      if (ec || target.rfind("socket:", 0) == 0 || target == "anon_inode:[eventpoll]" ||
          target == "anon_inode:[eventfd]" || target == "anon_inode:[timerfd]" ||
          target == "anon_inode:[signalfd]")
        continue;
      kinds.insert(target.rfind("pipe:", 0) == 0 ? "pipe"
                   : target == "anon_inode:[pidfd]" ? "pidfd"
                                                    : "file " + target);
    }
    return kinds;
  };
  auto run_one = [&] {
    auto started = d.request("POST", "/v1/sandboxes/" + id + "/processes", R"({"argv": ["true"]})");
    EXPECT_EQ(started.status, 201) << started.body;
    const std::string pid = started.json().value("id", "");
    auto waited =
        d.request("POST", "/v1/sandboxes/" + id + "/processes/" + pid + "/wait?timeout=10");
    EXPECT_EQ(waited.json().value("exit_code", -1), 0) << waited.body;
  };
  run_one();  // the first one may open what every later one reuses
  const auto before = fds();
  for (int i = 0; i < 40; ++i) run_one();
  auto after = fds();
  for (int tries = 0; tries < 40 && after.size() >= before.size() + 10; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    after = fds();
  }
  std::string grown;
  for (const auto& k : after) {
    if (after.count(k) > before.count(k) && grown.find(k) == std::string::npos)
      grown += "\n  " + k + " x" + std::to_string(after.count(k) - before.count(k));
  }
  EXPECT_LT(after.size(), before.size() + 10) << "40 finished processes kept:" << grown;
  auto list = d.request("GET", "/v1/sandboxes/" + id + "/processes").json();
  EXPECT_EQ(list.value("processes", json::array()).size(), 41u) << "finished ones stay listed";
}

// Query values that are not what they say are refused, not wrapped.
TEST(DaemonLifecycle, BadOffsetsAndTimeoutsAreRefused) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  std::string id = d.create_sandbox();
  ASSERT_FALSE(id.empty());
  auto started = d.request("POST", "/v1/sandboxes/" + id + "/processes", R"({"cmd": "echo hi"})");
  ASSERT_EQ(started.status, 201) << started.body;
  const std::string base = "/v1/sandboxes/" + id + "/processes/" + started.json().value("id", "");
  for (const char* o : {"-1", "+5", "%205", "5x"}) {
    auto r = d.request("GET", base + "/output?offset=" + std::string(o));
    EXPECT_EQ(r.status, 400) << o << ": " << r.body;
  }
  for (const char* t : {"nan", "-nan", "inf", "-1", "3601"}) {
    auto r = d.request("POST", base + "/wait?timeout=" + std::string(t));
    EXPECT_EQ(r.status, 400) << t << ": " << r.body;
  }
  auto ok = d.request("GET", base + "/output?offset=1");
  EXPECT_EQ(ok.status, 200);
}

// The initial stdin of a background process: up to 1 MiB arrives whole
// (the pipe is grown for it), more is refused with a pointer to the route.
TEST(DaemonLifecycle, InitialStdinOfABackgroundProcessArrivesWhole) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  std::string id = d.create_sandbox();
  ASSERT_FALSE(id.empty());
  const std::string input(512 * 1024, 'x');
  auto started = d.request("POST", "/v1/sandboxes/" + id + "/processes",
                           json{{"cmd", "head -c 524288 | wc -c"}, {"stdin", input}}.dump());
  ASSERT_EQ(started.status, 201) << started.body;
  const std::string base = "/v1/sandboxes/" + id + "/processes/" + started.json().value("id", "");
  auto waited = d.request("POST", base + "/wait?timeout=20");
  EXPECT_EQ(waited.json().value("exit_code", -1), 0) << waited.body;
  EXPECT_EQ(d.request("GET", base + "/output").body, "524288\n");

  auto big = d.request("POST", "/v1/sandboxes/" + id + "/processes",
                       json{{"cmd", "cat"}, {"stdin", std::string((1 << 20) + 1, 'y')}}.dump());
  EXPECT_EQ(big.status, 400) << big.body;
  EXPECT_NE(big.body.find("/stdin"), std::string::npos) << big.body;
}

// A background process that cannot start says why on its stderr, as an
// exec does.
TEST(DaemonLifecycle, ABackgroundProcessThatCannotStartSaysWhy) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  std::string id = d.create_sandbox();
  ASSERT_FALSE(id.empty());
  auto started =
      d.request("POST", "/v1/sandboxes/" + id + "/processes", R"({"argv": ["/no/such/tool"]})");
  ASSERT_EQ(started.status, 201) << started.body;
  const std::string base = "/v1/sandboxes/" + id + "/processes/" + started.json().value("id", "");
  auto waited = d.request("POST", base + "/wait?timeout=10");
  EXPECT_EQ(waited.json().value("exit_code", -1), 127) << waited.body;
  auto err = d.request("GET", base + "/output?stream=stderr");
  EXPECT_NE(err.body.find("corral: /no/such/tool"), std::string::npos) << err.body;
  EXPECT_NE(err.body.find("not found"), std::string::npos) << err.body;
}

// Output cut at max_output_bytes inside a UTF-8 character stays text.
TEST(DaemonLifecycle, OutputCutInsideACharacterStaysText) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  std::string id = d.create_sandbox();
  ASSERT_FALSE(id.empty());
  auto r = d.request("POST", "/v1/sandboxes/" + id + "/exec",
                     R"({"argv": ["printf", "a\\303\\251\\342\\202\\254"], "max_output_bytes": 4})")
               .json();
  EXPECT_EQ(r.value("stdout", "<none>"), "a\xc3\xa9") << r.dump();
  EXPECT_FALSE(r.contains("stdout_b64")) << r.dump();
  EXPECT_TRUE(r.value("stdout_truncated", false)) << r.dump();
}

TEST(DaemonLifecycle, SignalEndsABackgroundProcess) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  std::string id = d.create_sandbox();
  ASSERT_FALSE(id.empty());
  auto started = d.request("POST", "/v1/sandboxes/" + id + "/processes", R"({"cmd": "sleep 600"})");
  ASSERT_EQ(started.status, 201) << started.body;
  std::string pid = started.json().value("id", "");
  auto s = d.request("POST", "/v1/sandboxes/" + id + "/processes/" + pid + "/signal",
                     R"({"signal": "TERM"})");
  EXPECT_EQ(s.status, 200) << s.body;
  auto waited =
      d.request("POST", "/v1/sandboxes/" + id + "/processes/" + pid + "/wait?timeout=10").json();
  EXPECT_EQ(waited.value("signal", 0), 15) << waited.dump();
}

}  // namespace
}  // namespace corral::testing

namespace corral::testing {
namespace {

TEST(DaemonLifecycle, ConfigSandboxDefaultsApplyToCreates) {
  TestDaemon d({}, "sandbox:\n  memory_limit: 256Mi\n  pids_limit: 32\n  max_lifetime: 90s\n");
  ASSERT_TRUE(d.ready()) << d.output();
  HttpReply r;
  std::string id = d.create_sandbox("{}", &r);
  ASSERT_FALSE(id.empty()) << r.body;
  auto spec = r.json()["spec"];
  EXPECT_EQ(spec["limits"].value("memory_bytes", 0ull), 256ull << 20) << r.body;
  EXPECT_EQ(spec["limits"].value("pids", 0), 32);
  EXPECT_EQ(spec["limits"].value("max_lifetime_ms", 0), 90000);
  // A field the request gives wins over the default.
  std::string id2 = d.create_sandbox(R"({"limits": {"pids": 64}})", &r);
  ASSERT_FALSE(id2.empty()) << r.body;
  EXPECT_EQ(r.json()["spec"]["limits"].value("pids", 0), 64);
  EXPECT_EQ(r.json()["spec"]["limits"].value("memory_bytes", 0ull), 256ull << 20);
}

}  // namespace
}  // namespace corral::testing

namespace corral::testing {
namespace {

TEST(DaemonAudit, EveryOperationIsRecordedAndAnEditedLineFailsVerify) {
  std::string log;
  {
    TestDaemon d;
    ASSERT_TRUE(d.ready()) << d.output();
    std::string id = d.create_sandbox();
    ASSERT_FALSE(id.empty());
    d.exec(id, "echo audited");
    auto up = d.request("PUT", "/v1/sandboxes/" + id + "/files?path=/workspace/a.txt", "payload",
                        false, true, {{"content-type", "application/octet-stream"}});
    ASSERT_EQ(up.status, 201) << up.body;
    d.request("GET", "/v1/sandboxes/" + id + "/files?path=/workspace/a.txt");
    d.request("DELETE", "/v1/sandboxes/" + id);
    d.stop();  // flushes the journal
    log = d.data_dir() + "/audit.log";
    auto ok = run_corral({"audit", "verify", "--log", log});
    EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
    std::string text = host_sh("cat '" + log + "'");
    for (const char* type : {"sandbox.create", "sandbox.transition", "exec.start", "exec.exit",
                             "file.write", "file.read", "sandbox.destroy"})
      EXPECT_NE(text.find(std::string("\"type\":\"") + type + "\""), std::string::npos) << type;
    // The upload's digest is in the record: sha256("payload").
    EXPECT_NE(text.find("239f59ed55e737c77147cf55ad0c1b030b6d7ee748a7426952f9b852d5a935e5"),
              std::string::npos);
    // Edit one byte of a record in the middle: verify must fail and say where.
    host_sh("sed -i '3s/\"sandbox\"/\"sandbax\"/' '" + log + "'");
    auto bad = run_corral({"audit", "verify", "--log", log});
    EXPECT_NE(bad.exit_code, 0) << bad.out << bad.err;
    EXPECT_NE((bad.out + bad.err).find("line 3"), std::string::npos) << bad.out << bad.err;
  }
}

}  // namespace
}  // namespace corral::testing
