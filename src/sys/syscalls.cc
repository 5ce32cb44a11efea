#include "sys/syscalls.h"

#include <linux/capability.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace corral::sys {

int pivot_root(const char* new_root, const char* put_old) {
  return static_cast<int>(::syscall(SYS_pivot_root, new_root, put_old));
}
pid_t clone3(void* clone_args, std::size_t size) {
  return static_cast<pid_t>(::syscall(SYS_clone3, clone_args, size));
}
pid_t fork_into_new_userns() {
  return static_cast<pid_t>(::syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0));
}
pid_t fork_with_pidfd(int* pidfd) {
  // x86-64 and arm64 order: flags, stack, parent_tid (the pidfd), child_tid, tls.
  return static_cast<pid_t>(::syscall(SYS_clone, CLONE_PIDFD | SIGCHLD, 0, pidfd, 0, 0));
}
int capset_mask(std::uint64_t mask) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  data[0].effective = data[0].permitted = static_cast<std::uint32_t>(mask);
  data[1].effective = data[1].permitted = static_cast<std::uint32_t>(mask >> 32);
  return static_cast<int>(::syscall(SYS_capset, &header, data));
}
int set_own_ids(uid_t uid, gid_t gid) {
  if (::syscall(SYS_setgroups, 0, nullptr) != 0) return -1;
  if (::syscall(SYS_setresgid, gid, gid, gid) != 0) return -1;
  return static_cast<int>(::syscall(SYS_setresuid, uid, uid, uid));
}
int pidfd_getfd(int pidfd, int targetfd, unsigned int flags) {
  return static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd, targetfd, flags));
}
int pidfd_open(pid_t pid, unsigned int flags) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, flags));
}
int pidfd_send_signal(int pidfd, int sig, siginfo_t* info, unsigned int flags) {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, info, flags));
}
int close_range(unsigned int first, unsigned int last, unsigned int flags) {
  return static_cast<int>(::syscall(SYS_close_range, first, last, flags));
}
int openat2(int dirfd, const char* path, int flags, std::uint64_t mode, std::uint64_t resolve) {
  open_how how{};
  how.flags = static_cast<std::uint64_t>(flags);
  how.mode = mode;
  how.resolve = resolve;
  return static_cast<int>(::syscall(SYS_openat2, dirfd, path, &how, sizeof how));
}
int landlock_create_ruleset(const void* attr, std::size_t size, std::uint32_t flags) {
  return static_cast<int>(::syscall(SYS_landlock_create_ruleset, attr, size, flags));
}
int landlock_add_rule(int ruleset_fd, int rule_type, const void* rule_attr,
                      std::uint32_t flags) {
  return static_cast<int>(
      ::syscall(SYS_landlock_add_rule, ruleset_fd, rule_type, rule_attr, flags));
}
int landlock_restrict_self(int ruleset_fd, std::uint32_t flags) {
  return static_cast<int>(::syscall(SYS_landlock_restrict_self, ruleset_fd, flags));
}

}  // namespace corral::sys
