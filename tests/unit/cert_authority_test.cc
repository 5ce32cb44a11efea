// The per-daemon CA of TLS interception (src/egress/cert_authority.h): made
// once with a private key, reloaded identical, refused when its files are
// loose, and leaves that verify against it for exactly their host.
#include "egress/cert_authority.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "support/temp_dir.h"

namespace corral::net {
namespace {

class TempDir : public ::corral::testing::TempDir {
 public:
  TempDir() : ::corral::testing::TempDir("corral-ca-test") {}
};

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

X509* parse_pem(const std::string& pem) {
  BIO* b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* x = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
  BIO_free(b);
  return x;
}

// Verifies `leaf` against `ca` alone, for a TLS server named `host`.
int verify(X509* leaf, X509* ca, const std::string& host) {
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf, nullptr);
  X509_VERIFY_PARAM* p = X509_STORE_CTX_get0_param(ctx);
  X509_VERIFY_PARAM_set_purpose(p, X509_PURPOSE_SSL_SERVER);
  if (host.find(':') != std::string::npos || std::isdigit(static_cast<unsigned char>(host[0])))
    X509_VERIFY_PARAM_set1_ip_asc(p, host.c_str());
  else
    X509_VERIFY_PARAM_set1_host(p, host.c_str(), 0);
  int ok = X509_verify_cert(ctx);
  int err = ok == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  ERR_clear_error();
  return err;
}

TEST(CertAuthority, MadeOnceWithAPrivateKeyAndReloadedIdentical) {
  TempDir t;
  const std::string dir = t.path() + "/ca";
  auto ca = CertAuthority::load_or_create(dir);
  ASSERT_TRUE(ca) << ca.error().to_string();
  EXPECT_EQ(mode_of(dir), 0700u);
  EXPECT_EQ(mode_of(dir + "/ca.key"), 0600u);
  EXPECT_EQ((*ca)->ca_cert_path(), dir + "/ca.pem");
  EXPECT_EQ((*ca)->common_name().rfind("corral sandbox CA ", 0), 0u) << (*ca)->common_name();

  X509* cert = parse_pem((*ca)->ca_pem());
  ASSERT_NE(cert, nullptr);
  EXPECT_EQ(X509_check_ca(cert), 1);
  EXPECT_TRUE(X509_get_key_usage(cert) & KU_KEY_CERT_SIGN);
  EXPECT_EQ(X509_check_issued(cert, cert), X509_V_OK) << "not self-signed";
  X509_free(cert);
  // The key is in the key file only, never in the certificate file.
  std::ifstream in(dir + "/ca.pem");
  std::string on_disk((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(on_disk, (*ca)->ca_pem());
  EXPECT_EQ(on_disk.find("PRIVATE KEY"), std::string::npos);

  auto again = CertAuthority::load_or_create(dir);
  ASSERT_TRUE(again) << again.error().to_string();
  EXPECT_EQ((*again)->ca_pem(), (*ca)->ca_pem());
  EXPECT_EQ((*again)->common_name(), (*ca)->common_name());

  // Another directory: another CA.
  auto other = CertAuthority::load_or_create(t.path() + "/other");
  ASSERT_TRUE(other);
  EXPECT_NE((*other)->ca_pem(), (*ca)->ca_pem());
}

TEST(CertAuthority, LooseFilesAreRefused) {
  TempDir t;
  const std::string dir = t.path() + "/ca";
  ASSERT_TRUE(CertAuthority::load_or_create(dir));
  ASSERT_EQ(::chmod((dir + "/ca.key").c_str(), 0640), 0);
  auto loose = CertAuthority::load_or_create(dir);
  ASSERT_FALSE(loose);
  EXPECT_NE(loose.error().to_string().find("chmod 600"), std::string::npos)
      << loose.error().to_string();
  ASSERT_EQ(::chmod((dir + "/ca.key").c_str(), 0600), 0);
  ASSERT_TRUE(CertAuthority::load_or_create(dir));

  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  auto open_dir = CertAuthority::load_or_create(dir);
  ASSERT_FALSE(open_dir);
  EXPECT_NE(open_dir.error().message.find("writable by others"), std::string::npos);
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);

  // A certificate without its key is not silently replaced (sandboxes
  // may trust it); a key without a certificate was never trusted: remade.
  ASSERT_EQ(::rename((dir + "/ca.key").c_str(), (t.path() + "/kept.key").c_str()), 0);
  auto no_key = CertAuthority::load_or_create(dir);
  ASSERT_FALSE(no_key);
  EXPECT_NE(no_key.error().message.find("has no key"), std::string::npos);
  ASSERT_EQ(::unlink((dir + "/ca.pem").c_str()), 0);
  ASSERT_EQ(::rename((t.path() + "/kept.key").c_str(), (dir + "/ca.key").c_str()), 0);
  auto remade = CertAuthority::load_or_create(dir);
  ASSERT_TRUE(remade) << remade.error().to_string();
  EXPECT_EQ(mode_of(dir + "/ca.key"), 0600u);

  // A key that is not the certificate's.
  ASSERT_TRUE(CertAuthority::load_or_create(t.path() + "/b"));
  ASSERT_EQ(::rename((t.path() + "/b/ca.key").c_str(), (dir + "/ca.key").c_str()), 0);
  auto mismatch = CertAuthority::load_or_create(dir);
  ASSERT_FALSE(mismatch);
  EXPECT_NE(mismatch.error().message.find("does not match"), std::string::npos);
}

TEST(CertAuthority, LeavesVerifyForTheirHostOnly) {
  TempDir t;
  auto ca = CertAuthority::load_or_create(t.path() + "/ca");
  ASSERT_TRUE(ca);
  X509* root = parse_pem((*ca)->ca_pem());
  ASSERT_NE(root, nullptr);

  auto ctx = (*ca)->leaf_for("API.Example.TEST.");
  ASSERT_TRUE(ctx) << ctx.error().to_string();
  X509* leaf = SSL_CTX_get0_certificate(ctx->get());
  ASSERT_NE(leaf, nullptr);
  EXPECT_EQ(verify(leaf, root, "api.example.test"), X509_V_OK);
  EXPECT_EQ(verify(leaf, root, "other.example.test"), X509_V_ERR_HOSTNAME_MISMATCH);
  EXPECT_EQ(X509_check_host(leaf, "api.example.test", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_ca(leaf), 0) << "a leaf must not be a CA";
  // Short-lived: 7 days, backdated an hour.
  int days = 0, secs = 0;
  ASSERT_EQ(ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(leaf), X509_get0_notAfter(leaf)), 1);
  EXPECT_EQ(days * 86400 + secs, 7 * 86400 + 3600);
  EXPECT_LT(X509_cmp_current_time(X509_get0_notBefore(leaf)), 0);

  auto ip = (*ca)->leaf_for("10.1.2.3");
  ASSERT_TRUE(ip);
  X509* ip_leaf = SSL_CTX_get0_certificate(ip->get());
  EXPECT_EQ(verify(ip_leaf, root, "10.1.2.3"), X509_V_OK);
  EXPECT_EQ(verify(ip_leaf, root, "10.1.2.4"), X509_V_ERR_IP_ADDRESS_MISMATCH);

  // Leaves of another CA do not verify against this one.
  auto other = CertAuthority::load_or_create(t.path() + "/other");
  ASSERT_TRUE(other);
  auto foreign = (*other)->leaf_for("api.example.test");
  ASSERT_TRUE(foreign);
  EXPECT_NE(verify(SSL_CTX_get0_certificate(foreign->get()), root, "api.example.test"), X509_V_OK);

  EXPECT_FALSE((*ca)->leaf_for("not a host!"));
  EXPECT_FALSE((*ca)->leaf_for(""));
  X509_free(root);
}

TEST(CertAuthority, LeavesAreCachedWithABound) {
  TempDir t;
  CertAuthorityOptions o;
  o.cache_size = 2;
  auto ca = CertAuthority::load_or_create(t.path() + "/ca", o);
  ASSERT_TRUE(ca);
  auto a1 = (*ca)->leaf_for("a.test");
  auto a2 = (*ca)->leaf_for("A.test");
  ASSERT_TRUE(a1 && a2);
  EXPECT_EQ(a1->get(), a2->get());
  EXPECT_EQ((*ca)->leaves_minted(), 1u);
  ASSERT_TRUE((*ca)->leaf_for("b.test"));
  ASSERT_TRUE((*ca)->leaf_for("a.test"));  // a is now the most recent
  ASSERT_TRUE((*ca)->leaf_for("c.test"));  // evicts b
  EXPECT_EQ((*ca)->cached_leaves(), 2u);
  EXPECT_EQ((*ca)->leaves_minted(), 3u);
  auto a3 = (*ca)->leaf_for("a.test");
  EXPECT_EQ(a3->get(), a1->get());
  EXPECT_EQ((*ca)->leaves_minted(), 3u);
  ASSERT_TRUE((*ca)->leaf_for("b.test"));
  EXPECT_EQ((*ca)->leaves_minted(), 4u);
}

TEST(CertAuthority, AClientTrustingTheCaCompletesAHandshakeWithHttp11) {
  TempDir t;
  auto ca = CertAuthority::load_or_create(t.path() + "/ca");
  ASSERT_TRUE(ca);
  auto server_ctx = (*ca)->leaf_for("api.example.test");
  ASSERT_TRUE(server_ctx);
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  std::thread server([&] {
    SSL* s = SSL_new(server_ctx->get());
    SSL_set_fd(s, sv[1]);
    if (SSL_accept(s) == 1) SSL_write(s, "hi", 2);
    SSL_shutdown(s);
    SSL_free(s);
    OPENSSL_thread_stop();
  });
  SSL_CTX* cctx = SSL_CTX_new(TLS_client_method());
  X509* root = parse_pem((*ca)->ca_pem());
  X509_STORE_add_cert(SSL_CTX_get_cert_store(cctx), root);
  X509_free(root);
  SSL_CTX_set_verify(cctx, SSL_VERIFY_PEER, nullptr);
  static const unsigned char alpn[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  SSL_CTX_set_alpn_protos(cctx, alpn, sizeof alpn);
  SSL* c = SSL_new(cctx);
  SSL_set_fd(c, sv[0]);
  SSL_set_tlsext_host_name(c, "api.example.test");
  SSL_set1_host(c, "api.example.test");
  ASSERT_EQ(SSL_connect(c), 1) << ERR_error_string(ERR_get_error(), nullptr);
  const unsigned char* chosen = nullptr;
  unsigned int len = 0;
  SSL_get0_alpn_selected(c, &chosen, &len);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(chosen), len), "http/1.1");
  char buf[4] = {};
  EXPECT_EQ(SSL_read(c, buf, sizeof buf), 2);
  SSL_free(c);
  SSL_CTX_free(cctx);
  server.join();
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST(CertAuthority, TrustBundleIsTheSystemsPlusTheCa) {
  TempDir t;
  auto ca = CertAuthority::load_or_create(t.path() + "/ca");
  ASSERT_TRUE(ca);
  const std::string system = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----";
  auto bundle = (*ca)->trust_bundle(system);
  ASSERT_TRUE(bundle);
  EXPECT_EQ(bundle->rfind(system, 0), 0u);
  EXPECT_NE(bundle->find((*ca)->ca_pem()), std::string::npos);
  EXPECT_EQ(bundle->find("PRIVATE KEY"), std::string::npos);
  EXPECT_FALSE((*ca)->trust_bundle("-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n"));
  auto host = read_system_trust_bundle();
  if (host) {
    EXPECT_NE(host->find("BEGIN CERTIFICATE"), std::string::npos);
  }
}

}  // namespace
}  // namespace corral::net
