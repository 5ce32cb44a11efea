// Secrets through `corral serve` (issue 5, S1-S7): env and file modes
// injected into real sandboxes, read from inside, and checked from
// outside: the API output (waited, streamed, background), the audit log,
// the daemon's own output, and, after destroy, every file of the data dir
// (the state database included) and the temp dirs. Values are random per
// test; the tests pass them to the sandbox only through the store.
#include <fcntl.h>
#include <ctime>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/base64.h"
#include "base/sha256.h"
#include "http/http_client.h"
#include "support/daemon_harness.h"
#include "support/net_world.h"
#include "support/sandbox_harness.h"
#include "support/secret_file.h"

namespace corral::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

// Every regular file under `root`, on `root`'s own file system, whose
// bytes contain `needle`. Other mounts are not entered: /tmp may hold other
// tests' sandboxes with /proc mounted (reading /proc/kmsg blocks). Files
// whose status last changed before `since` (unix seconds) are not read: a
// leak during the test changes its file's ctime, and an unrelated big tree
// left in /tmp (an old build) would make the scan take minutes.
std::vector<std::string> files_containing(const std::string& root, const std::string& needle,
                                          std::time_t since = 0) {
  std::vector<std::string> hits;
  struct stat root_st {};
  if (::lstat(root.c_str(), &root_st) != 0) return hits;
  std::error_code ec;
  auto it =
      fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    if (st.st_dev != root_st.st_dev) {
      if (S_ISDIR(st.st_mode)) it.disable_recursion_pending();
      continue;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > (64 << 20)) continue;
    if (st.st_ctime < since) continue;
    int fd = ::open(it->path().c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    std::string data(static_cast<std::size_t>(st.st_size), '\0');
    ssize_t n = ::pread(fd, data.data(), data.size(), 0);
    ::close(fd);
    if (n > 0 && data.substr(0, static_cast<std::size_t>(n)).find(needle) != std::string::npos)
      hits.push_back(it->path().string());
  }
  return hits;
}

json exec_argv(TestDaemon& d, const std::string& id, std::vector<std::string> argv) {
  json body{{"argv", argv}, {"timeout", 30}};
  return d.request("POST", "/v1/sandboxes/" + id + "/exec", body.dump()).json();
}

// A streamed exec: the concatenated stdout of its ndjson events.
std::string streamed_stdout(TestDaemon& d, const std::string& id, std::vector<std::string> argv) {
  auto endpoint = http::Endpoint::parse(d.unix_url());
  auto client = http::Client::connect(*endpoint);
  if (!client) return "<no connection>";
  json body{{"argv", argv}, {"timeout", 30}};
  auto head = client->send(
      "POST", "/v1/sandboxes/" + id + "/exec",
      {{"content-type", "application/json"}, {"accept", "application/x-ndjson"}}, body.dump());
  if (!head || head->status != 200) return "<bad status>";
  std::string raw;
  char buf[4096];
  for (;;) {
    auto n = client->read_body(buf, sizeof buf);
    if (!n || *n == 0) break;
    raw.append(buf, *n);
  }
  std::string out;
  std::istringstream lines(raw);
  std::string line;
  while (std::getline(lines, line)) {
    json ev = json::parse(line, nullptr, false);
    if (ev.is_object() && ev.value("type", "") == "stdout") out += ev.value("data", "");
  }
  return out;
}

// Writes the value of env var `var` in two halves with a pause between.
std::vector<std::string> split_writer(const std::string& var) {
  return {"/usr/bin/python3", "-c",
          "import os,sys,time\nv=os.environ['" + var +
              "']\nsys.stdout.write('<'+v[:11]);sys.stdout.flush();time.sleep(1.2)\n"
              "sys.stdout.write(v[11:]+'>\\n');sys.stdout.flush()\n"};
}

TEST(DaemonSecrets, EnvAndFileSecretsReachTheSandboxButNeverLeaveIt) {
  const std::time_t test_start = ::time(nullptr) - 1;
  SecretFile store({"api", "db", "unused"});
  TestDaemon d({}, store.config());
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string api = store.values["api"], db = store.values["db"];

  HttpReply reply;
  std::string id = d.create_sandbox(
      R"({"secrets": [{"name": "api", "tier": "low"}, {"name": "db", "tier": "medium"}]})", &reply);
  ASSERT_FALSE(id.empty()) << reply.body;
  EXPECT_EQ(reply.body.find(api), std::string::npos);

  // env: the variable holds the value (its hash says so), and every form
  // of it that is printed comes out redacted.
  json r = exec_argv(d, id,
                     {"/bin/sh", "-c",
                      "echo \"$API\"; env | grep '^API='; printf %s \"$API\" | base64; "
                      "printf %s \"$API\" | od -An -tx1 | tr -d ' \\n'; echo; "
                      "printf %s \"$API\" | sha256sum"});
  const std::string out = r.value("stdout", "");
  EXPECT_EQ(r.value("exit_code", -1), 0) << r.dump();
  EXPECT_EQ(out.find(api), std::string::npos) << out;
  EXPECT_EQ(out.find(api::base64_encode(api).substr(0, 20)), std::string::npos) << out;
  EXPECT_NE(out.find("[REDACTED:api]\nAPI=[REDACTED:api]\n"), std::string::npos) << out;
  EXPECT_NE(out.find(sha256_hex(api)), std::string::npos)
      << "the sandbox saw another value: " << out;
  // Hex: each byte is one "xx"; od prints lower case.
  EXPECT_GE(std::count(out.begin(), out.end(), '['), 4) << out;

  // The CLI shows what the API gives: redacted.
  RunOutcome cli = run_corral({"exec", "--url", d.unix_url(), id, "--sh", "echo \"$API\"; env"});
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.out.find("[REDACTED:api]\n"), std::string::npos) << cli.out;
  EXPECT_EQ(cli.out.find(api), std::string::npos);

  // Half, a pause, the other half: waited and streamed.
  json split = exec_argv(d, id, split_writer("API"));
  EXPECT_EQ(split.value("stdout", ""), "<[REDACTED:api]>\n") << split.dump();
  EXPECT_EQ(streamed_stdout(d, id, split_writer("API")), "<[REDACTED:api]>\n");

  // file: 0400, the sandbox user's, its hash matches; cat is redacted.
  r = exec_argv(
      d, id,
      {"/bin/sh", "-c",
       "stat -c '%a %U' /run/secrets/db; cat /run/secrets/db; echo; "
       "sha256sum < /run/secrets/db; touch /run/secrets/x 2>&1 | grep -c -i -E 'read-only|denied'; "
       "echo $$"});
  const std::string fout = r.value("stdout", "");
  EXPECT_NE(fout.find("400 sandbox\n[REDACTED:db]\n"), std::string::npos) << r.dump();
  EXPECT_NE(fout.find(sha256_hex(db)), std::string::npos) << fout;
  EXPECT_EQ(fout.find(db), std::string::npos);
  EXPECT_NE(fout.find("1\n"), std::string::npos) << "the secrets dir must be read-only: " << fout;

  // A background process's output is redacted too, at any offset.
  auto started = d.request("POST", "/v1/sandboxes/" + id + "/processes",
                           R"({"cmd": "echo start; echo \"$API\"; echo end"})");
  ASSERT_EQ(started.status, 201) << started.body;
  const std::string pid = started.json().value("id", "");
  d.request("POST", "/v1/sandboxes/" + id + "/processes/" + pid + "/wait?timeout=10");
  auto bg = d.request("GET", "/v1/sandboxes/" + id + "/processes/" + pid + "/output");
  EXPECT_EQ(bg.body, "start\n[REDACTED:api]\nend\n");
  auto bg_tail = d.request("GET", "/v1/sandboxes/" + id + "/processes/" + pid + "/output?offset=8");
  EXPECT_EQ(bg_tail.body, "EDACTED:api]\nend\n") << "offsets count redacted bytes";

  // Read while the secret is half written: the redactor's held-back start
  // of it is not shown, and the next read from that offset goes on cleanly.
  auto half = d.request("POST", "/v1/sandboxes/" + id + "/processes",
                        json{{"argv", split_writer("API")}}.dump());
  ASSERT_EQ(half.status, 201) << half.body;
  const std::string hpid = half.json().value("id", "");
  std::this_thread::sleep_for(600ms);
  auto mid = d.request("GET", "/v1/sandboxes/" + id + "/processes/" + hpid + "/output");
  EXPECT_EQ(mid.body.find(api.substr(0, 8)), std::string::npos) << "a secret's start was shown";
  EXPECT_EQ(mid.body, "<") << "only what cannot be a secret's start";
  d.request("POST", "/v1/sandboxes/" + id + "/processes/" + hpid + "/wait?timeout=10");
  auto rest = d.request("GET", "/v1/sandboxes/" + id + "/processes/" + hpid +
                                   "/output?offset=" + std::to_string(mid.body.size()));
  EXPECT_EQ(mid.body + rest.body, "<[REDACTED:api]>\n");

  // Audited: one injection per secret, reads of the file (two opens above).
  auto injects = d.wait_audit("secret.inject", 2);
  ASSERT_EQ(injects.size(), 2u);
  EXPECT_EQ(injects[0].value("mode", ""), "env");
  EXPECT_EQ(injects[1].value("mode", ""), "file");
  auto reads = d.wait_audit("secret.read", 2);
  ASSERT_GE(reads.size(), 2u);
  EXPECT_EQ(reads[0].value("secret", ""), "db");
  EXPECT_EQ(reads[0].value("sandbox", ""), id);
  EXPECT_GT(reads[0].value("pid", 0), 0);
  auto metrics = d.request("GET", "/metrics").body;
  EXPECT_NE(metrics.find("corral_secret_reads_total{mode=\"file\"}"), std::string::npos);

  const std::string mount_dir = d.data_dir() + "/secrets/" + id;
  EXPECT_TRUE(fs::exists(mount_dir + "/db"));
  auto del = d.request("DELETE", "/v1/sandboxes/" + id);
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(del.json().value("state", ""), "cleaned") << del.body;
  EXPECT_FALSE(fs::exists(mount_dir));
  EXPECT_EQ(d.wait_audit("secret.wipe", 1).size(), 1u);

  // Nowhere on the host: data dir (state.db, audit.log, layers), the
  // run dir, the temp dirs, the daemon's own output.
  for (const auto& [key, value] : store.values) {
    for (const std::string& root :
         {d.data_dir(), std::string("/run/corral"), std::string("/dev/shm")})
      EXPECT_TRUE(files_containing(root, value, test_start).empty())
          << key << " found under " << root;
    for (const auto& hit : files_containing("/tmp", value, test_start))
      EXPECT_EQ(hit, store.path) << key << " found in " << hit;
    EXPECT_EQ(d.output().find(value), std::string::npos);
  }
}

TEST(DaemonSecrets, BadRequestsAreRefusedWithoutShowingAValue) {
  SecretFile store({"api", "payments"});
  TestDaemon d({}, store.config());
  ASSERT_TRUE(d.ready()) << d.output();
  struct Case {
    const char* body;
    const char* says;
  } cases[] = {
      {R"({"secrets": [{"name": "payments", "tier": "high", "mode": "env"}]})", "broker"},
      {R"({"secrets": [{"name": "payments", "tier": "high", "mode": "file"}]})", "broker"},
      {R"({"secrets": [{"name": "missing"}]})", "missing"},
      {R"({"secrets": [{"name": "api", "mode": "env", "env_var": "LD_PRELOAD"}]})", "LD_PRELOAD"},
      {R"({"secrets": [{"name": "api", "mode": "file", "path": "../etc/passwd"}]})", "path"},
      {R"({"secrets": [{"name": "api", "mode": "broker"}]})", "host"},
      {R"({"secrets": [{"name": "api", "mode": "sideways"}]})", "sideways"},
      {R"({"secrets": [{"name": "a", "key": "api"}, {"name": "b", "key": "api"}]})", "api"},
      {R"({"secrets": "api"})", "array"},
  };
  for (const auto& c : cases) {
    HttpReply reply;
    std::string id = d.create_sandbox(c.body, &reply);
    EXPECT_TRUE(id.empty()) << c.body;
    EXPECT_EQ(reply.status, 400) << c.body << " -> " << reply.body;
    EXPECT_NE(reply.body.find(c.says), std::string::npos) << c.body << " -> " << reply.body;
    for (const auto& [k, v] : store.values) EXPECT_EQ(reply.body.find(v), std::string::npos);
  }
  // Nothing was made for the refused creates.
  std::error_code ec;
  EXPECT_TRUE(!fs::exists(d.data_dir() + "/secrets") ||
              fs::is_empty(d.data_dir() + "/secrets", ec));
}

TEST(DaemonSecrets, SecretsComeBackAfterADaemonCrashAndAreWipedAtDestroy) {
  SecretFile store({"api", "db"});
  TestDaemon d({}, store.config());
  ASSERT_TRUE(d.ready()) << d.output();
  std::string id = d.create_sandbox(
      R"({"secrets": [{"name": "api", "tier": "low"}, {"name": "db", "path": "database"}]})");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(d.kill9());
  ASSERT_TRUE(d.restart()) << d.output();
  auto info = d.request("GET", "/v1/sandboxes/" + id);
  ASSERT_EQ(info.json().value("state", ""), "ready") << info.body << d.output();
  json r = exec_argv(d, id,
                     {"/bin/sh", "-c",
                      "printf %s \"$API\" | sha256sum; sha256sum < /run/secrets/database; "
                      "echo \"$API\""});
  const std::string out = r.value("stdout", "");
  EXPECT_NE(out.find(sha256_hex(store.values["api"])), std::string::npos) << r.dump();
  EXPECT_NE(out.find(sha256_hex(store.values["db"])), std::string::npos) << r.dump();
  EXPECT_NE(out.find("[REDACTED:api]"), std::string::npos) << "redacted after the restart too";
  auto reads = d.wait_audit("secret.read", 1);
  ASSERT_GE(reads.size(), 1u) << "reads are watched again after the restart";
  EXPECT_EQ(reads.back().value("secret", ""), "db");
  auto del = d.request("DELETE", "/v1/sandboxes/" + id);
  EXPECT_EQ(del.json().value("state", ""), "cleaned") << del.body;
  EXPECT_FALSE(fs::exists(d.data_dir() + "/secrets/" + id));
  for (const auto& [k, v] : store.values)
    EXPECT_TRUE(files_containing(d.data_dir(), v).empty()) << k;
}

// Broker mode from inside a real sandbox behind the daemon's network: the
// token goes out, the value arrives at the test upstream (TLS interception
// and an https gateway service), the value is nowhere in the sandbox, a
// token sent where its secret may not go is refused and audited, an
// expired token is refused, a runtime read gives a medium secret (and not
// a high one), and after destroy no value is anywhere on the host.
TEST(DaemonSecrets, BrokerTokensAreSwappedOnlyTowardTheirHosts) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("network tests run as root");
  auto world_or = NetWorld::create();
  ASSERT_TRUE(world_or.has_value()) << world_or.error().message;
  NetWorld& world = **world_or;
  SecretFile store({"openai", "search", "shortlived", "api", "db"});
  const std::string config =
      store.config() + "  network:\n    dns_servers: [\"" + world.dns_endpoint() +
      "\"]\n    upstream_ca_file: " + world.ca_pem_path() +
      "\n    gateway:\n      - name: llm\n        url: https://allowed.test/v1\n"
      "        methods: [GET, POST]\n";
  TestDaemon d({}, config);
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string openai = store.values["openai"], search = store.values["search"];

  HttpReply reply;
  std::string id = d.create_sandbox(R"({
    "network": {"mode": "allowlist", "allow": ["allowed.test:443", "http://allowed.test:80"],
                "gateway": ["llm"]},
    "secrets": [
      {"name": "openai", "tier": "high", "env_var": "OPENAI_API_KEY",
       "hosts": [{"host": "allowed.test", "intercept": true}]},
      {"name": "search", "tier": "medium", "mode": "broker", "hosts": ["www.allowed.test"]},
      {"name": "api", "tier": "low"}, {"name": "db"}],
    "expected_duration": "10m"})",
                                    &reply);
  ASSERT_FALSE(id.empty()) << reply.body;

  const std::string script = R"(
import hashlib, os, urllib.request, urllib.error
tok = os.environ['OPENAI_API_KEY']
def call(url, headers):
    try:
        r = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=15)
        return str(r.status) + ' ' + hashlib.sha256(r.read()).hexdigest()
    except urllib.error.HTTPError as e:
        return str(e.code) + ' ' + e.headers.get('X-Corral-Refusal', '')
    except Exception as e:
        return 'ERR ' + type(e).__name__ + ' ' + str(e)
print('prefix', tok[:11])
print('tls', call('https://allowed.test/chat', {'Authorization': 'Bearer ' + tok}))
print('gateway', call('http://gateway.corral.internal/llm/chat',
      {'Authorization': 'Bearer ' + tok, 'X-Corral-Gateway-Token': os.environ['CORRAL_GATEWAY_TOKEN']}))
print('plain', call('http://allowed.test/steal', {'Authorization': 'Bearer ' + tok}))
print('read_search', call('http://gateway.corral.internal/_secret', {'Authorization': 'Bearer ' + os.environ['SEARCH']}))
print('read_openai', call('http://gateway.corral.internal/_secret', {'Authorization': 'Bearer ' + tok}))
for k, v in sorted(os.environ.items()):
    print('envhash', k, hashlib.sha256(v.encode()).hexdigest())
# The value, given reversed (no redactor pattern), looked for in every
# environment, command line and file this sandbox can read.
import sys
needle = sys.argv[1][::-1].encode()
hits = []
for pid in os.listdir('/proc'):
    if pid.isdigit():
        for f in ('environ', 'cmdline'):
            try:
                if needle in open('/proc/%s/%s' % (pid, f), 'rb').read(): hits.append(pid + f)
            except OSError: pass
for top in ('/run', '/tmp', '/workspace', '/etc', '/home', '/root', '/var'):
    for d, _, files in os.walk(top):
        for f in files:
            try:
                if needle in open(os.path.join(d, f), 'rb').read(1 << 20): hits.append(os.path.join(d, f))
            except OSError: pass
print('inside', 'clean' if not hits else 'FOUND ' + ' '.join(hits))
)";
  const std::string reversed(openai.rbegin(), openai.rend());
  json body{{"argv", {"/usr/bin/python3", "-c", script, reversed}}, {"timeout", 60}};
  json r = d.request("POST", "/v1/sandboxes/" + id + "/exec", body.dump()).json();
  const std::string out = r.value("stdout", "") + r.value("stderr", "");
  EXPECT_NE(out.find("prefix corral_tok_"), std::string::npos) << out;
  EXPECT_NE(out.find("tls 200 "), std::string::npos) << out;
  EXPECT_NE(out.find("gateway 200 "), std::string::npos) << out;
  EXPECT_NE(out.find("plain 403 secret_refused"), std::string::npos) << out;
  EXPECT_NE(out.find("read_search 200 " + sha256_hex(search)), std::string::npos) << out;
  EXPECT_NE(out.find("read_openai 403 secret_refused"), std::string::npos)
      << "a high secret has no runtime read: " << out;
  EXPECT_NE(out.find("inside clean"), std::string::npos) << out;
  // The value never entered: no environment variable holds it.
  EXPECT_EQ(out.find(sha256_hex(openai)), std::string::npos) << out;
  EXPECT_EQ(out.find(openai), std::string::npos);

  // What the upstream saw: the value, in place of the token, twice (the
  // intercepted request and the gateway's); the plain-HTTP steal never
  // arrived.
  int with_value = 0;
  for (const auto& head : world.tls_request_heads()) {
    EXPECT_EQ(head.find("corral_tok_"), std::string::npos) << head;
    if (head.find("Bearer " + openai) != std::string::npos) ++with_value;
  }
  EXPECT_EQ(with_value, 2);
  for (const auto& head : world.http_request_heads())
    EXPECT_EQ(head.find("/steal"), std::string::npos) << "refused, so never forwarded: " << head;

  auto swapped = d.wait_audit("secret.swapped", 2);
  ASSERT_GE(swapped.size(), 2u);
  std::set<std::string> vias;
  for (const auto& ev : swapped) vias.insert(ev.value("via", ""));
  EXPECT_TRUE(vias.count("tls-intercept") && vias.count("gateway")) << swapped.size();
  auto refused = d.wait_audit("secret.refused", 2);
  ASSERT_GE(refused.size(), 2u);
  EXPECT_EQ(refused[0].value("secret", ""), "openai");
  EXPECT_EQ(refused[0].value("reason", ""), "host not allowed");
  EXPECT_TRUE(refused[0].value("exfiltration_attempt", false));
  EXPECT_GE(d.wait_audit("secret.read", 1).size(), 1u);

  // A token past its TTL is refused as expired.
  std::string id2 = d.create_sandbox(R"({
    "network": {"mode": "allowlist", "allow": ["allowed.test:443"]},
    "secrets": [{"name": "shortlived", "tier": "high", "ttl": "1s",
                 "hosts": [{"host": "allowed.test", "intercept": true}]}]})",
                                     &reply);
  ASSERT_FALSE(id2.empty()) << reply.body;
  const std::string late = R"(
import os, time, urllib.request, urllib.error
time.sleep(2.2)
try:
    urllib.request.urlopen(urllib.request.Request('https://allowed.test/late',
        headers={'Authorization': 'Bearer ' + os.environ['SHORTLIVED']}), timeout=15)
    print('late 200')
except urllib.error.HTTPError as e:
    print('late', e.code)
)";
  json late_body{{"argv", {"/usr/bin/python3", "-c", late}}, {"timeout", 60}};
  json lr = d.request("POST", "/v1/sandboxes/" + id2 + "/exec", late_body.dump()).json();
  EXPECT_NE(lr.value("stdout", "").find("late 403"), std::string::npos) << lr.dump();
  bool expired = false;
  for (const auto& ev : d.wait_audit("secret.refused", 3))
    expired |= ev.value("reason", "") == "expired";
  EXPECT_TRUE(expired);

  for (const auto& sid : {id, id2}) {
    auto del = d.request("DELETE", "/v1/sandboxes/" + sid);
    EXPECT_EQ(del.json().value("state", ""), "cleaned") << del.body;
  }
  EXPECT_GE(d.wait_audit("secret.revoked", 1).size(), 1u);
  for (const auto& [key, value] : store.values) {
    EXPECT_TRUE(files_containing(d.data_dir(), value).empty()) << key;
    EXPECT_EQ(d.output().find(value), std::string::npos) << key;
  }
}


// Issue 12, point 7 "responses": a host that reflects its request (the test
// upstream's /reflect: tests/support/reflector.h) would give the swapped
// value back. From inside a real sandbox, over TLS interception, the
// gateway and plain HTTP, in several framings and split into 1- and 7-byte
// pieces, with the token as a bearer, in Basic credentials and in the
// query: the bytes the sandbox received hold the token and never the value
// (looked for inside the sandbox without ever writing the value there: the
// test passes it reversed, and the script reverses what it received). A
// compressed answer is refused. The daemon's output never shows the value.
TEST(DaemonSecrets, AReflectingHostGivesTheSandboxOnlyItsToken) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("network tests run as root");
  auto world_or = NetWorld::create();
  ASSERT_TRUE(world_or.has_value()) << world_or.error().message;
  NetWorld& world = **world_or;
  SecretFile store({"openai", "legacy"});
  const std::string config =
      store.config() + "  network:\n    dns_servers: [\"" + world.dns_endpoint() +
      "\"]\n    upstream_ca_file: " + world.ca_pem_path() +
      "\n    gateway:\n      - name: llm\n        url: https://allowed.test/v1\n"
      "        methods: [GET, POST]\n";
  TestDaemon d({}, config);
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string openai = store.values["openai"], legacy = store.values["legacy"];

  HttpReply reply;
  std::string id = d.create_sandbox(R"({
    "network": {"mode": "allowlist", "allow": ["allowed.test:443", "http://allowed.test:80"],
                "gateway": ["llm"]},
    "secrets": [
      {"name": "openai", "tier": "high", "env_var": "OPENAI_API_KEY",
       "hosts": [{"host": "allowed.test", "intercept": true}]},
      {"name": "legacy", "tier": "high", "env_var": "LEGACY_KEY",
       "hosts": [{"host": "allowed.test", "port": 80}]}]})",
                                    &reply);
  ASSERT_FALSE(id.empty()) << reply.body;

  const std::string script = R"(
import base64, os, sys, urllib.request, urllib.error
tok, legacy_tok = os.environ['OPENAI_API_KEY'], os.environ['LEGACY_KEY']
needles = [n.encode() for n in sys.argv[1:]]  # each value, reversed
def call(name, url, token, basic, extra=None):
    h = {'Authorization': ('Basic ' + base64.b64encode(('git:' + token).encode()).decode())
                          if basic else 'Bearer ' + token,
         'X-Api-Key': token, 'Accept-Encoding': 'gzip'}
    h.update(extra or {})
    sep = '&' if '?' in url else '?'
    req = urllib.request.Request(url + sep + 'key=' + token, data=b'{"a": 1}', headers=h)
    try:
        r = urllib.request.urlopen(req, timeout=15)
        status, raw = r.status, bytes(str(r.headers), 'latin-1') + r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, bytes(str(e.headers), 'latin-1') + e.read()
    except Exception as e:
        print(name, 'ERR', type(e).__name__, e); return
    back = raw[::-1]
    leaked = any(n in back for n in needles)
    print(name, status, 'leaked' if leaked else 'clean', 'token' if token.encode() in raw else 'no-token')
gw = {'X-Corral-Gateway-Token': os.environ['CORRAL_GATEWAY_TOKEN']}
for shape in ('frame=length&piece=1', 'frame=chunked&piece=7', 'frame=close&piece=64'):
    for basic in (False, True):
        tag = shape.split('&')[0] + ('-basic' if basic else '-bearer')
        call('tls-' + tag, 'https://allowed.test/reflect?decode=basic&' + shape, tok, basic)
        call('gateway-' + tag, 'http://gateway.corral.internal/llm/reflect?decode=basic&' + shape, tok, basic, gw)
        call('plain-' + tag, 'http://allowed.test/reflect?decode=basic&' + shape, legacy_tok, basic)
call('tls-gzip', 'https://allowed.test/reflect?encoding=gzip', tok, False)
call('plain-gzip', 'http://allowed.test/reflect?encoding=gzip', legacy_tok, False)
)";
  const std::string rev_openai(openai.rbegin(), openai.rend());
  const std::string rev_legacy(legacy.rbegin(), legacy.rend());
  json body{{"argv", {"/usr/bin/python3", "-c", script, rev_openai, rev_legacy}},
            {"timeout", 120}};
  json r = d.request("POST", "/v1/sandboxes/" + id + "/exec", body.dump()).json();
  const std::string out = r.value("stdout", "") + r.value("stderr", "");
  for (const std::string way : {"tls", "gateway", "plain"}) {
    for (const std::string shape : {"frame=length", "frame=chunked", "frame=close"}) {
      for (const std::string auth : {"-bearer", "-basic"}) {
        const std::string name = way + "-" + shape + auth;
        EXPECT_NE(out.find(name + " 200 clean token\n"), std::string::npos) << name << "\n" << out;
      }
    }
  }
  EXPECT_NE(out.find("tls-gzip 502 clean no-token\n"), std::string::npos) << out;
  EXPECT_NE(out.find("plain-gzip 502 clean no-token\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("leaked"), std::string::npos) << out;

  // The hosts did get the values: the scan is what kept them out.
  bool tls_value = false;
  for (const auto& h : world.tls_request_heads()) tls_value |= h.find(openai) != std::string::npos;
  EXPECT_TRUE(tls_value);
  bool plain_value = false;
  for (const auto& h : world.http_request_heads()) plain_value |= h.find(legacy) != std::string::npos;
  EXPECT_TRUE(plain_value);

  auto del = d.request("DELETE", "/v1/sandboxes/" + id);
  EXPECT_EQ(del.json().value("state", ""), "cleaned") << del.body;
  for (const auto& [key, value] : store.values) {
    EXPECT_EQ(d.output().find(value), std::string::npos) << key;
    EXPECT_TRUE(files_containing(d.data_dir(), value).empty()) << key;
  }
}

}  // namespace
}  // namespace corral::testing
