// Capabilities inside a sandbox. The default user has none. `--root` keeps
// this small set, which acts only on what the sandbox's own user namespace
// owns (its files, its processes): every namespace but the user one is
// owned by the host, so none of these reach the network, mounts or host.
#pragma once

#include <linux/capability.h>

#include <array>
#include <cstdint>
#include <string_view>

#include "base/result.h"

namespace corral {

struct NamedCapability {
  int value;
  std::string_view name;
  std::string_view why;  // why a root-in-sandbox may keep it
};

inline constexpr std::array<NamedCapability, 8> kRootCapabilities{{
    {CAP_CHOWN, "CAP_CHOWN", "chown files in the writable layer (package installs)"},
    {CAP_DAC_OVERRIDE, "CAP_DAC_OVERRIDE", "root reads/writes files of other sandbox users"},
    {CAP_FOWNER, "CAP_FOWNER", "chmod/utime on files it does not own inside"},
    {CAP_FSETID, "CAP_FSETID", "keep setgid bits when writing (no effect: no_new_privs)"},
    {CAP_KILL, "CAP_KILL", "signal processes of other sandbox users"},
    {CAP_SETGID, "CAP_SETGID", "switch to another gid of the sandbox's own range"},
    {CAP_SETUID, "CAP_SETUID", "switch to another uid of the sandbox's own range"},
    {CAP_NET_BIND_SERVICE, "CAP_NET_BIND_SERVICE", "documented; ports < 1024 are opened for everyone inside"},
}};

// What the sandbox's init keeps once the sandbox runs: it only signals the
// workload (which runs as another uid) and reaps.
inline constexpr std::uint64_t kInitCapabilities = 1ULL << CAP_KILL;

// Bit mask of kRootCapabilities.
std::uint64_t root_capability_mask();

// Post-fork safe (syscalls only). Drops every capability not in `keep`
// from the bounding set, clears ambient and inheritable, and sets
// permitted = effective = keep. Must run while the process still has
// CAP_SETPCAP (before leaving uid 0 for the default user).
int drop_bounding_set(std::uint64_t keep);
int set_capabilities(std::uint64_t keep);

}  // namespace corral
