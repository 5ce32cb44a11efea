#include "base/sha256.h"

#include <openssl/evp.h>

#include <cstdlib>

namespace corral {

namespace {

EVP_MD_CTX* ctx_of(void* p) { return static_cast<EVP_MD_CTX*>(p); }

// Digest failures mean a broken libcrypto or out of memory: nothing sane
// to return, and a wrong digest would be worse than stopping.
void check(int ok) {
  if (ok != 1) std::abort();
}

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr) std::abort();
  reset();
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_of(ctx_)); }

void Sha256::reset() { check(EVP_DigestInit_ex(ctx_of(ctx_), EVP_sha256(), nullptr)); }

void Sha256::update(const void* data, std::size_t len) {
  if (len != 0) check(EVP_DigestUpdate(ctx_of(ctx_), data, len));
}

Sha256::Digest Sha256::final() {
  Digest d{};
  unsigned int n = 0;
  check(EVP_DigestFinal_ex(ctx_of(ctx_), d.data(), &n));
  reset();
  return d;
}

std::string Sha256::hex(const Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(64, '0');
  for (std::size_t i = 0; i < digest.size(); ++i) {
    s[2 * i] = kHex[digest[i] >> 4];
    s[2 * i + 1] = kHex[digest[i] & 0xf];
  }
  return s;
}

std::string sha256_hex(std::string_view data) {
  Sha256 h;
  h.update(data);
  return Sha256::hex(h.final());
}

}  // namespace corral
