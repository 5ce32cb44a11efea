// SecretReadWatch: sees every read of a sandbox's secret files (issue 5,
// S5: "every secret read is audited"), with fanotify, from outside the
// sandbox. One fanotify group per daemon, one filesystem mark per sandbox's
// secret tmpfs (secret_mount.h): each open of a file on it, through the
// host's mount or the sandbox's bind mount, is one SecretRead, reported
// from the watch's own thread. The event names the file and the process
// (host pid) and, from the tmpfs it came from, the sandbox.
//
// Opens are what is reported (FAN_OPEN): the files are read-only, so an
// open is a read; a process that keeps a file open and re-reads it is
// seen once.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/result.h"

namespace corral::secrets {

struct SecretRead {
  std::string sandbox;
  std::string file;  // the file's name in /run/secrets
  pid_t pid = 0;     // host pid of the reader
  std::int64_t time_ms = 0;
};

class SecretReadWatch {
 public:
  using Sink = std::function<void(const SecretRead&)>;
  // kUnavailable when the kernel has no fanotify (or no filesystem marks):
  // then file-mode secrets cannot be audited and must be refused.
  static Result<std::unique_ptr<SecretReadWatch>> start(Sink sink);
  ~SecretReadWatch();
  SecretReadWatch(const SecretReadWatch&) = delete;
  SecretReadWatch& operator=(const SecretReadWatch&) = delete;

  // Starts reporting opens on the file system that `dir` (a SecretMount's
  // directory) is on, as `sandbox`'s.
  Status watch(const std::string& sandbox, const std::string& dir);
  // Stops it (before the files are wiped: the wipe's own opens are not
  // reads). Reads already queued are still reported.
  void unwatch(const std::string& sandbox);

  struct Impl;

 private:
  explicit SecretReadWatch(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace corral::secrets
