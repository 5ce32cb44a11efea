// An https front for a test daemon's E2B facade, laid out as a hosted
// E2B-compatible service (tests/npm/tls_front.js): api.<domain> is the
// control plane, 49983-<id>.<domain> is envd of sandbox <id>, routed by the
// host name alone. <domain> is "sbx.localhost", which libcurl resolves to
// loopback itself (RFC 6761), with the port of the front. The certificate
// is made for the test by the openssl CLI; ca_file() trusts it.
#pragma once

#include <memory>
#include <string>

#include "base/result.h"
#include "support/node_helper.h"

namespace corral::testing {

class TlsFront {
 public:
  // `upstream`: the daemon's http://127.0.0.1:port. `envd_version`: when
  // not empty, the control plane's answers report it instead of the
  // facade's. kUnavailable when node or openssl is missing.
  static Result<std::unique_ptr<TlsFront>> start(const std::string& upstream,
                                                 const std::string& envd_version = "");
  ~TlsFront();

  std::string domain() const { return "sbx.localhost:" + std::to_string(node_->port()); }
  const std::string& ca_file() const { return cert_; }

 private:
  TlsFront() = default;
  std::string dir_;
  std::string cert_;
  std::unique_ptr<NodeHelper> node_;
};

}  // namespace corral::testing
