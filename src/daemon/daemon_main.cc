#include "daemon/daemon_main.h"

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/error_output.h"
#include "base/paths.h"
#include "daemon/api_keys.h"
#include "daemon/api_router.h"
#include "daemon/audit_budget.h"
#include "daemon/cluster_key.h"
#include "daemon/daemon_config.h"
#include "daemon/e2b_facade.h"
#include "daemon/fd_budget.h"
#include "daemon/log_redactor.h"
#include "daemon/metered_object_store.h"
#include "daemon/metrics.h"
#include "daemon/node_claim_keeper.h"
#include "daemon/node_config_yaml.h"
#include "daemon/node_forwarder.h"
#include "daemon/node_service.h"
#include "daemon/node_setup.h"
#include "daemon/object_store_open.h"
#include "daemon/pool_service.h"
#include "daemon/sandbox_placer.h"
#include "daemon/sandbox_service.h"
#include "daemon/secret_service.h"
#include "daemon/snapshot_service.h"
#include "daemon/task_service.h"
#include "egress/cert_authority.h"
#include "egress/egress_proxy.h"
#include "http/http_server.h"
#include "jail/fs_util.h"
#include "runtime/sandbox_factory.h"
#include "store/audit_log.h"
#include "store/state_store.h"
#include "volume/volume_store.h"

namespace corral::daemon {

namespace {

int fail(const std::string& message, const std::string& hint = {}) {
  print_error(message, hint);
  return 1;
}

// The config file (or the defaults), the flags on top, and the capacity
// resolved against the host.
Result<DaemonConfig> effective_config(const ServeFlags& flags) {
  auto config_or = flags.config_path.empty() ? Result<DaemonConfig>(default_daemon_config())
                                             : load_daemon_config(flags.config_path);
  if (!config_or) return tl::unexpected(config_or.error());
  DaemonConfig config = std::move(*config_or);
  if (!flags.listen.empty()) {
    auto hp = parse_listen(flags.listen);
    if (!hp) return tl::unexpected(hp.error());
    config.listen_host = hp->first;
    config.listen_port = hp->second;
  }
  if (!flags.socket_path.empty()) config.socket_path = flags.socket_path;
  if (!flags.data_dir.empty()) config.data_dir = flags.data_dir;
  for (const auto& f : flags.api_key_files) config.api_key_files.push_back(f);
  if (!flags.node_id.empty()) {
    config.node.id = default_node_id(flags.node_id);
    if (!valid_node_id(flags.node_id.substr(0, flags.node_id.find('.'))) ||
        config.node.id != flags.node_id.substr(0, flags.node_id.find('.')))
      return make_error(ErrorCode::kInvalidArgument,
                        "--node-id \"" + flags.node_id.substr(0, 80) +
                            "\" is not a node id: 1-63 of a-z, 0-9 and '-' (a host name is "
                            "taken up to its first '.')");
  }
  if (!flags.node_address.empty()) {
    auto address = parse_node_address(flags.node_address);
    if (!address)
      return make_error(ErrorCode::kInvalidArgument, "--node-address: " + address.error().message,
                        address.error().hint);
    config.node.address = *address;
  }
  if (auto st = resolve_capacity(config); !st) return tl::unexpected(st.error());
  return config;
}

// With no key configured, the daemon's own key file (made on the first
// start) is the one accepted; returns what the start-up line says of it.
Result<std::string> default_api_key(DaemonConfig& config) {
  std::string key_note;
  if (config.api_key_sha256.empty() && config.api_key_files.empty()) {
    const std::string key_file = config.data_dir + "/api-key";
    if (access(key_file.c_str(), F_OK) != 0) {
      auto key = ApiKeys::generate_into(key_file);
      if (!key) return tl::unexpected(key.error());
      key_note = "; new API key in " + key_file;
    } else {
      key_note = "; API key in " + key_file;
    }
    config.api_key_files.push_back(key_file);
  }
  return key_note;
}

ServiceLimits service_limits(const DaemonConfig& config) {
  ServiceLimits limits;
  limits.max_sandboxes = config.max_sandboxes;
  limits.max_memory_bytes = config.max_memory_bytes;
  limits.max_disk_bytes = config.max_disk_bytes;
  limits.mount_roots = config.mount_roots;
  limits.images = config.images;
  limits.setup_timeout = std::chrono::milliseconds(config.setup_timeout_ms);
  limits.self_check = config.self_check;
  limits.journal_queue = config.audit.queue;
  return limits;
}

// The HTTP connection limits from the descriptors left once everything
// the daemon opens at start is open (daemon/fd_budget.h).
Result<FdBudget> connection_budget(const DaemonConfig& config, const NofileLimit& nofile,
                                   const NetworkService& network) {
  auto open_now = count_open_fds();
  if (!open_now) return tl::unexpected(open_now.error());
  FdBudgetInput in;
  in.limit = nofile.soft;
  in.open_now = *open_now;
  in.max_sandboxes = config.max_sandboxes;
  in.proxy_connections = network.unavailable() ? 0 : net::EgressProxyOptions{}.max_connections;
  in.configured = config.connections;
  return plan_fd_budget(in);
}

// The server's connection counts on /metrics (docs/api.md).
void connection_metrics(MetricsRegistry& metrics, const http::Server& server) {
  auto stat = [&server](auto field) {
    return [&server, field] { return static_cast<double>(server.connection_stats().*field); };
  };
  const char* open_help = "HTTP connections open now, by listener and authentication";
  metrics.gauge_fn("corral_http_connections", open_help, stat(&http::ConnectionStats::unix_open),
                   {{"listener", "unix"}, {"state", "authenticated"}});
  metrics.gauge_fn("corral_http_connections", open_help,
                   stat(&http::ConnectionStats::tcp_authenticated),
                   {{"listener", "tcp"}, {"state", "authenticated"}});
  metrics.gauge_fn("corral_http_connections", open_help,
                   stat(&http::ConnectionStats::tcp_unauthenticated),
                   {{"listener", "tcp"}, {"state", "unauthenticated"}});
  const char* refused_help = "HTTP connections answered 503 overloaded at accept";
  metrics.counter_fn("corral_http_connections_refused_total", refused_help,
                     stat(&http::ConnectionStats::refused), {{"reason", "limit"}});
  metrics.counter_fn("corral_http_connections_refused_total", refused_help,
                     stat(&http::ConnectionStats::refused_no_descriptor),
                     {{"reason", "descriptors"}});
  metrics.counter_fn("corral_http_connections_evicted_total",
                     "Unauthenticated connections waiting for a head, closed to make room",
                     stat(&http::ConnectionStats::evicted));
}

}  // namespace

int serve(const ServeFlags& flags) {
  if (geteuid() != 0)
    return fail("corral serve must run as root", "it creates namespaces, cgroups and mounts");

  auto config_or = effective_config(flags);
  if (!config_or) return fail(config_or.error().message, config_or.error().hint);
  DaemonConfig config = std::move(*config_or);

  // Before anything opens descriptors or forks (the factory inherits it).
  auto nofile = raise_nofile_limit();
  if (!nofile) return fail("raising the descriptor limit: " + nofile.error().message);

  // Everything below reads data_dir() (images, host base): one source of truth.
  setenv("CORRAL_DATA_DIR", config.data_dir.c_str(), 1);
  if (auto st = mkdir_p(config.data_dir, 0700); !st) return fail(st.error().message);
  if (auto st = mkdir_p(run_dir(), 0700); !st) return fail(st.error().message);

  // Signals are taken by one thread (sigwait); block them before any other
  // thread exists, and before the factory is forked.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // The factory first: it must be forked while the daemon is one thread.
  // It plans networks with the same pool and templates as the engine.
  MetricsRegistry metrics;
  NetworkService network(config.network, config.data_dir + "/gateway.key", metrics);
  // The default network every create starts from must be one the engine
  // takes: a bad rule in the config stops the daemon here, not each create.
  if (auto p = network.resolve(config.default_spec.network); !p)
    return fail("config: sandbox network: " + p.error().message, p.error().hint);
  auto factory = SandboxFactory::start(network.factory_options());
  if (!factory) return fail(factory.error().message);

  // The state store: this data dir's SQLite file, or a PostgreSQL database
  // the nodes of a fleet share (serve.state; docs/fleet.md).
  auto state = state_location(config);
  if (!state) return fail(state.error().message, state.error().hint);
  auto store =
      StateStore::open(*state, config.power_loss_durable ? StateStore::Durability::kPowerLoss
                                                         : StateStore::Durability::kProcessCrash);
  if (!store) return fail(store.error().message, store.error().hint);
  if (auto st = store->set_node(node_id(config)); !st)
    return fail("serve.node.id: " + st.error().message, st.error().hint);
  // Another daemon live (or starting) under this node id is refused before
  // reconcile, which would take its sandboxes for this one's; the id is
  // claimed until this one registers (docs/fleet.md).
  auto instance = node_instance(config);
  if (!instance) return fail(instance.error().message, instance.error().hint);
  if (auto st = store->claim_node(node_registration(config, 0, *instance)); !st)
    return fail(st.error().message, st.error().hint);
  // Renewed until this node registers, however long its reconcile takes.
  NodeClaimKeeper claim_keeper(*store, node_registration(config, 0, *instance),
                               std::chrono::milliseconds(config.node.heartbeat_interval_ms));
  auto audit = AuditLog::open(config.data_dir + "/audit.log");
  if (!audit) return fail(audit.error().message, audit.error().hint);
  if (!audit->repair_note().empty())  // a torn last line left by a crash (docs/operations.md)
    fprintf(stderr, "corral serve: warning: audit log: %s\n", audit->repair_note().c_str());
  audit->set_sync_each_append(config.power_loss_durable);
  audit->set_rotation(AuditRotation{config.audit.max_file_size, config.audit.keep_files,
                                    std::chrono::duration_cast<std::chrono::seconds>(
                                        std::chrono::milliseconds(config.audit.max_age_ms))});

  auto key_note = default_api_key(config);
  if (!key_note) return fail(key_note.error().message, key_note.error().hint);
  auto keys = ApiKeys::load(config.api_key_sha256, config.api_key_files);
  if (!keys) return fail(keys.error().message, keys.error().hint);
  for (const auto& ns : config.api_key_namespaces) {
    if (auto st = keys->add_namespace(ns.name, ns.sha256, ns.files); !st)
      return fail(st.error().message, st.error().hint);
  }

  auto cgroups = CgroupManager::detect();
  if (!cgroups) return fail(cgroups.error().message, cgroups.error().hint);

  // Secrets (issue 5): a store that cannot be read stops the daemon here;
  // its proxy and gateway swap broker tokens through the service's broker.
  SecretService secrets(config.secrets, config.data_dir, metrics);
  if (auto st = secrets.start(); !st) return fail(st.error().message, st.error().hint);
  // From here on the daemon's own output and every audit record pass the
  // store's redactor (S3): a value that reaches a message is replaced. The
  // audit log's also finds values in any letter case and every broker token.
  auto log_redactor = LogRedactor::start(secrets.daemon_redaction());
  if (!log_redactor) return fail(log_redactor.error().message);
  audit->set_string_filter([redactor = secrets.audit_redactor()](std::string_view text) {
    return redactor->redact(text);
  });
  if (auto why = secrets.unavailable_reason())
    fprintf(stderr, "corral serve: warning: file-mode secrets are refused: %s\n", why->c_str());
  // The object store (D5): a bad setting, or credentials missing from the
  // secret store, stop the daemon here; an unreachable S3 service does not.
  auto objects = open_object_store(config, secrets.store());
  if (!objects) return fail(objects.error().message, objects.error().hint);
  // Every use of it counts its failures (corral_object_store_errors_total).
  *objects = std::make_unique<MeteredObjectStore>(std::move(*objects), metrics);
  // TLS interception's CA (broker hosts marked intercept): its key stays in
  // <data_dir>/ca; sandboxes that need it get the certificate only.
  std::shared_ptr<net::CertAuthority> ca;
  if (auto made = net::CertAuthority::load_or_create(config.data_dir + "/ca"); !made) {
    fprintf(stderr, "corral serve: warning: no TLS interception: %s\n",
            made.error().message.c_str());
  } else if (auto st = secrets.set_trust((*made)->ca_pem()); !st) {
    fprintf(stderr, "corral serve: warning: no TLS interception: %s\n", st.error().message.c_str());
  } else {
    ca = std::move(*made);
  }
  network.set_secrets(secrets.broker(), ca);
  // The network engine (ADR 0005). If it cannot start, sandboxes without
  // network are still served; networked creates are refused with why.
  network.start();
  if (auto why = network.unavailable())
    fprintf(stderr, "corral serve: warning: no network for sandboxes: %s\n", why->c_str());
  SandboxService service(service_limits(config), config.default_spec, *store, *audit, **factory,
                         **cgroups, metrics, &network, &secrets);
  // What sandboxes make the host write passes their budget (docs/audit.md).
  AuditBudget budget(
      AuditBudgetConfig{config.audit.sandbox_rate, config.audit.sandbox_burst,
                        std::chrono::milliseconds(config.audit.summary_interval_ms)},
      [&service](nlohmann::json event, bool droppable) {
        return service.audit_async(std::move(event), droppable);
      },
      &metrics);
  budget.start();
  // Diagnostics (T1) count refusals per sandbox before the budget may drop
  // a record.
  service.set_diagnostics(config.diagnostics);
  secrets.set_audit([&budget, &service](nlohmann::json event) {
    service.observe_for_diagnostics(event);
    budget.submit(std::move(event));
  });
  network.set_audit([&budget, &service](nlohmann::json event) {
    service.observe_for_diagnostics(event);
    budget.submit(std::move(event));
  });
  metrics.gauge_fn("corral_sandboxes_live", "Sandboxes alive now",
                   [&service] { return static_cast<double>(service.live_count()); });
  for (const auto& share : {std::pair{"sandboxes", &CapacityLedger::Totals::sandboxes},
                            std::pair{"memory_bytes", &CapacityLedger::Totals::memory_bytes},
                            std::pair{"disk_bytes", &CapacityLedger::Totals::disk_bytes}}) {
    metrics.gauge_fn("corral_capacity_reserved",
                     "Share of serve.capacity held by sandboxes and creates",
                     [&service, field = share.second] {
                       return static_cast<double>(service.capacity_reserved().*field);
                     },
                     {{"resource", share.first}});
  }
  // Volumes (docs/volumes.md): mounted again before the API serves.
  volume::VolumeStore volumes(config.data_dir,
                              {config.volumes.max_quota, config.volumes.max_total});
  const std::string volume_note = volumes.start();
  service.set_volumes(&volumes);
  std::string reconciled = service.start() + "; " + volume_note;
  // Warm pools (C4, ADR 0015): before tasks, whose creates claim too.
  PoolService pools(service, metrics);
  for (const PoolSettings& p : config.pools) {
    if (auto added = pools.add(p, true); !added)
      return fail("serve.pools: " + added.error().message, added.error().hint);
  }
  service.set_claimer(
      [&pools](const api::CreateSandboxRequest& request, const std::optional<std::string>& key,
               const std::function<bool()>& key_is_fresh,
               const std::string& ns) { return pools.claim(request, key, key_is_fresh, ns); });
  reconciled += "; " + pools.start();
  snapshot::SnapshotConfig snapshot_config = config.snapshots;
  snapshot_config.scratch_dir = config.data_dir;
  SnapshotService snapshots(service, **objects, snapshot_config, metrics);
  // An object store that cannot be read now does not stop the daemon: the
  // sweeper reads the snapshots again on its next round.
  if (auto started = snapshots.start(); !started)
    fprintf(stderr, "corral serve: warning: %s\n", started.error().to_string().c_str());
  // Tasks (docs/tasks.md): their inputs, outputs and logs in the object
  // store, their failure snapshots through the snapshot service.
  TaskService tasks(config.tasks, service, *store, objects->get(), metrics);
  tasks.set_snapshots(&snapshots);
  tasks.set_volumes(&volumes);
  tasks.set_pools(&pools);
  reconciled += "; " + tasks.start();

  ApiContext context{service, metrics, ApiLimits{}, objects->get()};
  context.volumes = &volumes;
  context.snapshots = &snapshots;
  context.limits.max_exec_output = config.max_exec_output_bytes;
  context.limits.max_upload = config.max_upload_bytes;
  context.tasks = &tasks;
  context.pools = &pools;
  // Calls on sandboxes of other nodes go there, signed (docs/fleet.md).
  std::optional<ClusterKey> cluster_key;
  if (!config.cluster_key_file.empty()) {
    auto loaded = ClusterKey::load(config.cluster_key_file);
    if (!loaded) return fail(loaded.error().message, loaded.error().hint);
    cluster_key = std::move(*loaded);
  }
  const bool fleet = store->shared() && cluster_key.has_value();
  const std::string key_id = cluster_key ? cluster_key->id() : "";
  // In a fleet the E2B access tokens are the fleet's: any node checks the
  // token of a sandbox another node made (docs/fleet.md "E2B").
  std::optional<std::string> fleet_token_key;
  if (fleet) fleet_token_key = cluster_key->derive("e2b-access-token");
  NodeForwarder forwarder(*store, std::move(cluster_key), metrics);
  context.forwarder = &forwarder;
  // Creates are placed across the fleet's nodes (docs/fleet.md "Placement").
  SandboxPlacer placer(*store, forwarder, metrics, fleet);
  context.placer = &placer;
  ApiRouter router(context, *keys);
  // The E2B-compatible facade (docs/e2b.md): its envd access tokens are
  // derived from a key of this data dir (or of the fleet), so they survive
  // a restart.
  std::optional<E2bFacade> e2b;
  if (config.e2b.enabled) {
    auto token_key = fleet_token_key
                         ? Result<std::string>(*fleet_token_key)
                         : E2bFacade::load_or_make_key(config.data_dir + "/e2b-token.key");
    if (!token_key) return fail("serve.e2b: " + token_key.error().message, token_key.error().hint);
    e2b.emplace(context, *keys, config.e2b, std::move(*token_key));
    if (auto st = e2b->check_templates(); !st) return fail(st.error().message, st.error().hint);
  }
  auto fds = connection_budget(config, *nofile, network);
  if (!fds) return fail(fds.error().message, fds.error().hint);
  if (!fds->warning.empty()) fprintf(stderr, "corral serve: warning: %s\n", fds->warning.c_str());
  http::ServerOptions server_options;
  server_options.io_timeout = std::chrono::milliseconds(config.request_timeout_ms);
  server_options.connections = fds->limits;
  // A TCP connection holds an unauthenticated slot until a request of it
  // presents a key the router accepts (issue 14).
  server_options.authenticate = [&router, &e2b](const http::Peer& peer,
                                                const http::RequestHead& head) {
    if (e2b && e2b->owns(head)) return e2b->authenticated(peer, head);
    return router.authenticated(peer, head);
  };
  server_options.warn = [](const std::string& message) {
    fprintf(stderr, "corral serve: warning: %s\n", message.c_str());
  };
  http::Server server(
      [&router, &e2b](const http::Peer& peer, const http::RequestHead& head, http::BodyReader& body,
                      http::ResponseWriter& out) {
        if (e2b && e2b->owns(head)) return e2b->handle(peer, head, body, out);
        router.handle(peer, head, body, out);
      },
      server_options);
  connection_metrics(metrics, server);
  std::string where;
  if (!flags.no_tcp) {
    if (auto st = server.listen_tcp(config.listen_host, config.listen_port); !st)
      return fail(st.error().message, "pick another port with --listen HOST:PORT");
    where = "http://" + config.listen_host + ":" + std::to_string(server.bound_port());
  }
  if (auto st = server.listen_unix(config.socket_path, 0600); !st)
    return fail(st.error().message, st.error().hint);
  where += (where.empty() ? "" : " and ") + std::string("unix:") + config.socket_path;

  // This daemon as a node of the fleet sharing the store (a fleet of one on
  // its own SQLite file): registered once reconcile has settled what it owns.
  NodeService node(config.node, *store, metrics,
                   {[&service] { return service.release_lost(); },
                    [&service](nlohmann::json event) { service.audit_async(std::move(event)); }});
  NodeRegistration registration =
      node_registration(config, flags.no_tcp ? 0 : server.bound_port(), *instance);
  registration.key_id = key_id;
  claim_keeper.stop();  // the registration checks the claim is still ours
  if (auto st = node.start(registration); !st)
    return fail("registering this node: " + st.error().message, st.error().hint);
  context.node = &node;  // /readyz; before server.run() starts any handler
  reconciled += "; node " + store->node() + " (incarnation " +
                std::to_string(node.registered().incarnation) + ")";

  std::thread signals([&server, stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    server.stop();
  });
  printf("corral serve: listening on %s%s; data in %s (%s); %s\n", where.c_str(), key_note->c_str(),
         config.data_dir.c_str(), reconciled.c_str(), describe(*nofile, *fds).c_str());
  if (e2b && !flags.no_tcp) {
    const bool v6 = config.listen_host.find(':') != std::string::npos;
    const std::string base = "http://" + std::string(v6 ? "[" : "") + config.listen_host +
                             (v6 ? "]" : "") + ":" + std::to_string(server.bound_port()) +
                             config.e2b.prefix;
    // The key's E2B spelling, as a command that reads it from the key file
    // (the key itself is never printed).
    const std::string key = config.api_key_files.empty()
                                ? std::string("<a key of serve.api_keys, crl_ written e2b_>")
                                : "e2b_$(sed 's/^crl_//' " + config.api_key_files.front() + ")";
    printf(
        "corral serve: E2B SDK: export E2B_API_URL=%s E2B_SANDBOX_URL=%s/envd E2B_API_KEY=%s "
        "(docs/e2b.md)\n",
        base.c_str(), base.c_str(), key.c_str());
  }
  fflush(stdout);
  server.run();
  // Drained (nothing left running here): the node leaves, and no sweep
  // will mark it lost. Otherwise it stays registered, so that it is marked
  // lost unless it comes back within serve.node.lost_after.
  node.stop(service.live_count() == 0);
  pools.stop();
  tasks.stop();
  service.stop();
  volumes.stop();
  // The proxy's threads may still call the broker and report connections
  // until `network` goes; `service` goes first.
  secrets.set_audit({});
  network.set_audit({});
  budget.stop();  // the last summaries
  // Wake the signal thread if the server stopped for another reason.
  pthread_kill(signals.native_handle(), SIGTERM);
  signals.join();
  fprintf(
      stderr,
      "corral serve: stopped; %zu sandboxes keep running and are re-attached on the next start\n",
      service.live_count());
  return 0;
}

}  // namespace corral::daemon
