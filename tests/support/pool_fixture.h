// What the warm pool tests (tests/integration/daemon_pools*_test.cc)
// share: a daemon config with one pool, waiting for its sandboxes, and
// telling pooled and claimed sandboxes apart by their audit records.
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <thread>

#include "support/daemon_harness.h"

namespace corral::testing {

inline std::string describe(const HttpReply& r) {
  return "HTTP " + std::to_string(r.status) + " " + r.body.substr(0, 600);
}

// serve.pools with one pool of small plain sandboxes; `extra_serve` holds
// more serve: keys, indented by two spaces.
inline std::string pool_config(const std::string& name, int min, int max,
                               const std::string& extra_serve = "") {
  return "serve:\n" + extra_serve + "  pools:\n    - name: " + name + "\n      min: " +
         std::to_string(min) + "\n      max: " + std::to_string(max) +
         "\n      sandbox:\n        limits: {memory: 64Mi, disk: 16Mi}\n";
}

// The pool's status once it has `ready` sandboxes (or after 90 s: the
// caller's assertion then shows what it had).
inline nlohmann::json wait_ready(TestDaemon& d, const std::string& pool, std::uint32_t ready) {
  nlohmann::json last;
  for (int i = 0; i < 900; ++i) {
    HttpReply r = d.request("GET", "/v1/pools/" + pool);
    last = r.json();
    if (r.status == 200 && last.value("ready", 0u) >= ready) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return last;
}

// Ids of the sandboxes the daemon made for pools (their create records
// carry the pool's idempotency key).
inline std::set<std::string> pooled_ids(const TestDaemon& d) {
  std::set<std::string> ids;
  for (const nlohmann::json& rec : d.audit_records("sandbox.create")) {
    const nlohmann::json key = rec.value("idempotency_key", nlohmann::json());
    if (key.is_string() && key.get<std::string>().rfind("corral-pool:", 0) == 0)
      ids.insert(rec.value("sandbox", ""));
  }
  return ids;
}

// The sandboxes handed out by a claim (audited sandbox.claim).
inline std::set<std::string> claimed_ids(const TestDaemon& d) {
  std::set<std::string> ids;
  for (const nlohmann::json& rec : d.audit_records("sandbox.claim"))
    ids.insert(rec.value("sandbox", ""));
  return ids;
}

}  // namespace corral::testing
