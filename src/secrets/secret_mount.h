// SecretMount: the files of a sandbox's `file`-mode secrets (issue 5, S1,
// S6). Each sandbox gets a tmpfs of its own, mounted on the host under the
// daemon's data directory (0700, root only) and bind-mounted read-only at
// /run/secrets inside the sandbox:
//   - tmpfs: the values never reach a disk; `noswap` keeps them out of swap
//     (kernels before 6.4 lack it: the mount is made without it and says
//     so in `notice`).
//   - one superblock per sandbox, so a fanotify filesystem mark on it
//     (secret_read_watch.h) sees every open of its files through any mount.
//   - files 0400, owned by the sandbox's user; the directory 0755 owned by
//     host root (unmapped inside: the sandbox cannot add or remove files).
// wipe() overwrites every file with zeros before it unlinks it (freed
// tmpfs pages are not cleared by the kernel), then unmounts: the copy in
// the sandbox's own mount namespace is the same superblock, so it is
// emptied too.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace corral::secrets {

class SecretMount {
 public:
  // Mounts an empty tmpfs at `dir` (created; its parent must exist).
  static Result<SecretMount> create(const std::string& dir);
  // A mount made earlier (a daemon restart): `dir` must be a tmpfs.
  static Result<SecretMount> adopt(const std::string& dir);

  SecretMount(SecretMount&&) = default;
  SecretMount& operator=(SecretMount&&) = default;

  // Writes one file (a plain name: no '/', not "." or "..") with mode 0400,
  // owned by uid:gid (host ids). Refuses an existing name.
  Status write(std::string_view name, std::string_view value, uid_t uid, gid_t gid);

  const std::string& dir() const { return dir_; }
  const std::string& notice() const { return notice_; }

 private:
  explicit SecretMount(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
  std::string notice_;
};

// Overwrites, unlinks and unmounts whatever secret mount is at `dir`, then
// removes `dir`. Succeeds when there is nothing there. Errors name what is
// left behind.
Status wipe_secret_mount(const std::string& dir);

}  // namespace corral::secrets
