#include "egress/gateway_token.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>

#include "base/base64_digits.h"
#include "base/random.h"
#include "base/unique_fd.h"

namespace corral::net {

namespace {

constexpr std::string_view kPrefix = "cgw1.";
constexpr int kBase64Url = sodium_base64_VARIANT_URLSAFE_NO_PADDING;
constexpr std::size_t kMaxTokenBytes = 1024;

// base64url without padding.
std::string b64url(std::string_view in) {
  std::string out(sodium_base64_ENCODED_LEN(in.size(), kBase64Url), '\0');
  ::sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(in.data()),
                      in.size(), kBase64Url);
  out.resize(std::strlen(out.c_str()));
  return out;
}

// Strict: only the alphabet, no padding, no impossible length, and the
// unused low bits of the last character must be zero (one encoding per
// value). The alphabet is checked first (base/base64_digits.h: libsodium
// takes bytes above 0x7f as digits; found by the gateway fuzz target); the
// end pointer refuses what follows the first byte libsodium stops at.
std::optional<std::string> unb64url(std::string_view in) {
  if (first_non_base64_digit(in, Base64Alphabet::kUrlSafe) != in.size()) return std::nullopt;
  std::string out(in.size() / 4 * 3 + 3, '\0');
  std::size_t len = 0;
  const char* end = nullptr;
  if (::sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), in.data(),
                          in.size(), nullptr, &len, &end, kBase64Url) != 0 ||
      end != in.data() + in.size())
    return std::nullopt;
  out.resize(len);
  return out;
}

// HMAC-SHA256 with a key of any length (the multi-part API: the one-shot
// crypto_auth_hmacsha256 takes a 32-byte key only).
std::string hmac(std::string_view secret, std::string_view data) {
  // libsodium asks for sodium_init() before any use; it is idempotent and
  // thread-safe (secret_value.cc calls it too).
  static const bool sodium_ready = ::sodium_init() >= 0;
  (void)sodium_ready;
  crypto_auth_hmacsha256_state state;
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  ::crypto_auth_hmacsha256_init(&state, reinterpret_cast<const unsigned char*>(secret.data()),
                                secret.size());
  ::crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(data.data()),
                                  data.size());
  ::crypto_auth_hmacsha256_final(&state, mac);
  ::sodium_memzero(&state, sizeof state);
  return std::string(reinterpret_cast<const char*>(mac), sizeof mac);
}

TokenCheck fail(TokenError e, std::string reason) { return TokenCheck{e, std::move(reason)}; }

}  // namespace

std::string_view token_error_name(TokenError e) {
  switch (e) {
    case TokenError::kNone:
      return "none";
    case TokenError::kMalformed:
      return "malformed";
    case TokenError::kBadSignature:
      return "bad_signature";
    case TokenError::kExpired:
      return "expired";
    case TokenError::kOtherSandbox:
      return "other_sandbox";
  }
  return "?";
}

std::string mint_gateway_token(std::string_view secret, std::string_view sandbox_id,
                               std::int64_t expires_at_unix) {
  std::string body =
      std::string(kPrefix) + b64url(sandbox_id) + "." + std::to_string(expires_at_unix);
  return body + "." + b64url(hmac(secret, body));
}

TokenCheck verify_gateway_token(std::string_view secret, std::string_view token,
                                std::string_view sandbox_id, std::int64_t now_unix) {
  const char* form = "the gateway token is malformed (expected cgw1.<sandbox>.<expiry>.<mac>)";
  if (token.size() > kMaxTokenBytes || token.substr(0, kPrefix.size()) != kPrefix)
    return fail(TokenError::kMalformed, form);
  std::string_view rest = token.substr(kPrefix.size());
  auto dot1 = rest.find('.');
  if (dot1 == std::string_view::npos) return fail(TokenError::kMalformed, form);
  auto dot2 = rest.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || rest.find('.', dot2 + 1) != std::string_view::npos)
    return fail(TokenError::kMalformed, form);
  std::string_view id_part = rest.substr(0, dot1);
  std::string_view exp_part = rest.substr(dot1 + 1, dot2 - dot1 - 1);
  std::string_view mac_part = rest.substr(dot2 + 1);
  auto id = unb64url(id_part);
  auto mac = unb64url(mac_part);
  std::int64_t expires = 0;
  auto [end, ec] = std::from_chars(exp_part.data(), exp_part.data() + exp_part.size(), expires);
  if (!id || id->empty() || !mac || exp_part.empty() || ec != std::errc() ||
      end != exp_part.data() + exp_part.size() || (exp_part.size() > 1 && exp_part[0] == '0') ||
      exp_part[0] == '-')
    return fail(TokenError::kMalformed, form);
  std::string expected = hmac(secret, token.substr(0, kPrefix.size() + dot2));
  if (mac->size() != expected.size() ||
      ::sodium_memcmp(mac->data(), expected.data(), expected.size()) != 0)
    return fail(TokenError::kBadSignature,
                "the gateway token's signature does not match (altered, or minted by another "
                "owner): use the CORRAL_GATEWAY_TOKEN given to this sandbox");
  if (now_unix >= expires)
    return fail(TokenError::kExpired, "the gateway token expired " +
                                          std::to_string(now_unix - expires) +
                                          " s ago: ask the owner for a new one");
  if (*id != sandbox_id)
    return fail(TokenError::kOtherSandbox,
                "the gateway token belongs to another sandbox: use this sandbox's "
                "CORRAL_GATEWAY_TOKEN");
  return TokenCheck{};
}

Result<std::string> random_gateway_secret() {
  std::string s(kGatewaySecretBytes, '\0');
  fill_random(s.data(), s.size());
  return s;
}

Result<std::string> load_or_create_gateway_secret(const std::string& path) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (!fd && errno == ENOENT) {
      auto secret = random_gateway_secret();
      if (!secret) return secret;
      UniqueFd out(
          ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!out && errno == EEXIST) continue;  // created meanwhile: read that one
      if (!out) return errno_error("creating the gateway secret " + path);
      if (::fchmod(out.get(), 0600) != 0) return errno_error("fchmod(" + path + ")");
      std::size_t done = 0;
      while (done < secret->size()) {
        ssize_t n = ::write(out.get(), secret->data() + done, secret->size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          int err = errno;
          ::unlink(path.c_str());
          return errno_error("writing the gateway secret " + path, err);
        }
        done += static_cast<std::size_t>(n);
      }
      if (::fsync(out.get()) != 0) return errno_error("fsync(" + path + ")");
      return secret;
    }
    if (!fd)
      return errno_error("opening the gateway secret " + path, errno,
                         errno == ELOOP ? "the path is a symbolic link: name the file itself" : "");
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return errno_error("fstat(" + path + ")");
    if (!S_ISREG(st.st_mode))
      return make_error(ErrorCode::kPermissionDenied,
                        "the gateway secret " + path + " is not a regular file");
    if (st.st_uid != ::geteuid() || (st.st_mode & 07777) != 0600)
      return make_error(ErrorCode::kPermissionDenied,
                        "the gateway secret " + path + " must be owned by uid " +
                            std::to_string(::geteuid()) + " with mode 0600",
                        "chmod 0600 " + path +
                            " (and check who could have read it), or delete "
                            "it to make a new one (tokens already given out "
                            "stop working)");
    if (st.st_size != static_cast<off_t>(kGatewaySecretBytes))
      return make_error(ErrorCode::kInvalidArgument,
                        "the gateway secret " + path + " holds " + std::to_string(st.st_size) +
                            " bytes, not " + std::to_string(kGatewaySecretBytes),
                        "delete it to make a new one (tokens already given out stop working)");
    std::string s(kGatewaySecretBytes, '\0');
    std::size_t got = 0;
    while (got < s.size()) {
      ssize_t n = ::read(fd.get(), s.data() + got, s.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return errno_error("reading the gateway secret " + path);
      got += static_cast<std::size_t>(n);
    }
    return s;
  }
  return make_error(ErrorCode::kSystem, "the gateway secret " + path + " keeps changing");
}

}  // namespace corral::net
