// The kill -9 loop of issue 14 (daemon_kill9_loop_test.cc): the loop's
// class, shared by its two files: the workload the clients run
// (kill9_workload.cc) and the cycle with its checks (the test file).
#pragma once

#include <atomic>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "integration/kill9_ledger.h"
#include "support/daemon_harness.h"
#include "support/net_world.h"
#include "support/sandbox_harness.h"

namespace corral::testing::kill9 {

inline constexpr int kWorkers = 4;            // even: unix socket, odd: TCP
inline constexpr std::size_t kPerWorker = 3;  // live sandboxes a worker keeps at most

std::string tail_of(const std::string& text, std::size_t n = 3000);
std::string brief(const HttpReply& r);  // status and the start of the body
std::string random_bytes(std::mt19937& rng, std::size_t n);

// The loop: the workload (kill9_workload.cc) and the cycle with its checks
// (daemon_kill9_loop_test.cc).
class Kill9Loop {
 public:
  Kill9Loop(TestDaemon& d, NetWorld* world, unsigned seed) : d_(d), world_(world), seed_(seed) {
    ledger_.owned.resize(kWorkers);
  }
  void warm_up();
  void run_cycle(int cycle);
  void finish();
  const Findings& findings() const { return findings_; }
  int acknowledged() const { return acked_.load(); }
  int dead_replays() const { return dead_replays_; }

 private:
  // The workload (worker threads).
  void work(int w, const std::atomic<bool>& stop);
  void create(int w, std::mt19937& rng);
  HttpReply send_create(const CreateFact& f, bool tcp);
  void note_create_answer(const std::string& tag, const HttpReply& r, bool network, int w);
  void exec(int w, const std::string& id);
  void start_process(int w, const std::string& id, std::mt19937& rng);
  void wait_process(int w, const std::string& id, std::mt19937& rng);
  void upload(int w, const std::string& id, std::mt19937& rng);
  void download(int w, const std::string& id, std::mt19937& rng);
  void remove_file(int w, const std::string& id, std::mt19937& rng);
  void replay_create(int w, const std::string& id);
  void destroy(int w, const std::string& id);
  bool tcp_of(int w) const { return w % 2 == 1; }
  HttpReply call(int w, const std::string& method, const std::string& target,
                 const std::string& body = {}, http::Headers headers = {}) {
    return d_.request(method, target, body, tcp_of(w), true, std::move(headers));
  }
  void unexpected(int w, const std::string& what, const HttpReply& r) {
    findings_.add(finding::kAnswer, "cycle " + std::to_string(cycle_) + " worker " +
                                        std::to_string(w) + ": " + what + " -> " + brief(r));
  }
  void disown(int w, const std::string& id);

  // After each kill (no daemon running), and after each restart.
  bool check_audit_after_kill();
  void read_new_audit_records();
  void check_audit_records();
  void restart(bool torn);
  int settle_in_doubt();  // returns how many creates were in doubt
  void check_ledger();
  void check_sandbox(const std::string& id, SandboxFact& f, const nlohmann::json& info);
  void check_processes(const std::string& id, SandboxFact& f);
  void check_cleaned(const std::string& id, SandboxFact& f, const nlohmann::json& info);
  void check_network_traffic();
  std::string at(const std::string& id) const {
    return "cycle " + std::to_string(cycle_) + ", " + id;
  }

  TestDaemon& d_;
  NetWorld* world_;
  const unsigned seed_;
  int cycle_ = 0;
  Ledger ledger_;
  Findings findings_;
  std::atomic<int> next_n_{0};
  std::atomic<int> acked_{0};
  int dead_replays_ = 0;
  std::mt19937 main_rng_{seed_};
  // The audit log as read so far (it is appended only; rotation is off
  // at this size).
  std::uint64_t audit_offset_ = 0;
  std::set<std::string> audit_created_, audit_destroyed_, audit_started_, audit_reconciled_;
  std::set<std::string> audit_writes_, audit_reads_;  // "id path sha256"
  std::set<std::string> audit_reported_;
  std::map<std::string, int> audit_exits_;        // exec.exit records: process -> exit code
  std::map<std::string, nlohmann::json> listed_;  // the last GET ?all=true, by id
};

}  // namespace corral::testing::kill9
