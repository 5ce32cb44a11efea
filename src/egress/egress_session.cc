#include "egress/egress_session.h"

#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "egress/socket_wait.h"
#include "netns/host_name.h"

namespace corral::net::egress_detail {

namespace {

// netfilter's getsockopt for the destination before NAT (linux/netfilter_ipv4.h,
// not included: it clashes with the libc headers).
constexpr int kSoOriginalDst = 80;

// What classification may buffer: a ClientHello of kMaxClientHelloBytes in
// records of any size, or a request head.
constexpr std::size_t kMaxFirstBytes = kMaxClientHelloBytes + 4 * 1024;
constexpr std::size_t kReadChunk = 16 * 1024;
constexpr milliseconds kLingerOnRefusal{200};

}  // namespace

void Session::refuse(EgressRefusal why, std::string reason, int http_status) {
  ev_.allowed = false;
  ev_.refusal = why;
  ev_.reason = one_line(reason);
  if (http_status == 0 || !http_answer_pending_) return;
  http_answer_pending_ = false;
  const char* text = http_status == 400   ? "Bad Request"
                     : http_status == 403 ? "Forbidden"
                     : http_status == 429 ? "Too Many Requests"
                     : http_status == 502 ? "Bad Gateway"
                     : http_status == 503 ? "Service Unavailable"
                     : http_status == 504 ? "Gateway Timeout"
                                          : "Error";
  std::string body = "corral egress proxy: " + ev_.reason + "\n";
  std::string msg = "HTTP/1.1 " + std::to_string(http_status) + " " + text +
                    "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
                    std::to_string(body.size()) +
                    "\r\nX-Corral-Refusal: " + std::string(egress_refusal_name(why)) +
                    "\r\nConnection: close\r\n\r\n" + body;
  auto deadline = Clock::now() + kLingerOnRefusal;
  if (!send_all(client_, msg, deadline)) return;
  // A lingering close: what the client still sends (a request body) is
  // read and dropped for a moment, so that closing with unread bytes does
  // not reset the connection before the client has read the answer.
  ::shutdown(client_, SHUT_WR);
  char scratch[4096];
  std::size_t dropped = 0;
  while (dropped < 256 * 1024 && wait_fd(client_, POLLIN, deadline) == 1) {
    ssize_t n = ::recv(client_, scratch, sizeof scratch, MSG_DONTWAIT);
    if (n <= 0 && !(n < 0 && (errno == EINTR || errno == EAGAIN))) break;
    if (n > 0) dropped += static_cast<std::size_t>(n);
  }
}

// Reads until the bytes in buf_ say what the connection is. Explicit
// clients must send a request head. Transparent ones (and tunnels after
// CONNECT), `lenient`, may send anything: what is neither TLS nor HTTP is
// tcp at once. A client that has sent nothing for first_bytes_timeout (a
// protocol where the server speaks first) is tcp too, if `quiet_is_tcp`:
// a tcp rule allows the destination, so classifying early changes no
// decision. A client that has started a TLS record or an HTTP request line
// stays that protocol however long it pauses: judged as tcp, a request
// whose Host or SNI names a denied host would reach that host's address
// anyway. It may take until the head deadline: a slow TLS or HTTP client is
// never refused for its pace.
Session::First Session::read_first(bool lenient, bool quiet_is_tcp,
                                   std::chrono::milliseconds head_timeout) {
  const auto head_deadline = Clock::now() + head_timeout;
  const auto stall = px_.options.first_bytes_timeout;
  auto first_deadline = std::min(head_deadline, Clock::now() + stall);
  bool read_at_once = true;
  for (;;) {
    if (!buf_.empty()) {
      if (looks_like_tls(buf_)) {
        hello_ = parse_client_hello(buf_);
        if (hello_.status == TlsHelloStatus::kClientHello) return First::kTls;
        if (hello_.status == TlsHelloStatus::kMalformed) {
          refuse(EgressRefusal::kMalformed, "malformed TLS ClientHello: " + hello_.error);
          return First::kFailed;
        }
        if (buf_.size() >= kMaxFirstBytes) {
          refuse(EgressRefusal::kMalformed,
                 "TLS ClientHello larger than " + std::to_string(kMaxFirstBytes) + " bytes");
          return First::kFailed;
        }
      } else {
        HttpStart s = classify_http_start(buf_);
        if (s == HttpStart::kRequestLine) {
          std::size_t limit = std::min(buf_.size(), kMaxProxyHeadBytes);
          std::size_t end = std::string_view(buf_.data(), limit).find("\r\n\r\n");
          if (end != std::string_view::npos) {
            head_end_ = end + 4;
            return First::kHttp;
          }
          if (buf_.size() >= kMaxProxyHeadBytes) {
            http_answer_pending_ = true;
            refuse(EgressRefusal::kMalformed,
                   "request head longer than " + std::to_string(kMaxProxyHeadBytes) + " bytes",
                   400);
            return First::kFailed;
          }
        } else if (s == HttpStart::kNotHttp) {
          if (lenient) return First::kTcp;
          refuse(EgressRefusal::kMalformed,
                 "not a proxy request: expected CONNECT host:port or an http:// URL");
          return First::kFailed;
        }
      }
    }
    // More bytes are needed. The first time, they are most often there
    // already (a client sends its request right after connecting): read
    // before waiting, and wait only if that found nothing.
    // Whatever is in buf_ here may still become a ClientHello or a request
    // head (the rest returned above): only a client that sent nothing yet
    // can be judged quiet.
    auto deadline = lenient && quiet_is_tcp && buf_.empty() ? first_deadline : head_deadline;
    int w = read_at_once ? 1 : wait_fd(client_, POLLIN, deadline);
    read_at_once = false;
    if (w == 0) {
      // Quiet: the server speaks first. A silent client is judged as tcp
      // (the decision says why it is refused, if it is).
      if (lenient && buf_.empty()) return First::kTcp;
      refuse(EgressRefusal::kTimeout,
             std::string(lenient ? "no complete TLS ClientHello or HTTP request head"
                                 : "no complete request") +
                 " within " + std::to_string(head_timeout.count()) + " ms");
      return First::kFailed;
    }
    std::size_t old = buf_.size();
    buf_.resize(old + kReadChunk);
    ssize_t n = w < 0 ? -1 : ::recv(client_, buf_.data() + old, kReadChunk, MSG_DONTWAIT);
    int err = errno;
    buf_.resize(old + (n > 0 ? static_cast<std::size_t>(n) : 0));
    if (n < 0 && (err == EINTR || err == EAGAIN)) continue;
    if (n == 0 && lenient && !cut()) return First::kTcp;  // half-closed: what it sent is all
    if (n <= 0) {
      refuse(EgressRefusal::kMalformed, n == 0 ? "client closed before a complete request"
                                               : "client connection failed before a request");
      return First::kFailed;
    }
    first_deadline = std::min(head_deadline, Clock::now() + stall);
  }
}

// Decides, resolves, checks the addresses and connects. On failure the
// refusal is recorded (and answered when the client waits for HTTP).
bool Session::route(const Target& t, const std::shared_ptr<const NetworkPolicy>& policy,
                    Verdict& v) {
  v = decide_target(*policy, t);
  ev_.rule = v.rule;
  if (policy->dry_run) {
    // X2: decided (the report says what a real run would do), never
    // resolved or connected: no byte reaches an upstream.
    refuse(EgressRefusal::kDryRun,
           std::string("dry run: nothing was sent; a real run would ") +
               (v.allowed ? "relay it" : "refuse it: " + v.reason),
           503);
    return false;
  }
  if (!v.allowed) {
    refuse(EgressRefusal::kDenied, v.reason, 403);
    return false;
  }
  std::vector<IpAddress> candidates;
  if (v.via_name) {
    // Always connect to what the PROXY resolves for the name, never to the
    // address the sandbox chose: a sandbox cannot send an allowed SNI or
    // Host to an address of its choosing (and corral's DNS may not even
    // have been asked).
    const std::string& name = t.names.front();
    // A sandbox with DNS servers of its own resolves through them here too.
    std::shared_ptr<Resolver> resolver = px_.resolver_for(policy->dns_servers);
    auto addrs = resolver != nullptr ? resolver->resolve(name, policy->request_timeout)
                                     : Result<std::vector<IpAddress>>(make_error(
                                           ErrorCode::kUnavailable, "no resolver configured"));
    if (!addrs || addrs->empty()) {
      refuse(EgressRefusal::kResolveFailed,
             "cannot resolve " + name + ": " +
                 (addrs ? std::string("no addresses") : addrs.error().to_string()),
             502);
      return false;
    }
    std::string first_refusal;
    for (const auto& raw : *addrs) {
      IpAddress a = raw.unmapped();
      Decision c = check_address(*policy, a, t.port, t.protocol);
      if (c.allowed) {
        if (std::find(candidates.begin(), candidates.end(), a) == candidates.end())
          candidates.push_back(a);
      } else if (first_refusal.empty()) {
        first_refusal = name + " resolved to " + a.str() + ": " + c.reason;
        ev_.address = a.str();
      }
    }
    if (candidates.empty()) {
      refuse(EgressRefusal::kAddress, first_refusal, 403);
      return false;
    }
  } else {
    Decision c = check_address(*policy, *t.address, t.port, t.protocol);
    if (!c.allowed) {
      ev_.address = t.address->str();
      refuse(EgressRefusal::kAddress, c.reason, 403);
      return false;
    }
    candidates.push_back(*t.address);
  }
  return connect_upstream(candidates, t.port, *policy);
}

bool Session::connect_upstream(const std::vector<IpAddress>& candidates, std::uint16_t port,
                               const NetworkPolicy& policy) {
  const auto deadline = Clock::now() + policy.request_timeout;
  std::string last_error = "no address";
  bool timed_out = false;
  for (const auto& a : candidates) {
    ev_.address = a.str();
    if (cut()) break;
    UniqueFd fd(::socket(a.v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                         IPPROTO_TCP));
    if (!fd) {
      last_error = "socket: " + std::string(errno_name(errno));
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(px_.mu);
      if (conn_.cut_done) break;
      conn_.upstream = fd.get();
    }
    const ConnectResult c = connect_until(fd.get(), a, port, deadline, client_);
    const int err = c.err;
    timed_out = timed_out || c.timed_out;
    if (err == 0) {
      set_nodelay(fd.get());
      upstream_ = std::move(fd);
      connected_ = a;
      return true;
    }
    {
      std::lock_guard<std::mutex> lock(px_.mu);
      conn_.upstream = -1;
    }
    last_error = "connect to " + Endpoint{a, port}.str() + ": " + std::string(errno_name(err));
    if (timed_out || Clock::now() >= deadline) {
      timed_out = true;
      break;
    }
  }
  if (timed_out) {
    refuse(EgressRefusal::kConnectFailed,
           "connect timed out after " + std::to_string(policy.request_timeout.count()) + " ms (" +
               last_error + ")",
           504);
  } else {
    refuse(EgressRefusal::kConnectFailed, last_error, 502);
  }
  return false;
}

// Registers the connection for set_policy and checks that the policy did
// not change while it was being decided.
bool Session::start_relay(const Target& t, const std::shared_ptr<const NetworkPolicy>& used) {
  std::lock_guard<std::mutex> lock(px_.mu);
  if (conn_.cut_done) return false;
  const auto& now = conn_.sandbox->policy;
  if (now.get() != used.get()) {
    Verdict v = reevaluate(*now, t, connected_);
    if (!v.allowed) {
      ev_.allowed = false;
      ev_.refusal = EgressRefusal::kPolicyChanged;
      ev_.reason = "policy changed: " + one_line(v.reason);
      ev_.rule = v.rule;
      return false;
    }
  }
  conn_.relaying = true;
  conn_.target = t;
  conn_.connected = connected_;
  ev_.allowed = true;
  return true;
}

namespace {

bool same_host(const std::string& a, const std::string& b) { return a == b; }

}  // namespace

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

EgressEvent Session::run() {
  ev_.sandbox = conn_.sandbox->id;
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(client_, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    if (auto e = endpoint_of(ss)) local_ = *e;
  }
  // The destination the sandbox asked for, before the firewall's redirect.
  // Without a NAT entry (a client that connected to the proxy itself) there
  // is none, or it is the proxy's own address: an explicit client.
  original_ = local_;
  sockaddr_in orig{};
  socklen_t olen = sizeof orig;
  if (!local_.address.v6 && ::getsockopt(client_, SOL_IP, kSoOriginalDst, &orig, &olen) == 0 &&
      orig.sin_family == AF_INET) {
    sockaddr_storage os{};
    std::memcpy(&os, &orig, sizeof orig);
    if (auto e = endpoint_of(os)) original_ = *e;
  }
  const bool transparent = !(original_ == local_);
  ev_.explicit_proxy = !transparent;
  if (transparent) {
    ev_.original_address = original_.address.str();
    ev_.port = original_.port;
  }
  const auto policy_now = policy();
  // The internal-service gateway (gateway.h) listens on the host end's port 80.
  if (transparent && px_.options.gateway && original_.address == local_.address &&
      original_.port == 80)
    return to_gateway({});
  const auto head_timeout = std::min(px_.options.head_timeout, policy_now->request_timeout);

  // Whether a tcp rule allows the destination as it is: then a quiet
  // client need not be waited for (see read_first).
  bool quiet_is_tcp = false;
  std::vector<std::string> dns_names;
  if (transparent) {
    if (px_.answers) dns_names = px_.answers->names_for(conn_.sandbox->id, original_.address);
    Target tcp_target;
    tcp_target.names = dns_names;
    tcp_target.names_from_dns = true;
    tcp_target.address = original_.address;
    tcp_target.port = original_.port;
    tcp_target.protocol = kTcp;
    tcp_target.address_fallback = true;
    quiet_is_tcp = decide_target(*policy_now, tcp_target).allowed;
  }
  First first = read_first(transparent, quiet_is_tcp, head_timeout);
  if (first == First::kFailed) return ev_;

  if (first == First::kHttp) {
    http_answer_pending_ = true;
    set_protocol(kHttp);
    auto req = parse_proxy_request(std::string_view(buf_).substr(0, head_end_));
    if (!req) {
      refuse(EgressRefusal::kMalformed, req.error().message, 400);
      return ev_;
    }
    if (!transparent && px_.options.gateway && req->form == ProxyRequest::kAbsolute &&
        req->target_host == kGatewayHost)
      return to_gateway(std::move(buf_));  // an explicit client's gateway request
    if (req->form == ProxyRequest::kConnect) {
      handle_connect(*req);
    } else if (req->form == ProxyRequest::kOrigin && !transparent) {
      refuse(EgressRefusal::kMalformed,
             "this is corral's egress proxy: send CONNECT host:port or an http:// URL", 400);
    } else {
      handle_http(*req, transparent);
    }
    return ev_;
  }

  if (!transparent) {
    refuse(EgressRefusal::kMalformed,
           "not a proxy request: expected CONNECT host:port or an http:// URL");
    return ev_;
  }
  Target t;
  t.address = original_.address;
  t.port = original_.port;
  t.address_fallback = true;
  if (first == First::kTls) {
    set_protocol(kTls);
    t.protocol = kTls;
    ev_.sni = hello_.sni;
    if (hello_.has_sni) t.names.push_back(hello_.sni);
  } else {
    set_protocol(kTcp);
    t.protocol = kTcp;
    t.names = std::move(dns_names);
    t.names_from_dns = true;
  }
  ev_.name = joined(t.names);
  if (!conn_.rate_ok) {
    refuse(EgressRefusal::kRateLimited, "rate limited: too many new connections");
    return ev_;
  }
  Verdict v;
  if (!route(t, policy_now, v)) return ev_;
  if (!start_relay(t, policy_now)) return ev_;
  ev_.reason = v.reason;
  if (first == First::kTls && hello_.has_sni && v.via_name &&
      wants_interception(hello_.sni, original_.port)) {
    intercept(hello_.sni, original_.port, std::move(buf_));
    return ev_;
  }
  relay(std::move(buf_), {}, RequestFraming::kNone, 0);
  return ev_;
}

// A plain HTTP request: origin form (transparent) or absolute form (an
// explicit client, or a transparent one that thinks it talks to a proxy).
bool Session::handle_http(const ProxyRequest& req, bool transparent) {
  Target t;
  t.protocol = kHttp;
  if (req.host_header) ev_.host = *req.host_header;
  std::string name;
  if (req.form == ProxyRequest::kAbsolute) {
    ev_.connect_host = req.target_host;
    name = req.target_host;
    t.port = req.target_port;
    ev_.port = t.port;
    if (req.host_header && !same_host(*req.host_header, req.target_host)) {
      ev_.name = name;
      refuse(EgressRefusal::kMismatch,
             "Host " + *req.host_header + " does not match the URL's host " + req.target_host, 403);
      return false;
    }
  } else {
    t.port = original_.port;
    t.address = original_.address;
    t.address_fallback = true;
    if (req.host_header) name = *req.host_header;
  }
  if (!name.empty() && is_ip_literal(name)) {
    auto literal = IpAddress::parse(name);
    if (transparent && req.form == ProxyRequest::kOrigin && !(*literal == original_.address)) {
      refuse(EgressRefusal::kMismatch,
             "Host " + name + " is not the address connected to (" + original_.address.str() + ")",
             403);
      return false;
    }
    t.address = literal;
    t.address_fallback = false;
  } else if (!name.empty()) {
    t.names.push_back(name);
  }
  ev_.name = name;
  if (!conn_.rate_ok) {
    refuse(EgressRefusal::kRateLimited, "rate limited: too many new connections", 429);
    return false;
  }
  const auto used = policy();
  if (used->dry_run) {
    ev_.method = req.method;
    ev_.path = req.head.path;
  }
  Verdict v;
  if (!route(t, used, v)) return false;
  if (!start_relay(t, used)) {
    if (ev_.refusal == EgressRefusal::kPolicyChanged) refuse(ev_.refusal, ev_.reason, 403);
    return false;
  }
  ev_.reason = v.reason;
  std::string head = req.upstream_head;
  bool secret_head = false;
  const std::string swap_host = !name.empty() ? name : t.address ? t.address->str() : "";
  if (!swap_plain(swap_host, t.port, head, secret_head, req.head)) return false;
  http_answer_pending_ = false;
  relay(std::move(head), buf_.substr(head_end_),
        req.head.chunked ? RequestFraming::kChunked : RequestFraming::kLength,
        req.head.content_length.value_or(0), secret_head);
  return true;
}

// CONNECT host:port, in steps: admit it (the rate, and some protocol
// allowed there), route and connect, open the tunnel, read what the
// tunnel carries, then decide on that protocol and relay.
bool Session::handle_connect(const ProxyRequest& req) {
  Target t;
  if (!admit_connect(req, t)) return false;
  auto used = policy();
  if (!some_protocol_allowed(t, *used)) return false;
  Verdict routed;
  if (!route(t, used, routed)) return false;
  if (!open_tunnel(*used)) return false;
  TunnelStart start;
  if (!read_tunnel_start(req.target_host, *used, t, start)) return false;
  return relay_tunnel(req, used, t, routed, std::move(start));
}

bool Session::admit_connect(const ProxyRequest& req, Target& t) {
  ev_.connect_host = req.target_host;
  ev_.name = req.target_host;
  ev_.port = req.target_port;
  ev_.protocol.clear();
  if (!conn_.rate_ok) {
    refuse(EgressRefusal::kRateLimited, "rate limited: too many new connections", 429);
    return false;
  }
  t.port = req.target_port;
  if (is_ip_literal(req.target_host)) {
    t.address = IpAddress::parse(req.target_host);
  } else {
    t.names.push_back(req.target_host);
  }
  return true;
}

// Before the tunnel is open only the name and port are known: refuse at
// once (with a 403 the client can show) unless some protocol is allowed
// there; the protocol decides once the first bytes through the tunnel
// show what it carries. Leaves in t.protocol the first one allowed.
bool Session::some_protocol_allowed(Target& t, const NetworkPolicy& used) {
  Verdict best;
  for (Protocol p : {kTls, kHttp, kTcp}) {
    t.protocol = p;
    Verdict v = decide_target(used, t);
    if (v.allowed) {
      best = v;
      break;
    }
    if (p == kTls) best = v;
  }
  if (!best.allowed) {
    ev_.rule = best.rule;
    refuse(EgressRefusal::kDenied, best.reason, 403);
    return false;
  }
  return true;
}

bool Session::open_tunnel(const NetworkPolicy& used) {
  if (!send_all(client_, "HTTP/1.1 200 Connection established\r\n\r\n",
                Clock::now() + used.request_timeout)) {
    refuse(EgressRefusal::kMalformed, "client went away before the tunnel opened");
    return false;
  }
  http_answer_pending_ = false;
  // What the client sent after the CONNECT head already belongs to the tunnel.
  buf_.erase(0, head_end_);
  head_end_ = 0;
  ev_.protocol.clear();
  return true;
}

// Reads the first bytes through the tunnel and checks that the names they
// carry (SNI, URL host, Host) are the CONNECT host's; sets t.protocol.
bool Session::read_tunnel_start(const std::string& host, const NetworkPolicy& used, Target& t,
                                TunnelStart& start) {
  Target tcp_target = t;
  tcp_target.protocol = kTcp;
  start.first = read_first(true, decide_target(used, tcp_target).allowed,
                           std::min(px_.options.head_timeout, used.request_timeout));
  if (start.first == First::kFailed) return false;

  if (start.first == First::kTls) {
    set_protocol(kTls);
    t.protocol = kTls;
    ev_.sni = hello_.sni;
    if (hello_.has_sni && !same_host(hello_.sni, host)) {
      refuse(EgressRefusal::kMismatch,
             "TLS SNI " + hello_.sni + " does not match the CONNECT host " + host);
      return false;
    }
    start.head = std::move(buf_);
  } else if (start.first == First::kHttp) {
    set_protocol(kHttp);
    t.protocol = kHttp;
    auto inner = parse_proxy_request(std::string_view(buf_).substr(0, head_end_));
    if (!inner || inner->form == ProxyRequest::kConnect) {
      refuse(EgressRefusal::kMalformed,
             inner ? std::string("CONNECT inside a CONNECT tunnel") : inner.error().message);
      return false;
    }
    if (inner->host_header) ev_.host = *inner->host_header;
    if (inner->form == ProxyRequest::kAbsolute && !same_host(inner->target_host, host)) {
      refuse(EgressRefusal::kMismatch,
             "URL host " + inner->target_host + " does not match the CONNECT host " + host);
      return false;
    }
    if (inner->host_header && !same_host(*inner->host_header, host)) {
      refuse(EgressRefusal::kMismatch,
             "HTTP Host " + *inner->host_header + " does not match the CONNECT host " + host);
      return false;
    }
    start.head = inner->upstream_head;
    start.inner_head = inner->head;
    start.body = buf_.substr(head_end_);
    start.framing = inner->head.chunked ? RequestFraming::kChunked : RequestFraming::kLength;
    start.length = inner->head.content_length.value_or(0);
  } else {
    set_protocol(kTcp);
    t.protocol = kTcp;
    start.head = std::move(buf_);
  }
  return true;
}

// Decides again with the protocol the tunnel carries, then intercepts,
// swaps or relays.
bool Session::relay_tunnel(const ProxyRequest& req,
                           const std::shared_ptr<const NetworkPolicy>& used, const Target& t,
                           const Verdict& routed, TunnelStart start) {
  const std::string& host = req.target_host;
  // Now with the protocol the tunnel carries (the policy may have changed
  // meanwhile: start_relay re-checks against the current one).
  Verdict v = decide_target(*used, t);
  ev_.rule = v.rule;
  if (!v.allowed) {
    refuse(EgressRefusal::kDenied, v.reason);
    return false;
  }
  if (!start_relay(t, used)) return false;
  ev_.reason = v.reason;
  if (start.first == First::kTls && routed.via_name && wants_interception(host, req.target_port)) {
    intercept(host, req.target_port, std::move(start.head));
    return true;
  }
  bool secret_head = false;
  if (start.first == First::kHttp) {
    http_answer_pending_ = true;  // the client waits for an answer inside the tunnel
    if (!swap_plain(host, req.target_port, start.head, secret_head, start.inner_head)) return false;
    http_answer_pending_ = false;
  }
  relay(std::move(start.head), std::move(start.body), start.framing, start.length, secret_head);
  return true;
}
}  // namespace corral::net::egress_detail
