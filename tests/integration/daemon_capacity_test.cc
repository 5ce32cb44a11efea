// Capacity is never oversold (REQUIREMENTS.md C2, issue 14 item 1): rounds
// of concurrent creates on both listeners, with destroys, idempotent
// retries and creates that fail after admission mixed in, never leave more
// sandboxes, memory or disk live than serve.capacity allows. Checked from
// the daemon's list and from the host (the daemon's sandbox cgroups and
// the memory limits the kernel enforces on them); every refusal is the one
// docs/api.md documents; a refused or failed create gives back what it
// took; re-adopted sandboxes count after a restart; a DELETE that races a
// create does not give its share back early.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "jail/cgroup.h"
#include "support/daemon_harness.h"
#include "support/proc_files.h"
#include "support/sandbox_harness.h"
#include "support/skip.h"

namespace corral::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr int kMaxSandboxes = 4;
constexpr std::uint64_t kMiB = 1ULL << 20;
constexpr std::uint64_t kMaxMemory = 1024 * kMiB;
constexpr std::uint64_t kMaxDisk = 512 * kMiB;

std::string capacity_config(const std::string& mount_root) {
  return "serve:\n  capacity:\n    max_sandboxes: " + std::to_string(kMaxSandboxes) +
         "\n    memory: 1Gi\n    disk: 512Mi\n  mount_roots: [\"" + mount_root +
         "\"]\nsandbox:\n  memory_limit: 128Mi\n  disk_limit: 32Mi\n";
}

// A directory of the test's, removed at the end however the test ends.
struct TempDir {
  explicit TempDir(std::string_view tag) : path(make_temp_dir(tag)) {}
  ~TempDir() { host_sh("rm -rf '" + path + "'"); }
  const std::string path;
};

// The reply's JSON object ({} when the body is not one).
json object_of(const HttpReply& r) {
  json j = r.json();
  return j.is_object() ? j : json::object();
}

// The reply's error code and field ("" when it has none).
std::string error_member(const HttpReply& r, const char* name) {
  json error = object_of(r).value("error", json::object());
  return error.is_object() ? error.value(name, "") : "";
}

std::string describe(const HttpReply& r) {
  return "HTTP " + std::to_string(r.status) + " " + r.body.substr(0, 600);
}

// ---- what the host shows ---------------------------------------------------------------

bool descends_from(pid_t pid, pid_t ancestor) {
  for (int depth = 0; pid > 1 && depth < 64; ++depth) {
    if (pid == ancestor) return true;
    pid = proc_parent(pid);
  }
  return false;
}

std::uint64_t read_number(const std::string& path) {
  std::ifstream in(path);
  std::uint64_t v = 0;
  if (!(in >> v)) return 0;
  return v;
}

// The sandbox cgroups under corral's parent that hold a process of this
// daemon (other daemons on the host share the parent), and the sum of the
// memory limits the kernel enforces on them.
struct HostView {
  int sandboxes = 0;
  std::uint64_t memory_bytes = 0;
  std::vector<std::string> names;
};

HostView host_view(CgroupManager& cgroups, pid_t daemon) {
  HostView view;
  auto names = cgroups.list();
  if (!names) return view;
  for (const std::string& name : *names) {
    if (name.rfind("sb-", 0) != 0) continue;
    auto cg = cgroups.open(name);
    if (!cg) continue;
    auto procs = (*cg)->processes();
    if (!procs) continue;
    bool ours = std::any_of(procs->begin(), procs->end(),
                            [&](pid_t p) { return descends_from(p, daemon); });
    if (!ours) continue;
    ++view.sandboxes;
    view.names.push_back(name);
    for (const std::string& dir : (*cg)->paths()) {
      std::uint64_t limit = read_number(dir + "/memory.limit_in_bytes");  // v1
      if (limit == 0) limit = read_number(dir + "/memory.max");          // v2
      if (limit != 0) {
        view.memory_bytes += limit;
        break;
      }
    }
  }
  return view;
}

// ---- what the daemon shows -------------------------------------------------------------

struct ListedView {
  std::set<std::string> live;  // ids of sandboxes that still hold their limits
  std::uint64_t memory_bytes = 0;
  std::uint64_t disk_bytes = 0;
};

bool holds_capacity(const std::string& state) { return state != "cleaned" && state != "failed"; }

ListedView listed_view(TestDaemon& d) {
  ListedView view;
  HttpReply r = d.request("GET", "/v1/sandboxes");
  EXPECT_EQ(r.status, 200) << describe(r);
  for (const auto& s : object_of(r).value("sandboxes", json::array())) {
    if (!holds_capacity(s.value("state", ""))) continue;
    view.live.insert(s.value("id", ""));
    const json limits = s.value("spec", json::object()).value("limits", json::object());
    view.memory_bytes += limits.value("memory_bytes", std::uint64_t{0});
    view.disk_bytes += limits.value("disk_bytes", std::uint64_t{0});
  }
  return view;
}

// The value of corral_capacity_reserved{resource="..."} in /metrics, or -1.
double reserved_gauge(TestDaemon& d, const std::string& resource) {
  const std::string series = "corral_capacity_reserved{resource=\"" + resource + "\"} ";
  std::istringstream text(d.request("GET", "/metrics").body);
  for (std::string line; std::getline(text, line);) {
    if (line.rfind(series, 0) == 0) return std::strtod(line.c_str() + series.size(), nullptr);
  }
  return -1;
}

// ---- one create and what its answer may be --------------------------------------------------

enum class Kind { kSmall, kBigMemory, kBigDisk, kKeyed, kFailsAfterAdmission };

struct Outcome {
  Kind kind = Kind::kSmall;
  std::string key;
  HttpReply reply;
};

std::string body_of(Kind kind, const std::string& outside) {
  switch (kind) {
    case Kind::kSmall:
    case Kind::kKeyed:
      return R"({"network": {"mode": "none"}, "limits": {"memory": "128Mi", "disk": "32Mi"}})";
    case Kind::kBigMemory:
      return R"({"network": {"mode": "none"}, "limits": {"memory": "512Mi", "disk": "32Mi"}})";
    case Kind::kBigDisk:
      return R"({"network": {"mode": "none"}, "limits": {"memory": "64Mi", "disk": "256Mi"}})";
    case Kind::kFailsAfterAdmission:
      // Outside serve.mount_roots: refused by the factory's plan, after
      // capacity was taken; the teardown must give it back.
      return R"({"network": {"mode": "none"}, "limits": {"memory": "128Mi", "disk": "32Mi"},
                 "mounts": [{"source": ")" +
             outside + R"(", "target": "/data"}]})";
  }
  return "{}";
}

// Fails the test unless `o` is an answer docs/api.md allows for its kind:
// 201 (200 for a retried key), 429 over_capacity for the count or memory,
// 507 insufficient_storage for disk, 400 invalid_value for the bad mount.
void expect_documented(const Outcome& o) {
  const HttpReply& r = o.reply;
  const std::string code = error_member(r, "code");
  const std::string field = error_member(r, "field");
  const std::string message = error_member(r, "message");
  if (r.status == 201) {
    EXPECT_NE(o.kind, Kind::kFailsAfterAdmission) << describe(r);
    return;
  }
  if (r.status == 200) {
    EXPECT_EQ(o.kind, Kind::kKeyed) << "200 is only for a retried Idempotency-Key: " << describe(r);
    return;
  }
  if (r.status == 429) {
    EXPECT_EQ(code, "over_capacity") << describe(r);
    if (field.empty()) {
      EXPECT_NE(message.find("serve.capacity.max_sandboxes"), std::string::npos) << describe(r);
    } else {
      EXPECT_EQ(field, "limits.memory") << describe(r);
    }
    return;
  }
  if (r.status == 507) {
    EXPECT_EQ(code, "insufficient_storage") << describe(r);
    EXPECT_EQ(field, "limits.disk") << describe(r);
    return;
  }
  if (r.status == 400 && o.kind == Kind::kFailsAfterAdmission) {
    EXPECT_EQ(code, "invalid_value") << describe(r);
    return;
  }
  ADD_FAILURE() << "an answer docs/api.md does not give to a create: " << describe(r);
}

// Lets threads that each connected first send their requests together,
// so that creates reach the daemon's admission at the same moment.
class StartGate {
 public:
  explicit StartGate(int parties) : waiting_(parties) {}
  void arrive_and_wait() {
    std::unique_lock lock(mu_);
    if (--waiting_ <= 0) cv_.notify_all();
    cv_.wait_for(lock, 10s, [&] { return waiting_ <= 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_;
};

// One request on its own connection, sent once every party of `gate` is
// connected. Status 0 with the reason in the body when there is no reply.
HttpReply gated_request(TestDaemon& d, StartGate& gate, const std::string& method,
                        const std::string& target, const std::string& body, bool via_tcp,
                        http::Headers headers = {}) {
  HttpReply reply;
  auto endpoint = http::Endpoint::parse(via_tcp ? d.tcp_url() : d.unix_url());
  auto client = endpoint ? http::Client::connect(*endpoint, 60s)
                         : Result<http::Client>(tl::unexpected(endpoint.error()));
  gate.arrive_and_wait();
  if (!client) {
    reply.body = "connect: " + client.error().message;
    return reply;
  }
  client->set_io_timeout(120s);
  if (via_tcp) headers.push_back({"authorization", "Bearer " + d.api_key()});
  if (!body.empty()) headers.push_back({"content-type", "application/json"});
  auto head = client->send(method, target, headers, body);
  if (!head) {
    reply.body = method + " " + target + ": " + head.error().message;
    return reply;
  }
  reply.status = head->status;
  reply.headers = head->headers;
  if (auto all = client->read_all(std::size_t{1} << 24); all) reply.body = *all;
  return reply;
}

// Samples the host view while a round runs and keeps the most seen.
class HostSampler {
 public:
  HostSampler(CgroupManager& cgroups, pid_t daemon)
      : thread_([this, &cgroups, daemon] {
          while (!stop_) {
            HostView v = host_view(cgroups, daemon);
            std::lock_guard lock(mu_);
            if (v.sandboxes > most_.sandboxes) most_ = v;
            most_memory_ = std::max(most_memory_, v.memory_bytes);
            std::this_thread::sleep_for(2ms);
          }
        }) {}
  ~HostSampler() { finish(); }
  void finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  HostView most() {
    std::lock_guard lock(mu_);
    return most_;
  }
  std::uint64_t most_memory() {
    std::lock_guard lock(mu_);
    return most_memory_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  HostView most_;
  std::uint64_t most_memory_ = 0;
  std::thread thread_;
};

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : " ") + s;
  return out;
}

// 8 rounds of 40 concurrent creates (half on the unix socket, half on TCP
// with the key), with about half of the live sandboxes destroyed before
// or during each round.
TEST(DaemonCapacity, ConcurrentCreatesNeverOversell) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("the daemon runs as root");
  auto cgroups = CgroupManager::detect();
  if (!cgroups) CORRAL_SKIP_OR_FAIL("no usable cgroups: " + cgroups.error().message);
  const TempDir dir("capacity");
  const std::string root = dir.path + "/root";
  const std::string outside = dir.path + "/outside";
  ASSERT_EQ(mkdir(root.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(outside.c_str(), 0755), 0);
  TestDaemon d({}, capacity_config(root));
  ASSERT_TRUE(d.ready()) << d.output();

  constexpr int kRounds = 8;
  constexpr int kConcurrent = 40;
  std::mt19937 rng(1414);
  std::set<std::string> live;  // what the test believes is live
  int created = 0, refused = 0, retried = 0, failed_after = 0;
  for (int round = 0; round < kRounds; ++round) {
    // About half of the live sandboxes go: some just before the round, to
    // make room that the creates compete for, the rest during it.
    std::vector<std::string> doomed;
    for (const auto& id : live) {
      if (rng() % 2 == 0) doomed.push_back(id);
    }
    while (doomed.size() > 1) {
      HttpReply r = d.request("DELETE", "/v1/sandboxes/" + doomed.back());
      EXPECT_EQ(r.status, 200) << describe(r);
      live.erase(doomed.back());
      doomed.pop_back();
    }
    std::vector<Outcome> outcomes(kConcurrent);
    for (int i = 0; i < kConcurrent; ++i) {
      Kind kind = static_cast<Kind>(rng() % 5);
      outcomes[i].kind = kind;
      // Keyed creates share 3 keys a round: a key's creates queue behind
      // its lock, and all but the first answer from the store.
      if (kind == Kind::kKeyed)
        outcomes[i].key = "cap-r" + std::to_string(round) + "-k" + std::to_string(i % 3);
    }
    {
      HostSampler sampler(**cgroups, d.pid());
      StartGate gate(kConcurrent + static_cast<int>(doomed.size()));
      std::vector<std::thread> threads;
      for (int i = 0; i < kConcurrent; ++i) {
        threads.emplace_back([&, i] {
          Outcome& o = outcomes[i];
          http::Headers headers;
          if (!o.key.empty()) headers.push_back({"idempotency-key", o.key});
          o.reply = gated_request(d, gate, "POST", "/v1/sandboxes", body_of(o.kind, outside),
                                  i % 2 == 1, headers);
        });
      }
      std::vector<HttpReply> destroyed(doomed.size());
      for (std::size_t i = 0; i < doomed.size(); ++i) {
        threads.emplace_back([&, i] {
          destroyed[i] =
              gated_request(d, gate, "DELETE", "/v1/sandboxes/" + doomed[i], {}, i % 2 == 0);
        });
      }
      for (auto& t : threads) t.join();
      sampler.finish();
      for (std::size_t i = 0; i < doomed.size(); ++i) {
        EXPECT_EQ(destroyed[i].status, 200) << doomed[i] << ": " << describe(destroyed[i]);
        EXPECT_EQ(object_of(destroyed[i]).value("state", ""), "cleaned") << describe(destroyed[i]);
        live.erase(doomed[i]);
      }
      const HostView most = sampler.most();
      EXPECT_LE(most.sandboxes, kMaxSandboxes)
          << "round " << round << ": the host had " << most.sandboxes
          << " sandbox cgroups of this daemon at once: " << join(most.names);
      EXPECT_LE(sampler.most_memory(), kMaxMemory)
          << "round " << round << ": the kernel enforced this much memory at once";
    }

    // Every answer is a documented one; keys answer one sandbox each.
    std::map<std::string, std::set<std::string>> ids_of_key;
    std::map<std::string, int> fresh_of_key;
    for (const Outcome& o : outcomes) {
      expect_documented(o);
      const std::string id = object_of(o.reply).value("id", "");
      if (o.reply.status == 201) {
        ++created;
        EXPECT_TRUE(live.insert(id).second) << "a second 201 for " << id;
      } else if (o.reply.status == 200) {
        ++retried;
      } else if (o.reply.status == 400) {
        ++failed_after;
      } else {
        ++refused;
      }
      if (!o.key.empty() && (o.reply.status == 200 || o.reply.status == 201)) {
        ids_of_key[o.key].insert(id);
        fresh_of_key[o.key] += o.reply.status == 201;
      }
    }
    for (const auto& [key, ids] : ids_of_key) {
      EXPECT_EQ(ids.size(), 1u) << "Idempotency-Key " << key << " answered " << ids.size()
                                << " sandboxes";
      EXPECT_LE(fresh_of_key[key], 1) << "Idempotency-Key " << key << " created twice";
    }

    // After the round: the daemon's list, its health count and the host
    // agree with the test, and none is over a limit.
    ListedView listed = listed_view(d);
    EXPECT_LE(listed.live.size(), static_cast<std::size_t>(kMaxSandboxes)) << "round " << round;
    EXPECT_LE(listed.memory_bytes, kMaxMemory) << "round " << round;
    EXPECT_LE(listed.disk_bytes, kMaxDisk) << "round " << round;
    EXPECT_EQ(listed.live, live) << "round " << round;
    EXPECT_EQ(object_of(d.request("GET", "/healthz")).value("sandboxes", -1),
              static_cast<int>(live.size()))
        << "round " << round;
    // Every create has answered and every DELETE too: what the daemon
    // holds is exactly what is live.
    EXPECT_EQ(reserved_gauge(d, "sandboxes"), static_cast<double>(live.size())) << "round " << round;
    EXPECT_EQ(reserved_gauge(d, "memory_bytes"), static_cast<double>(listed.memory_bytes))
        << "round " << round;
    EXPECT_EQ(reserved_gauge(d, "disk_bytes"), static_cast<double>(listed.disk_bytes))
        << "round " << round;
    HostView host = host_view(**cgroups, d.pid());
    EXPECT_EQ(host.sandboxes, static_cast<int>(live.size()))
        << "round " << round << ": " << join(host.names);
    EXPECT_LE(host.memory_bytes, kMaxMemory) << "round " << round;
    if (::testing::Test::HasFailure()) break;  // one round's report is enough
  }
  std::printf("%d created, %d answered again for their key, %d refused, %d failed after admission\n",
              created, retried, refused, failed_after);
  // The rounds were not vacuous: creates were admitted and refused alike.
  EXPECT_GT(created, kMaxSandboxes);
  EXPECT_GT(refused, kRounds);

  // Nothing leaked: with every sandbox gone, and after one more create
  // that fails after admission and a keyed create with its retry, one
  // create takes the whole memory and disk capacity.
  for (const auto& id : live) {
    EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200) << id;
  }
  HttpReply bad = d.request("POST", "/v1/sandboxes", body_of(Kind::kFailsAfterAdmission, outside));
  EXPECT_EQ(bad.status, 400) << describe(bad);
  const http::Headers key = {{"idempotency-key", "cap-final"}};
  const std::string keyed_body = body_of(Kind::kKeyed, "");
  HttpReply first = d.request("POST", "/v1/sandboxes", keyed_body, false, true, key);
  HttpReply again = d.request("POST", "/v1/sandboxes", keyed_body, true, true, key);
  EXPECT_EQ(first.status, 201) << describe(first);
  EXPECT_EQ(again.status, 200) << describe(again);
  EXPECT_EQ(object_of(again).value("id", ""), object_of(first).value("id", ""));
  EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + object_of(first).value("id", "")).status, 200);
  HttpReply whole;
  std::string id = d.create_sandbox(
      R"({"network": {"mode": "none"}, "limits": {"memory": "1Gi", "disk": "512Mi"}})", &whole);
  EXPECT_FALSE(id.empty()) << "refused or failed creates kept capacity: " << describe(whole);
  if (!id.empty()) {
    EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
  }
}

// After kill -9 and a restart, the re-adopted sandboxes hold their share:
// a full daemon stays full, and of 16 concurrent creates into the one slot
// a destroy frees, exactly one is admitted.
TEST(DaemonCapacity, ReadoptedSandboxesCountAfterRestart) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("the daemon runs as root");
  const TempDir dir("capacity-restart");
  const std::string root = dir.path + "/root";
  ASSERT_EQ(mkdir(root.c_str(), 0755), 0);
  TestDaemon d({}, capacity_config(root));
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string small = body_of(Kind::kSmall, "");
  std::vector<std::string> ids;
  for (int i = 0; i < kMaxSandboxes; ++i) {
    HttpReply r;
    std::string id = d.create_sandbox(small, &r);
    ASSERT_FALSE(id.empty()) << describe(r);
    ids.push_back(id);
  }
  ASSERT_TRUE(d.kill9()) << d.output();
  ASSERT_TRUE(d.restart()) << d.output();
  EXPECT_EQ(listed_view(d).live.size(), static_cast<std::size_t>(kMaxSandboxes));
  for (bool tcp : {false, true}) {
    HttpReply r = d.request("POST", "/v1/sandboxes", small, tcp);
    EXPECT_EQ(r.status, 429) << describe(r);
    EXPECT_EQ(error_member(r, "code"), "over_capacity") << describe(r);
  }

  ASSERT_EQ(d.request("DELETE", "/v1/sandboxes/" + ids.back()).status, 200);
  ids.pop_back();
  std::vector<HttpReply> replies(16);
  StartGate gate(static_cast<int>(replies.size()));
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    threads.emplace_back([&, i] {
      replies[i] = gated_request(d, gate, "POST", "/v1/sandboxes", small, i % 2 == 1);
    });
  }
  for (auto& t : threads) t.join();
  int admitted = 0;
  for (const HttpReply& r : replies) {
    if (r.status == 201) {
      ++admitted;
      ids.push_back(object_of(r).value("id", ""));
    } else {
      EXPECT_EQ(r.status, 429) << describe(r);
      EXPECT_EQ(error_member(r, "code"), "over_capacity") << describe(r);
    }
  }
  EXPECT_EQ(admitted, 1);
  EXPECT_EQ(listed_view(d).live.size(), static_cast<std::size_t>(kMaxSandboxes));
  for (const auto& id : ids) EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
}

// A DELETE of a sandbox whose create is still in progress (its id is in
// the list, state creating or initializing) must not give its share back
// while the create goes on making it (before: the create answered 201
// "cleaned" and its sandbox ran on, uncounted and unlisted). The DELETE
// waits for the create, then destroys it; the host, the list and the
// health count agree.
TEST(DaemonCapacity, DestroyDuringCreateKeepsTheCountRight) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("the daemon runs as root");
  auto cgroups = CgroupManager::detect();
  if (!cgroups) CORRAL_SKIP_OR_FAIL("no usable cgroups: " + cgroups.error().message);
  const TempDir dir("capacity-race");
  const std::string root = dir.path + "/root";
  ASSERT_EQ(mkdir(root.c_str(), 0755), 0);
  TestDaemon d({}, capacity_config(root));
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string small = body_of(Kind::kSmall, "");
  int caught = 0;
  for (int attempt = 0; attempt < 10; ++attempt) {
    HttpReply created;  // read only after the join, or once `answered` says it is written
    std::atomic<bool> answered{false};
    std::thread creator([&] {
      created = d.request("POST", "/v1/sandboxes", small);
      answered = true;
    });
    HttpReply deleted;
    for (int i = 0; i < 2000 && deleted.status == 0; ++i) {
      HttpReply r = d.request("GET", "/v1/sandboxes");
      for (const auto& s : object_of(r).value("sandboxes", json::array())) {
        const std::string state = s.value("state", "");
        if (state == "creating" || state == "initializing") {
          deleted = d.request("DELETE", "/v1/sandboxes/" + s.value("id", ""));
          ++caught;
          break;
        }
      }
      if (answered) break;
    }
    creator.join();
    if (deleted.status != 0) {
      // The DELETE waited for the create and then destroyed the sandbox.
      EXPECT_EQ(deleted.status, 200) << describe(deleted);
      EXPECT_EQ(object_of(deleted).value("state", ""), "cleaned") << describe(deleted);
      EXPECT_EQ(created.status, 201) << describe(created);
    }
    ListedView listed = listed_view(d);
    HostView host = host_view(**cgroups, d.pid());
    EXPECT_EQ(host.sandboxes, static_cast<int>(listed.live.size()))
        << "attempt " << attempt << ": create " << describe(created) << "; delete "
        << describe(deleted) << "; host " << join(host.names);
    EXPECT_EQ(object_of(d.request("GET", "/healthz")).value("sandboxes", -1),
              static_cast<int>(host.sandboxes))
        << "attempt " << attempt << ": create " << describe(created) << "; delete "
        << describe(deleted);
    for (const auto& id : listed.live) d.request("DELETE", "/v1/sandboxes/" + id);
    if (::testing::Test::HasFailure()) break;
  }
  std::printf("caught %d creates in progress\n", caught);
  EXPECT_GT(caught, 0) << "no create was seen in progress: the test proved nothing";
}

}  // namespace
}  // namespace corral::testing
