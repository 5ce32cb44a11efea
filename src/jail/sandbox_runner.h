// Runs one command in a fresh sandbox and tears it down, verified
// (`corral run`). The order of every isolation step lives in launch.cc
// (host side, shared with the daemon's factory) and init_process.cc /
// workload.cc (inside).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "jail/dry_run_writes.h"
#include "jail/sandbox_network.h"
#include "jail/stage.h"
#include "spec/sandbox_spec.h"

namespace corral {

// The base layer to use (resolved by the caller: host base or an image).
struct BaseLayerRef {
  std::string rootfs;            // empty: the embedded host base
  std::vector<std::string> env;  // "K=V" from an image's config
  std::string passwd_source;     // image /etc dir to take passwd/group from
};

struct RunOptions {
  BaseLayerRef base;
  std::vector<std::string> mount_roots;  // allowed roots for --mount sources
  std::string cwd;                       // resolves relative paths
  bool tty = false;                      // give the sandbox a pty relayed to our terminal
  // A daemon sandbox (ADR 0004): no command of its own, a zygote instead,
  // and init survives its creator. The id is the daemon's choice.
  bool long_lived = false;
  std::string sandbox_id;  // empty: a new random one
  // Templates and the address pool for networked sandboxes (ADR 0005).
  NetworkOptions network;
  // `corral run`: called once the sandbox's veth pair exists and before
  // init builds the sandbox, to start the proxy and DNS on its host end. A
  // failure stops the sandbox (fail closed). Unset: no networked sandboxes.
  std::function<Status(const std::string& sandbox_id, const SandboxNetwork& network)> network_ready;
  // Dry-run (X2, docs/dry-run.md): writable mounts become copy-on-write
  // overlays, so nothing the command writes reaches the host, and the
  // result carries what it wrote.
  bool dry_run = false;
  SecretCheck has_secret;  // dry-run diffs: a text holding a secret value gets none
};

struct SetupFailure {
  Stage stage = Stage::kPlan;
  int err = 0;
  std::string message;  // full sentence for the user
  std::string hint;
};

struct RunResult {
  std::string sandbox_id;
  int exit_code = 125;  // what `corral run` exits with
  int signal = 0;       // signal that ended the command, 0 if none
  bool timed_out = false;
  bool oom_killed = false;
  std::string limit_hit;  // "", "timeout", "memory", "pids"
  std::chrono::milliseconds wall{0};
  std::chrono::milliseconds cpu{0};
  std::uint64_t memory_peak_bytes = 0;
  std::uint64_t disk_used_bytes = 0;  // writable layer in use when the command ended
  std::uint64_t residue_bytes = 0;    // still allocated after cleanup (F3): must be 0
  std::vector<std::string> residue;   // anything of the sandbox left on the host
  std::uint64_t oom_kills = 0;
  std::uint64_t pids_max_hits = 0;
  std::optional<SetupFailure> failure;  // set when exit_code is 125 (or 126/127)
  std::vector<std::string> notices;     // limit reports etc., for stderr
  std::optional<DryRunWrites> dry_run;  // set for a dry run that started
};

// Runs spec.argv in a new sandbox. Never throws; every failure is in the
// result (exit 125 with the stage and a hint).
RunResult run_sandbox(const SandboxSpec& spec, const RunOptions& options);

}  // namespace corral
