#include "egress/tls_stream.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "netns/host_name.h"

namespace corral::net {

namespace {
constexpr std::size_t kIoChunk = 16 * 1024;
}

std::string openssl_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out;
}

TlsStream::TlsStream(SSL* ssl, int fd, std::string_view already_read) : ssl_(ssl), fd_(fd) {
  if (ssl_ == nullptr) {
    error_ = "no TLS state";
    return;
  }
  in_ = BIO_new(BIO_s_mem());
  out_ = BIO_new(BIO_s_mem());
  if (in_ == nullptr || out_ == nullptr) {
    BIO_free(in_);
    BIO_free(out_);
    in_ = out_ = nullptr;
    error_ = "out of memory";
    return;
  }
  SSL_set_bio(ssl_, in_, out_);
  if (!already_read.empty()) {
    BIO_write(in_, already_read.data(), static_cast<int>(already_read.size()));
    received_ += already_read.size();
  }
}

TlsStream::~TlsStream() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  ERR_clear_error();
}

void TlsStream::fail(std::string_view what) {
  std::string errs = openssl_errors();
  error_ = std::string(what) + (errs.empty() ? "" : ": " + errs);
}

bool TlsStream::flush(SteadyClock::time_point deadline, int watch) {
  if (out_ == nullptr) return false;
  char buf[kIoChunk];
  while (BIO_ctrl_pending(out_) > 0) {
    int n = BIO_read(out_, buf, sizeof buf);
    if (n <= 0) break;
    if (!send_all(fd_, std::string_view(buf, static_cast<std::size_t>(n)), deadline, watch)) {
      error_ = "the connection failed while sending";
      return false;
    }
    sent_ += static_cast<std::uint64_t>(n);
  }
  return true;
}

int TlsStream::fill(SteadyClock::time_point deadline, int watch) {
  if (eof_) return 0;
  char buf[kIoChunk];
  for (;;) {
    ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      BIO_write(in_, buf, static_cast<int>(n));
      received_ += static_cast<std::uint64_t>(n);
      return 1;
    }
    if (n == 0) {
      eof_ = true;
      BIO_set_mem_eof_return(in_, 0);
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      error_ = "the connection was reset";
      return -1;
    }
    int w = wait_fd(fd_, POLLIN, deadline, watch);
    if (w == 0) {
      error_ = "timed out";
      return -2;
    }
    if (w < 0) {
      error_ = "the other side of the relay went away";
      return -1;
    }
  }
}

bool TlsStream::handshake(SteadyClock::time_point deadline, int watch) {
  if (in_ == nullptr) return false;
  for (;;) {
    ERR_clear_error();
    int r = SSL_do_handshake(ssl_);
    int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl_, r);
    // Whatever OpenSSL produced (our flight, or an alert) goes out first.
    if (!flush(deadline, watch)) return false;
    if (r == 1) return true;
    if (e == SSL_ERROR_WANT_READ) {
      int f = fill(deadline, watch);
      if (f == 1) continue;
      if (f == 0) error_ = "the peer closed during the TLS handshake";
      return false;
    }
    long verify = SSL_get_verify_result(ssl_);
    if (verify != X509_V_OK) {
      error_ =
          std::string("certificate verification failed: ") + X509_verify_cert_error_string(verify);
      ERR_clear_error();
      return false;
    }
    fail("TLS handshake failed");
    return false;
  }
}

long TlsStream::read(char* buf, std::size_t n, SteadyClock::time_point deadline, int watch) {
  if (in_ == nullptr) return -1;
  for (;;) {
    ERR_clear_error();
    std::size_t got = 0;
    int r = SSL_read_ex(ssl_, buf, n, &got);
    if (r == 1) return static_cast<long>(got);
    int e = SSL_get_error(ssl_, r);
    if (e == SSL_ERROR_ZERO_RETURN) return 0;
    if (e == SSL_ERROR_WANT_READ) {
      if (!flush(deadline, watch)) return -1;
      int f = fill(deadline, watch);
      if (f == 1 || f == 0) continue;  // at end of stream, OpenSSL says so next
      return f;
    }
    if (e == SSL_ERROR_SYSCALL && eof_) return 0;
    fail("TLS read failed");
    return -1;
  }
}

bool TlsStream::write_all(std::string_view data, SteadyClock::time_point deadline, int watch) {
  if (in_ == nullptr) return false;
  while (!data.empty()) {
    ERR_clear_error();
    std::size_t put = 0;
    int r = SSL_write_ex(ssl_, data.data(), std::min(data.size(), kIoChunk), &put);
    if (r != 1) {
      fail("TLS write failed");
      return false;
    }
    data.remove_prefix(put);
    if (!flush(deadline, watch)) return false;
  }
  return true;
}

void TlsStream::close(SteadyClock::time_point deadline) {
  if (in_ == nullptr) return;
  ERR_clear_error();
  if (SSL_is_init_finished(ssl_)) (void)SSL_shutdown(ssl_);
  (void)flush(deadline, -1);
  ERR_clear_error();
}

Result<std::shared_ptr<SSL_CTX>> make_upstream_tls_context(const std::string& extra_ca_file) {
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (!ctx) return make_error(ErrorCode::kInternal, "SSL_CTX_new: " + openssl_errors());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx.get(), SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) ERR_clear_error();
  if (!extra_ca_file.empty() &&
      SSL_CTX_load_verify_locations(ctx.get(), extra_ca_file.c_str(), nullptr) != 1)
    return make_error(ErrorCode::kInvalidArgument,
                      "cannot load the upstream CA file " + extra_ca_file + ": " + openssl_errors(),
                      "give a PEM file of CA certificates");
  static constexpr unsigned char kAlpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  SSL_CTX_set_alpn_protos(ctx.get(), kAlpn, sizeof kAlpn);
  return ctx;
}

SSL* new_upstream_ssl(SSL_CTX* ctx, const std::string& host) {
  SSL* ssl = SSL_new(ctx);
  if (ssl == nullptr) return nullptr;
  bool ok = true;
  if (is_ip_literal(host)) {
    ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) == 1;
  } else {
    ok = SSL_set_tlsext_host_name(ssl, host.c_str()) == 1 && SSL_set1_host(ssl, host.c_str()) == 1;
    X509_VERIFY_PARAM_set_hostflags(SSL_get0_param(ssl), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  }
  if (!ok) {
    SSL_free(ssl);
    ERR_clear_error();
    return nullptr;
  }
  SSL_set_connect_state(ssl);
  return ssl;
}

}  // namespace corral::net
