// The kill -9 loop of issue 14 ("Must show"): cycle after cycle, four
// clients, two on the unix socket and two on TCP with the key, run a mixed
// workload (creates with an Idempotency-Key, D6, some sent twice at once,
// some without a key; network sandboxes with an allowlist; execs;
// background processes; uploads, downloads and deletes of files; sandbox
// deletes) and the daemon is killed with SIGKILL at a random moment. What
// was acknowledged (a 2xx answer read whole) is kept in a ledger
// (kill9_ledger.h) and checked after each restart: every acknowledged live
// sandbox is there and works, its files have the same hash, its processes
// are listed with their result, no key answered with two sandboxes, no
// sandbox appears that no create asked for, every acknowledged delete is
// `cleaned` with nothing left of it on the host. After each kill the audit
// chain verifies and every acknowledged operation has its record (X1); at
// the end nothing of the daemon's sandboxes is left on the host (C2, F3):
// cgroups, processes, mounts, network links, lock files, data-dir entries.
//
// Knobs (tests/README.md): CORRAL_KILL9_CYCLES (default 30; 10 in a
// sanitizer build), CORRAL_KILL9_SEED (default: from the clock, printed).
#include <arpa/inet.h>
#include <fcntl.h>
#include <glob.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <random>
#include <thread>

#include "base/paths.h"
#include "base/sha256.h"
#include "integration/kill9_loop.h"
#include "store/state_store.h"
#include "support/daemon_harness.h"
#include "support/net_client.h"
#include "support/net_world.h"
#include "support/sandbox_harness.h"

namespace corral::testing::kill9 {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
namespace F = finding;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : fallback;
}

int default_cycles() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return 10;  // the daemon is several times slower
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return 10;
#endif
#endif
  return 30;
}

// What the host still holds of sandbox `id` (its cgroups, mounts naming
// it, its lock file), read from the host, not through corral.
std::vector<std::string> host_residue_of(const std::string& id) {
  std::vector<std::string> left;
  for (const std::string& pattern :
       {"/sys/fs/cgroup/*/corral/" + id, "/sys/fs/cgroup/corral/" + id}) {
    glob_t g{};
    if (glob(pattern.c_str(), 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i)
        left.push_back(std::string("cgroup ") + g.gl_pathv[i]);
    }
    globfree(&g);
  }
  std::ifstream mountinfo("/proc/self/mountinfo");
  for (std::string line; std::getline(mountinfo, line);) {
    if (line.find(id) != std::string::npos) left.push_back("mount " + line);
  }
  struct stat st;
  const std::string lock = run_dir() + "/sandboxes/" + id + ".lock";
  if (lstat(lock.c_str(), &st) == 0) left.push_back("lock file " + lock);
  return left;
}

// A host link of a network sandbox of ours that is still there and whose
// slot lock no one holds (a held lock: the slot is another sandbox's now).
bool link_left(const std::string& link) {
  if (link.empty() || if_nametoindex(link.c_str()) == 0) return false;
  int fd = open((run_dir() + "/net/" + link).c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return true;
  const bool free_slot = flock(fd, LOCK_EX | LOCK_NB) == 0;
  close(fd);
  return free_slot;
}
}  // namespace

// ---------------------------------------------------------------------------
// One cycle: work, kill, check the audit log, restart, check the ledger.

// The first create builds the host base in the data dir: before the loop,
// so that the first kills do not keep interrupting it.
void Kill9Loop::warm_up() {
  CreateFact f;
  f.body = json{{"hostname", "k9-warmup"}}.dump();
  ledger_.creates["k9-warmup"] = f;
  HttpReply r;
  const std::string id = d_.create_sandbox(f.body, &r);
  ASSERT_FALSE(id.empty()) << brief(r);
  ASSERT_EQ(d_.request("DELETE", "/v1/sandboxes/" + id).json().value("state", ""), "cleaned");
}

void Kill9Loop::run_cycle(int cycle) {
  cycle_ = cycle;
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) workers.emplace_back([&, w] { work(w, stop); });
  // A random moment, but only once this cycle has had an answer: on a
  // loaded host a create can take longer than the whole window, and a loop
  // that kills every create before it is answered checks nothing.
  const int acked_before = acked_.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(150 + main_rng_() % 550));
  for (int i = 0; i < 200 && acked_.load() == acked_before; ++i) std::this_thread::sleep_for(50ms);
  std::this_thread::sleep_for(std::chrono::milliseconds(main_rng_() % 200));
  ASSERT_TRUE(d_.kill9());
  stop = true;
  for (auto& t : workers) t.join();  // their requests fail fast: nothing listens
  const bool torn = check_audit_after_kill();
  restart(torn);
  if (::testing::Test::HasFatalFailure()) return;
  const int in_doubt = settle_in_doubt();
  check_ledger();
  if (cycle % 3 == 0) check_network_traffic();
  int live = 0, networked = 0;
  {
    std::lock_guard lock(ledger_.mu);
    for (const auto& ids : ledger_.owned) live += static_cast<int>(ids.size());
    for (const auto& ids : ledger_.owned)
      for (const auto& id : ids) networked += ledger_.sandboxes[id].network;
  }
  std::printf("cycle %d: %d acknowledged so far, %d creates in doubt, %d live (%d networked)\n",
              cycle, acked_.load(), in_doubt, live, networked);
}

// The chain verifies (X1), and every acknowledged operation so far has its
// record. Returns whether the kill tore the last line.
bool Kill9Loop::check_audit_after_kill() {
  const std::string log = d_.data_dir() + "/audit.log";
  bool torn = false;
  {
    std::ifstream in(log, std::ios::binary | std::ios::ate);
    const auto size = static_cast<std::streamoff>(in.tellg());
    if (size > 0) {
      in.seekg(size - 1);
      torn = in.get() != '\n';
    }
  }
  RunOutcome v = run_corral({"audit", "verify", "--log", log});
  if (v.exit_code != 0 && !torn) {
    findings_.add(F::kAuditChain, "cycle " + std::to_string(cycle_) + ": " + v.out + v.err);
  }
  if (torn) {
    std::printf("cycle %d: the kill tore the audit log's last line (verify: %s)\n", cycle_,
                tail_of(v.err, 300).c_str());
  }
  read_new_audit_records();
  check_audit_records();
  return torn;
}

void Kill9Loop::read_new_audit_records() {
  std::ifstream in(d_.data_dir() + "/audit.log", std::ios::binary);
  in.seekg(static_cast<std::streamoff>(audit_offset_));
  for (std::string line; std::getline(in, line);) {
    if (in.eof()) break;  // no final newline: torn, not a record
    audit_offset_ += line.size() + 1;
    const json j = json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    const std::string type = j.value("type", "");
    const std::string sb = j.value("sandbox", "");
    if (type == "sandbox.create") audit_created_.insert(sb);
    if (type == "sandbox.destroy") audit_destroyed_.insert(sb);
    if (type == "sandbox.reconcile_destroy") audit_reconciled_.insert(sb);
    if (type == "exec.start") audit_started_.insert(j.value("process", ""));
    if (type == "exec.exit" && j.contains("exit_code"))
      audit_exits_[j.value("process", "")] = j.value("exit_code", -1);
    if (type == "file.write" && j.value("outcome", "") == "ok")
      audit_writes_.insert(sb + " " + j.value("path", "") + " " + j.value("sha256", ""));
    if (type == "file.read" && j.value("outcome", "") == "ok")
      audit_reads_.insert(sb + " " + j.value("path", "") + " " + j.value("sha256", ""));
  }
}

void Kill9Loop::check_audit_records() {
  std::lock_guard lock(ledger_.mu);
  for (const auto& entry : ledger_.sandboxes) {
    // Named, not a structured binding: clang 14 cannot capture those.
    const auto& id = entry.first;
    const auto& f = entry.second;
    // Each missing record is reported once, in the cycle it was found.
    auto missing = [&](const std::string& what, const char* kind = F::kAuditMissing) {
      if (audit_reported_.insert(id + " " + what).second) findings_.add(kind, at(id) + ": " + what);
    };
    if (audit_created_.count(id) == 0) missing("sandbox.create");
    // A delete caught by a kill may have been finished by reconcile.
    if (f.deleted && audit_destroyed_.count(id) == 0 && audit_reconciled_.count(id) == 0) {
      if (f.delete_retried) {
        missing("no destroy record", F::kDestroyRecord);
      } else {
        missing("sandbox.destroy");
      }
    }
    for (const auto& [pid, p] : f.procs) {
      if (audit_started_.count(pid) == 0) missing("exec.start of " + pid);
      // An exit a wait answered was recorded before the answer.
      auto exit = audit_exits_.find(pid);
      if (p.seen_exit && (exit == audit_exits_.end() || exit->second != *p.seen_exit))
        missing("exec.exit of " + pid + " with exit code " + std::to_string(*p.seen_exit));
    }
    for (const auto& [path, sha] : f.files)
      if (audit_writes_.count(id + " " + path + " " + sha) == 0) missing("file.write " + path);
    for (const auto& [path, sha] : f.reads)
      if (audit_reads_.count(id + " " + path + " " + sha) == 0) missing("file.read " + path);
  }
}

void Kill9Loop::restart(bool torn) {
  if (d_.restart()) return;
  const std::string why = tail_of(d_.output(), 1500);
  if (!torn) FAIL() << "cycle " << cycle_ << ": the daemon did not start again: " << why;
  findings_.add(F::kTornTail, "cycle " + std::to_string(cycle_) + ": " + tail_of(why, 500));
  // Cut the torn line by hand, as the repair would, so that the loop (and
  // the cleanup of the sandboxes) can go on.
  const std::string log = d_.data_dir() + "/audit.log";
  std::ifstream in(log, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(truncate(log.c_str(), static_cast<off_t>(bytes.rfind('\n') + 1)), 0);
  ASSERT_TRUE(d_.restart()) << "cycle " << cycle_
                            << ", after cutting the torn line: " << tail_of(d_.output(), 1500);
}

// Requests that got no answer: a keyed create is retried with its key (the
// same sandbox, or the documented answer, never a second one); a delete is
// sent again (it is idempotent).
int Kill9Loop::settle_in_doubt() {
  std::vector<std::string> tags;
  {
    std::lock_guard lock(ledger_.mu);
    for (auto& [tag, f] : ledger_.creates)
      if (f.unanswered && !f.key.empty()) tags.push_back(tag);
  }
  for (const std::string& tag : tags) {
    CreateFact f;
    {
      std::lock_guard lock(ledger_.mu);
      f = ledger_.creates[tag];
      ledger_.creates[tag].unanswered = false;
    }
    HttpReply r = send_create(f, f.tcp);
    const json answer = r.json();
    const std::string code =
        answer["error"].is_object() ? answer["error"].value("code", "") : std::string();
    if (r.status >= 400 && r.status < 500 && code != "idempotency_mismatch" && !code.empty()) {
      std::printf("cycle %d: retry of key %s -> %d %s (a clear error)\n", cycle_, f.key.c_str(),
                  r.status, code.c_str());
      continue;
    }
    if (r.status == 0)
      findings_.add(F::kAnswer,
                    "cycle " + std::to_string(cycle_) + ": retry of key " + f.key + ": " + r.body);
    note_create_answer(tag, r, f.body.find("\"network\"") != std::string::npos, f.worker);
    const std::string state = answer.value("state", "");
    if (r.status == 200 && state != "ready" && state != "running") {
      // The documented answer today (api.md, Idempotency); issue 14 #7
      // (the audit helper) may make it a fresh sandbox or a clear error.
      ++dead_replays_;
      std::printf("cycle %d: retry of key %s answered %s, %s (its create was never answered)\n",
                  cycle_, f.key.c_str(), answer.value("id", "").c_str(), state.c_str());
    }
  }
  std::vector<std::pair<int, std::string>> deletes;
  {
    std::lock_guard lock(ledger_.mu);
    for (auto& [id, f] : ledger_.sandboxes)
      if (f.delete_unanswered && !f.deleted && !f.delete_failed) deletes.push_back({f.worker, id});
  }
  for (const auto& [w, id] : deletes) {
    HttpReply r = call(w, "DELETE", "/v1/sandboxes/" + id);
    const json j = r.json();
    std::lock_guard lock(ledger_.mu);
    SandboxFact& f = ledger_.sandboxes[id];
    f.delete_unanswered = false;
    f.delete_retried = true;
    if (r.status == 200 && j.value("state", "") == "cleaned" && j["residue"].empty()) {
      f.deleted = true;
    } else {
      f.delete_failed = true;
      findings_.add(F::kResidue, at(id) + ": a DELETE retried after a kill -> " + brief(r));
    }
  }
  return static_cast<int>(tags.size());
}

// ---------------------------------------------------------------------------
// The ledger against the daemon, after a restart.

void Kill9Loop::check_ledger() {
  HttpReply list = d_.request("GET", "/v1/sandboxes?all=true");
  ASSERT_EQ(list.status, 200) << list.body;
  listed_.clear();
  const json all = list.json();  // named: a temporary's member would dangle in the loop
  for (const json& s : all["sandboxes"]) listed_[s.value("id", "")] = s;
  std::lock_guard lock(ledger_.mu);
  // Every sandbox was asked for; a key's creates made one live sandbox at
  // most; a create without a key made one sandbox at most.
  std::map<std::string, std::vector<std::string>> by_tag;
  for (const auto& [id, s] : listed_) {
    const std::string tag = s["spec"].value("hostname", "");
    const std::string state = s.value("state", "");
    if (ledger_.creates.count(tag) == 0) findings_.add(F::kUnknown, at(id) + ": " + s.dump());
    if (state != "cleaned") by_tag[tag].push_back(id + " (" + state + ")");
    if (state != "ready" && state != "running" && state != "cleaned")
      findings_.add(state == "failed" ? F::kResidue : F::kAnswer,
                    at(id) + " is " + state + " after reconcile: " + tail_of(s.dump(), 600));
  }
  for (const auto& [tag, ids] : by_tag) {
    if (ids.size() > 1)
      findings_.add(F::kDuplicate, "cycle " + std::to_string(cycle_) + ": create " + tag + " has " +
                                       ::testing::PrintToString(ids));
  }
  for (auto& [id, f] : ledger_.sandboxes) {
    auto it = listed_.find(id);
    if (it == listed_.end()) {
      findings_.add(F::kLost, at(id) + ": an acknowledged sandbox is not listed");
      continue;
    }
    if (f.deleted || f.delete_failed) {
      check_cleaned(id, f, it->second);
    } else {
      check_sandbox(id, f, it->second);
    }
  }
}

void Kill9Loop::check_cleaned(const std::string& id, SandboxFact& f, const json& info) {
  if (f.delete_failed) return;  // reported when it was answered
  if (info.value("state", "") != "cleaned" || !info["residue"].empty())
    findings_.add(F::kLost, at(id) + ": an acknowledged delete is now " + info.dump());
  if (f.residue_checked) return;
  f.residue_checked = true;
  for (const auto& r : host_residue_of(id)) findings_.add(F::kResidue, at(id) + ": " + r);
  if (link_left(f.link)) findings_.add(F::kResidue, at(id) + ": host link " + f.link);
}

// An acknowledged live sandbox: there, working, its files and processes too.
void Kill9Loop::check_sandbox(const std::string& id, SandboxFact& f, const json& info) {
  const std::string state = info.value("state", "");
  if (state != "ready" && state != "running") {
    findings_.add(F::kLost, at(id) + ": an acknowledged sandbox is " + state + ": " +
                                tail_of(info.dump(), 600));
    f.delete_failed = true;  // reported once; its owner lets it go
    disown(f.worker, id);
    return;
  }
  const std::string base = "/v1/sandboxes/" + id;
  HttpReply r =
      d_.request("POST", base + "/exec", json{{"cmd", "echo alive"}}.dump(), f.worker % 2 == 1);
  if (r.json().value("stdout", "") != "alive\n")
    findings_.add(F::kLost, at(id) + ": exec after the restart -> " + brief(r));
  if (f.network && info["network"].is_null())
    findings_.add(F::kLost, at(id) + ": its network is gone: " + tail_of(info.dump(), 600));
  for (const auto& [path, sha] : f.files) {
    HttpReply got = d_.request("GET", base + "/files?path=" + path);
    if (got.status != 200 || sha256_hex(got.body) != sha)
      findings_.add(F::kLost, at(id) + ": acknowledged upload " + path + " -> " +
                                  std::to_string(got.status) +
                                  (got.status == 200 ? " with other bytes" : " " + got.body));
  }
  for (const auto& path : f.removed_files) {
    HttpReply got = d_.request("GET", base + "/files/stat?path=" + path);
    if (got.status != 404)
      findings_.add(F::kLost,
                    at(id) + ": acknowledged file delete " + path + " undone: " + brief(got));
  }
  check_processes(id, f);
}

void Kill9Loop::check_processes(const std::string& id, SandboxFact& f) {
  if (f.procs.empty()) return;
  const std::string base = "/v1/sandboxes/" + id + "/processes";
  std::set<std::string> listed;
  const json procs = d_.request("GET", base).json();
  for (const json& p : procs["processes"]) listed.insert(p.value("id", ""));
  std::vector<std::string> forgotten;
  for (auto& [pid, p] : f.procs) {
    HttpReply r = d_.request("GET", base + "/" + pid);
    const json j = r.json();
    const std::string seen =
        p.seen_exit ? " (a wait had answered exit " + std::to_string(*p.seen_exit) + ")" : "";
    if (r.status == 404 || listed.count(pid) == 0) {
      findings_.add(F::kProcForgotten, at(id) + ": " + pid + seen + ": GET -> " + brief(r));
      forgotten.push_back(pid);  // reported once
      continue;
    }
    if (r.status != 200) {
      findings_.add(F::kAnswer, at(id) + ": GET process " + pid + " -> " + brief(r));
      continue;
    }
    if (j.value("state", "") != "exited") continue;
    // Lost (no exit code, no signal) is allowed only for an end no one had
    // been told of (api.md, "after a daemon restart").
    const bool lost = j["exit_code"].is_null() && j["signal"].is_null();
    if (lost && p.seen_exit)
      findings_.add(F::kLost, at(id) + ": " + pid + seen + " is now lost: " + r.body);
    if (!lost && j.value("exit_code", -1) != p.exit_code)
      findings_.add(F::kLost, at(id) + ": " + pid + " should exit " + std::to_string(p.exit_code) +
                                  ": " + r.body);
    if (lost) continue;
    HttpReply out = d_.request("GET", base + "/" + pid + "/output");
    if (out.body.find(p.token) == std::string::npos)
      findings_.add(F::kLost,
                    at(id) + ": the output of " + pid + " lacks " + p.token + ": " + brief(out));
  }
  for (const auto& pid : forgotten) f.procs.erase(pid);
}

// A network sandbox re-attached by this daemon still reaches what its
// allowlist allows, and nothing else (NetWorld's servers, not the internet).
void Kill9Loop::check_network_traffic() {
  if (world_ == nullptr) return;
  std::string id;
  {
    std::lock_guard lock(ledger_.mu);
    for (const auto& [sid, f] : ledger_.sandboxes)
      if (f.network && !f.deleted && !f.delete_failed && listed_.count(sid) != 0) id = sid;
  }
  if (id.empty()) return;
  json body{{"argv",
             {"/usr/bin/python3", "-c",
              std::string(kNetClientPy) + "out('a', transparent_http('allowed.test'))\n"
                                          "out('b', transparent_http('denied.test'))\n"}},
            {"timeout", 30}};
  const json j = d_.request("POST", "/v1/sandboxes/" + id + "/exec", body.dump()).json();
  const std::string out = j.value("stdout", "") + j.value("stderr", "");
  if (value_of(out, "a") != "OK hello from allowed.test")
    findings_.add(F::kLost, at(id) + ": its allowlist no longer lets allowed.test through: " +
                                tail_of(out, 500));
  if (value_of(out, "b").find("hello from") != std::string::npos)
    findings_.add(F::kLost, at(id) + ": after the restart denied.test is reached: " + out);
}

// Destroy everything, stop, and look at the host.
void Kill9Loop::finish() {
  std::set<std::string> ids;
  const json all = d_.request("GET", "/v1/sandboxes?all=true").json();
  for (const json& s : all["sandboxes"]) {
    const std::string id = s.value("id", "");
    ids.insert(id);
    if (s.value("state", "") == "cleaned") continue;
    HttpReply r = d_.request("DELETE", "/v1/sandboxes/" + id);
    if (r.json().value("state", "") != "cleaned")
      findings_.add(F::kResidue, "final DELETE " + id + " -> " + brief(r));
  }
  // Every acknowledged operation's record, as the daemon wrote it last.
  std::vector<std::string> links;
  {
    std::lock_guard lock(ledger_.mu);
    for (const auto& [id, f] : ledger_.sandboxes) links.push_back(f.link);
  }
  const std::string data = d_.data_dir();
  d_.stop();
  RunOutcome v = run_corral({"audit", "verify", "--log", data + "/audit.log"});
  if (v.exit_code != 0) findings_.add(F::kAuditChain, "after the last stop: " + v.out + v.err);
  for (const auto& id : ids) {
    for (const auto& r : host_residue_of(id)) findings_.add(F::kResidue, "at the end: " + r);
  }
  for (const auto& link : links) {
    if (link_left(link)) findings_.add(F::kResidue, "at the end: host link " + link);
  }
  // Inits, zygotes and the factory carry the daemon's command line (forks
  // of it, never exec'd): none may outlive the sandboxes.
  for (const auto& p : host_processes_matching(data))
    findings_.add(F::kResidue, "at the end, still running: " + p);
  // The data dir keeps the daemon's own files only: nothing named after a
  // sandbox, and no secret tmpfs.
  std::string entries = host_sh("cd '" + data + "' && find . -name 'sb-*' | head -20");
  if (!entries.empty()) findings_.add(F::kResidue, "in the data dir: " + entries);
  auto store = StateStore::open(data + "/state.db");
  if (!store) {
    findings_.add(F::kResidue, "the store does not open: " + store.error().message);
  } else if (auto ok = store->integrity_check(); !ok || *ok != "ok") {
    findings_.add(F::kResidue, "the store's integrity check fails");
  }
}

namespace {

TEST(DaemonCrash, Kill9LoopUnderMixedWorkloadOnBothListenersLosesAndLeavesNothing) {
  const int cycles = env_int("CORRAL_KILL9_CYCLES", default_cycles());
  const unsigned seed = static_cast<unsigned>(env_int(
      "CORRAL_KILL9_SEED",
      static_cast<int>(std::chrono::steady_clock::now().time_since_epoch().count() & 0x7fffffff)));
  std::printf("kill -9 loop: %d cycles, CORRAL_KILL9_SEED=%u\n", cycles, seed);
  // The test internet for the network sandboxes; without it (no root, no
  // `ip`), the loop runs without them and says so.
  std::unique_ptr<NetWorld> world;
  std::string config;
  if (geteuid() == 0) {
    auto made = NetWorld::create();
    if (made) {
      world = std::move(*made);
      config = "serve:\n  network:\n    dns_servers: [\"" + world->dns_endpoint() + "\"]\n";
    } else if (must_work()) {
      FAIL() << "no test network (CORRAL_MUST_WORK=1): " << made.error().message;
    } else {
      std::printf("no network sandboxes in this run: %s\n", made.error().message.c_str());
    }
  }
  TestDaemon d({}, config);
  ASSERT_TRUE(d.ready()) << d.output();
  Kill9Loop loop(d, world.get(), seed);
  loop.warm_up();
  if (::testing::Test::HasFatalFailure()) return;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    loop.run_cycle(cycle);
    if (::testing::Test::HasFatalFailure()) break;
  }
  if (!::testing::Test::HasFatalFailure()) loop.finish();
  loop.findings().report();
  std::printf(
      "kill -9 loop: %d acknowledged operations in %d cycles; %d retries of an unanswered "
      "create got the sandbox reconcile had destroyed\n",
      loop.acknowledged(), cycles, loop.dead_replays());
  EXPECT_GT(loop.acknowledged(), cycles * 4) << "the loop did too little work to mean anything";
}

}  // namespace
}  // namespace corral::testing::kill9
