// SandboxSpec: everything a sandbox is made from, after parsing and before
// planning. Defaults follow the design source (REQUIREMENTS.md C1, N1, N7).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace corral {

inline constexpr std::uint64_t kKiB = 1024;
inline constexpr std::uint64_t kMiB = 1024 * kKiB;
inline constexpr std::uint64_t kGiB = 1024 * kMiB;

struct Limits {
  double cpus = 2.0;                        // cpu_limit: CPU quota in cores
  std::uint64_t memory_bytes = 2 * kGiB;    // memory_limit: RAM + swap
  std::uint64_t disk_bytes = 2 * kGiB;      // disk_limit: writable layer size
  std::uint64_t inodes = 0;                 // inodes_limit; 0 = derived from disk
  std::uint32_t pids = 256;                 // pids_limit: fork-bomb guard
  std::chrono::milliseconds timeout{300'000};       // timeout: one task (N7)
  std::chrono::milliseconds max_lifetime{600'000};  // max_lifetime: one instance (N7)
};

// Inode limit actually applied: explicit, else one inode per 8 KiB of disk
// (at least 4096), like a small ext4.
std::uint64_t effective_inodes(const Limits& limits);

// Letters, digits, '-' and '.', labels not starting or ending with '-',
// at most 64 bytes (HOST_NAME_MAX). Shared by the CLI and the config file.
bool is_valid_hostname(std::string_view name);

// A host directory or file made visible inside (F4 persistent mounts, F6).
struct MountSpec {
  std::string source;     // host path, confined (see jail/mount_source.h)
  std::string target;     // absolute path inside the sandbox
  bool writable = false;  // read-only unless asked
};

// A named persistent volume of the caller's namespace made visible inside
// (D2, F4; docs/volumes.md): only `subpath` of it (relative, confined to the
// volume, "" or "." for all of it), read-only unless asked. The daemon
// resolves it; `corral run` has no volumes.
struct VolumeMountSpec {
  std::string volume;     // [a-z0-9][a-z0-9._-]{0,62}
  std::string subpath;    // normalized: no "..", no leading '/', "" = the volume's root
  std::string target;     // absolute path inside the sandbox
  bool writable = false;  // read-only unless asked
};

// Network policy (ADR 0005, N1-N4): a mode, optionally a named template,
// and rules in the grammar of net/network_policy.h. `allow_domains` is the
// design source's own form: each domain is an http+tls rule.
struct NetworkSpec {
  std::string mode = "none";  // "none" | "allowlist" | "open"
  std::vector<std::string> allow_domains;
  std::vector<std::string> dns_servers;
  std::string template_name;  // "code-exec" or "code-exec@1"; empty: none
  std::vector<std::string> allow;
  std::vector<std::string> deny;
  std::vector<std::string> remove;  // template rules to drop
  std::int64_t timeout_ms = 0;      // per connection (connect and idle); 0: 10 s
  double rate_per_second = -1;      // new connections; -1: the default (20/s, burst 40)
  double rate_burst = -1;
  std::vector<std::string> gateway;  // internal services granted (N5)
};

// A secret given to the sandbox (issue 5, S1-S7; docs/secrets.md). Plain
// fields as the API carries them; secrets/secret_spec.h checks them
// against the store and the rules (tiers, modes, one secret per service).
// Never holds a value: only names.
struct SecretHostSpec {
  std::string host;  // exact, or "*.example.com"
  std::uint16_t port = 443;
  bool intercept = false;  // TLS to it is intercepted so the token can be swapped
};

struct SecretSpec {
  std::string name;             // how the sandbox and the audit call it
  std::string key;              // the store's key; empty: `name`
  std::string mode;             // "env" | "file" | "broker"; empty: the tier's
  std::string tier;             // "low" | "medium" | "high"; empty: medium
  std::string env_var;          // variable (env, broker); empty: NAME upper-cased
  std::string path;             // file name under /run/secrets (file); empty: name
  std::vector<SecretHostSpec> hosts;  // broker: where the token may be swapped
  std::int64_t ttl_ms = 0;      // broker token lifetime; 0: the default
};

struct SandboxSpec {
  Limits limits;
  std::vector<std::string> argv;  // command to run
  std::vector<std::pair<std::string, std::string>> env;  // added to the default env
  std::string workdir = "/workspace";
  std::vector<MountSpec> mounts;
  std::vector<VolumeMountSpec> volumes;  // daemon only (docs/volumes.md)
  std::string image;  // empty: the embedded host base
  bool root = false;  // uid 0 inside with the documented small capability set
  std::string hostname = "sandbox";
  NetworkSpec network;
  std::vector<SecretSpec> secrets;
  // How long the task is expected to take (S4: a broker token lives 1.5x
  // this); 0: not declared (tokens live as long as the sandbox).
  std::int64_t expected_duration_ms = 0;
  // Dry-run (X2, docs/dry-run.md): writable mounts become copy-on-write
  // overlays and the network is answered locally; nothing leaves.
  bool dry_run = false;
  // Labels the client attaches (the E2B facade's "metadata"): never
  // interpreted, returned with the sandbox, matched by list filters.
  std::map<std::string, std::string> metadata;
};

}  // namespace corral
