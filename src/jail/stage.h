// The isolation steps, in the order they run (docs/isolation.md). A step
// that fails stops the sandbox: the child reports {stage, errno, detail}
// and the launcher turns it into exit code 125 with a hint.
#pragma once

#include <string_view>

namespace corral {

enum class Stage : int {
  // In the launcher (host side, before any process exists).
  kPlan = 1,
  kUidRange,
  kBaseLayer,
  kMountSources,
  kWritableLayer,
  kSeccompCompile,
  kCgroup,
  kNetworkPolicy,  // the spec's network request against the templates
  kNetworkSlot,    // an address slot of the pool (ADR 0005)
  kClone,
  kNetworkLink,    // the veth pair, made between clone and "go"
  // In the sandbox's init (host root inside new namespaces).
  kCgroupNamespace,
  kMountPropagation,
  kStageWritableLayer,
  kUserNamespace,  // the workload is born here, waiting; its namespace is needed to idmap
  kIdMap,
  kOverlay,
  kBaseBinds,
  kUserMounts,
  kDev,
  kProc,
  kTmp,
  kPty,
  kHostname,
  kLoopback,
  kPivotRoot,
  kCloseFds,
  // In the workload process (inside the user namespace).
  kSession,
  kCredentials,
  kCapabilities,
  kNoNewPrivs,
  kRlimits,
  kWorkdir,
  kLandlock,
  kSeccomp,
  kExec,
};

std::string_view stage_name(Stage stage);
// What the user can do when this stage fails with `err`.
std::string_view stage_hint(Stage stage, int err);

// What a child writes to the launcher when a stage fails. Fixed size: the
// child does not allocate.
struct ChildFailure {
  int stage;
  int err;
  char detail[240];
};

}  // namespace corral
