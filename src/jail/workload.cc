// The workload process: born in the sandbox's new user namespace (init
// wrote its uid/gid maps), it drops to the sandbox user, gives up every
// capability (or keeps the small --root set), sets no_new_privs and
// rlimits, confines itself with Landlock, installs the seccomp filter last
// and execs the command. Order matters and is fixed here.
#include <fcntl.h>
#include <grp.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>

#include "jail/capabilities.h"
#include "jail/sandbox_plan.h"
#include "jail/stage.h"

namespace corral {

namespace {

[[noreturn]] void fail(const SandboxPlan& plan, Stage stage, const char* detail) {
  child_fail(plan.control_fd, static_cast<int>(stage), errno, detail);
}

}  // namespace

void run_workload(const SandboxPlan& plan, int go_fd, int pty_slave) {
  char go;
  if (read(go_fd, &go, 1) != 1) _exit(125);  // init failed before mapping us
  close(go_fd);
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

  gid_t groups[1] = {plan.gid};
  if (setgroups(1, groups) != 0) fail(plan, Stage::kCredentials, "setgroups");
  if (setresgid(plan.gid, plan.gid, plan.gid) != 0) fail(plan, Stage::kCredentials, "setresgid");
  // Still uid 0 of the new namespace here: shrink the bounding set first.
  if (drop_bounding_set(plan.capabilities) != 0)
    fail(plan, Stage::kCapabilities, "bounding set");
  if (setresuid(plan.uid, plan.uid, plan.uid) != 0) fail(plan, Stage::kCredentials, "setresuid");
  if (set_capabilities(plan.capabilities) != 0) fail(plan, Stage::kCapabilities, "capset");
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail(plan, Stage::kNoNewPrivs, "prctl");

  for (const RlimitSetting& r : plan.rlimits) {
    rlimit current;
    if (getrlimit(r.resource, &current) != 0) fail(plan, Stage::kRlimits, "getrlimit");
    rlim_t v = r.value < current.rlim_max ? r.value : current.rlim_max;
    rlimit next{v, v};
    if (setrlimit(r.resource, &next) != 0) fail(plan, Stage::kRlimits, "setrlimit");
  }
  if (chdir(plan.workdir.c_str()) != 0) fail(plan, Stage::kWorkdir, plan.workdir.c_str());
  if (apply_landlock(plan.landlock) != 0) fail(plan, Stage::kLandlock, "landlock");

  // seccomp goes last: everything above uses calls the filter denies.
  sock_fprog prog{static_cast<unsigned short>(plan.seccomp.size()),
                  const_cast<sock_filter*>(plan.seccomp.data())};
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
    fail(plan, Stage::kSeccomp, "install filter");

  int first_error = 0;
  for (const std::string& candidate : plan.exec_candidates) {
    execve(candidate.c_str(), plan.argv.data(), plan.envp.data());
    if (first_error == 0 || (first_error == ENOENT && errno != ENOENT)) first_error = errno;
  }
  errno = first_error != 0 ? first_error : ENOENT;
  fail(plan, Stage::kExec, plan.argv[0]);
}

}  // namespace corral
