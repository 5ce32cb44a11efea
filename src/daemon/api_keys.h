// ApiKeys: the keys that may call the daemon's HTTP API, held only as
// SHA-256 digests. A key itself never stays in memory longer than the
// request that presents it, and never appears in a message or a log.
//
// Keys come from the config (`serve.api_keys.sha256`: digests in hex) and
// from key files (`serve.api_keys.files`: one key per line, blank lines and
// lines starting with '#' ignored). A key file must be a regular file (not a
// symlink), owned by root or by the daemon's effective uid, and readable and
// writable by its owner only (chmod 600).
//
// Every key belongs to a namespace (docs/api.md "Namespaces"): the keys
// above to "default", those of `serve.api_keys.namespaces` to theirs. One
// key in two namespaces is refused when loading.
//
// A key is 16 to 256 printable ASCII characters without spaces. The keys
// corral makes (generate_into) are "crl_" and 64 hex digits (256 bits from
// base/random.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/sha256.h"

namespace corral {

class ApiKeys {
 public:
  static constexpr std::size_t kMinKeyBytes = 16;
  static constexpr std::size_t kMaxKeyBytes = 256;

  ApiKeys() = default;

  // Hex digests (64 hex digits, either case) and key files, all of them
  // checked; the first problem is the error (naming the file and line, but
  // never a key).
  static Result<ApiKeys> load(const std::vector<std::string>& sha256_hex_hashes,
                              const std::vector<std::string>& key_files);

  // The keys of one more namespace (`name`), checked as load() checks.
  Status add_namespace(const std::string& name, const std::vector<std::string>& sha256_hex_hashes,
                       const std::vector<std::string>& key_files);

  static constexpr std::string_view kDefaultNamespace = "default";

  // The namespace of the key, or nullopt when no stored digest matches;
  // compared as verify() does.
  std::optional<std::string> namespace_of(std::string_view presented_key) const;

  // True when sha256(presented_key) equals one of the stored digests. Takes
  // the same time whichever digest matches and wherever digests differ: every
  // byte of every digest is compared.
  bool verify(std::string_view presented_key) const;

  bool empty() const { return digests_.empty(); }
  std::size_t size() const { return digests_.size(); }

  // Makes a new key and writes it to `path` (mode 0600, the key and a
  // newline), atomically: a temporary file created with O_EXCL next to it,
  // fsync'd, then renamed into place without replacing an existing file
  // (kAlreadyExists: an existing key file is never overwritten). Refuses a
  // directory that is group- or world-writable or owned by someone other
  // than root or the daemon's effective uid. Returns the key, which the
  // caller shows once.
  static Result<std::string> generate_into(const std::string& path);

  // The key from an Authorization header value "Bearer <key>": the scheme
  // in any case, one or more spaces, a key of 16..256 printable non-space
  // ASCII characters, nothing else (spaces and tabs around the whole value
  // are allowed, as HTTP does not count them as part of it). Errors
  // (kInvalidArgument) never quote the header: the daemon answers 401.
  static Result<std::string> parse_bearer(std::string_view authorization_header);

  // 16..256 bytes in 0x21..0x7e.
  static bool valid_key(std::string_view key);

 private:
  Status add(const std::string& ns, const std::vector<std::string>& sha256_hex_hashes,
             const std::vector<std::string>& key_files, const std::string& where);

  std::vector<Sha256::Digest> digests_;
  std::vector<std::string> namespaces_;  // namespaces_[i] owns digests_[i]
};

}  // namespace corral
