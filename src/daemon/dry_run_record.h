// Dry-run (X2, docs/dry-run.md, ADR 0016): what a dry-run sandbox tried
// besides writing, read from the same events the audit log gets: every
// DNS query (answered locally), every connection and HTTP request (method,
// host, path) and TLS SNI the egress proxy answered itself, every gateway
// call it checked and did not forward, and every secret read (names only,
// never a value). With the writes (jail/dry_run_writes.h) it makes the
// report: JSON for the API and `corral run --json`, one line for people.
//
// Used by `corral run` (one record) and the daemon (DryRunBook: one per
// live dry-run sandbox, fed by the network and secret audit sinks).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "jail/dry_run_writes.h"

namespace corral::daemon {

class DryRunRecord {
 public:
  // Takes a "network.dns", "network.connection", "network.gateway" or
  // "secret.read" event (network_service.cc, secret_service.cc); others
  // are ignored. Thread-safe.
  void observe(const nlohmann::json& event);

  // {"dns": [...], "connections": [...], "gateway": [...], "truncated"}
  nlohmann::json network_json() const;
  // {"reads": [{"secret", "path", "mode", "count"}]}: names, never values.
  nlohmann::json secrets_json() const;
  // "would connect to pypi.org:443 twice", "would read secret openai", ...
  std::vector<std::string> summary_parts() const;

 private:
  struct Dns {
    std::string name, qtype, outcome, answer;
    std::uint64_t count = 0;
  };
  struct Request {
    std::string method, host, path;
  };
  struct Connection {
    std::string host;  // the name (Host, SNI, CONNECT or DNS), else the address
    std::uint16_t port = 0;
    std::string protocol;  // "http", "tls", "tcp" or "" (refused before it was known)
    std::string sni;
    bool real_run_allows = false;  // what the policy would have done
    std::string reason;            // the last one
    std::uint64_t count = 0;
    std::vector<Request> requests;  // http: each one, bounded
  };
  struct Gateway {
    std::string service, method, path, reason;
    bool real_run_allows = false;
    std::uint64_t count = 0;
  };
  struct SecretRead {
    std::string secret, path, mode;
    std::uint64_t count = 0;
  };
  mutable std::mutex mu_;
  std::vector<Dns> dns_;
  std::vector<Connection> connections_;
  std::vector<Gateway> gateway_;
  std::vector<SecretRead> secrets_;
  bool truncated_ = false;  // more distinct entries than kMaxEntries of a kind
};

// The report: {"summary", "writes", "network", "secrets"} (docs/dry-run.md).
nlohmann::json dry_run_report(const DryRunWrites& writes, const DryRunRecord& record);
nlohmann::json dry_run_writes_json(const DryRunWrites& writes);
// The writes' summary, then the network's and the secrets'.
std::string summarize_dry_run(const DryRunWrites& writes, const DryRunRecord& record);

// What the daemon keeps of one live dry-run sandbox to report on request:
// its record, and what its writes are compared with.
struct DryRunSandbox {
  DryRunRecord record;
  UniqueFd root_lower;               // the base layer's root dir, only read
  UniqueFd base_in_use;              // host base: keeps its skeleton from being collected
  std::vector<UniqueFd> sources;     // each writable mount's host source (O_PATH)
  std::vector<DryMountArea> mounts;  // source_fd: one of `sources`
  WriteBaseline baseline;            // the layer's upper dir when it was handed out
};

// The daemon's dry-run sandboxes, by id, while they live.
class DryRunBook {
 public:
  void add(const std::string& sandbox, std::shared_ptr<DryRunSandbox> state);
  void remove(const std::string& sandbox);
  // Null when the sandbox is not a dry run (or is gone).
  std::shared_ptr<DryRunSandbox> find(const std::string& sandbox) const;
  // Routes an audit event to its sandbox's record, if it has one.
  void observe(const nlohmann::json& event);

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<DryRunSandbox>> records_;
};

}  // namespace corral::daemon
