#include "jail/host_check.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>

#include "base/paths.h"
#include "base/unique_fd.h"
#include "jail/cgroup.h"
#include "jail/landlock.h"
#include "jail/seccomp_policy.h"
#include "sys/syscalls.h"

namespace corral {

namespace {

std::string read_text(const char* path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// How long a new single-threaded process takes to join a throwaway
// cgroup the way a sandbox's init does (by writing "0" to the tasks files).
Result<double> time_self_join(CgroupManager& manager) {
  const std::string name = "doctor-" + std::to_string(getpid());
  auto cg = manager.create(name, CgroupLimits{});
  if (!cg) return tl::unexpected<Error>(cg.error());
  auto fds = (*cg)->open_self_join();
  double ms = -1;
  if (fds) {
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) == 0) {
      pid_t child = fork();
      if (child == 0) {
        timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        bool ok = true;
        for (const auto& fd : *fds) ok = ok && write(fd.get(), "0", 1) == 1;
        clock_gettime(CLOCK_MONOTONIC, &b);
        double took = ok ? (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6 : -1;
        (void)!write(pipe_fds[1], &took, sizeof took);
        _exit(0);
      }
      close(pipe_fds[1]);
      if (child > 0) {
        if (read(pipe_fds[0], &ms, sizeof ms) != sizeof ms) ms = -1;
        waitpid(child, nullptr, 0);
      }
      close(pipe_fds[0]);
    }
    fds->clear();
  }
  auto destroyed = (*cg)->destroy();
  if (!fds) return tl::unexpected<Error>(fds.error());
  if (!destroyed) return tl::unexpected<Error>(destroyed.error());
  if (ms < 0) return tl::unexpected<Error>(Error{ErrorCode::kSystem, "the probe could not join", "", 0});
  return ms;
}

bool on_path(const char* tool) {
  for (const char* dir : {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin"}) {
    if (access((std::string(dir) + "/" + tool).c_str(), X_OK) == 0) return true;
  }
  return false;
}

// Creates every namespace corral uses, in corral's order, in a child.
HostCheck check_namespaces() {
  HostCheck c{"namespaces", false, true, "", ""};
  pid_t pid = fork();
  if (pid == 0) {
    if (unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP) != 0)
      _exit(1);
    if (unshare(CLONE_NEWPID) != 0) _exit(2);
    if (unshare(CLONE_NEWUSER) != 0) _exit(3);
    _exit(0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) {
    c.detail = "fork failed";
    return c;
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 99;
  c.ok = code == 0;
  c.detail = c.ok ? "net, mount, ipc, uts, cgroup, pid, user: all can be created"
                  : (code == 1   ? "cannot create net/mount/ipc/uts/cgroup namespaces"
                     : code == 2 ? "cannot create a pid namespace"
                                 : "cannot create a user namespace");
  c.hint = "run corral as root on a kernel with CONFIG_*_NS; check "
           "/proc/sys/user/max_user_namespaces > 0";
  return c;
}

}  // namespace

std::vector<HostCheck> run_host_checks() {
  std::vector<HostCheck> checks;
  checks.push_back({"root", geteuid() == 0, true,
                    geteuid() == 0 ? "running as uid 0" : "running as uid " + std::to_string(geteuid()),
                    "run corral as root (sudo)"});
  checks.push_back(check_namespaces());

  std::string fs = read_text("/proc/filesystems");
  bool overlay = fs.find("\toverlay") != std::string::npos;
  checks.push_back({"overlayfs", overlay, true, overlay ? "overlay is available" : "no overlay",
                    "load the overlay module: modprobe overlay"});
  {
    UniqueFd fsfd(fsopen("tmpfs", FSOPEN_CLOEXEC));
    checks.push_back({"new mount API", fsfd.valid(), true,
                      fsfd ? "fsopen/fsmount work" : "fsopen(tmpfs) failed",
                      "a Linux 5.2+ kernel is required"});
  }
  {
    UniqueFd fd(sys::openat2(AT_FDCWD, "/", O_PATH | O_CLOEXEC, 0, 0));
    checks.push_back({"openat2", fd.valid(), true, fd ? "available" : "missing",
                      "a Linux 5.6+ kernel is required"});
  }
  {
    UniqueFd fd(sys::pidfd_open(getpid(), 0));
    checks.push_back({"pidfd", fd.valid(), true, fd ? "available" : "missing",
                      "a Linux 5.3+ kernel is required"});
  }
  {
    bool seccomp = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
    std::string actions = read_text("/proc/sys/kernel/seccomp/actions_avail");
    bool filter = seccomp && actions.find("errno") != std::string::npos &&
                  actions.find("kill_process") != std::string::npos;
    auto program = compile_seccomp_filter(SeccompOptions{});
    bool ok = filter && program.has_value();
    checks.push_back({"seccomp", ok, true,
                      ok ? "filters available (" + std::to_string(program->size()) +
                               " BPF instructions in corral's policy); actions: " + actions
                         : (program ? "seccomp filters unavailable" : program.error().message),
                      "enable CONFIG_SECCOMP_FILTER"});
  }
  {
    int abi = landlock_abi();
    checks.push_back({"landlock", abi >= 1, true,
                      abi >= 1 ? "ABI " + std::to_string(abi) +
                                     (abi >= 6 ? " (with signal and abstract-socket scoping)"
                                               : " (no scoping: ABI 6+ adds it)")
                               : "unavailable",
                      "boot with Landlock enabled, e.g. lsm=landlock,lockdown,yama,apparmor"});
  }
  {
    auto manager = CgroupManager::detect();
    checks.push_back({"cgroups", manager.has_value(), true,
                      manager ? (*manager)->describe() : manager.error().message,
                      manager ? "" : manager.error().hint});
    // Start-up speed, not safety: on cgroup v1 init moves itself into its
    // cgroups (Cgroup::open_self_join). Where the kernel still takes the
    // global threadgroup lock for that, each start waits for an RCU grace
    // period (5-12 ms): measured here with a throwaway cgroup.
    if (manager && (*manager)->version() == CgroupVersion::kV1) {
      auto ms = time_self_join(**manager);
      const bool fast = ms && *ms < 2.0;
      char took[64] = "";
      if (ms) snprintf(took, sizeof took, "%.2f ms", *ms);
      checks.push_back(
          {"cgroup attach", fast, false,
           !ms     ? "could not measure: " + ms.error().message
           : fast  ? std::string("a new sandbox joins its v1 cgroups in ") + took
                   : std::string("a new sandbox waits ") + took +
                        " to join its v1 cgroups (an RCU grace period)",
           "for faster starts use cgroup v2 (CLONE_INTO_CGROUP), a newer kernel, or mount the "
           "v1 hierarchies with -o favordynmods (costs every fork/exit a little)"});
    }
  }
  {
    std::string dir = data_dir();
    bool ok = access(dir.c_str(), W_OK) == 0 || (errno == ENOENT && geteuid() == 0);
    checks.push_back({"data dir", ok, true, dir, "make " + dir + " writable or set CORRAL_DATA_DIR"});
  }
  checks.push_back({"mmdebstrap", on_path("mmdebstrap"), false,
                    on_path("mmdebstrap") ? "found" : "not found",
                    "needed by `corral image build`: apt-get install mmdebstrap"});
  checks.push_back({"umoci", on_path("umoci"), false, on_path("umoci") ? "found" : "not found",
                    "needed by `corral image import`: apt-get install umoci"});
  return checks;
}

}  // namespace corral
