// CORRAL_TEST_SELF_CHECK_FAULT (daemon/self_check_fault.h).
#include "daemon/self_check_fault.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "daemon/file_ops.h"
#include "daemon/sandbox_service.h"

namespace corral::daemon {
namespace {

// Read once: the daemon's environment does not change while it runs.
const std::string& fault() {
  static const std::string f = [] {
    const char* v = std::getenv("CORRAL_TEST_SELF_CHECK_FAULT");
    return std::string(v != nullptr ? v : "");
  }();
  return f;
}

void fill_layer(SandboxService& service, SandboxEntry& sandbox) {
  auto root = open_sandbox_root(service, sandbox);
  if (!root) return;
  auto fd = root->open_write("/.corral-self-check-fill");
  if (!fd) return;
  const std::vector<char> chunk(64 * 1024, 'x');
  // Bounded: a layer without a limit would otherwise fill the host.
  for (std::uint64_t written = 0; written < (std::uint64_t{4} << 30); written += chunk.size()) {
    if (::write(fd->get(), chunk.data(), chunk.size()) <= 0) break;
  }
}

}  // namespace

void apply_self_check_fault(SandboxService& service, SandboxEntry& sandbox) {
  const std::string& f = fault();
  if (f.empty()) return;
  if (f == "layer_full") return fill_layer(service, sandbox);
  SecretService* secrets = service.secret_service();
  if (secrets == nullptr) return;
  if (f == "secret_broker_revoked") {
    (void)secrets->revoke_tokens(sandbox.id);
    return;
  }
  for (const auto& p : secrets->presence(sandbox.id)) {
    if (p.mode != secrets::SecretMode::kFile) continue;
    // The host side of the sandbox's secrets tmpfs (SecretService::mount_dir).
    const std::string host =
        secrets->mounts_root() + "/" + sandbox.id + "/" + p.path.substr(p.path.rfind('/') + 1);
    if (f == "secret_file_missing") (void)::unlink(host.c_str());
    if (f == "secret_file_mode") (void)::chmod(host.c_str(), 0644);
  }
}

}  // namespace corral::daemon
