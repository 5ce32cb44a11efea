// serve.images of the daemon config (issue 18, docs/images.md "Pulling by
// digest"): which registries a create may name an image in by digest, and
// how much room the node's pulled images take at most.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace corral::daemon {

struct ImageSettings {
  // HOST[:PORT] of the registries a create's "image": "REG/REPO@sha256:..."
  // may pull from. Empty: none (a create may still name an image the node
  // has by its digest, "sha256:...").
  std::vector<std::string> registries;
  // Of those, the ones reached over plain HTTP or unverified TLS (a
  // registry on loopback or a private network).
  std::vector<std::string> insecure_registries;
  // The pulled images of this node take at most this much (least recently
  // used first out); images built or imported by hand never count.
  std::uint64_t cache_max_bytes = 20ull << 30;
};

}  // namespace corral::daemon
