// The launcher sequence (jail/launch.h): one function per step, in the
// order launch_init runs them.
#include "jail/launch.h"

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "base/paths.h"
#include "jail/fs_util.h"
#include "jail/init_clone.h"
#include "jail/live_channel.h"
#include "netns/sandbox_link.h"
#include "sys/syscalls.h"

namespace corral {

namespace {

using Clock = std::chrono::steady_clock;

// The step that failed, before the undo.
struct StepFailure {
  LaunchStep step;
  Stage stage;
  Error error;
};

using StepStatus = tl::expected<void, StepFailure>;

tl::unexpected<StepFailure> step_failed(LaunchStep step, Stage stage, Error error) {
  return tl::unexpected<StepFailure>(StepFailure{step, stage, std::move(error)});
}

// 1. The lock that marks the sandbox as alive. `corral run` holds it for
// the sandbox's life; a long-lived sandbox's init holds it (held_fds).
// A lock whose holder died frees the sandbox's cgroup for
// `corral run`'s stale-cgroup reaper.
StepStatus create_alive_lock(const std::string& id, LaunchedInit& init) {
  const std::string locks_dir = run_dir() + "/sandboxes";
  if (auto st = mkdir_p(locks_dir, 0700); !st)
    return step_failed(LaunchStep::kAliveLock, Stage::kPlan, st.error());
  const std::string lock_path = locks_dir + "/" + id + ".lock";
  // Made unnamed, locked, then linked into place: a lock file under its
  // name is always held by its launcher until the launcher dies or unlinks
  // it, so a free one is a dead sandbox's (reap_stale_cgroups relies on it).
  UniqueFd alive(open(locks_dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  const std::string self = alive ? "/proc/self/fd/" + std::to_string(alive.get()) : "";
  if (!alive || flock(alive.get(), LOCK_EX) != 0 ||
      linkat(AT_FDCWD, self.c_str(), AT_FDCWD, lock_path.c_str(), AT_SYMLINK_FOLLOW) != 0) {
    const int err = errno;
    // EEXIST: a lock file that was there is someone else's, and stays.
    return step_failed(
        LaunchStep::kAliveLock, Stage::kPlan,
        Error{ErrorCode::kSystem, "creating " + lock_path + ": " + strerror(err), "", err});
  }
  init.lock_path = lock_path;
  init.alive = std::move(alive);
  return {};
}

// 2. The cgroup, with the spec's limits. The pids limit counts our own
// processes in it too: init, and the zygote of a long-lived sandbox.
StepStatus create_cgroup(const SandboxSpec& spec, const PreparedSandbox& prepared,
                         CgroupManager& cgroups, LaunchedInit& init) {
  CgroupLimits limits;
  limits.memory_bytes = spec.limits.memory_bytes;
  limits.cpus = spec.limits.cpus;
  limits.pids = spec.limits.pids + (prepared.plan.long_lived ? 2 : 1);
  auto cgroup = cgroups.create(prepared.id, limits);
  if (!cgroup) return step_failed(LaunchStep::kCgroup, Stage::kCgroup, cgroup.error());
  init.cgroup = std::move(*cgroup);
  return {};
}

// 3. The channels: control (init -> us: failures, exits, the pty), and for
// a long-lived sandbox spawn (us <-> the zygote). `child_ends` are init's.
StepStatus make_channels(bool long_lived, LaunchedInit& init, UniqueFd child_ends[2]) {
  auto pair = [](UniqueFd& ours, UniqueFd& theirs) -> StepStatus {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
      return step_failed(LaunchStep::kChannels, Stage::kClone,
                         Error{ErrorCode::kSystem, "socketpair", "", errno});
    ours = UniqueFd(sv[0]);
    theirs = UniqueFd(sv[1]);
    return {};
  };
  if (auto st = pair(init.control, child_ends[0]); !st) return st;
  if (long_lived) return pair(init.spawn, child_ends[1]);
  return {};
}

// What a long-lived init keeps open for a daemon that re-attaches
// (jail/live_channel.h) and the locks that mark its resources as in use.
void fill_held_fds(const PreparedSandbox& prepared, const LaunchedInit& init, int image_lock_fd,
                   SandboxPlan& plan) {
  const int held[] = {kInitHeldControlFd,
                      kInitHeldSpawnFd,
                      kInitHeldLayerFd,
                      prepared.uids->lock_fd(),
                      prepared.base_in_use.get(),
                      init.alive.get(),
                      image_lock_fd,
                      prepared.network.slot_lock_fd()};
  static_assert(sizeof held == sizeof plan.held_fds);
  std::copy(std::begin(held), std::end(held), plan.held_fds);
}

// 4. Clone init into its namespaces (and, on v2, its cgroup; on v1 it
// joins by itself with `join_fds`, step 5).
StepStatus clone_init(SandboxPlan& plan, const LaunchOptions& options, LaunchedInit& init) {
  auto join_fds = init.cgroup->open_self_join();
  if (!join_fds) return step_failed(LaunchStep::kCgroupAttach, Stage::kCgroup, join_fds.error());
  if (join_fds->size() > std::size(plan.cgroup_join_fds)) {
    return step_failed(LaunchStep::kCgroupAttach, Stage::kCgroup,
                       Error{ErrorCode::kUnavailable, "too many cgroup v1 hierarchies to join", "",
                             0});
  }
  for (std::size_t i = 0; i < join_fds->size(); ++i) plan.cgroup_join_fds[i] = (*join_fds)[i].get();
  std::vector<int> close_in_init = options.close_in_init;
  close_in_init.push_back(init.control.get());
  if (init.spawn) close_in_init.push_back(init.spawn.get());
  // Give freed planning memory back before init is forked from us: both
  // processes keep their heap for the sandbox's whole life. Not in the
  // daemon's factory: it plans in a heap it reuses for every create, and a
  // trim there cost ~1 ms per create (bench/daemon.sh) for no PSS gain.
  if (!plan.long_lived) malloc_trim(0);
  init.cloned_at = Clock::now();
  int pidfd = -1;
  init.pid = clone_sandbox_init(plan, *init.cgroup, &pidfd, close_in_init.data(),
                                static_cast<int>(close_in_init.size()));
  const int clone_errno = errno;
  init.pidfd = UniqueFd(pidfd);
  // Init has its copies (join_fds closes ours).
  std::fill(std::begin(plan.cgroup_join_fds), std::end(plan.cgroup_join_fds), -1);
  if (init.pid < 0) {
    return step_failed(LaunchStep::kClone, Stage::kClone,
                       Error{ErrorCode::kSystem, "clone3(new namespaces)",
                             std::string(stage_hint(Stage::kClone, clone_errno)), clone_errno});
  }
  return {};
}

// 5. On cgroup v1, init's word that it joined its cgroup (v2 cloned it
// there); init unshares its cgroup namespace after "go", so it sees itself
// at /. Bounded: an init that never answers is a failed launch.
StepStatus await_cgroup_joined(LaunchedInit& init) {
  if (init.cgroup->clone_into_fd() >= 0) return {};
  auto failed = [](Error e) {
    return step_failed(LaunchStep::kCgroupAttach, Stage::kCgroup, std::move(e));
  };
  pollfd p{init.control.get(), POLLIN, 0};
  int ready;
  do {
    ready = poll(&p, 1, 10000);
  } while (ready < 0 && errno == EINTR);
  if (ready == 0)
    return failed(Error{ErrorCode::kTimeout, "init did not join its cgroup within 10 s", "", 0});
  ControlMessage msg{};
  ssize_t n = ready < 0 ? -1 : recv(init.control.get(), &msg, sizeof msg, MSG_DONTWAIT);
  if (n == static_cast<ssize_t>(sizeof msg) && msg.type == ControlType::kJoined) return {};
  if (n == static_cast<ssize_t>(sizeof msg) && msg.type == ControlType::kFailure) {
    msg.detail[sizeof msg.detail - 1] = '\0';
    return failed(Error{ErrorCode::kSystem,
                        std::string(msg.detail) + ": " + strerror(msg.err), "", msg.err});
  }
  return failed(n < 0 ? errno_error("reading init's control channel").value()
                      : Error{ErrorCode::kSystem, "init ended before joining its cgroup", "", 0});
}

// 6. The veth pair, then the caller's proxy and DNS on its host end,
// before init builds the sandbox: the workload never runs with half a
// network.
StepStatus link_network(PreparedSandbox& prepared, const LaunchOptions& options,
                        const LaunchedInit& init) {
  if (!prepared.network.slot) return {};
  auto netns_path = "/proc/" + std::to_string(init.pid) + "/ns/net";
  UniqueFd netns(open(netns_path.c_str(), O_RDONLY | O_CLOEXEC));
  Status linked = netns ? net::setup_sandbox_link(*prepared.network.slot, netns.get())
                        : errno_error("open(" + netns_path + ")");
  if (linked && options.network_ready)
    linked = options.network_ready(prepared.id, prepared.network);
  if (!linked) return step_failed(LaunchStep::kNetworkLink, Stage::kNetworkLink, linked.error());
  return {};
}

// 7. "go", with (long-lived) the fds init keeps for a re-attaching daemon:
// they travel with "go", so that an init whose creator dies before it sees
// EOF on its control channel and ends.
StepStatus send_go(const PreparedSandbox& prepared, const LaunchedInit& init) {
  ControlMessage go{};
  go.type = ControlType::kGo;
  iovec iov{&go, sizeof go};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(3 * sizeof(int))] = {};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  if (prepared.plan.long_lived) {
    const int fds[3] = {init.control.get(), init.spawn.get(), prepared.layer->mount_fd()};
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof cbuf;
    cmsghdr* cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(cm), fds, sizeof fds);
  }
  ssize_t w;
  do {
    w = sendmsg(init.control.get(), &mh, MSG_NOSIGNAL);
  } while (w < 0 && errno == EINTR);
  if (w != static_cast<ssize_t>(sizeof go))
    return step_failed(LaunchStep::kGo, Stage::kClone, errno_error("sending go to init").value());
  return {};
}

// The sequence, without the undo.
StepStatus run_steps(const SandboxSpec& spec, PreparedSandbox& prepared,
                     const LaunchOptions& options, LaunchedInit& init) {
  SandboxPlan& plan = prepared.plan;
  if (auto st = create_alive_lock(prepared.id, init); !st) return st;
  if (auto st = create_cgroup(spec, prepared, *options.cgroups, init); !st) return st;
  UniqueFd child_ends[2];
  if (auto st = make_channels(plan.long_lived, init, child_ends); !st) return st;
  plan.control_fd = child_ends[0].get();
  plan.spawn_fd = child_ends[1].get();
  if (plan.long_lived) fill_held_fds(prepared, init, options.image_lock_fd, plan);
  auto cloned = clone_init(plan, options, init);
  // Init has its own copies (or never came to be).
  child_ends[0].reset();
  child_ends[1].reset();
  plan.control_fd = plan.spawn_fd = -1;
  if (!cloned) return cloned;
  if (auto st = await_cgroup_joined(init); !st) return st;
  if (auto st = link_network(prepared, options, init); !st) return st;
  // Init holds its copies of the mount sources; ours would only keep them
  // busy for the sandbox's life.
  prepared.bind_fds.clear();
  return send_go(prepared, init);
}

}  // namespace

tl::expected<LaunchedInit, LaunchError> launch_init(const SandboxSpec& spec,
                                                    PreparedSandbox& prepared,
                                                    const LaunchOptions& options) {
  LaunchedInit init;
  if (auto st = run_steps(spec, prepared, options, init); !st) {
    LaunchError e{st.error().step, st.error().stage, std::move(st.error().error), {}};
    e.residue = undo_launch(init);
    return tl::unexpected<LaunchError>(std::move(e));
  }
  return init;
}

std::vector<std::string> undo_launch(LaunchedInit& init) {
  std::vector<std::string> residue;
  if (init.pidfd) {
    // Init waits for "go", or runs the sandbox: SIGKILL ends it at once.
    // It is our child: reaped here, or by the kernel where the caller
    // ignores SIGCHLD (the factory), in which case waitpid says ECHILD.
    sys::pidfd_send_signal(init.pidfd.get(), SIGKILL, nullptr, 0);
    pollfd p{init.pidfd.get(), POLLIN, 0};
    while (poll(&p, 1, -1) < 0 && errno == EINTR) {
    }
    while (waitpid(init.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    init.pidfd.reset();
  }
  if (init.cgroup) {
    if (auto st = init.cgroup->destroy(); !st) residue.push_back(st.error().message);
    init.cgroup.reset();
  }
  // Unlinked while still held: a stale scan never finds our lock free.
  if (!init.lock_path.empty()) {
    if (unlink(init.lock_path.c_str()) != 0) residue.push_back("file " + init.lock_path);
    init.lock_path.clear();
  }
  init.alive.reset();
  return residue;
}

}  // namespace corral
