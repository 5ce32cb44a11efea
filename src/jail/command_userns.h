// The user namespace of a long-lived sandbox's commands (ADR 0006): a
// child of the sandbox's own user namespace, made once by the zygote, that
// maps every id of the sandbox's block but the last one, which the zygote
// keeps for itself. Every process the zygote starts joins it (setns), so
// all of them share one Landlock domain with the zygote yet hold no
// credential over it: not its uid (the commands' namespace cannot name
// it), and no capability in the namespace the zygote lives in (CAP_KILL of
// a --root sandbox stops at its own namespace).
#pragma once

#include <linux/filter.h>
#include <sys/types.h>

#include <span>

namespace corral {

// The zygote's uid and gid in the sandbox's user namespace: the last id of
// the block (uid_range.h), which the commands' namespace leaves unmapped.
inline constexpr uid_t kZygoteId = 65535;
// Ids the commands' namespace maps (0 .. kCommandIds - 1, identity).
inline constexpr unsigned kCommandIds = kZygoteId;

// Post-fork, in the zygote while it is still root of the sandbox's user
// namespace with its capabilities, before Landlock and seccomp: forks a
// helper that becomes kZygoteId and unshares a user namespace (so the
// zygote, once it takes the same uid, owns it), writes the identity maps
// and returns an O_CLOEXEC fd of that namespace. -1 with errno and
// `*step` naming what failed.
int make_command_userns(const char** step);

// Whether `program` lets a process join a user namespace
// (setns(fd, CLONE_NEWUSER)). If it does, the zygote installs the filter
// on itself once and its children inherit it; if not, each child installs
// it after its setns, which costs a filter attach per process. Asked of
// the kernel in a forked child (setns(-1, CLONE_NEWUSER) under the filter:
// EBADF means the call got past it), once per program and process.
bool filter_lets_children_join_userns(std::span<const sock_filter> program);

}  // namespace corral
