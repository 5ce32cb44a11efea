// NodeForwarder: one API on every node (issue 18, docs/fleet.md). A call on
// a sandbox that another node of the fleet runs is sent on to that node,
// signed with the cluster key (daemon/cluster_key.h), and its answer,
// streams included, is relayed back as it comes. The owner authenticates
// the signature in place of an API key and acts for the caller's
// namespace, as if the caller had called it directly.
//
// A request is forwarded once at most (a forwarded request is always
// handled where it lands), only to a live node, and only for a sandbox
// that is not yet cleaned. Without a cluster key a node answers 409 with
// the owner's id and address instead.
#pragma once

#include <optional>
#include <string>

#include "daemon/cluster_key.h"
#include "http/http_message.h"
#include "http/http_server.h"

namespace corral {
class MetricsRegistry;
class StateStore;
}  // namespace corral

namespace corral::daemon {

class NodeForwarder {
 public:
  NodeForwarder(StateStore& store, std::optional<ClusterKey> key, MetricsRegistry& metrics);

  // A forwarded request whose signature this node's key verifies: the
  // caller's namespace it carries. Empty for any other request.
  std::optional<std::string> forwarded_namespace(const http::RequestHead& head) const;
  static bool is_forwarded(const http::RequestHead& head);

  // For a request on sandbox `id` (already authenticated, `ns` the
  // caller's): true when it answered on `out` (relayed the owner's answer,
  // or said why it cannot), false when the sandbox is to be handled here
  // (this node's, unknown, ended, or a lost one's stored record read).
  bool relay(const http::RequestHead& head, http::BodyReader& body, http::ResponseWriter& out,
             const std::string& ns, const std::string& id);

 private:
  StateStore& store_;
  std::optional<ClusterKey> key_;
  MetricsRegistry& metrics_;
};

}  // namespace corral::daemon
