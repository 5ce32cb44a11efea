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

// The helper: takes the zygote's future ids, unshares (the namespace's
// owner is the euid at that moment) and waits until the zygote holds the
// namespace. Reports 0 or an errno on `ready`.
[[noreturn]] void run_helper(int ready, int done) {
  int err = 0;
  if (setgroups(0, nullptr) != 0 || setresgid(kZygoteId, kZygoteId, kZygoteId) != 0 ||
      setresuid(kZygoteId, kZygoteId, kZygoteId) != 0 || unshare(CLONE_NEWUSER) != 0)
    err = errno;
  // The id change made it non-dumpable, which hides its /proc entry (whose
  // maps the zygote writes) from anyone but the host.
  if (err == 0 && prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0) err = errno;
  (void)!write(ready, &err, sizeof err);
  char c;
  (void)!read(done, &c, 1);  // EOF once the zygote has the namespace
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
  *step = "fork";
  const pid_t helper = fork();
  if (helper == 0) {
    close(ready[0]);
    close(done[1]);
    run_helper(ready[1], done[0]);
  }
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
