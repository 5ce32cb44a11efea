// The kill -9 loop's ledger (daemon_kill9_loop_test.cc): what the daemon
// ACKNOWLEDGED (a 2xx answer read whole) to the loop's clients, what is in
// doubt (a request that got no answer because the daemon died under it),
// and the findings, grouped by kind so that a failing run says which class
// broke, how often, and in which cycle first.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace corral::testing {

// A background process whose start was acknowledged.
struct ProcFact {
  int exit_code = 0;             // what its command exits with
  std::string token;             // what it prints on stdout
  std::optional<int> seen_exit;  // an acknowledged wait showed it ended with this code
};

// A sandbox some create answered with its id.
struct SandboxFact {
  std::string tag;  // the create's hostname: which request made it
  int worker = 0;
  bool network = false;
  std::string link;                          // host end (crl<n>) of a network sandbox
  std::map<std::string, std::string> files;  // acknowledged uploads: path -> sha256
  std::set<std::string> removed_files;       // acknowledged file deletes
  std::map<std::string, std::string> reads;  // acknowledged downloads: path -> sha256
  std::map<std::string, ProcFact> procs;     // acknowledged starts, by process id
  bool deleted = false;                      // a DELETE answered `cleaned`
  bool delete_unanswered = false;            // a DELETE got no answer
  bool delete_failed = false;                // a DELETE answered `failed`
  bool delete_retried = false;               // it was answered only when sent again after a kill
  bool residue_checked = false;              // its host residue was looked for once it was cleaned
};

// One create request (and its retries), by the tag in its hostname.
struct CreateFact {
  std::string key;  // Idempotency-Key, "" for a create without one
  std::string body;
  int worker = 0;
  bool tcp = false;
  std::set<std::string> answered_ids;  // every id a 2xx answer named
  bool unanswered = false;             // a request of it got no answer: in doubt
};

// Everything the workers and the checks share; one lock.
struct Ledger {
  std::mutex mu;
  std::map<std::string, SandboxFact> sandboxes;  // by id
  std::map<std::string, CreateFact> creates;     // by tag
  std::vector<std::vector<std::string>> owned;   // each worker's live sandboxes
};

// Failures by kind. Kinds that belong to another part of issue 14 name it,
// so a red run points at the right fix.
class Findings {
 public:
  void add(const std::string& kind, const std::string& what) {
    std::lock_guard lock(mu_);
    auto& list = by_kind_[kind];
    if (list.size() < 6) list.push_back(what);
    ++count_[kind];
  }
  // One gtest failure per kind: how many, and the first examples.
  void report() const {
    std::lock_guard lock(mu_);
    for (const auto& [kind, examples] : by_kind_) {
      std::string text;
      for (const auto& e : examples) text += "\n  - " + e;
      ADD_FAILURE() << kind << ": " << count_.at(kind) << " time(s); first:" << text;
    }
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::vector<std::string>> by_kind_;
  std::map<std::string, int> count_;
};

namespace finding {
inline constexpr const char* kLost = "acknowledged work lost or changed after a kill";
inline constexpr const char* kDuplicate = "an Idempotency-Key made a second sandbox";
inline constexpr const char* kUnknown = "a sandbox that no create asked for";
inline constexpr const char* kAnswer = "a wrong answer from a running daemon";
inline constexpr const char* kAuditChain = "the audit chain does not verify after a kill";
inline constexpr const char* kAuditMissing =
    "an acknowledged operation has no audit record after a kill (docs/audit.md: none is lost)";
inline constexpr const char* kResidue = "left on the host";
// Other helpers' areas of issue 14 (kept as distinct kinds).
inline constexpr const char* kTornTail =
    "[issue 14 #7, audit] a kill tore the audit log's last line and the daemon does not start "
    "(torn-tail repair missing)";
inline constexpr const char* kProcForgotten =
    "[issue 14 #5, procs] an acknowledged background process is unknown (404) or unlisted "
    "after a restart";
inline constexpr const char* kDestroyRecord =
    "[issue 14 #7, teardown] a DELETE caught by a kill left the sandbox `cleaned` with neither "
    "a sandbox.destroy nor a sandbox.reconcile_destroy record";
inline constexpr const char* kDestroyFailed =
    "[issue 14 #6, teardown] a DELETE answered `failed` with residue";
}  // namespace finding

}  // namespace corral::testing
