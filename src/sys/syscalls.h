// Raw syscalls that glibc 2.36 does not wrap (or wraps badly for C++).
// This directory is the only place that calls syscall(2) directly: each
// wrapper returns -1 and sets errno like libc does, and is safe to call
// after fork (no allocation).
#pragma once

#include <linux/types.h>
#include <sched.h>
#include <signal.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace corral::sys {

// The new mount API (fsopen, fsmount, move_mount, open_tree,
// mount_setattr) is wrapped by glibc 2.36 in <sys/mount.h>.
int pivot_root(const char* new_root, const char* put_old);

// --- processes ---
// Layout of struct clone_args (linux/sched.h), kept here because that
// header clashes with glibc's <sched.h>.
struct CloneArgs {
  std::uint64_t flags;
  std::uint64_t pidfd;
  std::uint64_t child_tid;
  std::uint64_t parent_tid;
  std::uint64_t exit_signal;
  std::uint64_t stack;
  std::uint64_t stack_size;
  std::uint64_t tls;
  std::uint64_t set_tid;
  std::uint64_t set_tid_size;
  std::uint64_t cgroup;
};

// clone3 with a caller-built clone_args; returns like fork().
pid_t clone3(void* clone_args, std::size_t size);
// fork(2) semantics, the child in a new user namespace (clone(2) with
// CLONE_NEWUSER | SIGCHLD, no shared memory).
pid_t fork_into_new_userns();
// fork(2) semantics plus a pidfd for the child in *pidfd (clone(2) with
// CLONE_PIDFD | SIGCHLD): clone(2), not clone3, because it works under
// corral's own seccomp filter, which answers clone3 with ENOSYS.
pid_t fork_with_pidfd(int* pidfd);
// capset(2) with version 3 headers: permitted = effective = `mask`,
// inheritable = 0.
int capset_mask(std::uint64_t mask);
// setgroups(0), setresgid(id x3), setresuid(id x3) for the calling task
// only. glibc's wrappers change every thread of what they think is the
// process; a CLONE_VM child shares its parent's memory, so they would act
// on the parent's threads. 0, or -1 with errno from the first that failed.
int set_own_ids(uid_t uid, gid_t gid);
int pidfd_open(pid_t pid, unsigned int flags);
// A copy of another process's fd `targetfd` (needs ptrace access to it).
int pidfd_getfd(int pidfd, int targetfd, unsigned int flags);
int pidfd_send_signal(int pidfd, int sig, siginfo_t* info, unsigned int flags);
int close_range(unsigned int first, unsigned int last, unsigned int flags);

// --- open with resolution flags (Linux 5.6+) ---
int openat2(int dirfd, const char* path, int flags, std::uint64_t mode, std::uint64_t resolve);

// --- Landlock ---
int landlock_create_ruleset(const void* attr, std::size_t size, std::uint32_t flags);
int landlock_add_rule(int ruleset_fd, int rule_type, const void* rule_attr,
                      std::uint32_t flags);
int landlock_restrict_self(int ruleset_fd, std::uint32_t flags);

}  // namespace corral::sys
