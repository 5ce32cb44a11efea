// The veth pair of one networked sandbox (ADR 0005, "Per-sandbox
// plumbing"): host end <prefix><n> at .4n+1/30 in the caller's (host)
// namespace, sandbox end eth0 at .4n+2/30 inside the sandbox's network
// namespace with a default route via the host end; IPv6 off on both ends;
// MTU 65535 on both ends (the link only carries traffic to corral's own
// sockets on the host end).
// Everything goes through rtnetlink (net/netlink.h): no `ip` process.
#pragma once

#include "base/result.h"
#include "netns/net_slot.h"

namespace corral::net {

// Creates and configures the pair for `slot` between the caller's network
// namespace and the one of `netns_fd` (an fd of /proc/<pid>/ns/net; not
// the caller's own namespace). Either all of it is done, or nothing is
// left (the pair is deleted again) and the error names the step that
// failed. Safe to call from any thread of a multi-threaded process.
Status setup_sandbox_link(const NetSlot& slot, int netns_fd);

// Deletes the host end (which takes the sandbox end with it) if it is
// there, and checks that it is gone. Idempotent. Does not touch the slot's
// lock.
Status teardown_sandbox_link(const NetSlot& slot);

// Whether the host end of `slot` exists in the caller's namespace.
Result<bool> sandbox_link_present(const NetSlot& slot);

}  // namespace corral::net
