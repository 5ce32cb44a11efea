// Turns a SandboxSpec into a SandboxPlan plus the host resources it needs
// (uid block, writable layer, opened mount sources), before any process
// is created. Everything that can be checked is checked here, so a bad
// spec fails with a clear message and nothing to undo.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "jail/dry_run_writes.h"
#include "jail/mount_source.h"
#include "jail/sandbox_plan.h"
#include "jail/sandbox_runner.h"
#include "jail/uid_range.h"
#include "jail/writable_layer.h"

namespace corral {

struct PreparedSandbox {
  std::string id;
  std::optional<UidRange> uids;
  std::optional<WritableLayer> layer;
  std::vector<UniqueFd> bind_fds;  // base dirs and user mount sources
  UniqueFd base_in_use;            // shared lock on the host-base skeleton
  SandboxNetwork network;          // policy; slot when it lets anything out
  SandboxPlan plan;
  std::vector<std::string> notices;  // for the user; nothing was weakened
  // Dry-run (X2): each writable mount's host source (read only by the
  // report) and its upper dir in the layer; the upper dirs' files the
  // planner made before the start, which are not the command's.
  struct DryMount {
    std::string target;
    UniqueFd source_fd;  // O_PATH
    std::string upper;   // relative to the layer root
  };
  bool dry_run = false;
  std::vector<DryMount> dry_mounts;
  WriteBaseline dry_baseline;  // of the layer's "upper"
};

// Dry-run: what the command wrote, read from the layer's upper dirs
// before the layer is wiped.
DryRunWrites collect_dry_run_writes(const PreparedSandbox& prepared, const SecretCheck& has_secret);

// Stage of the error is reported through `failed_stage`.
Result<std::unique_ptr<PreparedSandbox>> prepare_sandbox(const SandboxSpec& spec,
                                                         const RunOptions& options,
                                                         Stage& failed_stage);

// The uid of a sandbox's processes inside it: 0 for a root sandbox, else
// this one (its host uid is the block's base plus it).
inline constexpr uid_t kSandboxUid = 1000;
inline uid_t sandbox_user_uid(const SandboxSpec& spec) { return spec.root ? 0 : kSandboxUid; }

// The directories a sandbox's processes may write beneath (Landlock),
// besides /dev's files, its writable mounts and, for a root sandbox, the
// top of its layer. The rules are fixed when the sandbox starts: a mount
// attached later (a warm pool's claim) is writable only at or beneath one
// of these.
std::vector<std::string> landlock_writable_dirs(const SandboxSpec& spec);

// "sb-" + 12 random hex digits.
std::string new_sandbox_id();

// The sandbox's /etc/hosts for host name `hostname` (the layer's copy; a
// warm pool's claim writes the same text, daemon/claim_hostname.cc).
std::string etc_hosts_for(const std::string& hostname);

}  // namespace corral
