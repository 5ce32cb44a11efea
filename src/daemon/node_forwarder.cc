#include "daemon/node_forwarder.h"

#include <strings.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "api/api_error.h"
#include "daemon/api_context.h"
#include "daemon/metrics.h"
#include "http/http_client.h"
#include "store/state_store.h"

namespace corral::daemon {

namespace {

constexpr std::string_view kForwardedBy = "x-corral-forwarded-by";
constexpr std::string_view kSignature = "x-corral-signature";
constexpr std::string_view kNamespace = "x-corral-namespace";

std::int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Request headers the owner needs; the caller's Authorization stays here
// (the signature stands for it), and hop-by-hop ones are the client's.
bool passes_on(std::string_view name) {
  return name == "content-type" || name == "accept" || name == "idempotency-key" ||
         name == "last-event-id" || name == "range";
}

// What an E2B call carries besides (envd's token and sandbox, Connect's
// timeouts, an upload's encoding, the user name of a Basic credential,
// which envd runs commands as). X-API-Key stays here: the signature stands
// for it.
bool e2b_passes_on(std::string_view name, std::string_view value) {
  if (name == "authorization")
    return value.size() >= 6 && strncasecmp(value.data(), "basic ", 6) == 0;
  return name == "x-access-token" || name == "e2b-sandbox-id" ||
         name == "connect-protocol-version" || name == "connect-timeout-ms" ||
         name == "content-encoding" || name == "keepalive-ping-interval";
}

// Response headers relayed back; framing is the server's own.
bool relays_back(std::string_view name) {
  return name != "connection" && name != "keep-alive" && name != "transfer-encoding" &&
         name != "content-length";
}

}  // namespace

NodeForwarder::InFlight::InFlight(Gauge& gauge) : gauge_(gauge) { gauge_.inc(); }
NodeForwarder::InFlight::~InFlight() { gauge_.dec(); }

NodeForwarder::NodeForwarder(StateStore& store, std::optional<ClusterKey> key,
                             MetricsRegistry& metrics)
    : store_(store), key_(std::move(key)), metrics_(metrics) {}

bool NodeForwarder::is_forwarded(const http::RequestHead& head) {
  return head.header(kForwardedBy).has_value() || head.header(kSignature).has_value();
}

std::optional<std::string> NodeForwarder::forwarded_namespace(const http::RequestHead& head) const {
  if (!key_) return std::nullopt;
  auto from = head.header(kForwardedBy);
  auto sig = head.header(kSignature);
  auto ns = head.header(kNamespace);
  if (!from || !sig || !ns || ns->empty()) return std::nullopt;
  if (!key_->verify(*sig, head.method, head.target, *ns, *from, unix_seconds())) {
    metrics_.counter("corral_forward_refused_total", "Forwarded requests whose signature failed")
        .inc();
    return std::nullopt;
  }
  return std::string(*ns);
}

bool NodeForwarder::relay(const http::RequestHead& head, http::BodyReader& body,
                          http::ResponseWriter& out, const std::string& ns, const std::string& id) {
  auto record = store_.get(id);
  if (is_forwarded(head)) {
    // Forwarded once at most. One that reached a node that does not run
    // the sandbox (an address that leads back to the sender, or to another
    // node) is refused, never handled as if it were this node's.
    if (record && !record->node.empty() && record->node != store_.node() &&
        !is_final(record->state)) {
      send_error(
          out, api::make_api_error(api::ApiErrorCode::kConflict,
                                   "node " + store_.node() + " got a forwarded call for sandbox " +
                                       id + ", which runs on node " + record->node,
                                   "",
                                   "check serve.node.address of node " + record->node +
                                       ": it must reach that node, not another"));
      return true;
    }
    return false;
  }
  if (!record || record->node == store_.node() || record->node.empty() || is_final(record->state))
    return false;
  const bool info_only = head.method == "GET" && head.path == "/v1/sandboxes/" + id;
  auto node = store_.get_node(record->node);
  const bool live = node && node->state == NodeState::kLive && !record->lost_at_ms;
  if (!live) {
    if (info_only) return false;  // the stored record says "lost"
    send_error(out, api::make_api_error(
                        api::ApiErrorCode::kConflict,
                        "sandbox " + id + " ran on node " + record->node + ", which is not live (" +
                            (node ? std::string(node_state_name(node->state)) : "unknown") +
                            "): it takes no more work",
                        "", "create a new sandbox; the node destroys it when it comes back"));
    return true;
  }
  if (!key_) {
    if (info_only) return false;  // the stored record, without the owner's live usage
    send_error(
        out, api::make_api_error(api::ApiErrorCode::kConflict,
                                 "sandbox " + id + " runs on node " + node->id + " (" +
                                     node->address + "), and this node cannot forward calls to it",
                                 "",
                                 "call that node directly, or give every node the same "
                                 "serve.cluster_key_file (docs/fleet.md)"));
    return true;
  }
  forward(*node, "sandbox " + id + " runs", head, body, out, ns, /*answer_unreached=*/true);
  return true;
}

bool NodeForwarder::relay_task(const http::RequestHead& head, http::BodyReader& body,
                               http::ResponseWriter& out, const std::string& ns,
                               const std::string& id,
                               const std::vector<std::pair<std::string, std::string>>& query) {
  auto task = store_.get_task(id);
  if (!task || !task->node || task->node->empty() || is_finished(task->status)) return false;
  const std::string& holder = *task->node;
  if (is_forwarded(head)) {
    if (holder == store_.node()) return false;
    send_error(
        out, api::make_api_error(api::ApiErrorCode::kConflict,
                                 "node " + store_.node() + " got a forwarded call for task " + id +
                                     ", which node " + holder + " holds",
                                 "",
                                 "check serve.node.address of node " + holder +
                                     ": it must reach that node, not another"));
    return true;
  }
  if (holder == store_.node()) return false;
  // A plain GET: the store has what the holder wrote, here as there.
  const bool waits =
      std::any_of(query.begin(), query.end(), [](const auto& kv) { return kv.first == "wait"; });
  if (head.method == "GET" && head.path == "/v1/tasks/" + id && !waits) return false;
  // A holder that is not live, cannot be reached, or no key to sign with:
  // answered here from the store (a lost node's tasks are the sweep's).
  auto node = store_.get_node(holder);
  if (!key_ || !node || node->state != NodeState::kLive) return false;
  return forward(*node, "task " + id + " is held", head, body, out, ns, /*answer_unreached=*/false);
}

bool NodeForwarder::forward(const NodeRecord& node, const std::string& what,
                            const http::RequestHead& head, http::BodyReader& body,
                            http::ResponseWriter& out, const std::string& ns,
                            bool answer_unreached) {
  auto call = open_relay(node, head, body, ns, out, /*e2b_headers=*/false);
  if (!call) {
    // Not even connected: nothing of the request was read or sent.
    if (!answer_unreached && !call.error().sent) return false;
    send_error(out, api::make_api_error(api::ApiErrorCode::kUnavailable,
                                        what + " on node " + node.id + " (" + node.address +
                                            "), which cannot be reached: " + call.error().why,
                                        "", "retry; if it persists, the node may be down"));
    return true;
  }
  relay_answer(*call, node.id, head, out);
  return true;
}

tl::expected<NodeForwarder::Call, NodeForwarder::CallError> NodeForwarder::open_relay(
    const NodeRecord& node, const http::RequestHead& head, http::BodyReader& body,
    const std::string& ns, http::ResponseWriter& out, bool e2b_headers) {
  http::BodySource source = [&body](char* buf, std::size_t cap) { return body.read(buf, cap); };
  // The caller's framing: its length, chunked, or no body at all.
  const std::optional<std::uint64_t> length =
      head.chunked ? std::nullopt : std::optional<std::uint64_t>(head.content_length.value_or(0));
  auto call = open_call(node, head, head.target, ns, source, length, out, e2b_headers);
  if (!call)
    metrics_.counter("corral_forward_errors_total", "Calls that could not be forwarded").inc();
  return call;
}

tl::expected<NodeForwarder::Call, NodeForwarder::CallError> NodeForwarder::open_call(
    const NodeRecord& node, const http::RequestHead& head, const std::string& target,
    const std::string& ns, const http::BodySource& source, std::optional<std::uint64_t> length,
    http::ResponseWriter& out, bool e2b_headers) {
  auto endpoint = http::Endpoint::parse("http://" + node.address);
  if (!endpoint) return tl::unexpected(CallError{endpoint.error().message, false});
  auto client = http::Client::connect(*endpoint, std::chrono::seconds(5));
  if (!client) return tl::unexpected(CallError{client.error().message, false});
  // A call may wait for a command as long as it runs (exec, wait, follow):
  // the owner's own timeouts bound it, not this relay's.
  client->set_io_timeout(std::chrono::hours(1));
  client->end_when_gone(out.fd());
  auto in_flight = std::make_unique<InFlight>(
      metrics_.gauge("corral_forwarded_in_flight", "Calls being relayed to another node now"));
  http::Headers headers;
  for (const auto& h : head.headers)
    if (passes_on(h.name) || (e2b_headers && e2b_passes_on(h.name, h.value)))
      headers.push_back(h);
  headers.push_back({std::string(kForwardedBy), store_.node()});
  headers.push_back({std::string(kNamespace), ns});
  headers.push_back({std::string(kSignature),
                     key_->sign(head.method, target, ns, store_.node(), unix_seconds())});
  auto answer = client->send_streaming(head.method, target, headers, source, length);
  if (!answer) return tl::unexpected(CallError{answer.error().message, true});
  metrics_.counter("corral_forwarded_total", "Calls forwarded to the node that runs the sandbox")
      .inc();
  return Call{std::make_unique<http::Client>(std::move(*client)), std::move(*answer),
              std::move(in_flight)};
}

void NodeForwarder::relay_answer(Call& call, const std::string& node_id,
                                 const http::RequestHead& head, http::ResponseWriter& out) {
  http::Headers back;
  for (const auto& h : call.answer.headers)
    if (relays_back(h.name)) back.push_back(h);
  back.push_back({"x-corral-node", node_id});
  if (head.method == "HEAD") {
    (void)out.send(call.answer.status, back, "");
    return;
  }
  if (!out.start(call.answer.status, back,
                 call.answer.chunked ? std::nullopt : call.answer.content_length))
    return;
  char buf[64 * 1024];
  for (;;) {
    auto n = call.client->read_body(buf, sizeof buf);
    if (!n || *n == 0) break;  // a cut answer ends the relayed one short
    if (!out.write(std::string_view(buf, *n))) break;
  }
  (void)out.finish();
}

std::optional<NodeRecord> NodeForwarder::e2b_owner(const http::RequestHead& head,
                                                   const std::string& id) {
  if (!key_ || is_forwarded(head)) return std::nullopt;
  auto record = store_.get(id);
  if (!record || record->node.empty() || record->node == store_.node() ||
      is_final(record->state) || record->lost_at_ms)
    return std::nullopt;
  auto node = store_.get_node(record->node);
  if (!node || node->state != NodeState::kLive) return std::nullopt;
  return std::move(*node);
}

bool NodeForwarder::forward_e2b(const NodeRecord& node, const http::RequestHead& head,
                                http::BodyReader& body, http::ResponseWriter& out,
                                const std::string& ns) {
  auto call = open_relay(node, head, body, ns, out, /*e2b_headers=*/true);
  if (!call) return false;
  relay_answer(*call, node.id, head, out);
  return true;
}

NodeForwarder::CreateOutcome NodeForwarder::forward_create(
    const http::RequestHead& head, const std::string& body, http::ResponseWriter& out,
    const std::string& ns, const NodeRecord& node, const std::string& target, std::string* lost) {
  if (!key_) return CreateOutcome::kNoKey;
  std::size_t sent = 0;
  http::BodySource source = [&](char* buf, std::size_t cap) -> Result<std::size_t> {
    const std::size_t n = std::min(cap, body.size() - sent);
    std::memcpy(buf, body.data() + sent, n);
    sent += n;
    return n;
  };
  auto call = open_call(node, head, target, ns, source, body.size(), out);
  if (!call) {
    metrics_.counter("corral_forward_errors_total", "Calls that could not be forwarded").inc();
    // Not connected: the node never saw the create, another may take it.
    if (!call.error().sent) return CreateOutcome::kNotReached;
    *lost = "the create was sent to node " + node.id + " (" + node.address +
            "), whose answer was lost: " + call.error().why;
    return CreateOutcome::kLost;
  }
  // Full there after all (its own count is the last word): another node may
  // have room.
  if (call->answer.status == 429 || call->answer.status == 507) return CreateOutcome::kFull;
  relay_answer(*call, node.id, head, out);
  return CreateOutcome::kAnswered;
}

}  // namespace corral::daemon
