// The egress proxy (ADR 0005, "Proxy (as built)"): every TCP connection a
// sandbox opens ends here, redirected by the firewall (transparent) or sent
// by a client that honours HTTP_PROXY/HTTPS_PROXY (explicit). For each one
// the proxy finds the name it is for (CONNECT host, TLS SNI, HTTP Host, or
// the names corral's DNS answered for the address), makes the sandbox's
// policy decide, resolves the name itself, refuses addresses that are not
// the internet unless a rule names them, connects, and moves the bytes with
// splice(2) until either side ends, then closes both. Every connection ends
// in exactly one audit event.
//
// There is one listening socket per sandbox, bound to the sandbox's host
// end: the socket a connection arrives on says which sandbox opened it.
// Each connection is served by a thread of its own (see egress_proxy.cc for
// why): idle threads wait (epoll) on all the listeners, the one woken
// accepts and serves, and threads linger a few seconds for the next
// connection.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "egress/cert_authority.h"
#include "egress/gateway.h"
#include "netns/ip_address.h"
#include "netns/network_policy.h"
#include "egress/resolver.h"
#include "secrets/token_swapper.h"

namespace corral::net {

// Why a connection was refused or cut short; one counter each in
// EgressMetrics (the blocks by reason of /metrics).
enum class EgressRefusal : std::uint8_t {
  kNone,           // relayed and ended normally
  kDenied,         // the policy has no rule for it, or a deny rule matched
  kAddress,        // the name resolved to an address that is not allowed (rebinding)
  kMismatch,       // CONNECT host, SNI and Host disagree
  kRateLimited,    // over the sandbox's rate of new connections
  kMalformed,      // not a valid proxy request, HTTP head or ClientHello
  kTimeout,        // the client sent no complete request in time
  kResolveFailed,  // the name did not resolve
  kConnectFailed,  // no allowed address accepted the connection in time
  kOverloaded,     // too many open connections (all sandboxes, or this one)
  kPolicyChanged,  // open, then closed: the new policy no longer allows it
  kSecretRefused,  // a broker token may not go there (issue 5): nothing was forwarded
  kUpstreamTls,    // intercepted TLS: the upstream's certificate or handshake failed
  kDryRun,         // a dry run (X2): recorded and answered by the proxy, nothing sent
  kCount,
};
// "none", "denied", "address", "mismatch", "rate_limited", "malformed",
// "timeout", "resolve_failed", "connect_failed", "overloaded", "policy_changed",
// "secret_refused", "upstream_tls", "dry_run".
std::string_view egress_refusal_name(EgressRefusal r);

// The audit record of one connection: sent once, when it ends (a refused
// connection ends at its refusal).
struct EgressEvent {
  std::string sandbox;
  bool explicit_proxy = false;   // the client addressed the proxy (CONNECT, http:// URL)
  std::string name;              // what the policy decided on: CONNECT host, SNI,
                                 // Host, or the DNS names of a tcp destination (joined by ",")
  std::string connect_host;      // the CONNECT or absolute-URL host, if any
  std::string sni;               // the TLS SNI, if any
  std::string host;              // the HTTP Host (without port), if any
  std::string original_address;  // transparent: the address the sandbox connected to
  std::string address;           // the upstream address connected to (or refused)
  std::uint16_t port = 0;
  std::string protocol;  // "http", "tls", "tcp", or "" when not known yet
  std::string rule;      // the rule that decided, if any
  bool allowed = false;  // true: relayed to the upstream
  EgressRefusal refusal = EgressRefusal::kNone;
  std::string reason;  // why it was allowed or refused
  std::string end;     // how a relayed connection ended ("closed", "idle timeout",
                       // "reset", "policy changed", "sandbox removed", ...)
  // Broker mode (issue 5): the TLS was ended and re-opened by the proxy
  // (tls_intercept.h), and the secrets whose tokens were swapped in (or,
  // with kSecretRefused, refused) on this connection.
  bool intercepted = false;
  std::vector<std::string> secrets;
  std::uint64_t bytes_up = 0;    // sandbox -> upstream, as delivered to the upstream
  std::uint64_t bytes_down = 0;  // upstream -> sandbox
  std::uint64_t duration_ms = 0;
  // Dry-run only: the HTTP request line's method and path (a path may
  // carry a token in its query, so a normal run does not keep it).
  std::string method;
  std::string path;
};

using EgressAuditSink = std::function<void(const EgressEvent&)>;

struct EgressMetrics {
  std::uint64_t connections = 0;  // accepted
  std::uint64_t relayed = 0;      // allowed and connected upstream
  std::uint64_t active = 0;       // open now
  std::uint64_t bytes_up = 0;     // of ended connections
  std::uint64_t bytes_down = 0;
  std::array<std::uint64_t, static_cast<std::size_t>(EgressRefusal::kCount)> refused{};

  std::uint64_t count(EgressRefusal r) const { return refused[static_cast<std::size_t>(r)]; }
};

struct EgressProxyOptions {
  // How long a transparent connection may stay silent before it is taken
  // for a server-speaks-first protocol (tcp). Only such protocols wait it.
  std::chrono::milliseconds first_bytes_timeout{300};
  // Bound for the whole request head or ClientHello once it has begun
  // (and for an explicit client's request); also capped by the policy's
  // request_timeout.
  std::chrono::milliseconds head_timeout{10'000};
  // Once the upstream has closed its side, how long the client may still
  // send before both sides are closed (a client half-close, by contrast,
  // waits for the upstream's answer up to the idle timeout).
  std::chrono::milliseconds half_close_timeout{2'000};
  std::size_t max_connections = 4096;              // all sandboxes; beyond: closed at once
  std::size_t max_connections_per_sandbox = 1024;  // one sandbox cannot take them all
  // What a direction's splice pipe grows to once it has moved 256 KiB
  // (F_SETPIPE_SZ; if the kernel refuses, the default 64 KiB stays).
  std::size_t pipe_bytes = 1 << 20;
  // A fast stream is read in batches of this many bytes (SO_RCVLOWAT; see
  // RelaySpec::batch_bytes in splice_relay.h); 0: every segment wakes the relay.
  std::size_t batch_bytes = 256 * 1024;
  // At most this many bytes wait unsent in a splicing flow's destination
  // socket (TCP_NOTSENT_LOWAT; see RelaySpec::unsent_bytes); 0: no limit.
  std::size_t unsent_bytes = 32 * 1024;
  // The send buffer toward a sandbox once a download splices (SO_SNDBUF;
  // see RelaySpec::client_sndbuf_bytes); 0: autotuned.
  std::size_t client_sndbuf_bytes = 256 * 1024;
  // The internal-service gateway (gateway.h): when set, a connection to the
  // host end's port 80 (transparent) or an explicit request for an
  // http://gateway.corral.internal/ URL is handed to it instead of the
  // egress policy; it answers and audits the request itself (no
  // EgressEvent). Unset: such connections meet the egress policy.
  std::function<void(const GatewayConnection&)> gateway;
  // Broker mode (issue 5; docs/network.md "TLS interception"). With a
  // swapper, every plain HTTP request head (absolute URL, transparent port
  // 80, HTTP inside CONNECT) is given to swapper->swap() (via "http")
  // before it is forwarded, and a refusal is answered 403 and audited
  // (kSecretRefused). With a swapper and a CA, an allowed TLS connection
  // to a host:port for which swapper->intercepts() is true is ended here
  // with a leaf of `ca` and re-opened to the upstream (verified against the
  // system trust store plus `upstream_ca_file`), and its request head is
  // swapped (via "tls-intercept"). Other TLS stays a blind tunnel. Unset:
  // nothing is read beyond the first request head or ClientHello.
  std::shared_ptr<secrets::TokenSwapper> swapper;
  std::shared_ptr<CertAuthority> ca;
  std::string upstream_ca_file;  // PEM CA bundle trusted besides the system's; may be empty
};

class EgressProxy {
 public:
  // `answers` may be null (then no tcp destination has a name). `audit` is
  // called from connection threads, with no lock held; it must not call
  // remove_sandbox() (which waits for the audit of every connection).
  static Result<std::unique_ptr<EgressProxy>> start(std::shared_ptr<Resolver> resolver,
                                                    std::shared_ptr<DnsAnswers> answers,
                                                    EgressAuditSink audit,
                                                    EgressProxyOptions options = {});
  // Closes every listener and connection and waits for every thread to end
  // (a thread inside Resolver::resolve finishes that call first).
  ~EgressProxy();
  EgressProxy(const EgressProxy&) = delete;
  EgressProxy& operator=(const EgressProxy&) = delete;

  // Listens on `address`:`port` (numeric IPv4 or IPv6; port 0 picks one)
  // for sandbox `id` and returns the bound port. kAlreadyExists if the id
  // is registered; the bind's error if the address is taken.
  Result<std::uint16_t> add_sandbox(const std::string& id, const std::string& address,
                                    std::uint16_t port,
                                    std::shared_ptr<const NetworkPolicy> policy);
  // Closes the sandbox's listener and every connection it has, and returns
  // once all of them are gone (audited). False if the id is not registered.
  bool remove_sandbox(const std::string& id);
  // New connections follow `policy` at once. Open connections that it no
  // longer allows are closed: their sockets are shut down before this
  // returns, and each is audited (kPolicyChanged) as its thread ends right
  // after. kNotFound if the id is not registered.
  Status set_policy(const std::string& id, std::shared_ptr<const NetworkPolicy> policy);

  EgressMetrics metrics() const;
  // Open connections of one sandbox (0 if unknown).
  std::size_t active_connections(const std::string& id) const;

  struct Impl;

 private:
  explicit EgressProxy(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace corral::net
