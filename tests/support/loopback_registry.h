// A real OCI registry for tests (issue 18, images by digest): Debian's
// docker-registry serving from a temporary directory on 127.0.0.1, and a
// helper that builds a one-busybox image with umoci and pushes it there
// with skopeo.
#pragma once

#include <sys/types.h>

#include <string>

namespace corral::testing {

class LoopbackRegistry {
 public:
  // Starts docker-registry with its storage under `dir` (up() says whether
  // it answers).
  explicit LoopbackRegistry(const std::string& dir);
  ~LoopbackRegistry();
  LoopbackRegistry(const LoopbackRegistry&) = delete;
  LoopbackRegistry& operator=(const LoopbackRegistry&) = delete;

  bool up() const { return pid_ > 0; }
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& dir() const { return dir_; }
  // HOST/repo@digest.
  std::string ref(const std::string& repo, const std::string& digest) const {
    return host() + "/" + repo + "@" + digest;
  }
  // Builds, under `work`, an image of /bin/busybox (as sh and cat) whose
  // /etc/marker holds `marker`, with `env` ("K=V", may be empty) and
  // workdir /etc in its config, and pushes it to <host>/<repo>:v. Its
  // manifest digest, or "" on failure.
  std::string push_busybox(const std::string& work, const std::string& repo,
                           const std::string& marker, const std::string& env = "") const;
  // The registry's stored copy of blob `digest`.
  std::string stored_blob(const std::string& digest) const;

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// Whether the tools a registry test needs are here; else why not.
bool registry_tools_present(std::string& why);

// `s` quoted for sh.
std::string sh_quote(const std::string& s);

}  // namespace corral::testing
