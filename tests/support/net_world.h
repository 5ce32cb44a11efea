// A small stand-in for the internet, for the network tests (issue 4): a
// network namespace of the test's own, joined to the host by a veth pair,
// with upstream servers inside it. Nothing leaves the machine.
//
//   host end      198.51.100.1/24 on interface "cw<n>"
//   198.51.100.10  allowed.test    HTTP :80, TLS :443, TCP echo :5432
//   198.51.100.11  denied.test     the same services
//   198.51.100.53  DNS :53         the test names (below), via TestDnsServer
//   198.51.100.20  an "internal service" HTTP :8080 for the gateway tests: it
//                  answers "internal <METHOD> <target> auth=<yes|no>" and
//                  records every request it saw (internal_requests())
//
// The HTTP :80 and TLS :443 servers reflect a request whose target holds
// "/reflect" (head and body back, in the framing its query asks for:
// support/reflector.h), as echo services and error pages do.
//
// DNS names: allowed.test, www.allowed.test, denied.test -> their address;
// loopback.test -> 127.0.0.1, private.test -> 10.1.2.3, metadata.test ->
// 169.254.169.254 (rebinding), txt.test -> a TXT record. The TLS
// certificates are signed by a CA made for this world (ca_pem()).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "support/test_dns_server.h"

namespace corral::testing {

class NetWorld {
 public:
  static constexpr const char* kHostEnd = "198.51.100.1";
  static constexpr const char* kAllowedAddress = "198.51.100.10";
  static constexpr const char* kDeniedAddress = "198.51.100.11";
  static constexpr const char* kDnsAddress = "198.51.100.53";
  static constexpr const char* kInternalAddress = "198.51.100.20";
  static constexpr std::uint16_t kInternalPort = 8080;

  // Needs root, `ip` and `openssl`. Everything is removed by the destructor.
  static Result<std::unique_ptr<NetWorld>> create();
  ~NetWorld();
  NetWorld(const NetWorld&) = delete;
  NetWorld& operator=(const NetWorld&) = delete;

  TestDnsServer& dns() { return *dns_; }
  std::string dns_endpoint() const { return std::string(kDnsAddress) + ":53"; }
  const std::string& ca_pem_path() const { return ca_pem_; }
  const std::string& netns_name() const { return netns_; }

  // What the upstream servers saw: HTTP requests by Host header, TLS
  // handshakes by SNI, TCP echo connections by local address.
  int http_requests(const std::string& host) const;
  int tls_handshakes(const std::string& sni) const;
  int tcp_connections(const std::string& address) const;
  // The internal service's requests, in order: one line each,
  // "<METHOD> <target> auth=<yes|no> token=<yes|no> sandbox=<X-Corral-Sandbox>",
  // where token says whether any field held the text "cgw1.".
  std::vector<std::string> internal_requests() const;
  // The request heads (non-empty) the HTTP :80 and TLS :443 servers read,
  // in order (the broker tests check what reached the upstream).
  std::vector<std::string> http_request_heads() const;
  std::vector<std::string> tls_request_heads() const;

 private:
  NetWorld() = default;
  Status start_servers();
  void serve(int listener, int kind);

  std::string netns_, host_if_, dir_, ca_pem_, cert_pem_, key_pem_;
  std::unique_ptr<TestDnsServer> dns_;
  UniqueFd stop_;
  std::vector<UniqueFd> listeners_;
  std::vector<std::thread> threads_;
  void* ssl_ctx_ = nullptr;  // SSL_CTX*

  mutable std::mutex mu_;
  std::map<std::string, int> http_, tls_, tcp_;
  std::vector<std::string> internal_;
  std::vector<std::string> http_heads_, tls_heads_;
};

}  // namespace corral::testing
