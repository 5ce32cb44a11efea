#include "jail/command_userns.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <string_view>

#include "jail/seccomp_install.h"
#include "jail/uid_range.h"
#include "sys/syscalls.h"

#if defined(__SANITIZE_THREAD__)
#define CORRAL_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CORRAL_UNDER_TSAN 1
#endif
#endif
#ifndef CORRAL_UNDER_TSAN
#define CORRAL_UNDER_TSAN 0
#endif

namespace corral {

static_assert(kZygoteId == kUidBlockSize - 1, "the zygote takes the last id of the block");

namespace {

bool write_file(const char* path, const char* content) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const size_t len = strlen(content);
  const bool ok = write(fd, content, len) == static_cast<ssize_t>(len);
  const int err = errno;
  close(fd);
  errno = err;
  return ok;
}

struct HelperArgs {
  int ready;       // write end: the helper's errno (0: its namespace is made)
  int done;        // read end: EOF once the zygote holds the namespace
  int parent_end[2];  // the zygote's ends, which the helper's fd table copied
};

// The helper, cloned with CLONE_VM: it shares the zygote's memory (no copy
// of its page tables, which made a fork() cost milliseconds for a zygote
// of a few MiB) but not its fds or credentials. It takes the zygote's
// future ids, unshares (the namespace's owner is the euid at that moment)
// and waits until the zygote holds the namespace. It calls only plain
// syscall wrappers (the ids through sys::set_own_ids, not glibc's
// all-threads setxid); the one errno a failed call leaves in the shared
// TLS is written before the report the zygote waits for.
__attribute__((no_sanitize("address", "thread"))) int run_helper(void* arg) {
  const auto* a = static_cast<const HelperArgs*>(arg);
  close(a->parent_end[0]);
  close(a->parent_end[1]);
  int err = 0;
  if (sys::set_own_ids(kZygoteId, kZygoteId) != 0 || unshare(CLONE_NEWUSER) != 0) err = errno;
  // The id change made the (shared) mm non-dumpable, which hides the
  // helper's /proc entry (whose maps the zygote writes) from anyone but the
  // host. The zygote makes it non-dumpable again once it changes ids.
  if (err == 0 && prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0) err = errno;
  (void)!write(a->ready, &err, sizeof err);
  char c;
  (void)!read(a->done, &c, 1);  // EOF once the zygote has the namespace
  _exit(0);
}

}  // namespace

int make_command_userns(const char** step) {
  int ready[2], done[2];
  *step = "pipe";
  if (pipe2(ready, O_CLOEXEC) != 0) return -1;
  if (pipe2(done, O_CLOEXEC) != 0) {
    close(ready[0]);
    close(ready[1]);
    return -1;
  }
  // The helper's stack: this frame outlives it (it is reaped below).
  alignas(64) char stack[16 * 1024];
  HelperArgs args{ready[1], done[0], {ready[0], done[1]}};
  *step = "clone";
#if CORRAL_UNDER_TSAN
  // TSan's interceptors keep per-thread state that a CLONE_VM child would
  // share with the zygote: a TSan build pays for a fork instead.
  (void)stack;
  const pid_t helper = fork();
  if (helper == 0) run_helper(&args);
#else
  const pid_t helper = clone(run_helper, stack + sizeof stack, CLONE_VM | SIGCHLD, &args);
#endif
  close(ready[1]);
  close(done[0]);
  int result = -1, err = 0;
  if (helper < 0) {
    err = errno;
  } else if (read(ready[0], &err, sizeof err) != sizeof err) {
    *step = "helper";
    err = EPROTO;
  } else if (err != 0) {
    *step = "helper: setresuid + unshare(CLONE_NEWUSER)";
  } else {
    char path[64], map[32];
    snprintf(map, sizeof map, "0 0 %u\n", kCommandIds);
    snprintf(path, sizeof path, "/proc/%d/uid_map", helper);
    *step = "uid_map";
    bool ok = write_file(path, map);
    if (ok) {
      snprintf(path, sizeof path, "/proc/%d/gid_map", helper);
      *step = "gid_map";
      ok = write_file(path, map);
    }
    if (ok) {
      snprintf(path, sizeof path, "/proc/%d/ns/user", helper);
      *step = "open ns/user";
      result = open(path, O_RDONLY | O_CLOEXEC);
    }
    if (result < 0) err = errno;
  }
  close(ready[0]);
  close(done[1]);  // the helper exits
  if (helper > 0) {
    int status;
    while (waitpid(helper, &status, 0) < 0 && errno == EINTR) {
    }
  }
  errno = err;
  return result;
}

bool filter_lets_children_join_userns(std::span<const sock_filter> program) {
  static std::mutex mu;
  static std::size_t last_hash = 0;
  static bool last_answer = false;
  const std::size_t hash = std::hash<std::string_view>{}(
      std::string_view(reinterpret_cast<const char*>(program.data()), program.size_bytes()));
  std::lock_guard<std::mutex> lock(mu);
  if (hash == last_hash && hash != 0) return last_answer;
  // The child makes only raw syscalls: the caller may have threads. Its
  // answer comes on a pipe: the caller may ignore SIGCHLD (the factory
  // does), and then wait() cannot tell its exit status.
  int answer[2];
  if (pipe2(answer, O_CLOEXEC) != 0) return false;
  const pid_t pid = fork();
  if (pid < 0) {
    close(answer[0]);
    close(answer[1]);
    return false;
  }
  if (pid == 0) {
    char verdict = 'n';
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && install_seccomp_filter_raw(program) == 0 &&
        setns(-1, CLONE_NEWUSER) != 0 && errno == EBADF)
      verdict = 'y';
    (void)!write(answer[1], &verdict, 1);
    _exit(0);
  }
  close(answer[1]);
  char verdict = 'n';
  while (read(answer[0], &verdict, 1) < 0 && errno == EINTR) {
  }
  close(answer[0]);
  int status;
  (void)waitpid(pid, &status, 0);
  last_hash = hash;
  last_answer = verdict == 'y';
  return last_answer;
}

}  // namespace corral
