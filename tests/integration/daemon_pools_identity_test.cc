// Warm pools bind the caller's secrets (env, file, broker) and host name
// at claim (REQUIREMENTS.md C4, issue 16 point 1; docs/adr/0015-warm-
// pools.md). Checked from the host: before the claim the pooled sandbox's
// processes, its /run/secrets and its UTS name hold nothing of the caller;
// after it they hold what a cold create of the same spec would, with the
// same modes and owners; nothing of one caller reaches the next claim; a
// claim whose secrets are refused is answered as a cold create and its
// pooled sandbox destroyed; each claim counts as a pool hit.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/sha256.h"
#include "support/daemon_harness.h"
#include "support/pool_fixture.h"
#include "support/secret_file.h"

namespace corral::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A daemon serving `store` with one pool, `name`, of `min` sandboxes.
std::string config(const SecretFile& store, const std::string& name, int min) {
  return pool_config(name, min, min, "  secrets:\n    file: " + store.path + "\n");
}

// The host pids of sandbox `id`'s processes (init and the zygote, before
// anything ran): those whose cgroup names it.
std::vector<pid_t> sandbox_pids(const std::string& id) {
  std::vector<pid_t> pids;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return pids;
  while (dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    if (read_all("/proc/" + std::string(e->d_name) + "/cgroup").find(id) != std::string::npos)
      pids.push_back(pid);
  }
  closedir(proc);
  return pids;
}

// The host name of `pid`'s UTS namespace, read by a thread that joins it.
std::string uts_name_of(pid_t pid) {
  std::string name = "<unreadable>";
  std::thread t([&] {
    const int fd = open(("/proc/" + std::to_string(pid) + "/ns/uts").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[HOST_NAME_MAX + 1] = {};
    if (setns(fd, CLONE_NEWUTS) == 0 && gethostname(buf, sizeof buf - 1) == 0) name = buf;
    close(fd);
  });
  t.join();
  return name;
}

// Everything the daemon wrote to its audit log, rotated files too.
std::string whole_audit(const TestDaemon& d) {
  std::string all;
  for (const auto& f : std::filesystem::directory_iterator(d.data_dir())) {
    if (f.path().filename().string().rfind("audit", 0) == 0 && f.is_regular_file())
      all += read_all(f.path().string());
  }
  return all;
}

const char* kSecrets =
    R"([{"name": "api", "mode": "env"}, {"name": "db", "mode": "file"},
        {"name": "tok", "mode": "broker", "hosts": ["api.example.test"]}])";

// What a sandbox shows of its host name and secrets: hashes of the
// values (the exec's output is redacted, and a value must not be in a
// command), modes and owners.
const char* kShowIdentity =
    "hostname; cat /etc/hostname; cat /etc/hosts; echo \"HOSTNAME=$HOSTNAME\"; "
    "printf %s \"$API\" | sha256sum | cut -c1-64; "
    "sha256sum /run/secrets/db | cut -c1-64; "
    "printf %s \"$TOK\" | sha256sum | cut -c1-64; "
    "stat -c '%a %u:%g %n' /run/secrets /run/secrets/db /etc/hostname /etc/hosts";

TEST(DaemonPoolsIdentity, SecretsAndHostnameAreAbsentBeforeTheClaimAndBoundAtIt) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("reading a sandbox's /proc and UTS name needs root");
  SecretFile store({"api", "db", "tok"});
  TestDaemon d({}, config(store, "id", 1));
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(wait_ready(d, "id", 1).value("ready", 0u), 1u);
  const std::set<std::string> pooled = pooled_ids(d);
  ASSERT_EQ(pooled.size(), 1u);
  const std::string id = *pooled.begin();

  // Before: its processes, its secret tmpfs and its UTS name hold nothing
  // of a caller (only the pool's default host name).
  const std::vector<pid_t> before = sandbox_pids(id);
  ASSERT_FALSE(before.empty()) << "no process of " << id << " found by its cgroup";
  for (pid_t pid : before) {
    const std::string environ = read_all("/proc/" + std::to_string(pid) + "/environ");
    for (const auto& [key, value] : store.values)
      EXPECT_EQ(environ.find(value), std::string::npos) << key << " in pid " << pid;
    EXPECT_EQ(environ.find("agent-a"), std::string::npos);
  }
  const std::string root = "/proc/" + std::to_string(before.front()) + "/root";
  ASSERT_TRUE(std::filesystem::is_directory(root + "/run/secrets"));
  EXPECT_TRUE(std::filesystem::is_empty(root + "/run/secrets"));
  EXPECT_EQ(read_all(root + "/etc/hostname"), "sandbox\n");
  EXPECT_EQ(read_all(root + "/etc/hosts").find("agent-a"), std::string::npos);
  EXPECT_EQ(uts_name_of(before.front()), "sandbox");

  // The claim: the pool named, a host name and one secret of each mode.
  HttpReply r;
  const std::string claimed = d.create_sandbox(
      std::string(R"({"pool": "id", "hostname": "agent-a", "secrets": )") + kSecrets + "}", &r);
  ASSERT_FALSE(claimed.empty()) << describe(r);
  EXPECT_EQ(claimed, id) << "the claim was not served from the pool";
  // The self-check at claim saw each secret in its mode.
  const json check = r.json()["self_check"];
  EXPECT_TRUE(check.value("ok", false)) << check.dump();
  std::set<std::string> checks;
  for (const json& c : check["checks"]) checks.insert(c.value("name", ""));
  for (const char* name : {"secret_env", "secret_file", "secret_broker"})
    EXPECT_EQ(checks.count(name), 1u) << name << " not checked at claim: " << check.dump();

  // After, from the host: the file with its value, 0400; the UTS name and
  // the layer's files; still no value in init's or the zygote's env.
  EXPECT_EQ(read_all(root + "/run/secrets/db"), store.values["db"]);
  struct stat st {};
  ASSERT_EQ(stat((root + "/run/secrets/db").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0400u);
  EXPECT_EQ(uts_name_of(before.front()), "agent-a");
  EXPECT_EQ(read_all(root + "/etc/hostname"), "agent-a\n");
  for (pid_t pid : sandbox_pids(id)) {
    const std::string environ = read_all("/proc/" + std::to_string(pid) + "/environ");
    for (const auto& [key, value] : store.values)
      EXPECT_EQ(environ.find(value), std::string::npos) << key << " in pid " << pid;
  }

  // Inside, the same as a cold create of the same spec (other limits, so
  // that it does not match the pool): names, hashes, modes and owners.
  const std::string cold = d.create_sandbox(
      std::string(R"({"limits": {"memory": "80Mi", "disk": "16Mi"}, "hostname": "agent-a",
                      "secrets": )") +
          kSecrets + "}",
      &r);
  ASSERT_FALSE(cold.empty()) << describe(r);
  EXPECT_EQ(pooled_ids(d).count(cold), 0u) << "the reference create was not cold";
  const json in_claimed = d.exec(claimed, kShowIdentity);
  const json in_cold = d.exec(cold, kShowIdentity);
  ASSERT_EQ(in_claimed.value("exit_code", -1), 0) << in_claimed.dump();
  ASSERT_EQ(in_cold.value("exit_code", -1), 0) << in_cold.dump();
  std::istringstream lines(in_claimed.value("stdout", ""));
  std::vector<std::string> shown;
  for (std::string line; std::getline(lines, line);) shown.push_back(line);
  const std::string claimed_out = in_claimed.value("stdout", "");
  EXPECT_NE(claimed_out.find("agent-a\nagent-a\n"), std::string::npos) << claimed_out;
  EXPECT_NE(claimed_out.find("127.0.1.1\tagent-a\n"), std::string::npos) << claimed_out;
  EXPECT_NE(claimed_out.find("HOSTNAME=agent-a\n"), std::string::npos) << claimed_out;
  EXPECT_NE(claimed_out.find(sha256_hex(store.values["api"]) + "\n"), std::string::npos)
      << "the env secret is not in the claimed sandbox's processes: " << claimed_out;
  EXPECT_NE(claimed_out.find(sha256_hex(store.values["db"]) + "\n"), std::string::npos)
      << claimed_out;
  // The broker secret is a token, never the value; each sandbox its own.
  EXPECT_EQ(claimed_out.find(sha256_hex(store.values["tok"])), std::string::npos) << claimed_out;
  EXPECT_EQ(claimed_out.find(sha256_hex("")), std::string::npos) << "a variable is empty";
  EXPECT_NE(claimed_out.find("400 "), std::string::npos) << claimed_out;
  // Line for line as the cold create's but the token's hash.
  std::istringstream cold_lines(in_cold.value("stdout", ""));
  std::vector<std::string> cold_shown;
  for (std::string line; std::getline(cold_lines, line);) cold_shown.push_back(line);
  ASSERT_EQ(shown.size(), cold_shown.size()) << claimed_out << "---\n" << in_cold.dump();
  for (std::size_t i = 0; i < shown.size(); ++i) {
    if (shown[i] == cold_shown[i]) continue;
    EXPECT_EQ(shown[i].size(), 64u) << "line " << i << ": " << shown[i] << " vs " << cold_shown[i];
  }

  // A hit, counted; no value in the daemon's output, audit log or replies.
  const std::string metrics = d.request("GET", "/metrics").body;
  EXPECT_NE(metrics.find("corral_pool_hits_total{pool=\"id\"} 1"), std::string::npos) << metrics;
  const std::string audit = whole_audit(d);
  ASSERT_FALSE(audit.empty());
  for (const auto& [key, value] : store.values) {
    EXPECT_EQ(d.output().find(value), std::string::npos) << key << " in the daemon's output";
    EXPECT_EQ(audit.find(value), std::string::npos) << key << " in the audit log";
    EXPECT_EQ(r.body.find(value), std::string::npos) << key << " in a reply";
    EXPECT_EQ(metrics.find(value), std::string::npos) << key << " in /metrics";
  }
  EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + claimed).status, 200);
  EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + cold).status, 200);
}

// Two claims never share a sandbox, and nothing of caller A's secrets or
// host name is in caller B's: B's env, files, host name and /run/secrets
// are the pool's plain ones. A claims by a matching spec (no pool named).
TEST(DaemonPoolsIdentity, NothingOfOneClaimsSecretsOrHostnameReachesAnother) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("reading a sandbox's /proc needs root");
  SecretFile store({"api", "db", "tok"});
  TestDaemon d({}, config(store, "two", 2));
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(wait_ready(d, "two", 2).value("ready", 0u), 2u);
  HttpReply r;
  const std::string a = d.create_sandbox(
      std::string(R"({"limits": {"memory": "64Mi", "disk": "16Mi"}, "hostname": "agent-a",
                      "secrets": )") +
          kSecrets + "}",
      &r);
  ASSERT_FALSE(a.empty()) << describe(r);
  EXPECT_EQ(pooled_ids(d).count(a), 1u) << "a matching spec with secrets did not claim";
  const json in_a = d.exec(a, "hostname; [ -s /run/secrets/db ] && [ -n \"$API\" ] && echo bound");
  EXPECT_EQ(in_a.value("stdout", ""), "agent-a\nbound\n") << in_a.dump();

  std::vector<std::string> others;
  for (int round = 0; round < 2; ++round) {
    ASSERT_GE(wait_ready(d, "two", 1).value("ready", 0u), 1u);
    const std::string b = d.create_sandbox(R"({"pool": "two"})", &r);
    ASSERT_FALSE(b.empty()) << describe(r);
    EXPECT_NE(b, a);
    for (const std::string& o : others) EXPECT_NE(b, o) << "handed out twice";
    others.push_back(b);
    EXPECT_EQ(pooled_ids(d).count(b), 1u);
    const json in_b = d.exec(b, "hostname; cat /etc/hostname /etc/hosts; env; ls -A /run/secrets");
    const std::string out = in_b.value("stdout", "");
    EXPECT_EQ(in_b.value("exit_code", -1), 0) << in_b.dump();
    EXPECT_EQ(out.rfind("sandbox\nsandbox\n", 0), 0u) << out;
    EXPECT_EQ(out.find("agent-a"), std::string::npos) << out;
    EXPECT_EQ(out.find("API="), std::string::npos) << out;
    EXPECT_EQ(out.find("TOK="), std::string::npos) << out;
    EXPECT_NE(out.find("HOSTNAME=sandbox\n"), std::string::npos) << out;
    for (const auto& [key, value] : store.values)
      EXPECT_EQ(out.find(value), std::string::npos) << key << " of A in B";
    const std::vector<pid_t> pids = sandbox_pids(b);
    ASSERT_FALSE(pids.empty()) << b;
    EXPECT_TRUE(
        std::filesystem::is_empty("/proc/" + std::to_string(pids.front()) + "/root/run/secrets"))
        << b;
    EXPECT_EQ(uts_name_of(pids.front()), "sandbox");
    if (round == 0) {
      EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + a).status, 200);
    }
  }
  const json pool = d.request("GET", "/v1/pools/two").json();
  EXPECT_EQ(pool.value("hits", 0), 3) << pool.dump();
}

// A claim whose secret the store does not have is refused as a cold create
// is (the same status, code and field), and the pooled sandbox it took is
// destroyed, never handed out; the pool makes a new one.
TEST(DaemonPoolsIdentity, AClaimWhoseSecretsAreRefusedDestroysItsPooledSandbox) {
  SecretFile store({"api"});
  TestDaemon d({}, config(store, "one", 1));
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(wait_ready(d, "one", 1).value("ready", 0u), 1u);
  const std::set<std::string> pooled = pooled_ids(d);
  ASSERT_EQ(pooled.size(), 1u);
  const std::string id = *pooled.begin();

  const HttpReply claim =
      d.request("POST", "/v1/sandboxes", R"({"pool": "one", "secrets": [{"name": "nope"}]})");
  const HttpReply cold =
      d.request("POST", "/v1/sandboxes",
                R"({"limits": {"memory": "80Mi", "disk": "16Mi"}, "secrets": [{"name": "nope"}]})");
  EXPECT_EQ(claim.status, 400) << describe(claim);
  EXPECT_EQ(claim.status, cold.status) << describe(cold);
  EXPECT_EQ(claim.json()["error"].value("code", "a"), cold.json()["error"].value("code", "b"))
      << describe(claim) << " vs " << describe(cold);
  EXPECT_EQ(claim.json()["error"].value("field", "a"), cold.json()["error"].value("field", "b"))
      << describe(claim) << " vs " << describe(cold);

  std::string state;
  for (int i = 0; i < 300 && state != "cleaned"; ++i) {
    state = d.request("GET", "/v1/sandboxes/" + id).json().value("state", "");
    if (state != "cleaned") std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(state, "cleaned") << "the pooled sandbox the refused claim took was not destroyed";
  EXPECT_TRUE(d.audit_records("sandbox.claim").empty());
  EXPECT_TRUE(sandbox_pids(id).empty());
  // The pool makes a new one; a good claim then is a hit.
  ASSERT_EQ(wait_ready(d, "one", 1).value("ready", 0u), 1u);
  HttpReply r;
  const std::string next = d.create_sandbox(R"({"pool": "one", "secrets": [{"name": "api"}]})", &r);
  ASSERT_FALSE(next.empty()) << describe(r);
  EXPECT_NE(next, id);
  const std::string metrics = d.request("GET", "/metrics").body;
  EXPECT_NE(metrics.find("corral_pool_misses_total{pool=\"one\",reason=\"refused\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("corral_pool_hits_total{pool=\"one\"} 1"), std::string::npos) << metrics;
}

// A pooled sandbox's /etc/hostname swapped for a symlink to a host file
// (planted from the host here, as a hostile layer would have it): the
// claim's rewrite never follows it, the host file is untouched, the pooled
// sandbox is destroyed and the create is made cold with the host name.
TEST(DaemonPoolsIdentity, ALayerFileSwappedForASymlinkIsNeverFollowed) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("planting into a sandbox's root needs root");
  SecretFile store({"api"});
  TestDaemon d({}, config(store, "one", 1));
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(wait_ready(d, "one", 1).value("ready", 0u), 1u);
  const std::set<std::string> pooled = pooled_ids(d);
  ASSERT_EQ(pooled.size(), 1u);
  const std::string id = *pooled.begin();
  const std::vector<pid_t> pids = sandbox_pids(id);
  ASSERT_FALSE(pids.empty());

  const std::string canary_dir = make_temp_dir("pool-canary");
  const std::string canary = canary_dir + "/hostname";
  { std::ofstream(canary) << "host-canary\n"; }
  const std::string planted = "/proc/" + std::to_string(pids.front()) + "/root/etc/hostname";
  ASSERT_EQ(unlink(planted.c_str()), 0) << strerror(errno);
  ASSERT_EQ(symlink(canary.c_str(), planted.c_str()), 0) << strerror(errno);

  HttpReply r;
  const std::string got = d.create_sandbox(R"({"pool": "one", "hostname": "agent-b"})", &r);
  ASSERT_FALSE(got.empty()) << describe(r);
  EXPECT_NE(got, id) << "a sandbox whose binding failed was handed out";
  EXPECT_EQ(read_all(canary), "host-canary\n") << "the rewrite followed the symlink";
  EXPECT_EQ(d.exec(got, "hostname; cat /etc/hostname").value("stdout", ""), "agent-b\nagent-b\n");
  std::string state;
  for (int i = 0; i < 300 && state != "cleaned"; ++i) {
    state = d.request("GET", "/v1/sandboxes/" + id).json().value("state", "");
    if (state != "cleaned") std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(state, "cleaned");
  const std::string metrics = d.request("GET", "/metrics").body;
  EXPECT_NE(metrics.find("corral_pool_misses_total{pool=\"one\",reason=\"bind\"} 1"),
            std::string::npos)
      << metrics;
  std::filesystem::remove_all(canary_dir);
}

}  // namespace
}  // namespace corral::testing
