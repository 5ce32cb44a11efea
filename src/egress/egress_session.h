// One connection through the egress proxy, from its first byte to its
// audit event (egress_proxy.h says what the proxy does with it): what it
// is (read_first), what the policy says (route), the CONNECT tunnel, the
// data phase, and broker mode (egress_session_relay.cc). Internal to
// src/egress: egress_proxy.cc runs one Session per admitted connection.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "egress/egress_proxy_state.h"
#include "egress/proxy_request.h"
#include "egress/scrubbed_response.h"
#include "egress/splice_relay.h"
#include "egress/tls_client_hello.h"
#include "http/http_message.h"
#include "secrets/redactor.h"

namespace corral::net::egress_detail {

using std::chrono::milliseconds;

// An address and port, as the proxy logs them ("[v6]:port").
struct Endpoint {
  IpAddress address;
  std::uint16_t port = 0;
  bool operator==(const Endpoint&) const = default;
  std::string str() const {
    return (address.v6 ? "[" + address.str() + "]" : address.str()) + ":" + std::to_string(port);
  }
};

inline std::optional<Endpoint> endpoint_of(const sockaddr_storage& ss) {
  auto a = IpAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&ss));
  if (!a) return std::nullopt;
  Endpoint e{a->unmapped(), 0};
  e.port = ss.ss_family == AF_INET ? ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port)
                                   : ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  return e;
}

inline void set_nodelay(int fd) {
  int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// The names joined by ",", as audit records list them.
std::string joined(const std::vector<std::string>& names);

// The work on one connection, from the first byte to the audit event.
class Session {
 public:
  Session(EgressProxy::Impl& px, Conn& conn, int client) : px_(px), conn_(conn), client_(client) {}

  // Serves the connection; the event says how it ended.
  EgressEvent run();
  // The upstream socket, if one was opened (closed by the caller after
  // unregistering).
  UniqueFd take_upstream() { return std::move(upstream_); }
  // Handed to the gateway, which audits it itself: no EgressEvent.
  bool gateway_served() const { return gateway_served_; }

 private:
  enum class First { kTls, kHttp, kTcp, kFailed };

  std::shared_ptr<const NetworkPolicy> policy() const {
    std::lock_guard<std::mutex> lock(px_.mu);
    return conn_.sandbox->policy;
  }
  bool cut() const {
    std::lock_guard<std::mutex> lock(px_.mu);
    return conn_.cut_done;
  }

  // Ends the connection without relaying: audit fields, and an HTTP answer
  // when the client spoke HTTP and has not been answered yet.
  void refuse(EgressRefusal why, std::string reason, int http_status = 0);
  // `head_timeout`: how long the whole first head may take (the proxy's
  // head timeout or the sandbox's shorter network timeout).
  First read_first(bool lenient, bool quiet_is_tcp, std::chrono::milliseconds head_timeout);
  bool handle_http(const ProxyRequest& req, bool transparent);
  bool handle_connect(const ProxyRequest& req);
  // The steps of handle_connect.
  struct TunnelStart {
    First first = First::kFailed;
    std::string head, body;  // what goes upstream first
    RequestFraming framing = RequestFraming::kNone;
    std::uint64_t length = 0;
    http::RequestHead inner_head;  // HTTP inside the tunnel: its parsed head
  };
  bool admit_connect(const ProxyRequest& req, Target& t);
  bool some_protocol_allowed(Target& t, const NetworkPolicy& used);
  bool open_tunnel(const NetworkPolicy& used);
  bool read_tunnel_start(const std::string& host, const NetworkPolicy& used, Target& t,
                         TunnelStart& start);
  bool relay_tunnel(const ProxyRequest& req, const std::shared_ptr<const NetworkPolicy>& used,
                    const Target& t, const Verdict& routed, TunnelStart start);
  bool route(const Target& target, const std::shared_ptr<const NetworkPolicy>& policy,
             Verdict& verdict);
  bool connect_upstream(const std::vector<IpAddress>& candidates, std::uint16_t port,
                        const NetworkPolicy& policy);
  bool start_relay(const Target& target, const std::shared_ptr<const NetworkPolicy>& used);
  // The data phase: `head` then `body` (the bytes already read) go upstream
  // first; `framing` and `length` bound a plain HTTP request.
  // `secret_head`: the head holds swapped-in secret values; it is sent
  // first and wiped before the relay starts.
  void relay(std::string head, std::string body, RequestFraming framing, std::uint64_t length,
             bool secret_head = false);
  // Broker mode (issue 5).
  bool wants_interception(const std::string& host, std::uint16_t port) const;
  void intercept(const std::string& host, std::uint16_t port, std::string client_hello);
  // Gives a plain HTTP head to the swapper (via "http"). False: refused,
  // answered 403 and recorded. `secret_head` says whether values went in;
  // then the answer will be scrubbed (reflection_, scrub_).
  bool swap_plain(const std::string& host, std::uint16_t port, std::string& head, bool& secret_head,
                  const http::RequestHead& request);
  // The data phase of a request that carried a secret (swapped_relay.h).
  void relay_swapped_request(std::string head, std::string body, RequestFraming framing,
                             std::uint64_t length);
  void set_protocol(Protocol p) { ev_.protocol = protocol_name(p); }
  EgressEvent to_gateway(std::string already_read) {
    gateway_served_ = true;
    {
      std::lock_guard<std::mutex> lock(px_.mu);
      conn_.gateway = true;
    }
    px_.options.gateway(
        GatewayConnection{conn_.sandbox->id, client_, std::move(already_read), policy()});
    return ev_;
  }

  EgressProxy::Impl& px_;
  Conn& conn_;
  int client_;
  UniqueFd upstream_;
  std::string buf_;  // bytes read from the client and not yet forwarded
  TlsHello hello_;
  std::size_t head_end_ = 0;
  bool http_answer_pending_ = false;  // the client waits for an HTTP answer from the proxy
  Endpoint local_;
  Endpoint original_;
  IpAddress connected_;
  EgressEvent ev_;
  bool gateway_served_ = false;
  // Set by swap_plain when it swapped: the response scan (issue 12).
  std::shared_ptr<const secrets::RedactionSet> reflection_;
  ScrubOptions scrub_;
  bool expect_continue_ = false;
};

}  // namespace corral::net::egress_detail
