#include "jail/running_mounts.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "base/unique_fd.h"
#include "jail/mount_tree.h"

namespace corral {

namespace {

// What the helper reports: the step that failed (0: none), which mount,
// and errno.
struct HelperResult {
  int step = 0;
  int index = -1;
  int err = 0;
};
enum HelperStep : int { kSetns = 1, kRoot, kTarget, kMove, kResolvConf };

const char* step_name(int step) {
  switch (step) {
    case kSetns: return "setns(init's mount namespace)";
    case kRoot: return "open(/)";
    case kTarget: return "opening the mount point";
    case kMove: return "move_mount";
    case kResolvConf: return "writing /etc/resolv.conf";
    default: return "the helper";
  }
}

struct Attach {
  int tree;
  const char* target;
  bool is_dir;
};

// The forked helper: only system calls (the daemon has threads; nothing
// here allocates or takes a lock). Reports through `out` and exits.
[[noreturn]] void helper_main(int out, int init_pidfd, const Attach* attach, std::size_t n,
                              const char* resolv, std::size_t resolv_len, uid_t root_uid) {
  HelperResult r;
  auto report = [&](int step, int index) {
    r.step = step;
    r.index = index;
    r.err = errno;
    (void)!write(out, &r, sizeof r);
    _exit(1);
  };
  if (setns(init_pidfd, CLONE_NEWNS) != 0) report(kSetns, -1);
  // setns made the sandbox's root (the pivoted one) our root.
  const int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) report(kRoot, -1);
  for (std::size_t i = 0; i < n; ++i) {
    const int target = open_mount_target(root, attach[i].target, attach[i].is_dir);
    if (target < 0) report(kTarget, static_cast<int>(i));
    if (move_mount(attach[i].tree, "", target, "",
                   MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
      report(kMove, static_cast<int>(i));
    close(target);
  }
  if (resolv != nullptr) {
    // As the planner's: a file of the sandbox's root, mode 0644, in place
    // of whatever the image has there (a symlink included: replaced, never
    // followed).
    const int etc = open_mount_target(root, "etc", true);
    if (etc < 0) report(kResolvConf, -1);
    if (unlinkat(etc, "resolv.conf", 0) != 0 && errno != ENOENT) report(kResolvConf, -1);
    const int f = openat(etc, "resolv.conf", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                         0644);
    if (f < 0 || fchown(f, root_uid, root_uid) != 0 || fchmod(f, 0644) != 0)
      report(kResolvConf, -1);
    for (std::size_t done = 0; done < resolv_len;) {
      const ssize_t w = write(f, resolv + done, resolv_len - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) report(kResolvConf, -1);
      done += static_cast<std::size_t>(w);
    }
    close(f);
  }
  (void)!write(out, &r, sizeof r);
  _exit(0);
}

}  // namespace

Status attach_to_running_sandbox(int init_pidfd, const std::vector<RunningBind>& binds,
                                 const std::string& resolv_conf, uid_t root_uid) {
  if (binds.empty() && resolv_conf.empty()) return ok();
  std::vector<Attach> attach;
  for (const RunningBind& b : binds) attach.push_back(Attach{b.tree, b.target.c_str(), b.is_dir});
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return errno_error("pipe2");
  UniqueFd from_helper(pipe_fds[0]);
  UniqueFd to_parent(pipe_fds[1]);
  const char* resolv = resolv_conf.empty() ? nullptr : resolv_conf.c_str();
  const pid_t child = fork();
  if (child < 0) return errno_error("fork (a helper for the running sandbox's mounts)");
  if (child == 0)
    helper_main(to_parent.get(), init_pidfd, attach.data(), attach.size(), resolv,
                resolv_conf.size(), root_uid);
  to_parent.reset();
  HelperResult r;
  ssize_t got;
  do {
    got = read(from_helper.get(), &r, sizeof r);
  } while (got < 0 && errno == EINTR);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (got != static_cast<ssize_t>(sizeof r))
    return make_error(ErrorCode::kSystem, "the mount helper ended without an answer");
  if (r.step != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string what = step_name(r.step);
    if (r.index >= 0 && static_cast<std::size_t>(r.index) < binds.size())
      what += " /" + binds[static_cast<std::size_t>(r.index)].target;
    return errno_error(what, r.err);
  }
  return ok();
}

}  // namespace corral
