// The workload process: born in the sandbox's new user namespace (init
// wrote its uid/gid maps), it drops to the sandbox user, gives up every
// capability (or keeps the small --root set), sets no_new_privs and
// rlimits, confines itself with Landlock, installs the seccomp filter last
// and execs the command. Order matters and is fixed here.
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "jail/capabilities.h"
#include "jail/command_userns.h"
#include "jail/landlock.h"
#include "jail/sandbox_plan.h"
#include "jail/seccomp_install.h"
#include "jail/stage.h"

namespace corral {

namespace {

[[noreturn]] void fail(const SandboxPlan& plan, Stage stage, const char* detail) {
  child_fail(plan.control_fd, static_cast<int>(stage), errno, detail);
}

bool failed(HardenFailure* failure, Stage stage, const char* detail) {
  failure->stage = static_cast<int>(stage);
  failure->err = errno;
  failure->detail = detail;
  return false;
}

}  // namespace

bool harden_process(const SandboxPlan& plan, const char* workdir, HardenFailure* failure,
                    const SharedConfinement* shared) {
  if (shared != nullptr) {
    // Into the commands' user namespace (the zygote owns it, so this
    // process has every capability there until the steps below drop them).
    int r = setns(shared->commands_userns, CLONE_NEWUSER);
    close(shared->commands_userns);
    if (r != 0) return failed(failure, Stage::kUserNamespace, "setns(commands' user namespace)");
  }
  gid_t groups[1] = {plan.gid};
  if (setgroups(1, groups) != 0) return failed(failure, Stage::kCredentials, "setgroups");
  if (setresgid(plan.gid, plan.gid, plan.gid) != 0)
    return failed(failure, Stage::kCredentials, "setresgid");
  // Still uid 0 of the new namespace here: shrink the bounding set first.
  if (drop_bounding_set(plan.capabilities) != 0)
    return failed(failure, Stage::kCapabilities, "bounding set");
  if (setresuid(plan.uid, plan.uid, plan.uid) != 0)
    return failed(failure, Stage::kCredentials, "setresuid");
  if (set_capabilities(plan.capabilities) != 0)
    return failed(failure, Stage::kCapabilities, "capset");
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return failed(failure, Stage::kNoNewPrivs, "prctl");

  for (const RlimitSetting& r : plan.rlimits) {
    rlimit current;
    if (getrlimit(r.resource, &current) != 0) return failed(failure, Stage::kRlimits, "getrlimit");
    rlim_t v = r.value < current.rlim_max ? r.value : current.rlim_max;
    rlimit next{v, v};
    if (setrlimit(r.resource, &next) != 0) return failed(failure, Stage::kRlimits, "setrlimit");
  }
  umask(022);  // init runs with 0 to create /dev; the command gets the usual
  if (chdir(workdir) != 0) return failed(failure, Stage::kWorkdir, workdir);

  // A spawner's child stays in the spawner's Landlock domain, the one
  // domain of the whole sandbox (ADR 0006): its processes may signal and
  // see each other, and nothing outside it.
  if (shared == nullptr && apply_landlock(plan.landlock) != 0)
    return failed(failure, Stage::kLandlock, "landlock");
  if (shared != nullptr && shared->filter_inherited) {
    // Inherited from the spawner; fail closed if it is somehow not there.
    if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != 2) {
      errno = EPERM;
      return failed(failure, Stage::kSeccomp, "inherited filter missing");
    }
    return true;
  }

  // seccomp goes last, so that the filter is as strict as the command
  // needs and not loosened for the setup steps above.
  if (install_seccomp_filter_raw(plan.seccomp) != 0)
    return failed(failure, Stage::kSeccomp, "install filter");
  return true;
}

bool prepare_shared_confinement(const SandboxPlan& plan, SharedConfinement* out,
                                HardenFailure* failure) {
  // Built while still root of the sandbox's namespace: opening every
  // rule's path is the costly part, done once.
  const int ruleset = build_landlock_ruleset(plan.landlock);
  if (ruleset < 0) return failed(failure, Stage::kLandlock, "landlock ruleset");
  const char* step = "";
  out->commands_userns = make_command_userns(&step);
  if (out->commands_userns < 0) {
    const int err = errno;
    close(ruleset);
    errno = err;
    return failed(failure, Stage::kUserNamespace, step);
  }
  // The spawner keeps nothing: its children get their capabilities in the
  // commands' namespace, which it owns as kZygoteId.
  if (drop_bounding_set(0) != 0) return failed(failure, Stage::kCapabilities, "bounding set");
  if (setgroups(0, nullptr) != 0 || setresgid(kZygoteId, kZygoteId, kZygoteId) != 0 ||
      setresuid(kZygoteId, kZygoteId, kZygoteId) != 0)
    return failed(failure, Stage::kCredentials, "zygote id");
  if (set_capabilities(0) != 0) return failed(failure, Stage::kCapabilities, "capset");
  // Its memory and /proc entries stay the host's alone (it never execs,
  // so its mm belongs to the host's user namespace).
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
    return failed(failure, Stage::kNoNewPrivs, "dumpable");
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return failed(failure, Stage::kNoNewPrivs, "prctl");
  // The sandbox's one Landlock domain: entered here, inherited by every
  // child.
  const int r = restrict_to_landlock_ruleset(ruleset);
  const int err = errno;
  close(ruleset);
  errno = err;
  if (r != 0) return failed(failure, Stage::kLandlock, "landlock");
  // The filter too, if it lets the children setns into their namespace;
  // else each child installs it after its setns (a filter attach per
  // process, and a zygote without a filter).
  if (plan.seccomp_allows_userns_join) {
    if (install_seccomp_filter_raw(plan.seccomp) != 0)
      return failed(failure, Stage::kSeccomp, "install filter");
    out->filter_inherited = true;
  }
  return true;
}

void run_workload(const SandboxPlan& plan, int go_fd) {
  WorkloadGo go{};
  if (read(go_fd, &go, sizeof go) != sizeof go) _exit(125);  // init failed
  close(go_fd);
  // Born before init closed the launcher's fds: close them here too.
  const int keep[] = {plan.control_fd};
  if (close_fds_except(keep, 1) != 0) fail(plan, Stage::kCloseFds, "close_range");
  int pty_slave = -1;
  if (go.pty_index >= 0) {
    char path[32];
    snprintf(path, sizeof path, "/dev/pts/%d", go.pty_index);
    pty_slave = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (pty_slave < 0) fail(plan, Stage::kPty, path);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  // A session of its own: no controlling terminal from the host, ever.
  if (setsid() < 0) fail(plan, Stage::kSession, "setsid");
  if (pty_slave >= 0) {
    if (ioctl(pty_slave, TIOCSCTTY, 0) != 0) fail(plan, Stage::kSession, "TIOCSCTTY");
    for (int fd = 0; fd <= 2; ++fd) {
      if (dup2(pty_slave, fd) < 0) fail(plan, Stage::kSession, "dup2 pty");
    }
    close(pty_slave);
  }

  HardenFailure failure;
  if (!harden_process(plan, plan.workdir.c_str(), &failure)) {
    errno = failure.err;
    fail(plan, static_cast<Stage>(failure.stage), failure.detail);
  }

  int first_error = 0;
  for (const std::string& candidate : plan.exec_candidates) {
    execve(candidate.c_str(), plan.argv.data(), plan.envp.data());
    if (first_error == 0 || (first_error == ENOENT && errno != ENOENT)) first_error = errno;
  }
  errno = first_error != 0 ? first_error : ENOENT;
  fail(plan, Stage::kExec, plan.argv[0]);
}

}  // namespace corral
