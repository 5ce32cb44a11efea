// A session's data phase (splice_relay.h), and broker mode: the swap of
// broker tokens in plain HTTP heads and the interception of TLS to broker
// hosts (tls_intercept.h, swapped_relay.h).
#include "egress/egress_session.h"
#include "egress/socket_wait.h"
#include "egress/swapped_relay.h"
#include "egress/tls_intercept.h"
#include "secrets/reflection_guard.h"
#include "secrets/secret_value.h"
#include "secrets/token_swapper.h"

namespace corral::net::egress_detail {

void Session::relay(std::string head, std::string body, RequestFraming framing,
                    std::uint64_t length, bool secret_head) {
  if (secret_head && reflection_) {
    relay_swapped_request(std::move(head), std::move(body), framing, length);
    return;
  }
  std::uint64_t head_sent = 0;
  if (secret_head) {
    // The relay keeps its head in buffers of its own: a head that holds a
    // secret goes out from here, and is wiped at once.
    const bool sent =
        send_all(upstream_.get(), head, Clock::now() + policy()->request_timeout, client_);
    head_sent = sent ? head.size() : 0;
    secrets::wipe(head);
    if (!sent) {
      ev_.end = "sending the request head failed";
      return;
    }
  }
  RelaySpec spec;
  spec.client = client_;
  spec.upstream = upstream_.get();
  spec.head = std::move(head);
  spec.body = std::move(body);
  spec.framing = framing;
  spec.length = length;
  spec.idle_timeout = policy()->request_timeout;
  spec.half_close_timeout = px_.options.half_close_timeout;
  spec.pipe_bytes = px_.options.pipe_bytes;
  spec.batch_bytes = px_.options.batch_bytes;
  spec.unsent_bytes = px_.options.unsent_bytes;
  spec.client_sndbuf_bytes = px_.options.client_sndbuf_bytes;
  set_nodelay(client_);  // the proxy adds no coalescing delay of its own
  RelayResult r = relay_connection(std::move(spec));
  ev_.bytes_up = r.bytes_up + head_sent;
  ev_.bytes_down = r.bytes_down;
  ev_.end = std::move(r.end);
}

// --- Broker mode (issue 5) ---------------------------------------------------

bool Session::wants_interception(const std::string& host, std::uint16_t port) const {
  const auto& o = px_.options;
  return o.swapper && o.ca && px_.upstream_tls && !host.empty() &&
         o.swapper->intercepts(conn_.sandbox->id, host, port);
}

void Session::relay_swapped_request(std::string head, std::string body, RequestFraming framing,
                                    std::uint64_t length) {
  SwappedRelaySpec spec;
  spec.client = client_;
  spec.upstream = upstream_.get();
  spec.head = std::move(head);
  spec.body = std::move(body);
  spec.framing = framing;
  spec.length = length;
  spec.idle_timeout = policy()->request_timeout;
  spec.reflection = reflection_;
  spec.scrub = scrub_;
  spec.expect_continue = expect_continue_;
  set_nodelay(client_);
  SwappedRelayResult r = relay_swapped(std::move(spec));
  ev_.bytes_up = r.relay.bytes_up;
  ev_.bytes_down = r.relay.bytes_down;
  ev_.end = std::move(r.relay.end);
  if (r.refused) {
    // An answer corral could not check for the secret (compressed): not
    // relayed, and a 502 if the client has had nothing yet.
    http_answer_pending_ = !r.answered;
    refuse(EgressRefusal::kSecretRefused, ev_.end, 502);
  }
}

bool Session::swap_plain(const std::string& host, std::uint16_t port, std::string& head,
                         bool& secret_head, const http::RequestHead& request) {
  secret_head = false;
  if (!px_.options.swapper) return true;
  secrets::OutboundRequest out{conn_.sandbox->id, host, port, "http"};
  secrets::SwapResult r = px_.options.swapper->swap(out, head);
  if (r.outcome == secrets::SwapOutcome::kRefused) {
    ev_.secrets = r.secrets;
    std::string names = joined(r.secrets);
    const std::string dest = host + ":" + std::to_string(port);
    std::string stale = secrets::stale_token_refusal(r, dest);
    refuse(EgressRefusal::kSecretRefused,
           !stale.empty() ? stale
                          : "the token of secret " + names + " may not be sent to " + dest +
                                " in plain HTTP" + (r.reason.empty() ? "" : " (" + r.reason + ")"),
           403);
    return false;
  }
  if (r.outcome == secrets::SwapOutcome::kSwapped) {
    ev_.secrets = r.secrets;
    secret_head = true;
    // The answer is scanned for what went in: uncompressed, and nothing is
    // sent when the scan cannot be set up.
    auto set = secrets::reflection_set(r.swapped);
    if (!set) {
      secrets::wipe(head);
      refuse(EgressRefusal::kSecretRefused,
             "the answer could not be checked for the secret: " + set.error().message, 502);
      return false;
    }
    reflection_ = std::move(*set);
    scrub_ = {request.method == "HEAD", request.version_minor >= 1};
    expect_continue_ =
        request.expect_continue && (request.chunked || request.content_length.value_or(0) > 0);
    if (reflection_) secrets::ask_identity_encoding(head);
  }
  return true;
}

void Session::intercept(const std::string& host, std::uint16_t port, std::string client_hello) {
  ev_.intercepted = true;
  auto leaf = px_.options.ca->leaf_for(host);
  if (!leaf) {
    refuse(EgressRefusal::kMalformed, "no certificate for " + host + ": " + leaf.error().message);
    return;
  }
  const auto p = policy();
  InterceptSpec spec;
  spec.sandbox = conn_.sandbox->id;
  spec.host = host;
  spec.port = port;
  spec.client = client_;
  spec.upstream = upstream_.get();
  spec.client_hello = std::move(client_hello);
  spec.leaf = std::move(*leaf);
  spec.upstream_ctx = px_.upstream_tls.get();
  spec.swapper = px_.options.swapper.get();
  spec.head_timeout = std::min(px_.options.head_timeout, p->request_timeout);
  spec.idle_timeout = p->request_timeout;
  set_nodelay(client_);
  InterceptResult r = relay_intercepted(std::move(spec));
  ev_.bytes_up = r.bytes_up;
  ev_.bytes_down = r.bytes_down;
  ev_.secrets = std::move(r.secrets);
  if (!r.method.empty()) ev_.host = host;
  switch (r.outcome) {
    case InterceptOutcome::kRelayed:
      ev_.end = r.end;
      break;
    case InterceptOutcome::kNoRequest:
    case InterceptOutcome::kClientTls:
      ev_.end = r.reason;  // allowed; the sandbox sent nothing to forward
      break;
    case InterceptOutcome::kUpstreamTls:
      refuse(EgressRefusal::kUpstreamTls, r.reason);
      break;
    case InterceptOutcome::kSecretRefused:
      refuse(EgressRefusal::kSecretRefused, r.reason);
      break;
    case InterceptOutcome::kMismatch:
      refuse(EgressRefusal::kMismatch, r.reason);
      break;
    case InterceptOutcome::kMalformed:
      refuse(EgressRefusal::kMalformed, r.reason);
      break;
    case InterceptOutcome::kTimeout:
      refuse(EgressRefusal::kTimeout, r.reason);
      break;
  }
}

}  // namespace corral::net::egress_detail
