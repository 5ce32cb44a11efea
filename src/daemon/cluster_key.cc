#include "daemon/cluster_key.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>

#include "base/fs.h"
#include "base/strings.h"
#include "base/unique_fd.h"

namespace corral::daemon {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Result<ClusterKey> ClusterKey::load(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd)
    return errno_error("serve.cluster_key_file: open(" + path + ")", errno,
                       "give every node the same key file: head -c 32 /dev/urandom | od -An -tx1 "
                       "| tr -d ' \\n' > " +
                           path + "; chmod 600 " + path);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return errno_error("fstat(" + path + ")");
  if (!S_ISREG(st.st_mode) || (st.st_mode & 077) != 0 || (st.st_uid != 0 && st.st_uid != geteuid()))
    return make_error(ErrorCode::kPermissionDenied,
                      "serve.cluster_key_file: " + path +
                          " must be a regular file of root's (or the daemon's), mode 0600",
                      "chmod 600 " + path);
  auto text = read_up_to(fd.get(), 4096, path);
  if (!text) return tl::unexpected(text.error());
  std::string_view line = std::string_view(*text).substr(0, text->find('\n'));
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r' || line.back() == '\t'))
    line.remove_suffix(1);
  const std::string hex(line);
  std::string bytes;
  bool ok = hex.size() >= 64 && hex.size() % 2 == 0;
  for (std::size_t i = 0; ok && i < hex.size(); i += 2) {
    const int hi = hex_digit(hex[i]), lo = hex_digit(hex[i + 1]);
    ok = hi >= 0 && lo >= 0;
    if (ok) bytes.push_back(static_cast<char>(hi * 16 + lo));
  }
  if (!ok)
    return make_error(ErrorCode::kInvalidArgument,
                      "serve.cluster_key_file: " + path +
                          " does not hold at least 64 hex digits on its first line",
                      "a key of 32 random bytes or more, in hex, the same on every node");
  return ClusterKey(std::move(bytes));
}

ClusterKey ClusterKey::of_bytes(std::string bytes) { return ClusterKey(std::move(bytes)); }

std::string ClusterKey::id() const {
  static constexpr std::string_view kLabel = "corral-cluster-key-id-v1";
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), bytes_.data(), static_cast<int>(bytes_.size()),
       reinterpret_cast<const unsigned char*>(kLabel.data()), kLabel.size(), out, &len);
  return to_hex(out, 8);
}

std::string ClusterKey::mac(std::string_view method, std::string_view target, std::string_view ns,
                            std::string_view from_node, std::int64_t unix_seconds) const {
  std::string data = "corral-forward-v1\n";
  for (std::string_view part : {method, target, ns, from_node}) {
    data.append(part);
    data.push_back('\n');
  }
  data += std::to_string(unix_seconds);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), bytes_.data(), static_cast<int>(bytes_.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return to_hex(out, len);
}

std::string ClusterKey::derive(std::string_view label) const {
  const std::string data = "corral-derive-v1\n" + std::string(label);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), bytes_.data(), static_cast<int>(bytes_.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string ClusterKey::sign(std::string_view method, std::string_view target, std::string_view ns,
                             std::string_view from_node, std::int64_t unix_seconds) const {
  return std::to_string(unix_seconds) + "." + mac(method, target, ns, from_node, unix_seconds);
}

bool ClusterKey::verify(std::string_view signature, std::string_view method,
                        std::string_view target, std::string_view ns, std::string_view from_node,
                        std::int64_t now_seconds) const {
  const auto dot = signature.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 19) return false;
  std::int64_t t = 0;
  auto [end, ec] = std::from_chars(signature.data(), signature.data() + dot, t);
  if (ec != std::errc() || end != signature.data() + dot) return false;
  if (t > now_seconds + kMaxSkew.count() || t < now_seconds - kMaxSkew.count()) return false;
  // No newline may hide in a part: it would let two requests share a MAC.
  for (std::string_view part : {method, target, ns, from_node})
    if (part.find('\n') != std::string_view::npos) return false;
  const std::string want = mac(method, target, ns, from_node, t);
  const std::string_view got = signature.substr(dot + 1);
  return got.size() == want.size() && CRYPTO_memcmp(got.data(), want.data(), want.size()) == 0;
}

}  // namespace corral::daemon
