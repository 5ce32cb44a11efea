// A claim's host name (C4, ADR 0015): what a cold create puts in three
// places, put there in a sandbox that runs already.
//   - the UTS namespace: init's sethostname at create; here a thread of
//     ours joins the sandbox's UTS namespace (setns by init's pidfd), sets
//     the name, checks it and exits. A UTS namespace is per thread, so no
//     other daemon thread ever sees it, and the thread is never reused.
//   - /etc/hostname and /etc/hosts: the planner writes them in the
//     writable layer's upper dir; here they are rewritten in place through
//     the layer's root fd (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: nothing
//     in the layer can send the write elsewhere), with the planner's owner
//     (the sandbox's root) and mode 0644. In place, not replaced: the
//     mounted overlay keeps the same upper inode and reads the new bytes.
//   - HOSTNAME in the base env (env_with_hostname).
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <thread>

#include "base/fs.h"
#include "base/unique_fd.h"
#include "daemon/claim_identity.h"
#include "jail/sandbox_planner.h"
#include "sys/syscalls.h"

namespace corral::daemon {

namespace {

Status set_uts_name(int init_pidfd, const std::string& hostname) {
  Status result = ok();
  std::thread joiner([&] {
    if (::setns(init_pidfd, CLONE_NEWUTS) != 0) {
      result = errno_error("setns(init pidfd, CLONE_NEWUTS)");
      return;
    }
    if (::sethostname(hostname.data(), hostname.size()) != 0) {
      result = errno_error("sethostname in the sandbox's UTS namespace");
      return;
    }
    char now[HOST_NAME_MAX + 1] = {};
    if (::gethostname(now, sizeof now - 1) != 0 || hostname != now)
      result = make_error(ErrorCode::kInternal,
                          "the sandbox's host name did not change (gethostname after sethostname)");
  });
  joiner.join();
  return result;
}

// One of the layer's files, rewritten in place: `rel` under the layer's
// root, a regular file, never a symlink on the way.
Status rewrite_layer_file(int layer_root, const char* rel, const std::string& content,
                          uid_t owner) {
  const std::string shown = std::string("layer/") + rel;
  UniqueFd fd(sys::openat2(
      layer_root, rel, O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0,
      RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV));
  if (!fd) return errno_error("openat2(" + shown + ")");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error("fstat(" + shown + ")");
  if (!S_ISREG(st.st_mode))
    return make_error(ErrorCode::kInternal, shown + " is not a regular file");
  if (::ftruncate(fd.get(), 0) != 0) return errno_error("ftruncate(" + shown + ")");
  CORRAL_TRY(write_all(fd.get(), content, shown));
  if (::fchown(fd.get(), owner, owner) != 0) return errno_error("fchown(" + shown + ")");
  if (::fchmod(fd.get(), 0644) != 0) return errno_error("fchmod(" + shown + ")");
  return ok();
}

}  // namespace

Status bind_hostname(const LiveSandbox& live, const std::string& hostname) {
  if (!is_valid_hostname(hostname))
    return make_error(ErrorCode::kInvalidArgument, "\"" + hostname + "\" is not a valid host name");
  const int root = live.layer_root_fd();
  if (root < 0) return make_error(ErrorCode::kInternal, "the sandbox has no writable layer");
  // The planner's owner for both: the sandbox's root (its uid base).
  const uid_t owner = live.identity().host_uid_base;
  CORRAL_TRY_CTX(rewrite_layer_file(root, "upper/etc/hostname", hostname + "\n", owner),
                 "binding the host name");
  CORRAL_TRY_CTX(rewrite_layer_file(root, "upper/etc/hosts", etc_hosts_for(hostname), owner),
                 "binding the host name");
  CORRAL_TRY_CTX(set_uts_name(live.pidfd(), hostname), "binding the host name");
  return ok();
}

std::vector<std::string> env_with_hostname(std::vector<std::string> env, const SandboxSpec& claim) {
  for (const auto& kv : claim.env)
    if (kv.first == "HOSTNAME") return env;
  const std::string entry = "HOSTNAME=" + claim.hostname;
  for (std::string& e : env) {
    if (e.rfind("HOSTNAME=", 0) == 0) {
      e = entry;
      return env;
    }
  }
  env.push_back(entry);
  return env;
}

}  // namespace corral::daemon
