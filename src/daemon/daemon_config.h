// DaemonConfig: the settings of `corral serve`, from its YAML file
// (`corral serve --config FILE`, reference in docs/config.md, "Daemon
// configuration"). The file has two top-level maps, both optional:
//
//   serve:                       # the daemon itself
//     listen: "127.0.0.1:7070"
//     socket: /run/corral/corral.sock
//     data_dir: /var/lib/corral
//     api_keys: {sha256: [...], files: [/etc/corral/api-keys]}
//     capacity: {max_sandboxes: 256, memory: auto, disk: auto}
//     connections: {tcp: auto, unix: auto, unauthenticated: auto, ...}
//     request_timeout: 30s
//     max_exec_output: 64Mi
//     max_upload: auto
//     object_store: {kind: local}  # or s3 (daemon/object_store_config_yaml.h)
//   sandbox:                     # the defaults of every sandbox, exactly the
//     memory_limit: 2Gi          # map `corral run --config` reads
//
// Errors name the file, the line and the key ("serve.yaml:3:
// serve.capacity.memory: invalid size ..."), like the sandbox config's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/paths.h"
#include "base/result.h"
#include "daemon/image_settings.h"
#include "daemon/diagnostics_config.h"
#include "daemon/e2b_settings.h"
#include "daemon/node_settings.h"
#include "daemon/pool_settings.h"
#include "daemon/task_config.h"
#include "egress/gateway.h"
#include "netns/network_policy.h"
#include "objstore/object_store_config.h"
#include "secrets/secret_store.h"
#include "snapshot/snapshot_store.h"
#include "spec/sandbox_spec.h"

namespace corral {

struct DaemonConfig {
  // TCP listener (serve.listen). IPv6 hosts without brackets ("::1").
  std::string listen_host = "127.0.0.1";
  std::uint16_t listen_port = 7070;  // 0: any free port (tests)
  // Unix socket listener (serve.socket), root-only.
  std::string socket_path = run_dir() + "/corral.sock";
  // State store, images (serve.data_dir).
  std::string data_dir = ::corral::data_dir();
  // The state store (serve.state): an SQLite file's absolute path, or a
  // postgres:// URL that the nodes of a fleet share (issue 18). Empty:
  // <data_dir>/state.db. serve.state_url_file names a file holding it
  // instead (a Kubernetes Secret), read at start.
  std::string state;
  std::string state_url_file;
  // Who this daemon is among the nodes sharing the store (serve.node).
  daemon::NodeSettings node;
  // The key the nodes of a fleet sign forwarded calls with
  // (serve.cluster_key_file; daemon/cluster_key.h). Empty: no forwarding.
  std::string cluster_key_file;
  // API keys (serve.api_keys): hex SHA-256 digests and key files (relative
  // paths resolved against the config file's directory). See ApiKeys.
  std::vector<std::string> api_key_sha256;
  std::vector<std::string> api_key_files;
  // Keys of other namespaces than "default" (serve.api_keys.namespaces;
  // docs/api.md "Namespaces"): a caller's namespace is its key's.
  struct ApiKeyNamespace {
    std::string name;
    std::vector<std::string> sha256;
    std::vector<std::string> files;
  };
  std::vector<ApiKeyNamespace> api_key_namespaces;

  // Named persistent volumes (serve.volumes; docs/volumes.md).
  struct Volumes {
    std::uint64_t max_quota = 16 * kGiB;   // one volume
    std::uint64_t max_total = 256 * kGiB;  // the sum of all volumes' quotas
  } volumes;

  // Capacity (serve.capacity): creates beyond these are refused, never
  // oversold (C2). Sums over live sandboxes of their limits.
  std::uint32_t max_sandboxes = 256;
  // 0 = computed by resolve_capacity(): 75% of MemTotal.
  std::uint64_t max_memory_bytes = 0;
  // 0 = computed by resolve_capacity(): 50% of MemTotal. Writable layers are
  // tmpfs, so their bytes live in RAM (or swap), not on the data disk.
  std::uint64_t max_disk_bytes = 0;

  // HTTP connections held at once (serve.connections; issue 14): 0 is
  // "auto", sized from the file descriptors the daemon may open
  // (daemon/fd_budget.h). http::ConnectionLimits says what each bounds.
  struct Connections {
    std::uint32_t tcp = 0;
    std::uint32_t unix_socket = 0;
    std::uint32_t unauthenticated = 0;
    std::uint32_t unauthenticated_per_peer = 0;
    // Each request head of a connection that has not authenticated.
    std::int64_t unauthenticated_head_timeout_ms = 10'000;
  } connections;

  // One HTTP request, headers to response (serve.request_timeout; N7).
  std::int64_t request_timeout_ms = 30'000;
  // Each stage of a create (serve.setup_timeout): the factory's answer,
  // then init and the zygote reporting ready.
  std::int64_t setup_timeout_ms = 30'000;
  // serve.self_check (T3, daemon/self_check.h): every create is checked
  // before it is answered; off only to measure its cost or rule it out.
  bool self_check = true;
  // A sandbox's lifetime when a create does not give one: the default
  // spec's max_lifetime (sandbox.max_lifetime), copied here by the loader.
  std::int64_t default_max_lifetime_ms = 600'000;
  // stdout + stderr kept per exec (serve.max_exec_output).
  std::uint64_t max_exec_output_bytes = 64 * kMiB;
  // One uploaded file (serve.max_upload); 0 = the sandbox's disk limit.
  std::uint64_t max_upload_bytes = 0;

  // Host directories that a create's `mounts` may take sources from
  // (serve.mount_roots). Empty: no host mounts through the API.
  std::vector<std::string> mount_roots;

  // What an acknowledged write to the state store and audit log survives
  // (serve.durability): "process" (default: a kill -9 of the daemon; a power
  // cut may lose the last ~100 ms, as it loses every sandbox anyway) or
  // "power-loss" (fsync before every acknowledgment; slower creates).
  bool power_loss_durable = false;

  // Diagnostics of sandboxes (serve.diagnostics; T1, docs/operations.md):
  // how long a destroyed sandbox's are kept, how many refusals in full.
  daemon::DiagnosticsConfig diagnostics;

  // The audit log (serve.audit; docs/audit.md): its rotation and
  // retention, the budget of records each sandbox may make the host
  // write, and the journal queue between the daemon and the log.
  struct Audit {
    std::uint64_t max_file_size = 64 * kMiB;  // 0: never rotate
    std::uint32_t keep_files = 16;            // rotated files kept; 0: all
    std::int64_t max_age_ms = 0;              // rotated files older are deleted; 0: no limit
    double sandbox_rate = 20;                 // KiB of budgeted records per second per sandbox
    std::uint32_t sandbox_burst = 200;        // KiB at once (AuditBudget)
    std::int64_t summary_interval_ms = 10'000;
    std::uint32_t queue = 8192;  // journal writes waiting at most
  } audit;

  // The network engine (serve.network; ADR 0005, docs/network.md).
  struct Network {
    std::string subnet = "10.211.0.0/16";   // per-sandbox /30 slots
    std::string interface_prefix = "crl";   // host ends: crl<slot>
    std::string firewall_table = "corral";  // nftables table inet <name>
    std::uint16_t proxy_port = 15001;
    std::uint16_t dns_port = 15053;
    // Upstream DNS servers ("IP", "IP:PORT"); empty: the host's resolv.conf.
    std::vector<std::string> dns_servers;
    // Templates added to (or, by name and version, replacing) the shipped
    // code-exec, data-query and scraping.
    std::vector<net::NetworkTemplate> templates;
    // Internal services sandboxes may be granted (N5): reached only as
    // http://gateway.corral.internal/<name>/..., with a per-process token.
    std::vector<net::GatewayService> gateway;
    // PEM CAs trusted for upstreams besides the system's: TLS interception
    // and https gateway services verify the servers they connect to.
    std::string upstream_ca_file;
  } network;

  // Where the secrets sandboxes may be given live (serve.secrets; issue 5,
  // docs/secrets.md). Nothing set: an empty store (a spec that asks for a
  // secret is refused).
  secrets::SecretStoreConfig secrets;

  // The task service (serve.tasks; docs/tasks.md).
  daemon::TaskConfig tasks;

  // Warm pools (serve.pools; C4, docs/adr/0015-warm-pools.md).
  std::vector<daemon::PoolSettings> pools;
  // Where task inputs, outputs and failure snapshots are kept
  // (serve.object_store; D5, docs/config.md): a local directory (default
  // <data_dir>/objects) or an S3 bucket. Opened at start.
  objstore::ObjectStoreConfig object_store;

  // The E2B-compatible facade (serve.e2b; issue 17, docs/e2b.md).
  daemon::E2bSettings e2b;

  // Failure snapshots (serve.snapshots; D4, docs/snapshots.md): retention,
  // quota, the archiver's bounds. scratch_dir is set to data_dir at start.
  snapshot::SnapshotConfig snapshots;
  // Images by digest (serve.images; docs/images.md "Pulling by digest").
  daemon::ImageSettings images;

  // The base of every create (sandbox:); a request's fields go on top.
  SandboxSpec default_spec;
};

// The configuration with no file: the values above.
DaemonConfig default_daemon_config();

// A commented YAML file that loads to default_daemon_config() (apart from
// the computed capacity): what `corral serve --print-config` may show.
std::string_view default_daemon_config_yaml();

// Reads `path` (a regular file of at most 1 MiB) and applies it on top of
// default_daemon_config(). Capacity stays 0 where the file says nothing or
// "auto"; call resolve_capacity() next.
Result<DaemonConfig> load_daemon_config(const std::string& path);
// The same for YAML text; `source_name` names it in messages and is the
// base of relative key file paths.
Result<DaemonConfig> parse_daemon_config(std::string_view yaml_text, std::string_view source_name);

// Fills max_memory_bytes / max_disk_bytes that are 0 from /proc/meminfo's
// MemTotal, and checks that one sandbox of default_spec fits the capacity.
Status resolve_capacity(DaemonConfig& config);
// The same with a given MemTotal in bytes (tests, or a cgroup's limit).
Status resolve_capacity(DaemonConfig& config, std::uint64_t mem_total_bytes);
// MemTotal of a /proc/meminfo text, in bytes.
Result<std::uint64_t> parse_meminfo_total(std::string_view meminfo);

// "127.0.0.1:7070", "[::1]:7070", ":7070" (= 127.0.0.1:7070). The host must
// be an IP address; the port 0..65535 (0 = any free port).
Result<std::pair<std::string, std::uint16_t>> parse_listen(std::string_view text);

// One line for the start-up log: listeners, key count, capacity, limits,
// the default sandbox. No secrets (key files are named, keys are counted).
std::string describe(const DaemonConfig& config);

}  // namespace corral
