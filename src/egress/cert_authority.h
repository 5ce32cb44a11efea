// The per-daemon certificate authority of TLS interception (issue 5, broker
// mode; docs/network.md "TLS interception", docs/threat-model.md).
//
// For a host a sandbox's broker secret names and marks for interception,
// the egress proxy ends the sandbox's TLS itself, with a leaf certificate
// for that host signed by this CA, so that it can swap the broker token in
// the request for the secret's value. Sandboxes trust the CA through a
// bundle (the system's plus this CA: trust_bundle()) mounted for
// SSL_CERT_FILE, REQUESTS_CA_BUNDLE and NODE_EXTRA_CA_CERTS.
//
// The CA's key (EC P-256) lives in `dir`/ca.key (0600, in a 0700 directory
// owned by the daemon's user) and never leaves the daemon; its certificate
// is `dir`/ca.pem. Leaf certificates are short-lived (7 days, backdated an
// hour for clock skew), each with a fresh key held only in memory, and are
// cached (least recently used first out).
#pragma once

#include <openssl/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "base/result.h"

namespace corral::net {

struct CertAuthorityOptions {
  std::chrono::hours leaf_validity{24 * 7};
  std::chrono::minutes leaf_backdate{60};
  std::size_t cache_size = 256;  // leaves kept (at least 1)
  // Only for a CA made now: how long it is valid.
  std::chrono::hours ca_validity{24 * 365 * 10};
};

class CertAuthority {
 public:
  // Loads the CA from `dir`, or makes it there the first time (the
  // directory is created 0700). Refuses a key file that is not a regular
  // file of this user with mode 0600 (or stricter), a directory others may
  // write, a certificate without the key (or the reverse), a key that does
  // not match the certificate, and an expired CA.
  static Result<std::shared_ptr<CertAuthority>> load_or_create(const std::string& dir,
                                                               CertAuthorityOptions options = {});
  ~CertAuthority();
  CertAuthority(const CertAuthority&) = delete;
  CertAuthority& operator=(const CertAuthority&) = delete;

  // The CA certificate, PEM.
  const std::string& ca_pem() const { return ca_pem_; }
  // Its path (`dir`/ca.pem) and common name ("corral sandbox CA <host> <random>").
  const std::string& ca_cert_path() const { return cert_path_; }
  const std::string& common_name() const { return common_name_; }

  // A TLS server context for `host` (a DNS name or an IP literal, as
  // canonical_host() gives it): a leaf certificate with that name as its
  // only subjectAltName, signed by the CA; TLS 1.2 or later; ALPN selects
  // http/1.1 and nothing else. Minted on first use, then cached.
  // kInvalidArgument for a host that is neither a name nor a literal.
  Result<std::shared_ptr<SSL_CTX>> leaf_for(std::string_view host);

  // What sandboxes are given to trust: `system_bundle_pem` (certificates
  // only; a private key in it is refused) followed by the CA certificate.
  Result<std::string> trust_bundle(std::string_view system_bundle_pem) const;

  std::size_t cached_leaves() const;
  std::uint64_t leaves_minted() const;

 private:
  CertAuthority() = default;
  Result<std::shared_ptr<SSL_CTX>> mint(const std::string& host);

  CertAuthorityOptions options_;
  std::string cert_path_;
  std::string common_name_;
  std::string ca_pem_;
  X509* ca_cert_ = nullptr;
  EVP_PKEY* ca_key_ = nullptr;

  mutable std::mutex mu_;
  std::list<std::string> lru_;  // most recently used first
  struct Entry {
    std::shared_ptr<SSL_CTX> ctx;
    std::list<std::string>::iterator at;
  };
  std::map<std::string, Entry> cache_;
  std::uint64_t minted_ = 0;
};

// The host's CA bundle (OpenSSL's default certificate file, else
// /etc/ssl/certs/ca-certificates.crt): the first part of trust_bundle().
Result<std::string> read_system_trust_bundle();

}  // namespace corral::net
