// The default daemon config as a commented YAML file: it loads to
// default_daemon_config() (tests/unit/daemon_config_test.cc checks that).
#include "daemon/daemon_config.h"

namespace corral {
namespace {

constexpr std::string_view kDefaultYaml =
    R"(# corral serve --config FILE (docs/config.md, "Daemon configuration").
# Every key is optional; these are the defaults.
serve:
  listen: "127.0.0.1:7070"      # HTTP API; "[::1]:7070" for IPv6, ":7070" = 127.0.0.1
  # socket: /run/corral/corral.sock   (default: $CORRAL_RUN_DIR/corral.sock)
  # data_dir: /var/lib/corral         (default: $CORRAL_DATA_DIR)
  api_keys:
    sha256: []                  # hex SHA-256 digests of accepted keys
    files: []                   # files with one key per line (chmod 600)
  capacity:
    max_sandboxes: 256
    memory: auto                # 75% of MemTotal
    disk: auto                  # 50% of MemTotal (writable layers are tmpfs, in RAM)
  connections:                  # HTTP connections at once (docs/api.md, Limits)
    tcp: auto                   # 1024, fewer when file descriptors are short
    unix: auto                  # 64, the unix socket's own budget
    unauthenticated: auto       # 128 TCP connections with no valid key yet (1/8 of tcp)
    unauthenticated_per_peer: auto    # 32 of them from one IP address
    unauthenticated_head_timeout: 10s # each head of such a connection must arrive within
  request_timeout: 30s
  setup_timeout: 30s            # each stage of a create (the factory, then init + zygote)
  self_check: on                # check each sandbox before it is handed out (or off)
  max_exec_output: 64Mi
  max_upload: auto              # the sandbox's disk limit
  mount_roots: []               # host dirs API mounts may come from (none: no mounts)
  durability: process           # or power-loss: fsync before every acknowledgment
  audit:                        # the audit log (docs/audit.md)
    max_file_size: 64Mi         # rotate past this; 0: never
    keep_files: 16              # rotated files kept; 0: all
    # max_age: 2160h            rotated files older than this are deleted too
    sandbox_rate: 20            # KiB of records per second a sandbox's own actions may add
    sandbox_burst: 200          # ... and KiB at once after a quiet while
    summary_interval: 10s       # one audit.suppressed record per sandbox per interval
    queue: 8192                 # journal writes waiting at most
  network:                      # the network engine (docs/network.md)
    subnet: 10.211.0.0/16       # one /30 per networked sandbox
    interface_prefix: crl       # host ends of the veth pairs: crl<slot>
    firewall_table: corral      # nftables table inet corral
    proxy_port: 15001           # on each sandbox's host end
    dns_port: 15053
    dns_servers: []             # upstream DNS; none: the host's /etc/resolv.conf
    templates: []               # extra rule sets (the shipped code-exec, data-query, scraping stay)
    gateway: []                 # internal services: {name, url, methods, paths, rate}
    # upstream_ca_file: /etc/corral/upstream-ca.pem   extra CAs for intercepted and https upstreams
  secrets:                      # where sandbox secrets come from (docs/secrets.md)
    # file: /etc/corral/secrets          KEY=value lines, mode 0600
    env: []                     # names of the daemon's own environment variables
    # env_prefix: CORRAL_SECRET_         every variable with this prefix (key: the rest, lower case)
    # encrypted_file: /etc/corral/secrets.enc   from corral secrets encrypt
    # key_file: /etc/corral/secrets.key         from corral secrets keygen
  tasks:                        # the task service (docs/tasks.md)
    workers: 4                  # tasks run at once; the rest wait queued in the state store
    default_timeout: 10m        # a task's command timeout when it gives none
    max_timeout: 24h
    retention: 168h             # finished tasks (and their stored outputs) kept this long
    max_body: 64Mi              # POST /v1/tasks with its inline inputs
    max_output_size: 1Gi        # an output's max_size when it gives none
    max_log: 16Mi               # stdout and stderr each, kept after the end
    initialize_timeout: 5m      # pushing the inputs
    collect_timeout: 10m        # hashing and storing the outputs
    prune_interval: 10m
  object_store:                 # task inputs, outputs, snapshots (docs/config.md, object_store)
    kind: local                 # or s3
    # path: /var/lib/corral/objects      (default: <data_dir>/objects, mode 0700)
    # s3: endpoint: https://s3.example.com, bucket: corral, prefix: prod/, region: us-east-1,
    #     access_key_secret: s3_access_key, secret_key_secret: s3_secret_key (secret-store names)
    timeout: 30s                # connect, and any stall of a transfer (s3)
  snapshots:                    # failure snapshots of tasks (docs/snapshots.md)
    retention: 168h             # kept 7 days, then deleted by the sweeper
    quota: 10Gi                 # all snapshots together; the oldest are evicted first
    sweep_interval: 1m
    max_files: 100000           # entries archived per snapshot (more: partial)
    max_depth: 64               # directory levels
    max_bytes: 1Gi              # file content read per snapshot
  pools: []                     # warm pools (docs/config.md, pools), e.g.
  #  - {name: py, min: 4, max: 8, idle_limit: 10m, sandbox: {image: python}}
  e2b:                          # the E2B-compatible facade (docs/e2b.md)
    enabled: true
    prefix: /e2b                # E2B_API_URL=http://HOST:PORT/e2b, E2B_SANDBOX_URL=.../e2b/envd
    network: open               # a create without network options: open, none or a template
    templates: {}               # E2B template -> image or pool:<name>, e.g. {python: pool:py}
sandbox:                        # defaults of every sandbox, as for corral run --config
  cpu_limit: "2"
  memory_limit: "2Gi"
  disk_limit: "2Gi"
  pids_limit: 256
  timeout: 300
  max_lifetime: 600
  network:
    default: deny
)";

}  // namespace

std::string_view default_daemon_config_yaml() { return kDefaultYaml; }

}  // namespace corral
