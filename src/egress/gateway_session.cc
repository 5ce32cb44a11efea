// One gateway request, from its first byte to its audit event
// (Gateway::serve, gateway.h): one function per step, in the order run()
// states. A step either moves the request on and returns true, or refuses
// it (refuse(): our answer, the event's refusal and reason) and returns
// false; serve() then audits the event, once, whatever happened.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "base/json_string.h"
#include "base/unique_fd.h"
#include "http/char_class.h"
#include "http/http_message.h"
#include "egress/gateway.h"
#include "egress/gateway_token.h"
#include "egress/proxy_request.h"
#include "egress/scrubbed_response.h"
#include "egress/socket_wait.h"
#include "egress/tls_stream.h"
#include "secrets/reflection_guard.h"
#include "secrets/secret_value.h"
#include "secrets/token_swapper.h"

namespace corral::net {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::size_t kChunk = 64 * 1024;
constexpr milliseconds kLingerOnRefusal{200};

int status_of(GatewayRefusal r) {
  switch (r) {
    case GatewayRefusal::kMalformed:
    case GatewayRefusal::kPath:
      return 400;
    case GatewayRefusal::kNoToken:
    case GatewayRefusal::kBadToken:
      return 401;
    case GatewayRefusal::kUnknownService:
      return 404;
    case GatewayRefusal::kNotGranted:
    case GatewayRefusal::kMethod:
    case GatewayRefusal::kPathNotAllowed:
    case GatewayRefusal::kSecretRefused:
      return 403;
    case GatewayRefusal::kRateLimited:
      return 429;
    case GatewayRefusal::kLengthRequired:
      return 411;
    case GatewayRefusal::kUpstreamFailed:
    case GatewayRefusal::kUpstreamTls:
      return 502;
    case GatewayRefusal::kUpstreamTimeout:
      return 504;
    case GatewayRefusal::kTimeout:
      return 408;
    case GatewayRefusal::kDryRun:
      return 503;
    case GatewayRefusal::kNone:
    case GatewayRefusal::kCount:
      break;
  }
  return 500;
}

// A status line "HTTP/1.x NNN ...": its code, or 0.
int response_status(std::string_view bytes) {
  if (bytes.size() < 12 || bytes.substr(0, 7) != "HTTP/1." || bytes[8] != ' ') return 0;
  int code = 0;
  for (std::size_t i = 9; i < 12; ++i) {
    if (bytes[i] < '0' || bytes[i] > '9') return 0;
    code = code * 10 + (bytes[i] - '0');
  }
  return code;
}

// Fields never forwarded: hop-by-hop ones, our own, and Host (replaced).
bool dropped_field(std::string_view name) {
  static constexpr std::string_view kDropped[] = {"host",
                                                  "connection",
                                                  "keep-alive",
                                                  "proxy-connection",
                                                  "proxy-authorization",
                                                  "te",
                                                  "trailer",
                                                  "upgrade",
                                                  "x-corral-gateway-token",
                                                  "x-corral-sandbox",
                                                  "x-corral-service",
                                                  "transfer-encoding"};
  return std::find(std::begin(kDropped), std::end(kDropped), name) != std::end(kDropped);
}

std::optional<IpAddress> local_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return std::nullopt;
  auto a = IpAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&ss));
  if (!a) return std::nullopt;
  return a->unmapped();
}

// "Bearer <credentials>" (the scheme in any case): the credentials, trimmed.
std::optional<std::string_view> bearer_credentials(std::string_view authorization) {
  if (authorization.size() > 7 && http::chars::iequals(authorization.substr(0, 7), "bearer "))
    return http::chars::trim_ows(authorization.substr(7));
  return std::nullopt;
}

}  // namespace

class Gateway::Session {
 public:
  Session(Gateway& gateway, const GatewayConnection& conn, GatewayEvent& ev)
      : gateway_(gateway), options_(gateway.options_), conn_(conn), ev_(ev), client_(conn.client) {}
  ~Session() {
    if (secret_head_) secrets::wipe(head_);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The steps, in order; each refuses the request when it fails.
  void run() {
    if (!read_head() || !parse_request() || !check_gateway_host()) return;
    if (request_.head.target == kSecretReadPath) return serve_secret_read();
    if (!authenticate() || !check_policy() || !take_rate_token()) return;
    build_upstream_head();
    if (conn_.policy != nullptr && conn_.policy->dry_run) {
      // X2: checked as a real run would be, recorded, never connected, and
      // no broker token is swapped.
      refuse(GatewayRefusal::kDryRun,
             "dry run: nothing was sent; a real run would forward it to " + host_port_,
             "run it without dry-run to reach the service");
      return;
    }
    if (!connect_upstream() || !start_upstream_tls() || !swap_broker_tokens() || !send_request())
      return;
    if (reflection_)
      relay_scrubbed_response();
    else
      relay_response();
  }

 private:
  // --- Answers of our own -----------------------------------------------------

  // Answers the client with our refusal (if it may still get one).
  void refuse(GatewayRefusal why, std::string reason, std::string fix) {
    ev_.allowed = false;
    ev_.refusal = why;
    ev_.reason = one_line(reason);
    if (answered_) return;
    answered_ = true;
    const int status = status_of(why);
    ev_.status = status;
    std::string body = "{\"error\":\"" + std::string(gateway_refusal_name(why)) + "\",\"message\":";
    append_json_string_lossy(body, ev_.reason);
    body += ",\"fix\":";
    append_json_string_lossy(body, one_line(fix));
    body += "}\n";
    std::string msg =
        "HTTP/1.1 " + std::to_string(status) + " " + std::string(http::status_reason(status)) +
        "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\nX-Corral-Refusal: " + std::string(gateway_refusal_name(why)) +
        (status == 401 ? "\r\nWWW-Authenticate: Bearer realm=\"corral-gateway\"" : "") +
        "\r\nConnection: close\r\n\r\n" + body;
    auto deadline = Clock::now() + kLingerOnRefusal;
    if (!send_all(client_, msg, deadline, -1)) return;
    ev_.bytes_down += msg.size();
    // A lingering close, so that unread request bytes do not reset the
    // connection before the client has read the answer.
    ::shutdown(client_, SHUT_WR);
    char scratch[4096];
    std::size_t dropped = 0;
    while (dropped < 256 * 1024 && wait_fd(client_, POLLIN, deadline, -1) == 1) {
      ssize_t n = ::recv(client_, scratch, sizeof scratch, MSG_DONTWAIT);
      if (n <= 0 && !(n < 0 && (errno == EINTR || errno == EAGAIN))) break;
      if (n > 0) dropped += static_cast<std::size_t>(n);
    }
  }

  // The service failed after it was connected.
  void refuse_upstream_failed(const std::string& what) {
    refuse(GatewayRefusal::kUpstreamFailed, what, "the internal service failed: tell the owner");
  }

  // Answers the client with a body of ours (the runtime secret read).
  void answer(int status, std::string_view content_type, std::string& body) {
    answered_ = true;
    ev_.status = status;
    std::string msg = "HTTP/1.1 " + std::to_string(status) + " " +
                      std::string(http::status_reason(status)) +
                      "\r\nContent-Type: " + std::string(content_type) +
                      "\r\nContent-Length: " + std::to_string(body.size()) +
                      "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n";
    msg += body;
    secrets::wipe(body);
    if (send_all(client_, msg, Clock::now() + kLingerOnRefusal, -1)) ev_.bytes_down += msg.size();
    secrets::wipe(msg);
    ::shutdown(client_, SHUT_WR);
  }

  // --- The request from the sandbox -------------------------------------------

  // Reads the head: true with buf_ holding it (and maybe more).
  bool read_head() {
    buf_ = conn_.already_read;
    const auto deadline = Clock::now() + options_.head_timeout;
    const std::size_t limit = std::min(options_.max_head_bytes, kMaxProxyHeadBytes);
    for (;;) {
      std::size_t end = std::string_view(buf_).substr(0, limit).find("\r\n\r\n");
      if (end != std::string::npos) {
        head_end_ = end + 4;
        return true;
      }
      if (buf_.size() >= limit) {
        refuse(GatewayRefusal::kMalformed,
               "request head longer than " + std::to_string(limit) + " bytes",
               "send a smaller request head");
        return false;
      }
      if (!buf_.empty() && classify_http_start(buf_) == HttpStart::kNotHttp) {
        refuse(GatewayRefusal::kMalformed, "not an HTTP/1 request",
               "speak plain HTTP/1.1 to http://gateway.corral.internal/<service>/");
        return false;
      }
      int w = wait_fd(client_, POLLIN, deadline, -1);
      if (w != 1) {
        refuse(GatewayRefusal::kTimeout,
               w == 0 ? "no complete request head within " +
                            std::to_string(options_.head_timeout.count()) + " ms"
                      : std::string("the client went away"),
               "send the whole request head at once");
        return false;
      }
      char tmp[4096];
      ssize_t n = ::recv(client_, tmp, sizeof tmp, MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        answered_ = n < 0;  // a reset client gets no answer
        refuse(GatewayRefusal::kMalformed, "the client closed before a complete request head",
               "send a complete request");
        return false;
      }
      buf_.append(tmp, static_cast<std::size_t>(n));
    }
  }

  // Parses the head; CONNECT is not served.
  bool parse_request() {
    auto req = parse_proxy_request(std::string_view(buf_).substr(0, head_end_));
    if (!req) {
      refuse(GatewayRefusal::kMalformed, req.error().message,
             "send a well-formed HTTP/1.1 request");
      return false;
    }
    request_ = std::move(*req);
    ev_.method = request_.method;
    ev_.path = request_.head.target;
    if (request_.form == ProxyRequest::kConnect) {
      refuse(GatewayRefusal::kMalformed, "CONNECT is not served by the gateway",
             "send plain requests to http://gateway.corral.internal/<service>/");
      return false;
    }
    return true;
  }

  // Where the client thinks it is: the gateway's name (or its address).
  bool check_gateway_host() {
    const ProxyRequest& req = request_;
    std::string host =
        req.form == ProxyRequest::kAbsolute ? req.target_host : req.host_header.value_or("");
    auto port =
        req.form == ProxyRequest::kAbsolute ? std::optional(req.target_port) : req.host_header_port;
    auto here = local_address(conn_.client);
    bool ok_host = host == kGatewayHost || (here && host == here->str());
    if (!ok_host || (port && *port != 80) ||
        (req.form == ProxyRequest::kAbsolute && req.host_header &&
         *req.host_header != req.target_host)) {
      refuse(GatewayRefusal::kMalformed,
             "the request is for \"" + host + "\", not " + std::string(kGatewayHost) + ":80",
             "use http://gateway.corral.internal/<service>/<path>");
      return false;
    }
    return true;
  }

  // The runtime endpoint (issue 5, S1 "runtime API"): the value of the
  // secret behind the broker token in Authorization, for a tier that
  // allows it. The broker token is the credential; no gateway token.
  void serve_secret_read() {
    ev_.service = "_secret";
    if (!options_.swapper) {
      refuse(GatewayRefusal::kUnknownService, "this gateway serves no secrets",
             "ask the owner to run the daemon with a secret store");
      return;
    }
    std::string bearer;
    if (auto a = request_.head.header("authorization"))
      if (auto credentials = bearer_credentials(*a)) bearer = std::string(*credentials);
    if (request_.method != "GET" || bearer.rfind(secrets::kTokenPrefix, 0) != 0) {
      refuse(GatewayRefusal::kNoToken, "a runtime secret read is GET with a broker token",
             "send GET /_secret with Authorization: Bearer $YOUR_SECRET_TOKEN");
      return;
    }
    auto value = options_.swapper->read_value(bearer, conn_.sandbox);
    secrets::wipe(bearer);
    if (!value) {
      refuse(GatewayRefusal::kSecretRefused, value.error().message,
             "only a live token of this sandbox for a low or medium secret can be read");
      return;
    }
    ev_.allowed = true;
    std::string body(value->view());
    answer(200, "application/octet-stream", body);
  }

  // The gateway token: X-Corral-Gateway-Token, else Authorization: Bearer.
  bool authenticate() {
    std::optional<std::string> token;
    if (auto t = request_.head.header("x-corral-gateway-token")) {
      token = std::string(*t);
    } else if (auto a = request_.head.header("authorization")) {
      // A broker token (issue 5) is for the swapper, never a gateway token.
      auto credentials = bearer_credentials(*a);
      if (credentials && credentials->rfind(secrets::kTokenPrefix, 0) != 0) {
        token = std::string(*credentials);
        token_in_authorization_ = true;
      }
    }
    if (!token || token->empty()) {
      refuse(GatewayRefusal::kNoToken, "no gateway token in the request",
             "send Authorization: Bearer $CORRAL_GATEWAY_TOKEN (or X-Corral-Gateway-Token)");
      return false;
    }
    TokenCheck tc = verify_gateway_token(gateway_.secret_, *token, conn_.sandbox,
                                         static_cast<std::int64_t>(std::time(nullptr)));
    if (!tc.ok()) {
      refuse(GatewayRefusal::kBadToken,
             tc.reason + " (" + std::string(token_error_name(tc.error)) + ")",
             "send this sandbox's own CORRAL_GATEWAY_TOKEN");
      return false;
    }
    return true;
  }

  // The path, the service it names, the sandbox's grant of it, and the
  // service's methods and path prefixes.
  bool check_policy() {
    auto target = split_gateway_target(request_.head.target);
    if (!target) {
      refuse(GatewayRefusal::kPath, target.error().message, target.error().hint);
      return false;
    }
    target_ = std::move(*target);
    ev_.service = target_.service;
    const auto& services = gateway_.services_;
    auto it = std::find_if(services.begin(), services.end(),
                           [&](const GatewayService& g) { return g.name == target_.service; });
    if (it == services.end()) {
      refuse(GatewayRefusal::kUnknownService,
             "no gateway service named \"" + target_.service + "\"",
             "the first path segment names the service; ask the owner which are declared");
      return false;
    }
    service_ = &*it;
    const GatewayService& svc = *service_;
    const auto& grants = conn_.policy ? conn_.policy->gateway_services : std::vector<std::string>{};
    if (std::find(grants.begin(), grants.end(), svc.name) == grants.end()) {
      refuse(GatewayRefusal::kNotGranted,
             "this sandbox's policy does not grant gateway service \"" + svc.name + "\"",
             "grant it in the spec (network.gateway) or with corral run --gateway " + svc.name);
      return false;
    }
    if (std::find(svc.methods.begin(), svc.methods.end(), request_.method) == svc.methods.end()) {
      std::string allowed;
      for (const auto& m : svc.methods) allowed += (allowed.empty() ? "" : ", ") + m;
      refuse(
          GatewayRefusal::kMethod,
          "method " + request_.method + " is not allowed for gateway service \"" + svc.name + "\"",
          "use one of: " + allowed);
      return false;
    }
    if (!gateway_path_allowed(svc, target_.decoded_rest)) {
      std::string allowed;
      for (const auto& p : svc.path_prefixes) allowed += (allowed.empty() ? "" : ", ") + p;
      refuse(GatewayRefusal::kPathNotAllowed,
             "path " + one_line(target_.decoded_rest) + " is not allowed for gateway service \"" +
                 svc.name + "\"",
             "paths must start with one of: " + allowed);
      return false;
    }
    if (request_.head.chunked) {
      refuse(GatewayRefusal::kLengthRequired, "a chunked request body is not forwarded",
             "send the body with a Content-Length");
      return false;
    }
    return true;
  }

  // The sandbox's rate limit for the service (Gateway::take).
  bool take_rate_token() {
    const GatewayService& svc = *service_;
    if (!gateway_.take(conn_.sandbox, svc)) {
      refuse(GatewayRefusal::kRateLimited,
             "over the rate limit of gateway service \"" + svc.name + "\"",
             "send fewer requests per second (" + std::to_string(svc.rate.per_second) + "/s)");
      return false;
    }
    return true;
  }

  // --- The request to the service ---------------------------------------------

  // The head sent upstream: path = base + rest, Host = the service's, our
  // fields, the token and hop-by-hop fields dropped.
  void build_upstream_head() {
    const GatewayService& svc = *service_;
    const ProxyRequest& req = request_;
    const bool v6_host = svc.host.find(':') != std::string::npos;
    host_port_ = (v6_host ? "[" + svc.host + "]" : svc.host) + ":" + std::to_string(svc.port);
    ev_.upstream = host_port_;
    head_ = req.method + " " + svc.base_path + target_.rest +
            (target_.query.empty() && req.head.target.find('?') == std::string::npos
                 ? ""
                 : "?" + target_.query) +
            " HTTP/1.1\r\nHost: " +
            (svc.port == (svc.tls ? 443 : 80) ? (v6_host ? "[" + svc.host + "]" : svc.host)
                                              : host_port_) +
            "\r\n";
    const std::vector<std::string> listed = connection_options(req.head.headers);
    for (const auto& h : req.head.headers) {
      if (dropped_field(h.name)) continue;
      if (token_in_authorization_ && h.name == "authorization") continue;
      if (std::find(listed.begin(), listed.end(), h.name) != listed.end() &&
          h.name != "content-length")
        continue;
      head_ += h.name + ": " + h.value + "\r\n";
    }
    head_ += "X-Corral-Sandbox: " + conn_.sandbox + "\r\nConnection: close\r\n\r\n";
  }

  // Connects (resolution included) within connect_timeout.
  bool connect_upstream() {
    const GatewayService& svc = *service_;
    const auto connect_deadline = Clock::now() + options_.connect_timeout;
    std::vector<IpAddress> addrs;
    if (auto lit = IpAddress::parse(svc.host)) {
      addrs.push_back(*lit);
    } else if (gateway_.resolver_) {
      auto r = gateway_.resolver_->resolve(svc.host, options_.connect_timeout);
      if (r) addrs = *r;
      if (addrs.empty()) {
        refuse(GatewayRefusal::kUpstreamFailed,
               "cannot resolve " + svc.host + (r ? "" : ": " + r.error().to_string()),
               "the internal service is unavailable: tell the owner");
        return false;
      }
    } else {
      refuse(GatewayRefusal::kUpstreamFailed, "no resolver for " + svc.host,
             "the internal service is unavailable: tell the owner");
      return false;
    }
    std::string last_error = "no address";
    bool timed_out = false;
    for (const auto& raw : addrs) {
      IpAddress a = raw.unmapped();
      UniqueFd fd(::socket(a.v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                           IPPROTO_TCP));
      if (!fd) {
        last_error = "socket: " + std::string(errno_name(errno));
        continue;
      }
      const ConnectResult c = connect_until(fd.get(), a, svc.port, connect_deadline, conn_.client);
      const int err = c.err;
      timed_out = timed_out || c.timed_out;
      if (err == 0) {
        up_ = std::move(fd);
        break;
      }
      last_error = "connect to " + a.str() + ":" + std::to_string(svc.port) + ": " +
                   std::string(errno_name(err));
      if (timed_out || Clock::now() >= connect_deadline) {
        timed_out = true;
        break;
      }
    }
    if (!up_) {
      if (timed_out)
        refuse(GatewayRefusal::kUpstreamTimeout, "connect timed out (" + last_error + ")",
               "the internal service does not answer: tell the owner");
      else
        refuse(GatewayRefusal::kUpstreamFailed, last_error,
               "the internal service is unavailable: tell the owner");
      return false;
    }
    int one = 1;
    (void)::setsockopt(up_.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    (void)::setsockopt(conn_.client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return true;
  }

  // https: TLS to the service (SNI = its host), chain and name verified.
  bool start_upstream_tls() {
    const GatewayService& svc = *service_;
    if (!svc.tls) return true;
    tls_ = std::make_unique<TlsStream>(
        gateway_.tls_ ? new_upstream_ssl(gateway_.tls_.get(), svc.host) : nullptr, up_.get());
    if (!tls_->handshake(Clock::now() + options_.connect_timeout, conn_.client)) {
      refuse(GatewayRefusal::kUpstreamTls, "TLS to " + host_port_ + " failed: " + tls_->error(),
             "the internal service's certificate is not trusted: tell the owner");
      return false;
    }
    return true;
  }

  // Broker mode: tokens in the head become the secrets' values (or refuse
  // the request) once the service is connected (and, https,
  // verified), before anything is sent.
  bool swap_broker_tokens() {
    if (!options_.swapper) return true;
    const GatewayService& svc = *service_;
    secrets::OutboundRequest out{conn_.sandbox, svc.host, svc.port, "gateway"};
    secrets::SwapResult sr = options_.swapper->swap(out, head_);
    ev_.secrets = sr.secrets;
    if (sr.outcome == secrets::SwapOutcome::kRefused) {
      std::string names;
      for (const auto& n : sr.secrets) names += (names.empty() ? "" : ", ") + n;
      std::string stale = secrets::stale_token_refusal(sr, "gateway service \"" + svc.name + "\"");
      if (!stale.empty())
        refuse(GatewayRefusal::kSecretRefused, stale,
               "a revoked or expired token is never valid again: a new sandbox gets new tokens");
      else
        refuse(GatewayRefusal::kSecretRefused,
               "the token of secret " + names + " may not be sent to gateway service \"" +
                   svc.name + "\" (" + svc.host + ")" + (sr.reason.empty() ? "" : ": " + sr.reason),
               "a broker token goes only to the hosts its secret names");
      secrets::wipe(head_);
      return false;
    }
    if (sr.outcome != secrets::SwapOutcome::kSwapped) return true;
    // The answer is scanned for what went in (scrubbed_response.h): it
    // must come uncompressed, and without a guard nothing is sent.
    auto set = secrets::reflection_set(sr.swapped);
    if (!set) {
      secrets::wipe(head_);
      refuse(GatewayRefusal::kUpstreamFailed,
             "the answer could not be checked for the secret: " + set.error().message,
             "tell the owner");
      return false;
    }
    secret_head_ = true;  // wiped once sent, and by ~Session on every path
    reflection_ = std::move(*set);
    if (reflection_) secrets::ask_identity_encoding(head_);
    return true;
  }

  // The head, then exactly Content-Length body bytes.
  bool send_request() {
    std::uint64_t body_left = request_.head.content_length.value_or(0);
    std::string_view first_body = std::string_view(buf_).substr(head_end_);
    if (first_body.size() > body_left) first_body = first_body.substr(0, body_left);
    body_left -= first_body.size();
    const bool head_sent = up_send(head_);
    const std::size_t head_size = head_.size();
    if (secret_head_) secrets::wipe(head_);
    if (!head_sent || !up_send(first_body)) {
      refuse_upstream_failed("sending the request to " + host_port_ + " failed");
      return false;
    }
    ev_.bytes_up += head_size + first_body.size();
    chunk_.assign(kChunk, '\0');
    while (body_left > 0) {
      int w = wait_fd(conn_.client, POLLIN, Clock::now() + options_.idle_timeout, -1);
      if (w != 1) {
        answered_ = true;
        refuse(GatewayRefusal::kTimeout, "the request body stalled or the client went away", "");
        return false;
      }
      ssize_t n = ::recv(conn_.client, chunk_.data(),
                         static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, body_left)),
                         MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        answered_ = true;
        refuse(GatewayRefusal::kTimeout, "the client closed before the end of its request body",
               "");
        return false;
      }
      if (!up_send(std::string_view(chunk_.data(), static_cast<std::size_t>(n)))) {
        refuse_upstream_failed("sending the request body to " + host_port_ + " failed");
        return false;
      }
      ev_.bytes_up += static_cast<std::uint64_t>(n);
      body_left -= static_cast<std::uint64_t>(n);
    }
    return true;
  }

  bool up_send(std::string_view data) {
    const auto deadline = Clock::now() + options_.idle_timeout;
    return tls_ ? tls_->write_all(data, deadline, conn_.client)
                : send_all(up_.get(), data, deadline, conn_.client);
  }

  // > 0 bytes, 0 end of stream, -1 failed (or the client went away), -2 idle.
  long up_recv(char* buf, std::size_t n) {
    const auto idle = options_.idle_timeout;
    if (tls_) return tls_->read(buf, n, Clock::now() + idle, conn_.client);
    for (;;) {
      int w = wait_fd(up_.get(), POLLIN, Clock::now() + idle, conn_.client);
      if (w == 0) return -2;
      if (w < 0) return -1;
      ssize_t n_read = ::recv(up_.get(), buf, n, MSG_DONTWAIT);
      if (n_read < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      return n_read < 0 ? -1 : static_cast<long>(n_read);
    }
  }

  // --- The response, back to the sandbox --------------------------------------

  // The answer to a swapped request: what went in is written back as
  // the token, head and body, reframed (scrubbed_response.h).
  void relay_scrubbed_response() {
    const GatewayService& svc = *service_;
    const auto idle = options_.idle_timeout;
    ScrubbedResponse response(reflection_,
                              {request_.method == "HEAD", request_.head.version_minor >= 1});
    ScrubIo io;
    io.read = [this](char* buf, std::size_t n) { return up_recv(buf, n); };
    io.write = [&](std::string_view data) {
      return send_all(conn_.client, data, Clock::now() + idle, -1);
    };
    ScrubRelayResult sr = relay_scrubbed(response, io);
    ev_.status = sr.status;
    ev_.bytes_down += sr.bytes_down;
    if (!sr.answered) {
      if (sr.refused)
        refuse(GatewayRefusal::kUpstreamFailed, sr.end,
               "a service must answer a request that carried a secret uncompressed");
      else if (sr.end == "idle timeout")
        refuse(GatewayRefusal::kUpstreamTimeout,
               host_port_ + " sent no answer within " + std::to_string(idle.count()) + " ms",
               "the internal service does not answer: tell the owner");
      else
        refuse(GatewayRefusal::kUpstreamFailed, host_port_ + ": " + sr.end,
               "the internal service failed: tell the owner");
      if (tls_) tls_->close(Clock::now() + milliseconds(200));
      return;
    }
    answered_ = true;
    ev_.allowed = true;
    ev_.reason =
        sr.end == "closed"
            ? "forwarded to " + host_port_ + (svc.tls ? " (TLS)" : "") +
                  (sr.replaced > 0 ? "; the secret reflected in the answer was replaced by "
                                     "its token " +
                                         std::to_string(sr.replaced) + " times"
                                   : "")
            : sr.end;
    if (tls_) tls_->close(Clock::now() + milliseconds(200));
    ::shutdown(conn_.client, SHUT_WR);
  }

  // Streamed back as it comes, until the service closes.
  void relay_response() {
    const GatewayService& svc = *service_;
    const auto idle = options_.idle_timeout;
    bool any = false;
    std::string status_bytes;
    for (;;) {
      long n = up_recv(chunk_.data(), kChunk);
      if (n == -2 && !any) {
        refuse(GatewayRefusal::kUpstreamTimeout,
               host_port_ + " sent no answer within " + std::to_string(idle.count()) + " ms",
               "the internal service does not answer: tell the owner");
        return;
      }
      if (n == -2 || (n < 0 && any)) {
        ev_.reason = n == -2 ? "idle timeout" : "the client went away";
        break;
      }
      if (n <= 0) {
        if (!any) return refuse_upstream_failed(host_port_ + " closed without an answer");
        break;
      }
      if (!any) answered_ = true;
      any = true;
      if (status_bytes.size() < 12) {
        status_bytes.append(chunk_.data(), std::min<std::size_t>(static_cast<std::size_t>(n), 12));
        ev_.status = response_status(status_bytes);
      }
      if (!send_all(conn_.client, std::string_view(chunk_.data(), static_cast<std::size_t>(n)),
                    Clock::now() + idle, -1)) {
        ev_.reason = "the client stopped reading";
        break;
      }
      ev_.bytes_down += static_cast<std::uint64_t>(n);
    }
    ev_.allowed = true;
    if (ev_.reason.empty()) ev_.reason = "forwarded to " + host_port_ + (svc.tls ? " (TLS)" : "");
    if (tls_) tls_->close(Clock::now() + milliseconds(200));
    ::shutdown(conn_.client, SHUT_WR);
  }

  Gateway& gateway_;
  const GatewayOptions& options_;
  const GatewayConnection& conn_;
  GatewayEvent& ev_;
  int client_;
  bool answered_ = false;  // the client got its answer (or may get none): no refusal sent
  // The request, as read and checked.
  std::string buf_;  // the head, and maybe the first body bytes
  std::size_t head_end_ = 0;
  ProxyRequest request_;
  bool token_in_authorization_ = false;  // then Authorization is not forwarded
  GatewayTarget target_;
  const GatewayService* service_ = nullptr;
  // The request to the service.
  std::string host_port_;
  std::string head_;
  bool secret_head_ = false;  // head_ holds a secret's value: wiped
  std::shared_ptr<const secrets::RedactionSet> reflection_;
  UniqueFd up_;
  std::unique_ptr<TlsStream> tls_;  // https: over up_ (declared after it: goes first)
  std::string chunk_;
};

// Every request ends in exactly one GatewayEvent, whichever step ended it.
void Gateway::serve(const GatewayConnection& conn) {
  const auto start = Clock::now();
  GatewayEvent ev;
  ev.sandbox = conn.sandbox;
  Session session(*this, conn, ev);
  session.run();
  count_and_audit(ev, start);
}

}  // namespace corral::net
