// Everything the sandbox's processes need, computed by the launcher before
// any fork (plan first, then act). The post-fork code in init_process.cc
// and workload.cc only reads this: no allocation, no logging, no parsing.
#pragma once

#include <linux/filter.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "jail/landlock.h"

namespace corral {

// A tree to bind into the new root: `source_fd` is a detached mount made
// by the launcher (open_tree clone of a confined source, with read-only,
// nosuid and nodev already applied); `target` is relative to the new root.
struct BindStep {
  int source_fd = -1;
  std::string target;  // no leading '/', no "..", checked by the planner
  bool is_dir = true;
  bool writable = false;
  bool from_base = false;  // a system directory of the host base
  // Dry-run (X2, ADR 0016): a writable mount becomes an overlay. The tree
  // (read-only) is attached at `overlay_lower` and an overlay with its
  // upper and work dirs in the writable layer goes to `target` instead.
  // All three absolute under stage_dir; empty: a plain bind.
  std::string overlay_lower, overlay_upper, overlay_work;
};

// A path under the new root to hide (file: bind /dev/null over it; dir:
// empty read-only tmpfs) or to make read-only.
struct ProcStep {
  enum Kind { kMaskFile, kMaskDir, kReadOnly } kind;
  std::string path;  // absolute, under root_dir
};

struct DevNode {
  const char* name;
  unsigned major;
  unsigned minor;
};

struct RlimitSetting {
  int resource;
  rlim_t value;  // soft = hard = min(value, current hard)
};

// Messages on the launcher <-> init control socket (SOCK_SEQPACKET).
// kExtend (daemon -> init of a long-lived sandbox): a new lifetime
// deadline. kExpired (init -> daemon): the deadline passed with no daemon
// to end the sandbox, so init ended it. kJoined (init -> launcher, cgroup
// v1, before "go"): init moved itself into its cgroup.
enum class ControlType : int { kGo = 1, kFailure, kExited, kPtyMaster, kExtend, kExpired, kJoined };
struct ControlMessage {
  ControlType type;
  int wait_status;  // kExited: the workload's wait status
  int stage;        // kFailure
  int err;          // kFailure
  char detail[240];
  std::int64_t deadline_ms;  // kExtend: unix ms
};

struct SandboxPlan {
  // Control channel (child's end) and how init joins its cgroup namespace.
  int control_fd = -1;
  int stdio[3] = {0, 1, 2};       // what becomes the sandbox's fds 0, 1, 2
  bool unshare_cgroup_ns = true;  // v1: after init joined its cgroup
  // v1: the cgroup's `tasks` files (Cgroup::open_self_join). Init writes
  // "0" to each as its first step, then reports kJoined; -1: none (v2).
  int cgroup_join_fds[8] = {-1, -1, -1, -1, -1, -1, -1, -1};

  // File system.
  int layer_mount_fd = -1;        // detached tmpfs (WritableLayer)
  std::string stage_dir;          // where init attaches the layer (private mount ns)
  std::string root_dir;           // stage_dir + "/root": the overlay, later "/"
  std::string lower_dir;          // host path of the base layer (image or skeleton)
  std::string stage_lower;        // stage_dir + "/lower": the base, idmapped
  std::string stage_proc;         // stage_dir + "/proc": the sandbox's proc, early
  std::string overlay_options;
  std::vector<BindStep> binds;    // base binds first, then user mounts
  std::string dev_dir, proc_dir, tmp_dir, shm_dir, pts_dir;  // under root_dir
  std::string layer_tmp, layer_shm;                          // under stage_dir
  std::string devpts_options;
  std::string dev_options;        // the /dev tmpfs: small, owned by the sandbox's root
  std::vector<ProcStep> proc_steps;

  // Identity.
  std::string hostname;
  std::string uid_map, gid_map;  // written by init for the workload
  uid_t uid = 1000;              // inside
  gid_t gid = 1000;
  uid_t host_uid = 0;            // the same user seen from the host (pty owner)
  uid_t host_root = 0;           // the sandbox's root seen from the host
  std::uint64_t capabilities = 0;  // kept capability mask (root only)
  bool tty = false;

  // Long-lived sandboxes (the daemon, ADR 0004, jail/live_channel.h): init
  // survives its creator, keeps `held_fds` open for a daemon that re-attaches,
  // and the workload is a zygote that starts processes on request.
  bool long_lived = false;
  int spawn_fd = -1;          // the zygote's end of the spawn channel
  int held_fds[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  std::string default_path;   // PATH of a request that sets none
  // Lifetime backstop (unix ms, 0: none): init ends the sandbox itself this
  // long after its deadline if no daemon did (a daemon that never came back).
  std::int64_t deadline_ms = 0;

  // Workload.
  std::vector<std::string> exec_candidates;  // PATH search, precomputed
  std::vector<char*> argv;                   // null-terminated
  std::vector<char*> envp;                   // null-terminated
  std::string workdir;
  std::vector<RlimitSetting> rlimits;
  LandlockPlan landlock;
  std::vector<sock_filter> seccomp;
  // The filter lets a process join a user namespace, so the zygote may
  // carry it and its children inherit it (jail/command_userns.h).
  bool seccomp_allows_userns_join = false;

  // Storage for argv/envp/landlock strings (pointers above point here).
  std::vector<std::string> strings;
};

// What init sends the workload once its namespace is ready.
struct WorkloadGo {
  int pty_index;  // -1: no pty; else open /dev/pts/<index>
};

// Post-fork entry points. They report failures on plan.control_fd and exit.
[[noreturn]] void run_init(SandboxPlan& plan);
[[noreturn]] void run_workload(const SandboxPlan& plan, int go_fd);
[[noreturn]] void run_zygote(const SandboxPlan& plan, int go_fd);

// A step of harden_process() that failed.
struct HardenFailure {
  int stage = 0;  // Stage
  int err = 0;
  const char* detail = "";
};

// Post-fork, in a process of the sandbox's user namespace: takes the
// sandbox user's credentials and confinement in the fixed order
// (credentials, bounding set, capabilities, no_new_privs, rlimits, umask,
// workdir, Landlock, seccomp last). The same steps for `corral run`'s
// workload and for every process the zygote starts. Returns false with
// `failure` set when a step fails.
//
// A spawner that starts many processes (the zygote) prepares once with
// prepare_shared_confinement() and passes the result in: then the process
// first joins the commands' user namespace (jail/command_userns.h), stays
// in the spawner's Landlock domain instead of entering one of its own, and
// installs the seccomp filter last as any workload does (ADR 0006).
struct SharedConfinement {
  int commands_userns = -1;  // kept open by the spawner; its children close it
  // The spawner installed the seccomp filter on itself (the filter allows
  // setns(CLONE_NEWUSER)); its children inherit it instead of installing it.
  bool filter_inherited = false;
};
bool harden_process(const SandboxPlan& plan, const char* workdir, HardenFailure* failure,
                    const SharedConfinement* shared = nullptr);

// In the spawner itself, while root of the sandbox's user namespace:
// builds the Landlock ruleset, makes the commands' user namespace, then
// gives up everything (bounding set, capabilities, ids: it becomes
// kZygoteId, which only it has), becomes non-dumpable, sets no_new_privs
// and enters the sandbox's one Landlock domain. Its children inherit the
// domain and no_new_privs.
bool prepare_shared_confinement(const SandboxPlan& plan, SharedConfinement* out,
                                HardenFailure* failure);

// Post-fork: closes every fd >= 3 except the `count` listed in `keep`
// (at most 16; negative entries are ignored).
int close_fds_except(const int* keep, int count);

// Post-fork helper: sends a kFailure message and _exits(125).
[[noreturn]] void child_fail(int control_fd, int stage, int err, const char* detail);

}  // namespace corral
