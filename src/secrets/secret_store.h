// SecretStore: the secrets the daemon can hand to sandboxes (issue 5).
// They live outside every sandbox, in up to three sources named by the
// daemon config: a plain file (mode 0600), variables of the daemon's own
// environment, and a file encrypted with libsodium (key in a file).
// User guide: docs/secrets.md, "Where secrets are stored".
//
// Every value is held in a SecretValue (guarded, locked memory). No error
// message of this file contains a value, or any part of a line that could
// not be read: only file names, line numbers, key names and env variable
// names.
#pragma once

#include <cstddef>
#include <map>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "secrets/secret_value.h"

namespace corral::secrets {

struct SecretStoreConfig {
  // A plain file of KEY=value lines (format below). Empty: none.
  std::string file;
  // Names of variables of the daemon's environment to take; the key is the
  // variable's name as written (OPENAI_API_KEY).
  std::vector<std::string> env;
  // Every variable whose name starts with this prefix is taken too; the key
  // is the rest of the name, lower-cased (CORRAL_SECRET_OPENAI -> openai).
  // Empty: none.
  std::string env_prefix;
  // A file written by encrypt_store() (`corral secrets encrypt`), and the
  // file holding its 32-byte key. Both or neither.
  std::string encrypted_file;
  std::string key_file;
};

// Store keys: 1 to 128 of [A-Za-z0-9_.-].
inline constexpr std::size_t kMaxKeyLength = 128;
bool valid_secret_key(std::string_view key);

// A plain or decrypted store file may hold at most this many bytes.
inline constexpr std::size_t kMaxStoreFileSize = 4u << 20;
// The encrypted file: this magic (7 bytes) then a version byte (1), a
// 24-byte nonce, and the XChaCha20-Poly1305 (IETF) ciphertext of the
// plain format, with the 8 header bytes as additional authenticated data.
inline constexpr std::string_view kEncryptedMagic = "CORRALS";
inline constexpr unsigned char kEncryptedVersion = 1;
inline constexpr std::size_t kStoreKeySize = 32;

class SecretStore {
 public:
  SecretStore() = default;
  SecretStore(SecretStore&&) noexcept = default;
  SecretStore& operator=(SecretStore&&) noexcept = default;
  SecretStore(const SecretStore&) = delete;
  SecretStore& operator=(const SecretStore&) = delete;

  // Loads every source the config names, in the order plain file, env,
  // encrypted file. A key defined by two sources (or twice in one) is an
  // error naming the key and both places. `envp` is the environment to read
  // (nullptr: the process's own `environ`).
  static Result<SecretStore> load(const SecretStoreConfig& config, char** envp = nullptr);

  // Adds one value; `source` says where it came from ("file /etc/x line 3").
  // Refuses an invalid key, an empty value and a key already present.
  Status add(std::string_view key, SecretValue value, std::string source);

  // nullptr when the key is absent.
  const SecretValue* find(std::string_view key) const;
  // Key names, sorted. Never values.
  std::vector<std::string> keys() const;
  // Where a key came from ("file /etc/corral/secrets line 3",
  // "env OPENAI_API_KEY", "encrypted file /etc/corral/secrets.enc line 1");
  // empty when the key is absent.
  std::string source_of(std::string_view key) const;
  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

 private:
  struct Entry {
    SecretValue value;
    std::string source;
  };
  std::map<std::string, Entry, std::less<>> entries_;
};

// SecretValue throws std::bad_alloc when guarded memory cannot be had
// (sodium_malloc maps the value's pages plus three more: guard pages and
// a canary page); the functions of this layer return that as an error.
inline tl::unexpected<Error> locked_memory_error(std::string_view what) {
  return make_error(ErrorCode::kResourceExhausted,
                    std::string(what) + ": out of guarded memory for secret values",
                    "check the daemon's memory limits (RLIMIT_AS, vm.max_map_count)");
}
template <typename F>
auto catch_locked_memory(std::string_view what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return locked_memory_error(what);
  }
}

// One entry of the plain format, as parsed.
struct StoreLine {
  std::string key;
  SecretValue value;
  std::size_t line = 0;  // 1-based
};

// Parses the plain format: one `KEY=value` per line; blank lines and lines
// whose first non-blank byte is `#` are skipped; the value is every byte
// after the first `=` up to the end of the line (a final CR is dropped);
// `KEY=base64:...` holds standard base64 for values with a newline or any
// other byte. `what` names the source in errors ("secret file /etc/x").
Result<std::vector<StoreLine>> parse_store_text(std::string_view text, std::string_view what);

// Opens `path` refusing a symlink, anything but a regular file, an owner
// other than root or the effective uid, and any group/other permission
// bit; returns its bytes in guarded memory. `what` names it in errors.
Result<SecretValue> read_protected_file(const std::string& path, std::string_view what);

// 32 random bytes.
Result<SecretValue> generate_key();
// A key file: exactly 32 raw bytes, or 64 hex digits, or the standard
// base64 of 32 bytes (a final newline allowed); permissions as for
// read_protected_file.
Result<SecretValue> read_key_file(const std::string& path);
// What `corral secrets keygen` writes: 64 lower-case hex digits and "\n".
Result<SecretValue> encode_key_hex(const SecretValue& key);

// The encrypted file for `plaintext` (which must parse as the plain
// format: the errors name the line). The result holds no value in clear.
Result<std::string> encrypt_store(std::string_view plaintext, const SecretValue& key);
// The plain text of an encrypted file; refuses a bad header, a wrong key
// and any modified byte.
Result<SecretValue> decrypt_store(std::string_view file_bytes, const SecretValue& key,
                                  std::string_view what = "encrypted secret file");

}  // namespace corral::secrets
