// `corral run [options] -- CMD [ARGS...]`: parse flags and the config file
// into a SandboxSpec, resolve the base layer, run, report.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_text.h"
#include "base/paths.h"
#include "cli/cli_output.h"
#include "cli/commands.h"
#include "cli/flag_parser.h"
#include "daemon/dry_run_record.h"
#include "image/image_store.h"
#include "jail/sandbox_planner.h"
#include "jail/sandbox_runner.h"
#include "egress/dns_message.h"
#include "egress/gateway_token.h"
#include "egress/network_engine.h"
#include "spec/config_file.h"
#include "spec/mount_arg.h"
#include "spec/units.h"

namespace corral::cli {

namespace {

constexpr const char* kRunUsage =
    "usage: corral run [options] -- CMD [ARGS...]\n"
    "\n"
    "Runs CMD in a new sandbox: its own root file system (read-only base + a\n"
    "size-limited writable layer), no network but loopback, no capabilities,\n"
    "seccomp and Landlock, inside cgroup limits. Everything is removed after.\n"
    "\n"
    "options:\n"
    "  --memory SIZE        memory+swap limit (default 2Gi)\n"
    "  --cpus N             CPU quota in cores, fractions allowed (default 2)\n"
    "  --pids N             process limit (default 256)\n"
    "  --disk SIZE          writable layer size (default 2Gi)\n"
    "  --inodes N           writable layer inode limit (default: disk / 8Ki)\n"
    "  --timeout DURATION   kill the whole sandbox after this long (default 300s)\n"
    "  --env K=V            add an environment variable (repeatable)\n"
    "  --workdir DIR        working directory inside (default /workspace)\n"
    "  --mount SRC:DST[:ro|:rw]  bind a host path, read-only unless :rw (repeatable)\n"
    "  --mount-root DIR     allow mount sources below DIR (default: current dir)\n"
    "  --image NAME         base image from `corral image` (default: host base)\n"
    "  --root               run as uid 0 inside, with a small capability set\n"
    "  --hostname NAME      (default sandbox)\n"
    "  --network MODE       none (loopback only, the default), allowlist or open\n"
    "  --allow RULE         allow [http|tls|tcp://]host[:ports] (repeatable; implies allowlist)\n"
    "  --deny RULE          deny the same form; deny wins (repeatable)\n"
    "  --network-template NAME  start from a rule set: code-exec, data-query, scraping\n"
    "  --dns IP[:PORT]      upstream DNS for this sandbox (default: the host's resolvers)\n"
    "  --network-timeout DURATION  connect and idle timeout per connection (default 10s)\n"
    "  --network-rate RATE  new connections: 20/s, 600/min, \"5/s,burst=10\", unlimited\n"
    "                       (default 20/s, burst 40)\n"
    "  --gateway-service NAME=URL[;methods=GET,POST][;paths=/v1/,/health][;rate=10/s]\n"
    "                       declare an internal service for this run (repeatable)\n"
    "  --gateway NAME       grant it: http://gateway.corral.internal/NAME/ with\n"
    "                       $CORRAL_GATEWAY_TOKEN (repeatable)\n"
    "  --gateway-secret-file FILE  sign gateway tokens with this 0600 key (made if missing)\n"
    "  --config FILE        YAML with cpu_limit, memory_limit, disk_limit, ...\n"
    "  --tty / --no-tty     force or refuse a pty (default: when on a terminal)\n"
    "  --dry-run            run, but let nothing leave the sandbox: writable mounts\n"
    "                       become copy-on-write overlays, DNS and connections are\n"
    "                       answered locally; then say what it would have done\n"
    "                       (docs/dry-run.md)\n"
    "  --json               print the JSON report on stderr at the end\n"
    "  --report FILE        write the JSON report to FILE\n"
    "\n"
    "exit status: the command's; 128+N if killed by signal N; 124 timeout;\n"
    "137 out of memory; 125 sandbox setup failed; 126/127 command not executable/found.\n";

int usage_error(const std::string& message) {
  fprintf(stderr, "corral run: %s\n(see corral run --help)\n", message.c_str());
  return 125;
}

int setup_error(const Error& e) {
  print_error(e);
  return 125;
}

// How corral run reports a refused flag: a value its parser refused as
// "corral run: FLAG: MESSAGE", anything else with a pointer to --help.
int report_flag_error(const FlagError& e) {
  switch (e.kind) {
    case FlagError::Kind::kMissingValue:
      fprintf(stderr, "corral run: %s: %s\n", e.flag.c_str(), e.message.c_str());
      return 125;
    case FlagError::Kind::kBadValue:
      fprintf(stderr, "corral run: %s\n", e.message.c_str());
      return 125;
    case FlagError::Kind::kUnknown:
    case FlagError::Kind::kMisuse:
      break;
  }
  return usage_error(e.message);
}

nlohmann::json to_json(const RunResult& r, const daemon::DryRunRecord& dry) {
  nlohmann::json j;
  j["sandbox_id"] = r.sandbox_id;
  j["exit_code"] = r.exit_code;
  j["signal"] = r.signal != 0 ? nlohmann::json(std::string("SIG") + sigabbrev_np(r.signal))
                              : nlohmann::json(nullptr);
  j["timed_out"] = r.timed_out;
  j["limit_hit"] = r.limit_hit.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.limit_hit);
  j["oom_killed"] = r.oom_killed;
  j["oom_kills"] = r.oom_kills;
  j["pids_max_hits"] = r.pids_max_hits;
  j["wall_ms"] = r.wall.count();
  j["cpu_ms"] = r.cpu.count();
  j["memory_peak_bytes"] = r.memory_peak_bytes;
  j["disk_used_bytes"] = r.disk_used_bytes;
  j["residue_bytes"] = r.residue_bytes;
  j["residue"] = r.residue;
  if (r.failure) {
    j["error"] = {{"stage", std::string(stage_name(r.failure->stage))},
                  {"errno", r.failure->err != 0 ? std::string(errno_name(r.failure->err)) : ""},
                  {"message", r.failure->message},
                  {"hint", r.failure->hint}};
  } else {
    j["error"] = nullptr;
  }
  if (r.dry_run) j["dry_run"] = daemon::dry_run_report(*r.dry_run, dry);
  return j;
}

// What the flags set besides the spec.
struct RunFlags {
  std::string config;
  std::string report;
  bool json = false;
  int tty = -1;  // -1 auto
  std::vector<std::string> mount_roots;
  bool workdir_set = false;
  std::vector<net::GatewayService> gateway_services;
  std::string gateway_secret_file;
  bool network_none = false;  // --network none given on the command line
  bool dry_run = false;
};

// The config file first, so flags override it wherever they appear.
std::optional<int> apply_config_flag(const std::vector<std::string_view>& args, SandboxSpec& spec,
                                     RunFlags& flags) {
  for (size_t i = 0; i < args.size() && args[i] != "--"; ++i) {
    if (args[i] == "--config") {
      if (i + 1 >= args.size()) return usage_error("--config needs a FILE");
      flags.config = std::string(args[i + 1]);
    }
  }
  if (!flags.config.empty()) {
    if (auto st = apply_config_file(flags.config, spec); !st) return setup_error(st.error());
  }
  return std::nullopt;
}

// Reads the flags before "--" into `spec` and `flags`, the command after it
// into spec.argv. The table below and kRunUsage describe the same flags
// (FlagParser checks it).
std::optional<int> parse_run_flags(const std::vector<std::string_view>& args, SandboxSpec& spec,
                                   RunFlags& flags) {
  FlagParser parser(kRunUsage, report_flag_error);
  parser.stop_at_double_dash();
  // A value that `parse` reads into what `apply` stores.
  auto parsed = [&parser](std::string_view name, auto parse, auto apply) {
    parser.option(name, [name, parse, apply](const std::string& v) -> Refusal {
      auto r = parse(v);
      if (!r) return refused(name, r.error());
      apply(*r);
      return std::nullopt;
    });
  };
  // A value stored as given.
  auto text = [&parser](std::string_view name, auto apply) {
    parser.option(name, [apply](const std::string& v) -> Refusal {
      apply(v);
      return std::nullopt;
    });
  };
  parsed("--memory", parse_size, [&](auto r) { spec.limits.memory_bytes = r; });
  parsed("--cpus", parse_cpus, [&](auto r) { spec.limits.cpus = r; });
  parsed("--pids", parse_count, [&](auto r) { spec.limits.pids = r; });
  parsed("--disk", parse_size, [&](auto r) { spec.limits.disk_bytes = r; });
  parsed("--inodes", parse_count64, [&](auto r) { spec.limits.inodes = r; });
  parsed("--timeout", parse_duration, [&](auto r) { spec.limits.timeout = r; });
  parsed("--env", parse_env_arg, [&](const auto& r) { spec.env.push_back(r); });
  text("--workdir", [&](const std::string& v) {
    spec.workdir = v;
    flags.workdir_set = true;
  });
  parsed("--mount", parse_mount_arg, [&](const auto& r) { spec.mounts.push_back(r); });
  text("--mount-root", [&](const std::string& v) { flags.mount_roots.emplace_back(v); });
  text("--image", [&](const std::string& v) { spec.image = v; });
  parser.flag({"--root"}, [&] { spec.root = true; });
  text("--hostname", [&](const std::string& v) { spec.hostname = v; });
  text("--network", [&](const std::string& v) {
    spec.network.mode = v;
    flags.network_none = v == "none";
  });
  parser.option("--network-timeout", [&](const std::string& v) -> Refusal {
    auto r = parse_duration(v);
    if (!r) return refused("--network-timeout", r.error());
    if (r->count() < 1 || r->count() > 3600 * 1000)
      return "--network-timeout " + v + ": give a duration from 1ms to 1h (10s, 500ms)";
    spec.network.timeout_ms = r->count();
    return std::nullopt;
  });
  parsed("--network-rate", net::parse_gateway_rate, [&](const auto& r) {
    spec.network.rate_per_second = r.per_second;
    spec.network.rate_burst = r.burst;
  });
  text("--allow", [&](const std::string& v) { spec.network.allow.emplace_back(v); });
  text("--deny", [&](const std::string& v) { spec.network.deny.emplace_back(v); });
  text("--network-template", [&](const std::string& v) { spec.network.template_name = v; });
  text("--dns", [&](const std::string& v) { spec.network.dns_servers.emplace_back(v); });
  parsed("--gateway-service", net::parse_gateway_service_flag,
         [&](const auto& r) { flags.gateway_services.push_back(r); });
  text("--gateway", [&](const std::string& v) { spec.network.gateway.emplace_back(v); });
  text("--gateway-secret-file", [&](const std::string& v) { flags.gateway_secret_file = v; });
  text("--config", [](const std::string&) {});  // applied before the other flags
  parser.flag({"--json"}, flags.json);
  parser.flag({"--dry-run"}, flags.dry_run);
  text("--report", [&](const std::string& v) { flags.report = v; });
  parser.flag({"--tty"}, [&] { flags.tty = 1; });
  parser.flag({"--no-tty"}, [&] { flags.tty = 0; });
  if (auto status = parser.parse(args)) return status;
  if (const auto& command = parser.after_double_dash()) {
    for (std::string_view a : *command) spec.argv.emplace_back(a);
  }
  return std::nullopt;
}

// What the flags say together, checked before anything is set up.
std::optional<int> check_run_flags(const SandboxSpec& spec, const RunFlags& flags) {
  if (spec.argv.empty()) return usage_error("no command given: put it after --");
  if (!is_valid_hostname(spec.hostname))
    return usage_error("--hostname \"" + spec.hostname +
                       "\" is not a host name: use letters, digits, '-' and '.' (at most 64)");
  if (spec.network.mode != "none" && spec.network.mode != "allowlist" &&
      spec.network.mode != "open" && !spec.network.mode.empty())
    return usage_error("--network \"" + spec.network.mode +
                       "\" is not a network mode: use none, allowlist or open");
  for (const auto& g : spec.network.gateway) {
    bool declared = false;
    for (const auto& s : flags.gateway_services) declared = declared || s.name == g;
    if (!declared)
      return usage_error("--gateway " + g +
                         ": no such service: declare it with --gateway-service " + g +
                         "=http://host:port/base");
  }
  return std::nullopt;
}

// --image: the image's root file system as the base, held with a shared
// lock (`image_lock`) while the sandbox runs.
std::optional<int> use_image(SandboxSpec& spec, const RunFlags& flags, ImageStore& images,
                             RunOptions& options, UniqueFd& image_lock) {
  auto info = images.get(spec.image);
  if (!info) return setup_error(info.error());
  auto lock = images.lock_shared(spec.image);
  if (!lock) return setup_error(lock.error());
  image_lock = std::move(*lock);
  options.base.rootfs = info->rootfs;
  options.base.env = info->env;
  options.base.passwd_source = info->rootfs + "/etc";
  if (!flags.workdir_set && !info->workdir.empty()) spec.workdir = info->workdir;
  return std::nullopt;
}

// The network mode the rules imply, and the gateway's key and token.
std::optional<int> prepare_network(SandboxSpec& spec, const RunFlags& flags, RunOptions& options,
                                   std::string& gateway_secret) {
  const bool grants = !spec.network.allow.empty() || !spec.network.template_name.empty() ||
                      !spec.network.gateway.empty();
  if (flags.network_none && grants)
    return usage_error(
        "--network none contradicts --allow, --network-template and --gateway: leave out "
        "--network (the rules then mean allowlist) or the rules");
  if (spec.network.mode == "none" && grants)
    spec.network.mode = "";  // rules or a template without --network: what they say
  // Gateway (N5): the token names the sandbox, so the id is chosen here;
  // it lives as long as the run may (its timeout, else an hour).
  if (!flags.gateway_secret_file.empty()) {
    auto secret = net::load_or_create_gateway_secret(flags.gateway_secret_file);
    if (!secret) return setup_error(secret.error());
    gateway_secret = std::move(*secret);
  } else if (!spec.network.gateway.empty()) {
    auto secret = net::random_gateway_secret();
    if (!secret) return setup_error(secret.error());
    gateway_secret = std::move(*secret);
  }
  if (!spec.network.gateway.empty()) {
    options.sandbox_id = new_sandbox_id();
    const auto life = spec.limits.timeout.count() > 0
                          ? std::chrono::duration_cast<std::chrono::seconds>(spec.limits.timeout)
                          : std::chrono::seconds(3600);
    const std::int64_t expires = static_cast<std::int64_t>(std::time(nullptr)) + life.count() + 1;
    bool given = false;
    for (const auto& [k, v] : spec.env) given = given || k == "CORRAL_GATEWAY_TOKEN";
    if (!given)
      spec.env.emplace_back("CORRAL_GATEWAY_TOKEN",
                            net::mint_gateway_token(gateway_secret, options.sandbox_id, expires));
  }
  return std::nullopt;
}

// A dry run's network events (X2), in the form the daemon's audit log
// gives them (daemon/network_service.cc), for the report.
nlohmann::json dry_run_event(const net::EgressEvent& e) {
  nlohmann::json ev{{"type", "network.connection"}, {"name", e.name},       {"port", e.port},
                    {"protocol", e.protocol},        {"reason", e.reason},   {"sni", e.sni},
                    {"host", e.host},                {"method", e.method},   {"path", e.path},
                    {"connect_host", e.connect_host}, {"original_address", e.original_address},
                    {"address", e.address}};
  if (!e.allowed) ev["refusal"] = std::string(net::egress_refusal_name(e.refusal));
  return ev;
}
nlohmann::json dry_run_event(const net::DnsLogEntry& e) {
  return {{"type", "network.dns"},
          {"name", e.name},
          {"qtype", net::dns::type_name(e.qtype)},
          {"outcome", std::string(net::dns_outcome_name(e.outcome))},
          {"addresses", e.addresses}};
}
nlohmann::json dry_run_event(const net::GatewayEvent& e) {
  return {{"type", "network.gateway"}, {"service", e.service}, {"method", e.method},
          {"path", e.path},            {"reason", e.reason}};
}

// What every refusal of the sandbox's network prints on stderr; a dry
// run's events go to `dry` instead (its summary says what was tried).
net::NetworkAuditSinks refusal_printers(daemon::DryRunRecord* dry) {
  net::NetworkAuditSinks sinks;
  if (dry != nullptr) {
    sinks.egress = [dry](const net::EgressEvent& e) { dry->observe(dry_run_event(e)); };
    sinks.dns = [dry](const net::DnsLogEntry& e) { dry->observe(dry_run_event(e)); };
    sinks.gateway = [dry](const net::GatewayEvent& e) { dry->observe(dry_run_event(e)); };
    return sinks;
  }
  sinks.egress = [](const net::EgressEvent& e) {
    if (e.allowed) return;
    fprintf(stderr, "corral: network: refused %s%s%s:%u: %s\n",
            e.protocol.empty() ? "" : (e.protocol + " to ").c_str(),
            e.name.empty() ? e.original_address.c_str() : e.name.c_str(),
            e.name.empty() && e.original_address.empty() ? e.address.c_str() : "",
            static_cast<unsigned>(e.port), e.reason.c_str());
  };
  sinks.dns = [](const net::DnsLogEntry& e) {
    if (e.outcome != net::DnsOutcome::kDenied && e.outcome != net::DnsOutcome::kRefused &&
        e.outcome != net::DnsOutcome::kTypeRefused)
      return;
    fprintf(stderr, "corral: network: refused DNS %s %s: %s\n",
            net::dns::type_name(e.qtype).c_str(), e.name.c_str(), e.reason.c_str());
  };
  sinks.gateway = [](const net::GatewayEvent& e) {
    if (e.allowed) return;
    fprintf(stderr, "corral: network: gateway refused %s %s (%d %s): %s\n", e.method.c_str(),
            e.path.c_str(), e.status, std::string(net::gateway_refusal_name(e.refusal)).c_str(),
            e.reason.c_str());
  };
  return sinks;
}

// The notices, the error and the residue on stderr; the JSON report where
// --report and --json ask for it. Returns the exit status.
int report_result(const RunResult& result, const RunFlags& flags,
                  const daemon::DryRunRecord& dry) {
  for (const std::string& n : result.notices) fprintf(stderr, "corral: %s\n", n.c_str());
  if (result.failure) print_error(result.failure->message, result.failure->hint);
  for (const std::string& r : result.residue)
    fprintf(stderr, "corral: warning: left behind after cleanup: %s\n", r.c_str());
  nlohmann::json report = to_json(result, dry);
  if (!flags.report.empty()) {
    std::ofstream out(flags.report, std::ios::trunc);
    out << json_text(report) << "\n";
    if (!out) fprintf(stderr, "corral: warning: could not write %s\n", flags.report.c_str());
  }
  if (flags.json) {
    fprintf(stderr, "%s\n", json_text(report).c_str());
  } else if (result.dry_run) {
    fprintf(stderr, "corral: dry-run: %s\n", daemon::summarize_dry_run(*result.dry_run, dry).c_str());
  }
  return result.exit_code;
}

}  // namespace

int run_command(int argc, char** argv) {
  SandboxSpec spec;
  RunFlags flags;
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (auto status = apply_config_flag(args, spec, flags)) return *status;
  if (auto status = parse_run_flags(args, spec, flags)) return *status;
  if (auto status = check_run_flags(spec, flags)) return *status;
  if (geteuid() != 0) {
    fprintf(stderr,
            "corral: error: corral run must run as root\n"
            "hint: it creates namespaces owned by the host and per-sandbox uid ranges; run it "
            "with sudo (the sandboxed command itself never runs as host root)\n");
    return 125;
  }

  RunOptions options;
  options.dry_run = flags.dry_run;
  char cwd[4096];
  options.cwd = getcwd(cwd, sizeof cwd) != nullptr ? cwd : "/";
  options.mount_roots =
      flags.mount_roots.empty() ? std::vector<std::string>{options.cwd} : flags.mount_roots;
  options.tty =
      flags.tty == 1 || (flags.tty == -1 && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO));

  ImageStore images(data_dir() + "/images");
  UniqueFd image_lock;
  if (!spec.image.empty()) {
    if (auto status = use_image(spec, flags, images, options, image_lock)) return *status;
  }

  // A dry run's DNS and proxy answer every query and connection
  // themselves (X2, ADR 0016): recorded here, nothing sent upstream.
  // Declared first: the engine's threads feed it until the engine is gone.
  daemon::DryRunRecord dry;
  // A networked sandbox gets its proxy and DNS from this process (ADR 0005).
  std::unique_ptr<net::NetworkEngine> network;
  std::string gateway_secret;
  if (auto status = prepare_network(spec, flags, options, gateway_secret)) return *status;
  options.network_ready = [&](const std::string& id, const SandboxNetwork& n) -> Status {
    net::NetworkEngineConfig config;
    config.dns_servers = n.policy.dns_servers;
    config.gateway_services = flags.gateway_services;
    config.gateway_secret = gateway_secret;
    auto engine =
        net::NetworkEngine::start(std::move(config), refusal_printers(flags.dry_run ? &dry : nullptr));
    if (!engine) return tl::unexpected(engine.error());
    network = std::move(*engine);
    return network->add_sandbox(id, n.host_address(),
                                net::IpAddress::v4(n.slot->sandbox_address()).str(), n.policy);
  };
  RunResult result = run_sandbox(spec, options);
  network.reset();  // joins the proxy's threads: every event is in `dry`
  return report_result(result, flags, dry);
}

}  // namespace corral::cli
