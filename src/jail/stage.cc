#include "jail/stage.h"

#include <cerrno>

namespace corral {

std::string_view stage_name(Stage stage) {
  switch (stage) {
    case Stage::kPlan:
      return "plan";
    case Stage::kUidRange:
      return "uid-range";
    case Stage::kBaseLayer:
      return "base-layer";
    case Stage::kMountSources:
      return "mount-sources";
    case Stage::kWritableLayer:
      return "writable-layer";
    case Stage::kSeccompCompile:
      return "seccomp-compile";
    case Stage::kCgroup:
      return "cgroup";
    case Stage::kClone:
      return "clone-namespaces";
    case Stage::kCgroupNamespace:
      return "cgroup-namespace";
    case Stage::kMountPropagation:
      return "mount-propagation";
    case Stage::kStageWritableLayer:
      return "attach-writable-layer";
    case Stage::kOverlay:
      return "overlay-root";
    case Stage::kBaseBinds:
      return "base-binds";
    case Stage::kUserMounts:
      return "user-mounts";
    case Stage::kDev:
      return "dev";
    case Stage::kProc:
      return "proc";
    case Stage::kTmp:
      return "tmp";
    case Stage::kPty:
      return "pty";
    case Stage::kHostname:
      return "hostname";
    case Stage::kNetworkPolicy:
      return "network policy";
    case Stage::kNetworkSlot:
      return "network slot";
    case Stage::kNetworkLink:
      return "network link";
    case Stage::kLoopback:
      return "loopback";
    case Stage::kPivotRoot:
      return "pivot-root";
    case Stage::kCloseFds:
      return "close-fds";
    case Stage::kUserNamespace:
      return "user-namespace";
    case Stage::kIdMap:
      return "id-map";
    case Stage::kSession:
      return "session";
    case Stage::kCredentials:
      return "credentials";
    case Stage::kCapabilities:
      return "capabilities";
    case Stage::kNoNewPrivs:
      return "no-new-privs";
    case Stage::kRlimits:
      return "rlimits";
    case Stage::kWorkdir:
      return "workdir";
    case Stage::kLandlock:
      return "landlock";
    case Stage::kSeccomp:
      return "seccomp";
    case Stage::kExec:
      return "exec";
  }
  return "unknown";
}

std::string_view stage_hint(Stage stage, int err) {
  switch (stage) {
    case Stage::kClone:
    case Stage::kUserNamespace:
      if (err == EPERM || err == ENOSPC || err == EINVAL)
        return "corral must run as root on a kernel with user, pid, net, mount, ipc, uts and "
               "cgroup namespaces; run `corral doctor`";
      break;
    case Stage::kCgroup:
      return "run `corral doctor` to see which cgroup controllers are missing";
    case Stage::kNetworkSlot:
      if (err == ENOSPC || err == EAGAIN)
        return "every address slot of the network pool is taken: destroy sandboxes or "
               "give the daemon a larger network.subnet";
      return "the network slot locks live under the run dir (/run/corral/net): it must be "
             "writable";
    case Stage::kNetworkLink:
      return "making the sandbox's veth pair needs root and veth support; an interface of "
             "the pool's prefix may be left over: run `corral doctor`";
    case Stage::kOverlay:
      return "overlayfs with a tmpfs upper layer is required; run `corral doctor`";
    case Stage::kLandlock:
      return "Landlock must be enabled (lsm=...,landlock on the kernel command line); run "
             "`corral doctor`";
    case Stage::kSeccomp:
    case Stage::kSeccompCompile:
      return "the kernel must support seccomp filters; run `corral doctor`";
    case Stage::kWorkdir:
      return "the --workdir must exist in the sandbox and be accessible to its user";
    case Stage::kUserMounts:
      return "check the --mount source exists and the target is a plain path inside the image";
    case Stage::kExec:
      if (err == ENOENT) return "the command was not found inside the sandbox (PATH or image)";
      if (err == EACCES) return "the command is not executable by the sandbox user";
      break;
    default:
      break;
  }
  return "";
}

}  // namespace corral
