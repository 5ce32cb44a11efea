#include "jail/idmap_userns.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

namespace corral {

namespace {

Status write_map(pid_t pid, const char* file, const std::string& map) {
  std::string path = "/proc/" + std::to_string(pid) + "/" + file;
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return errno_error("open(" + path + ")");
  if (write(fd.get(), map.data(), map.size()) != static_cast<ssize_t>(map.size()))
    return errno_error("write(" + path + ", \"" + map + "\")");
  return ok();
}

}  // namespace

Result<UniqueFd> make_idmap_userns(const std::string& uid_map, const std::string& gid_map) {
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) return errno_error("pipe2");
  UniqueFd ready_r(ready[0]), ready_w(ready[1]);
  pid_t pid = fork();
  if (pid < 0) return errno_error("fork(idmap helper)");
  if (pid == 0) {
    // The helper only has to exist while we write its maps and open its
    // namespace; it waits for the pipe to close, then leaves.
    ready_w.reset();
    if (unshare(CLONE_NEWUSER) != 0) _exit(1);
    char c;
    (void)!read(ready_r.get(), &c, 1);
    _exit(0);
  }
  ready_r.reset();
  // Wait until the child is in its new namespace (its ns link changes).
  std::string ns_path = "/proc/" + std::to_string(pid) + "/ns/user";
  char self[64] = {}, child[64] = {};
  (void)!readlink("/proc/self/ns/user", self, sizeof self - 1);
  Status st = ok();
  for (int i = 0; i < 10000; ++i) {
    memset(child, 0, sizeof child);
    if (readlink(ns_path.c_str(), child, sizeof child - 1) < 0) {
      st = errno_error("readlink(" + ns_path + ")");
      break;
    }
    if (strcmp(self, child) != 0) break;
    usleep(50);
  }
  UniqueFd ns;
  if (st) st = write_map(pid, "uid_map", uid_map);
  if (st) st = write_map(pid, "gid_map", gid_map);
  if (st) {
    ns.reset(open(ns_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns) st = errno_error("open(" + ns_path + ")");
  }
  ready_w.reset();
  int status;
  waitpid(pid, &status, 0);
  if (!st) return tl::unexpected(st.error());
  if (strcmp(self, child) == 0)
    return make_error(ErrorCode::kUnavailable, "the idmap helper did not enter a user namespace");
  return ns;
}

}  // namespace corral
