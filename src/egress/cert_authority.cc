#include "egress/cert_authority.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/random.h"
#include "base/unique_fd.h"
#include "netns/host_name.h"

namespace corral::net {

namespace {

struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
struct ExtFree {
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using BioPtr = std::unique_ptr<BIO, BioFree>;

// The OpenSSL error queue as text (and cleared).
std::string ssl_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

tl::unexpected<Error> ssl_error(const std::string& what) {
  return make_error(ErrorCode::kInternal, what + ": " + ssl_errors());
}

std::string random_hex(std::size_t bytes) {
  std::string raw(bytes, '\0');
  fill_random(raw.data(), raw.size());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

PkeyPtr new_ec_key() { return PkeyPtr(EVP_EC_gen("P-256")); }

// A random positive 127-bit serial (RFC 5280: at most 20 octets, positive).
bool set_random_serial(X509* x) {
  BIGNUM* bn = BN_new();
  bool ok = bn != nullptr && BN_rand(bn, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
            BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != nullptr;
  BN_free(bn);
  return ok;
}

bool add_ext(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, ExtFree> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  return ext && X509_add_ext(cert, ext.get(), -1) == 1;
}

std::string pem_of_cert(X509* x) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), x) != 1) return "";
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

Status write_file(const std::string& path, std::string_view data, mode_t mode) {
  const std::string tmp = path + ".tmp-" + random_hex(4);
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!fd) return errno_error("creating " + tmp);
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      return errno_error("writing " + tmp, err);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fchmod(fd.get(), mode) != 0 || ::fsync(fd.get()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return errno_error("syncing " + tmp, err);
  }
  fd.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return errno_error("renaming " + tmp + " to " + path, err);
  }
  return ok();
}

// Reads a file that must be a regular file of this user, not readable or
// writable by anyone else when `private_file`.
Result<std::string> read_checked(const std::string& path, bool private_file) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return errno_error("opening " + path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error("stat " + path);
  if (!S_ISREG(st.st_mode))
    return make_error(ErrorCode::kPermissionDenied, path + " is not a regular file");
  if (private_file && st.st_uid != ::geteuid())
    return make_error(ErrorCode::kPermissionDenied,
                      "the CA key " + path + " is owned by uid " + std::to_string(st.st_uid) +
                          ", not by this process's user",
                      "chown it to the daemon's user");
  if (private_file && (st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return make_error(ErrorCode::kPermissionDenied,
                      "the CA key " + path + " has mode " + mode +
                          ": others could read the key every sandbox trusts",
                      "chmod 600 " + path);
  }
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("reading " + path);
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > (1u << 20))
      return make_error(ErrorCode::kInvalidArgument, path + " is too large");
  }
  return out;
}

// The directory: made 0700 if missing; refused if others may write it.
Status prepare_dir(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return errno_error("stat " + dir);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return make_error(ErrorCode::kSystem, "creating " + dir + ": " + ec.message());
    if (::chmod(dir.c_str(), 0700) != 0) return errno_error("chmod 0700 " + dir);
    if (::lstat(dir.c_str(), &st) != 0) return errno_error("stat " + dir);
  }
  if (!S_ISDIR(st.st_mode))
    return make_error(ErrorCode::kInvalidArgument, dir + " is not a directory");
  if (st.st_uid != ::geteuid() || (st.st_mode & 022) != 0)
    return make_error(
        ErrorCode::kPermissionDenied,
        "the CA directory " + dir + " is writable by others or not owned by this user",
        "chown it to the daemon's user and chmod 700 " + dir);
  if ((st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0)
    return errno_error("chmod 0700 " + dir);
  return ok();
}

int select_http11(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                  unsigned int inlen, void*) {
  static constexpr unsigned char kHttp11[] = {'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned int i = 0;
  while (i < inlen) {
    unsigned int n = in[i];
    if (i + 1 + n > inlen) break;
    if (n == sizeof kHttp11 && std::memcmp(in + i + 1, kHttp11, n) == 0) {
      *out = in + i + 1;
      *outlen = static_cast<unsigned char>(n);
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + n;
  }
  // Nothing we speak (h2 only): no ALPN; the client decides.
  return SSL_TLSEXT_ERR_NOACK;
}

std::string short_hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "host";
  std::string s(name);
  if (s.size() > 24) s.resize(24);
  return s.empty() ? "host" : s;
}

}  // namespace

CertAuthority::~CertAuthority() {
  X509_free(ca_cert_);
  EVP_PKEY_free(ca_key_);
}

Result<std::shared_ptr<CertAuthority>> CertAuthority::load_or_create(const std::string& dir,
                                                                     CertAuthorityOptions options) {
  if (dir.empty()) return make_error(ErrorCode::kInvalidArgument, "no directory for the CA");
  CORRAL_TRY(prepare_dir(dir));
  std::shared_ptr<CertAuthority> ca(new CertAuthority());
  ca->options_ = options;
  ca->options_.cache_size = std::max<std::size_t>(ca->options_.cache_size, 1);
  const std::string key_path = dir + "/ca.key";
  ca->cert_path_ = dir + "/ca.pem";
  struct stat st {};
  const bool have_key = ::lstat(key_path.c_str(), &st) == 0;
  const bool have_cert = ::lstat(ca->cert_path_.c_str(), &st) == 0;
  if (have_cert && !have_key)
    return make_error(ErrorCode::kInvalidArgument,
                      "the CA certificate " + ca->cert_path_ + " has no key (" + key_path + ")",
                      "restore the key, or remove " + ca->cert_path_ +
                          " to make a new CA (running sandboxes then need the new bundle)");
  if (have_cert) {
    auto key_pem = read_checked(key_path, true);
    if (!key_pem) return tl::unexpected(key_pem.error());
    BioPtr kb(BIO_new_mem_buf(key_pem->data(), static_cast<int>(key_pem->size())));
    ca->ca_key_ = PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr);
    OPENSSL_cleanse(key_pem->data(), key_pem->size());
    if (ca->ca_key_ == nullptr) return ssl_error("reading the CA key " + key_path);
    auto cert_pem = read_checked(ca->cert_path_, false);
    if (!cert_pem) return tl::unexpected(cert_pem.error());
    BioPtr cb(BIO_new_mem_buf(cert_pem->data(), static_cast<int>(cert_pem->size())));
    ca->ca_cert_ = PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr);
    if (ca->ca_cert_ == nullptr) return ssl_error("reading the CA certificate " + ca->cert_path_);
    if (X509_check_private_key(ca->ca_cert_, ca->ca_key_) != 1) {
      ERR_clear_error();
      return make_error(ErrorCode::kInvalidArgument,
                        "the CA key " + key_path + " does not match " + ca->cert_path_,
                        "restore the matching pair, or remove both to make a new CA");
    }
    if (X509_check_ca(ca->ca_cert_) == 0)
      return make_error(ErrorCode::kInvalidArgument, ca->cert_path_ + " is not a CA certificate");
    if (X509_cmp_current_time(X509_get0_notAfter(ca->ca_cert_)) <= 0)
      return make_error(ErrorCode::kInvalidArgument, "the CA " + ca->cert_path_ + " has expired",
                        "remove " + dir + "/ca.key and ca.pem to make a new CA");
    ca->ca_pem_ = pem_of_cert(ca->ca_cert_);
  } else {
    // New: the key first, then the certificate (a key without a
    // certificate was never trusted by anyone and is replaced).
    PkeyPtr key = new_ec_key();
    if (!key) return ssl_error("generating the CA key");
    X509Ptr cert(X509_new());
    ca->common_name_ = "corral sandbox CA " + short_hostname() + " " + random_hex(4);
    X509_NAME* name = X509_get_subject_name(cert.get());
    std::time_t now = std::time(nullptr);
    bool ok =
        cert && X509_set_version(cert.get(), 2) == 1 && set_random_serial(cert.get()) &&
        X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>("corral"), -1, -1,
                                   0) == 1 &&
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(ca->common_name_.c_str()),
                                   -1, -1, 0) == 1 &&
        X509_set_issuer_name(cert.get(), name) == 1 &&
        X509_time_adj_ex(X509_getm_notBefore(cert.get()), 0, -3600, &now) != nullptr &&
        X509_time_adj_ex(X509_getm_notAfter(cert.get()),
                         static_cast<int>(options.ca_validity.count() / 24), 0, &now) != nullptr &&
        X509_set_pubkey(cert.get(), key.get()) == 1 &&
        add_ext(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
        add_ext(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign") &&
        add_ext(cert.get(), cert.get(), NID_subject_key_identifier, "hash") &&
        X509_sign(cert.get(), key.get(), EVP_sha256()) > 0;
    if (!ok) return ssl_error("making the CA certificate");
    BioPtr kb(BIO_new(BIO_s_mem()));
    if (!kb ||
        PEM_write_bio_PrivateKey(kb.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1)
      return ssl_error("encoding the CA key");
    char* data = nullptr;
    long n = BIO_get_mem_data(kb.get(), &data);
    Status w = write_file(key_path, std::string_view(data, static_cast<std::size_t>(n)), 0600);
    OPENSSL_cleanse(data, static_cast<std::size_t>(n));
    CORRAL_TRY(w);
    ca->ca_pem_ = pem_of_cert(cert.get());
    CORRAL_TRY(write_file(ca->cert_path_, ca->ca_pem_, 0644));
    ca->ca_key_ = key.release();
    ca->ca_cert_ = cert.release();
  }
  if (ca->common_name_.empty()) {
    char cn[256] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(ca->ca_cert_), NID_commonName, cn,
                              sizeof cn - 1);
    ca->common_name_ = cn;
  }
  return ca;
}

Result<std::shared_ptr<SSL_CTX>> CertAuthority::leaf_for(std::string_view host) {
  const std::string canonical = canonical_host(host);
  if (canonical.empty())
    return make_error(ErrorCode::kInvalidArgument, "no certificate for \"" +
                                                       std::string(host.substr(0, 100)) +
                                                       "\": not a host name or an IP address");
  {
    std::lock_guard lock(mu_);
    auto it = cache_.find(canonical);
    if (it != cache_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.at);
      return it->second.ctx;
    }
  }
  auto ctx = mint(canonical);  // outside the lock: a few hundred microseconds
  if (!ctx) return ctx;
  std::lock_guard lock(mu_);
  ++minted_;
  auto it = cache_.find(canonical);
  if (it != cache_.end()) return it->second.ctx;  // minted by another thread meanwhile
  lru_.push_front(canonical);
  cache_[canonical] = Entry{*ctx, lru_.begin()};
  while (cache_.size() > options_.cache_size) {
    cache_.erase(lru_.back());
    lru_.pop_back();
  }
  return ctx;
}

Result<std::shared_ptr<SSL_CTX>> CertAuthority::mint(const std::string& host) {
  PkeyPtr key = new_ec_key();
  if (!key) return ssl_error("generating a leaf key");
  X509Ptr cert(X509_new());
  if (!cert) return ssl_error("X509_new");
  const bool ip = is_ip_literal(host);
  const std::string san = (ip ? "IP:" : "DNS:") + host;
  std::time_t now = std::time(nullptr);
  const long backdate = static_cast<long>(
      std::chrono::duration_cast<std::chrono::seconds>(options_.leaf_backdate).count());
  const long validity = static_cast<long>(
      std::chrono::duration_cast<std::chrono::seconds>(options_.leaf_validity).count());
  X509_NAME* name = X509_get_subject_name(cert.get());
  bool ok = X509_set_version(cert.get(), 2) == 1 && set_random_serial(cert.get()) &&
            (host.size() > 64 ||
             X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                        reinterpret_cast<const unsigned char*>(host.c_str()), -1,
                                        -1, 0) == 1) &&
            X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert_)) == 1 &&
            X509_time_adj_ex(X509_getm_notBefore(cert.get()), 0, -backdate, &now) != nullptr &&
            X509_time_adj_ex(X509_getm_notAfter(cert.get()), 0, validity, &now) != nullptr &&
            X509_set_pubkey(cert.get(), key.get()) == 1 &&
            add_ext(cert.get(), ca_cert_, NID_basic_constraints, "critical,CA:FALSE") &&
            add_ext(cert.get(), ca_cert_, NID_key_usage, "critical,digitalSignature") &&
            add_ext(cert.get(), ca_cert_, NID_ext_key_usage, "serverAuth") &&
            add_ext(cert.get(), ca_cert_, NID_subject_key_identifier, "hash") &&
            add_ext(cert.get(), ca_cert_, NID_authority_key_identifier, "keyid:always") &&
            add_ext(cert.get(), ca_cert_, NID_subject_alt_name, san.c_str());
  if (!ok) return ssl_error("making a leaf certificate for " + host);
  // Never valid beyond the CA itself.
  if (ASN1_TIME_compare(X509_get0_notAfter(cert.get()), X509_get0_notAfter(ca_cert_)) > 0 &&
      X509_set1_notAfter(cert.get(), X509_get0_notAfter(ca_cert_)) != 1)
    return ssl_error("bounding a leaf certificate by the CA's validity");
  if (X509_sign(cert.get(), ca_key_, EVP_sha256()) <= 0)
    return ssl_error("signing a leaf certificate for " + host);

  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (!ctx) return ssl_error("SSL_CTX_new");
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx.get(), SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION |
                                     SSL_OP_NO_TICKET | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  SSL_CTX_set_num_tickets(ctx.get(), 0);
  if (SSL_CTX_use_certificate(ctx.get(), cert.get()) != 1 ||
      SSL_CTX_use_PrivateKey(ctx.get(), key.get()) != 1 ||
      SSL_CTX_check_private_key(ctx.get()) != 1)
    return ssl_error("loading the leaf certificate for " + host);
  SSL_CTX_set_alpn_select_cb(ctx.get(), select_http11, nullptr);
  return ctx;
}

Result<std::string> CertAuthority::trust_bundle(std::string_view system_bundle_pem) const {
  if (system_bundle_pem.find("PRIVATE KEY") != std::string_view::npos)
    return make_error(ErrorCode::kInvalidArgument,
                      "the system CA bundle holds a private key: it is not put in sandboxes",
                      "point the daemon at a bundle of certificates only");
  std::string out(system_bundle_pem);
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += "# " + common_name_ + " (corral: TLS interception of broker hosts)\n";
  out += ca_pem_;
  return out;
}

std::size_t CertAuthority::cached_leaves() const {
  std::lock_guard lock(mu_);
  return cache_.size();
}

std::uint64_t CertAuthority::leaves_minted() const {
  std::lock_guard lock(mu_);
  return minted_;
}

Result<std::string> read_system_trust_bundle() {
  std::vector<std::string> candidates;
  if (const char* f = X509_get_default_cert_file()) candidates.emplace_back(f);
  candidates.emplace_back("/etc/ssl/certs/ca-certificates.crt");
  for (const auto& path : candidates) {
    std::ifstream in(path, std::ios::binary);
    if (!in) continue;
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  return make_error(ErrorCode::kNotFound, "no system CA bundle",
                    "install ca-certificates (looked at " + candidates.front() + ")");
}

}  // namespace corral::net
