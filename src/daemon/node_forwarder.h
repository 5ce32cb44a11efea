// NodeForwarder: one API on every node (issue 18, docs/fleet.md). A call on
// a sandbox that another node of the fleet runs is sent on to that node,
// signed with the cluster key (daemon/cluster_key.h), and its answer,
// streams included, is relayed back as it comes. The owner authenticates
// the signature in place of an API key and acts for the caller's
// namespace, as if the caller had called it directly.
//
// A request is forwarded once at most (a forwarded request is always
// handled where it lands), only to a live node, and only for a sandbox
// that is not yet cleaned or a task not yet finished. Without a cluster key a node answers 409 with
// the owner's id and address instead.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "daemon/cluster_key.h"
#include "http/http_client.h"
#include "http/http_message.h"
#include "http/http_server.h"
#include "store/node_record.h"

namespace corral {
class Gauge;
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
  // The same for a request on task `id` (GET with ?wait, cancel, log,
  // outputs): sent to the live node that holds it (claimed it to run),
  // whose worker acts on it and whose wait wakes when it ends. A task
  // nobody holds, held here, finished, held by a node that is not live or
  // cannot be reached (or without a cluster key), and a plain GET (the
  // store has what the holder wrote) are handled here: false.
  // `query` is the request's, parsed.
  bool relay_task(const http::RequestHead& head, http::BodyReader& body, http::ResponseWriter& out,
                  const std::string& ns, const std::string& id,
                  const std::vector<std::pair<std::string, std::string>>& query);

  // Sends a create (its JSON `body`, read already) to `target` on `node`
  // (a create path with ?placement=<id>: the placement a placement chose,
  // store/placement.h, which the node's stored sandbox fills).
  enum class CreateOutcome {
    kAnswered,    // the node's answer is on `out`
    kLost,        // sent, and its answer was lost: *lost says so (the caller answers)
    kFull,        // the node refused it for capacity (429, 507): place again
    kNotReached,  // no connection: the node never saw it, place again
    kNoKey,       // this node has no cluster key: it cannot forward
  };
  CreateOutcome forward_create(const http::RequestHead& head, const std::string& body,
                               http::ResponseWriter& out, const std::string& ns,
                               const NodeRecord& node, const std::string& target,
                               std::string* lost);
  // The E2B facade's calls (docs/fleet.md "E2B"): the live node, not this
  // one, that runs sandbox `id`, when the call is to go there (a cluster
  // key, a record not final, not forwarded already); nullopt otherwise.
  std::optional<NodeRecord> e2b_owner(const http::RequestHead& head, const std::string& id);
  // Sends an E2B call to `node`, signed for namespace `ns`, with the
  // headers envd and the control plane read (the access token, the sandbox
  // id, Connect's timeouts, a Basic user name; never the X-API-Key, which
  // the signature stands for), and relays the answer as it comes. False
  // when the node could not be reached and nothing was sent: the caller
  // answers.
  bool forward_e2b(const NodeRecord& node, const http::RequestHead& head, http::BodyReader& body,
                   http::ResponseWriter& out, const std::string& ns);

  // ClusterKey::id of this node's key ("" without one).
  std::string key_id() const { return key_ ? key_->id() : ""; }

 private:
  // Counted in corral_forwarded_in_flight from before it is sent until
  // its answer is relayed (or not).
  class InFlight {
   public:
    explicit InFlight(Gauge& gauge);
    ~InFlight();
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

   private:
    Gauge& gauge_;
  };
  struct Call {
    std::unique_ptr<http::Client> client;
    http::ResponseHead answer;
    std::unique_ptr<InFlight> in_flight;
  };
  struct CallError {
    std::string why;
    bool sent = false;  // connected, and the request may have reached the node
  };
  // Sends the request to `node`, signed, with `head`'s passable headers.
  // The call ends, and its connection to the node closes, as soon as the
  // caller (`out`'s connection) goes away, however long the node's answer
  // would take.
  tl::expected<Call, CallError> open_call(const NodeRecord& node, const http::RequestHead& head,
                                          const std::string& target, const std::string& ns,
                                          const http::BodySource& source,
                                          std::optional<std::uint64_t> length,
                                          http::ResponseWriter& out, bool e2b_headers = false);
  // open_call with the caller's own target, body and framing; a failure is
  // counted (corral_forward_errors_total).
  tl::expected<Call, CallError> open_relay(const NodeRecord& node, const http::RequestHead& head,
                                           http::BodyReader& body, const std::string& ns,
                                           http::ResponseWriter& out, bool e2b_headers);
  // Sends the caller's request to `node` and relays its answer: true. When
  // it cannot be reached, 503 saying "<what> on node N (address), which
  // cannot be reached" (true), or, without `answer_unreached` and when not
  // a byte of the request was sent, nothing (false: handle it here).
  bool forward(const NodeRecord& node, const std::string& what, const http::RequestHead& head,
               http::BodyReader& body, http::ResponseWriter& out, const std::string& ns,
               bool answer_unreached);
  // Relays the node's answer back to the caller as it comes.
  void relay_answer(Call& call, const std::string& node_id, const http::RequestHead& head,
                    http::ResponseWriter& out);

  StateStore& store_;
  std::optional<ClusterKey> key_;
  MetricsRegistry& metrics_;
};

}  // namespace corral::daemon
