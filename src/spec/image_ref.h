// How a sandbox names its image (issue 18, docs/images.md): by name (an
// image of the node's store), by the digest of its manifest alone
// ("sha256:<hex>", an image the node has), or by a reference to a registry
// pinned by that digest (which a node may pull).
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace corral {

// An image in a registry pinned by the digest of its manifest:
// HOST[:PORT]/PATH@sha256:<64 hex> (issue 18, docs/images.md "Pulling by
// digest"). A tag can be moved; a digest names one image for ever.
struct DigestReference {
  std::string registry;    // HOST[:PORT]
  std::string repository;  // PATH (a/b/c)
  std::string digest;      // sha256:<64 lowercase hex>
  std::string text() const { return registry + "/" + repository + "@" + digest; }
};
Result<DigestReference> parse_digest_reference(std::string_view text);
// Where `corral image push` puts an image: HOST[:PORT]/PATH[:TAG], the tag
// "latest" when none is given. What the push answers is the
// DigestReference that pins what was pushed.
struct PushTarget {
  std::string registry;    // HOST[:PORT]
  std::string repository;  // PATH (a/b/c)
  std::string tag;         // [A-Za-z0-9_][A-Za-z0-9._-]{0,127}
  std::string text() const { return registry + "/" + repository + ":" + tag; }
  DigestReference pinned(std::string digest) const {
    return DigestReference{registry, repository, std::move(digest)};
  }
};
Result<PushTarget> parse_push_target(std::string_view text);
// "sha256:<hex>" alone (64 lowercase hex digits).
bool valid_digest(std::string_view text);
// A registry as a reference names it: HOST[:PORT] (a DNS name or an IPv4
// address; an IPv6 one in brackets).
bool valid_registry(std::string_view host_port);
// A name of the node's image store: [a-z0-9][a-z0-9._-]{0,62}.
bool valid_image_name(std::string_view text);
// What a spec's "image" may be: a name, a digest, or a digest reference.
bool valid_image_ref(std::string_view text);

}  // namespace corral
