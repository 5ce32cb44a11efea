#include "support/loopback_registry.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "support/sandbox_harness.h"

namespace corral::testing {

std::string sh_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool registry_tools_present(std::string& why) {
  for (const char* tool : {"docker-registry", "skopeo", "umoci", "curl"}) {
    int st = 0;
    host_sh(std::string("command -v ") + tool + " >/dev/null 2>&1", &st);
    if (st != 0) {
      why = std::string(tool) + " is missing (scripts/install-deps installs it)";
      return false;
    }
  }
  if (access("/bin/busybox", X_OK) != 0) {
    why = "/bin/busybox is missing (busybox-static)";
    return false;
  }
  return true;
}

LoopbackRegistry::LoopbackRegistry(const std::string& dir) : dir_(dir) {
  for (int attempt = 0; attempt < 5 && pid_ < 0; ++attempt) {
    port_ = 17000 + static_cast<int>(getpid() % 2000) + attempt * 7;
    std::ofstream(dir_ + "/config.yml")
        << "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: "
        << dir_ << "/store\nhttp:\n  addr: 127.0.0.1:" << port_ << "\n";
    pid_t pid = fork();
    if (pid == 0) {
      const std::string log = dir_ + "/registry.log";
      freopen(log.c_str(), "w", stdout);
      freopen(log.c_str(), "a", stderr);
      execlp("docker-registry", "docker-registry", "serve", (dir_ + "/config.yml").c_str(),
             nullptr);
      _exit(127);
    }
    for (int i = 0; i < 100; ++i) {
      int st = 0;
      host_sh("curl -fsS http://" + host() + "/v2/ >/dev/null 2>&1", &st);
      if (st == 0) {
        pid_ = pid;
        break;
      }
      usleep(50'000);
    }
    if (pid_ < 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
}

LoopbackRegistry::~LoopbackRegistry() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
}

std::string LoopbackRegistry::push_busybox(const std::string& work, const std::string& repo,
                                           const std::string& marker,
                                           const std::string& env) const {
  const std::string d = work + "/build-" + repo;
  const std::string config =
      env.empty() ? std::string()
                  : "; umoci config --image layout:latest --config.env=" + sh_quote(env) +
                        " --config.workingdir=/etc";
  std::string out =
      host_sh("( set -e; mkdir -p " + sh_quote(d) + "; cd " + sh_quote(d) +
              "; umoci init --layout layout; umoci new --image layout:latest"
              "; umoci unpack --image layout:latest bundle"
              "; mkdir -p bundle/rootfs/bin bundle/rootfs/etc bundle/rootfs/tmp"
              "; cp /bin/busybox bundle/rootfs/bin/busybox; ln -s busybox bundle/rootfs/bin/sh"
              "; ln -s busybox bundle/rootfs/bin/cat; printf %s " +
              sh_quote(marker) +
              " > bundle/rootfs/etc/marker"
              "; umoci repack --image layout:latest bundle" +
              config + "; skopeo copy --quiet --dest-tls-verify=false oci:layout:latest docker://" +
              host() + "/" + repo + ":v --digestfile digest ) 2>&1; cat " + sh_quote(d) +
              "/digest 2>/dev/null");
  auto at = out.rfind("sha256:");
  return at == std::string::npos ? "" : out.substr(at, 71);
}

std::string LoopbackRegistry::stored_blob(const std::string& digest) const {
  const std::string hex = digest.substr(7);
  return dir_ + "/store/docker/registry/v2/blobs/sha256/" + hex.substr(0, 2) + "/" + hex + "/data";
}

}  // namespace corral::testing
