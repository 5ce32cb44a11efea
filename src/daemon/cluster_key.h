// ClusterKey: the secret the nodes of a fleet share (serve.cluster_key_file;
// issue 18, docs/fleet.md) to sign the requests one node forwards to
// another. A forwarded request carries
//
//   X-Corral-Forwarded-By: <node id>
//   X-Corral-Namespace:    <the caller's namespace>
//   X-Corral-Signature:    <unix seconds>.<hex HMAC-SHA256>
//
// where the MAC covers a version tag, the method, the target (path and
// query as sent), the namespace, the sending node and the time. The owner
// node accepts it in place of an API key when the MAC matches (constant
// time) and the time is within kMaxSkew of its clock. The key never
// travels; the body is not signed (the transport's job: keep node-to-node
// traffic on a private network or behind TLS).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace corral::daemon {

class ClusterKey {
 public:
  static constexpr std::chrono::seconds kMaxSkew{60};

  // Reads `path`: a regular file of root's (or the daemon's), mode 0600,
  // holding at least 64 hex digits (32 bytes) on its first line.
  static Result<ClusterKey> load(const std::string& path);
  // A key of these bytes (tests).
  static ClusterKey of_bytes(std::string bytes);

  // Names the key without giving it away (16 hex digits of an HMAC of a
  // fixed label): stored with the node's registration, so that nodes know
  // which others accept their forwarded calls.
  std::string id() const;

  // A secret of its own for another use (32 bytes, HMAC-SHA256 of a
  // version tag and `label` under the key), the same on every node that
  // has the key: the E2B facade's access-token key in a fleet, so that any
  // node checks the token of any node's sandbox.
  std::string derive(std::string_view label) const;

  // The X-Corral-Signature value for a request.
  std::string sign(std::string_view method, std::string_view target, std::string_view ns,
                   std::string_view from_node, std::int64_t unix_seconds) const;
  // Whether `signature` is one this key made for the request, at most
  // kMaxSkew from `now_seconds`.
  bool verify(std::string_view signature, std::string_view method, std::string_view target,
              std::string_view ns, std::string_view from_node, std::int64_t now_seconds) const;

 private:
  explicit ClusterKey(std::string bytes) : bytes_(std::move(bytes)) {}
  std::string mac(std::string_view method, std::string_view target, std::string_view ns,
                  std::string_view from_node, std::int64_t unix_seconds) const;
  std::string bytes_;
};

}  // namespace corral::daemon
