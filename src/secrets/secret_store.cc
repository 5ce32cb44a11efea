#include "secrets/secret_store.h"

#include "base/base64_digits.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "base/random.h"
#include "base/unique_fd.h"

extern char** environ;

namespace corral::secrets {

namespace {

bool key_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

// A std::string that is wiped when it goes: for the few temporaries that
// must hold secret bytes before they are copied into a SecretValue.
struct WipedString {
  std::string s;
  explicit WipedString(std::size_t n) : s(n, '\0') {}
  ~WipedString() { wipe(s); }
  WipedString(const WipedString&) = delete;
  WipedString& operator=(const WipedString&) = delete;
};

std::string line_ref(std::string_view what, std::size_t line) {
  return std::string(what) + ": line " + std::to_string(line);
}

// Decodes standard base64 (padding optional) into guarded memory.
Result<SecretValue> decode_base64(std::string_view text) {
  // libsodium alone takes bytes above 0x7f as digits (base/base64_digits.h).
  if (!only_base64_digits_and_padding(text, Base64Alphabet::kStandard)) {
    return make_error(ErrorCode::kInvalidArgument, "not valid base64");
  }
  WipedString buf(text.size() / 4 * 3 + 3);
  std::size_t len = 0;
  const char* end = nullptr;
  if (::sodium_base642bin(reinterpret_cast<unsigned char*>(buf.s.data()), buf.s.size(), text.data(),
                          text.size(), nullptr, &len, &end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
      end != text.data() + text.size()) {
    // Padding is optional: try the unpadded variant before giving up.
    if (::sodium_base642bin(reinterpret_cast<unsigned char*>(buf.s.data()), buf.s.size(),
                            text.data(), text.size(), nullptr, &len, &end,
                            sodium_base64_VARIANT_ORIGINAL_NO_PADDING) != 0 ||
        end != text.data() + text.size()) {
      return make_error(ErrorCode::kInvalidArgument, "not valid base64");
    }
  }
  return SecretValue(std::string_view(buf.s.data(), len));
}

Result<SecretValue> read_file_checked(const std::string& path, std::string_view what,
                                      bool require_private) {
  if (!sodium_ready()) return make_error(ErrorCode::kUnavailable, "libsodium cannot initialise");
  // O_NOFOLLOW: a symlink is refused (ELOOP), not followed; O_NONBLOCK: a
  // FIFO put there does not hang the daemon (it is refused below).
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) {
    int err = errno;
    if (err == ELOOP) {
      return make_error(ErrorCode::kPermissionDenied,
                        std::string(what) + " " + path + " is a symbolic link: refused",
                        "name the file itself, not a link to it");
    }
    return errno_error("open(" + path + ") for the " + std::string(what), err);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error("fstat(" + path + ")");
  if (!S_ISREG(st.st_mode)) {
    return make_error(ErrorCode::kPermissionDenied,
                      std::string(what) + " " + path + " is not a regular file: refused");
  }
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return make_error(ErrorCode::kPermissionDenied,
                      std::string(what) + " " + path + " is owned by uid " +
                          std::to_string(st.st_uid) + ", not by root: refused",
                      "chown root " + path);
  }
  if (require_private && (st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return make_error(ErrorCode::kPermissionDenied,
                      std::string(what) + " " + path + " has mode " + mode +
                          ": group and others must have no access, refused",
                      "chmod 600 " + path);
  }
  if (static_cast<std::size_t>(st.st_size) > kMaxStoreFileSize) {
    return make_error(ErrorCode::kResourceExhausted,
                      std::string(what) + " " + path + " is larger than " +
                          std::to_string(kMaxStoreFileSize) + " bytes");
  }
  // One buffer of the final size (plus one byte to see growth): no
  // reallocation leaves a copy behind in freed memory.
  WipedString buf(static_cast<std::size_t>(st.st_size) + 1);
  std::size_t got = 0;
  while (got < buf.s.size()) {
    ssize_t n = ::read(fd.get(), buf.s.data() + got, buf.s.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error("read(" + path + ")");
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > static_cast<std::size_t>(st.st_size)) {
    return make_error(ErrorCode::kSystem,
                      std::string(what) + " " + path + " changed while it was read",
                      "write the file elsewhere and rename it into place");
  }
  return SecretValue(std::string_view(buf.s.data(), got));
}

// Finds NAME in an environment block; nullptr when absent.
const char* find_env(char** envp, std::string_view name) {
  for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    if (entry.size() > name.size() && entry[name.size()] == '=' &&
        entry.compare(0, name.size(), name) == 0) {
      return *e + name.size() + 1;
    }
  }
  return nullptr;
}

}  // namespace

bool valid_secret_key(std::string_view key) {
  return !key.empty() && key.size() <= kMaxKeyLength &&
         std::all_of(key.begin(), key.end(), key_char);
}

Result<std::vector<StoreLine>> parse_store_text(std::string_view text, std::string_view what) {
  return catch_locked_memory(std::string(what), [&]() -> Result<std::vector<StoreLine>> {
    if (!sodium_ready()) return make_error(ErrorCode::kUnavailable, "libsodium cannot initialise");
    std::vector<StoreLine> out;
    std::map<std::string, std::size_t, std::less<>> seen;
    std::size_t number = 0;
    std::size_t pos = 0;
    while (pos < text.size()) {
      std::size_t nl = text.find('\n', pos);
      std::string_view line =
          text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
      pos = nl == std::string_view::npos ? text.size() : nl + 1;
      ++number;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      std::size_t first = line.find_first_not_of(" \t");
      if (first == std::string_view::npos || line[first] == '#') continue;
      // From here on, no byte of the line goes into a message unless it has
      // been checked to be a key: a malformed line may hold a value.
      std::size_t eq = line.find('=');
      if (eq == std::string_view::npos) {
        return make_error(ErrorCode::kInvalidArgument,
                          line_ref(what, number) + ": no '=' (the line is not shown)",
                          "write KEY=value, one per line; comments start with #");
      }
      std::string_view key = line.substr(0, eq);
      if (!valid_secret_key(key)) {
        return make_error(
            ErrorCode::kInvalidArgument,
            line_ref(what, number) +
                ": the key is not 1 to 128 of A-Z a-z 0-9 _ . - (the line is not shown)",
            "write KEY=value with no space before the '='");
      }
      std::string_view raw = line.substr(eq + 1);
      SecretValue value;
      constexpr std::string_view kB64 = "base64:";
      if (raw.substr(0, kB64.size()) == kB64) {
        auto decoded = decode_base64(raw.substr(kB64.size()));
        if (!decoded) {
          return make_error(ErrorCode::kInvalidArgument,
                            line_ref(what, number) + " (key '" + std::string(key) +
                                "'): the value after base64: is not valid base64",
                            "encode the value with `base64 -w0`");
        }
        value = std::move(*decoded);
      } else {
        value = SecretValue(raw);
      }
      if (value.empty()) {
        return make_error(ErrorCode::kInvalidArgument,
                          line_ref(what, number) + " (key '" + std::string(key) + "'): empty value",
                          "give the key a value or remove the line");
      }
      auto [it, inserted] = seen.emplace(std::string(key), number);
      if (!inserted) {
        return make_error(ErrorCode::kInvalidArgument,
                          "secret key '" + std::string(key) + "' is defined twice in " +
                              std::string(what) + ": lines " + std::to_string(it->second) +
                              " and " + std::to_string(number),
                          "keep one of them");
      }
      out.push_back(StoreLine{std::string(key), std::move(value), number});
    }
    return out;
  });
}

Result<SecretValue> read_protected_file(const std::string& path, std::string_view what) {
  return catch_locked_memory(
      path, [&]() -> Result<SecretValue> { return read_file_checked(path, what, true); });
}

Status SecretStore::add(std::string_view key, SecretValue value, std::string source) {
  if (!valid_secret_key(key)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "secret key from " + source + " is not 1 to 128 of A-Z a-z 0-9 _ . -");
  }
  if (value.empty()) {
    return make_error(ErrorCode::kInvalidArgument, "secret key '" + std::string(key) + "' from " +
                                                       source + " has an empty value");
  }
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    return make_error(ErrorCode::kAlreadyExists,
                      "secret key '" + std::string(key) + "' is defined twice: in " +
                          it->second.source + " and in " + source,
                      "keep one of them: a key has one value");
  }
  entries_.emplace(std::string(key), Entry{std::move(value), std::move(source)});
  return ok();
}

const SecretValue* SecretStore::find(std::string_view key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second.value;
}

std::vector<std::string> SecretStore::keys() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [k, e] : entries_) out.push_back(k);
  return out;
}

std::string SecretStore::source_of(std::string_view key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? std::string() : it->second.source;
}

Result<SecretStore> SecretStore::load(const SecretStoreConfig& config, char** envp) {
  return catch_locked_memory("loading secrets", [&]() -> Result<SecretStore> {
    if (!sodium_ready()) return make_error(ErrorCode::kUnavailable, "libsodium cannot initialise");
    if (envp == nullptr) envp = environ;
    SecretStore store;
    auto add_lines = [&store](std::vector<StoreLine>& lines, const std::string& source) -> Status {
      for (auto& l : lines) {
        CORRAL_TRY(
            store.add(l.key, std::move(l.value), source + " line " + std::to_string(l.line)));
      }
      return ok();
    };

    if (!config.file.empty()) {
      const std::string what = "secret file " + config.file;
      auto bytes = read_protected_file(config.file, "secret file");
      if (!bytes) return tl::unexpected(bytes.error().wrap("loading secrets"));
      auto lines = parse_store_text(bytes->view(), what);
      if (!lines) return tl::unexpected(lines.error().wrap("loading secrets"));
      CORRAL_TRY_CTX(add_lines(*lines, "file " + config.file), "loading secrets");
    }

    for (const std::string& name : config.env) {
      if (!valid_secret_key(name)) {
        return make_error(ErrorCode::kInvalidArgument,
                          "loading secrets: env variable name '" + name +
                              "' is not a valid key (1 to 128 of A-Z a-z 0-9 _ . -)");
      }
      const char* v = find_env(envp, name);
      if (v == nullptr) {
        return make_error(
            ErrorCode::kNotFound,
            "loading secrets: env variable " + name + " is not set in the daemon's environment",
            "set it where the daemon is started, or remove it from the secrets env list");
      }
      CORRAL_TRY_CTX(store.add(name, SecretValue(v), "env " + name), "loading secrets");
    }

    if (!config.env_prefix.empty()) {
      const std::string& prefix = config.env_prefix;
      for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
        std::string_view entry(*e);
        std::size_t eq = entry.find('=');
        if (eq == std::string_view::npos || eq <= prefix.size() ||
            entry.compare(0, prefix.size(), prefix) != 0) {
          continue;
        }
        std::string var(entry.substr(0, eq));
        if (std::find(config.env.begin(), config.env.end(), var) != config.env.end()) continue;
        std::string key = var.substr(prefix.size());
        std::transform(key.begin(), key.end(), key.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        if (!valid_secret_key(key)) {
          return make_error(ErrorCode::kInvalidArgument,
                            "loading secrets: env variable " + var + " gives the key '" + key +
                                "', which is not 1 to 128 of A-Z a-z 0-9 _ . -",
                            "rename the variable or unset it");
        }
        CORRAL_TRY_CTX(store.add(key, SecretValue(entry.substr(eq + 1)), "env " + var),
                       "loading secrets");
      }
    }

    if (config.encrypted_file.empty() != config.key_file.empty()) {
      return make_error(ErrorCode::kInvalidArgument,
                        "loading secrets: an encrypted secret file needs a key file, and a key "
                        "file needs an encrypted secret file",
                        "name both, or neither");
    }
    if (!config.encrypted_file.empty()) {
      auto key = read_key_file(config.key_file);
      if (!key) return tl::unexpected(key.error().wrap("loading secrets"));
      // The encrypted file need not be private (it is authenticated), but it
      // must be root's own regular file.
      auto bytes = read_file_checked(config.encrypted_file, "encrypted secret file", false);
      if (!bytes) return tl::unexpected(bytes.error().wrap("loading secrets"));
      const std::string what = "encrypted secret file " + config.encrypted_file;
      auto plain = decrypt_store(bytes->view(), *key, what);
      if (!plain) return tl::unexpected(plain.error().wrap("loading secrets"));
      auto lines = parse_store_text(plain->view(), what);
      if (!lines) return tl::unexpected(lines.error().wrap("loading secrets"));
      CORRAL_TRY_CTX(add_lines(*lines, "encrypted file " + config.encrypted_file),
                     "loading secrets");
    }
    return store;
  });
}

Result<SecretValue> generate_key() {
  return catch_locked_memory("generating a key", [&]() -> Result<SecretValue> {
    if (!sodium_ready()) return make_error(ErrorCode::kUnavailable, "libsodium cannot initialise");
    unsigned char k[kStoreKeySize];
    ::crypto_aead_xchacha20poly1305_ietf_keygen(k);
    SecretValue key(std::string_view(reinterpret_cast<const char*>(k), sizeof k));
    wipe(k, sizeof k);
    return key;
  });
}

Result<SecretValue> encode_key_hex(const SecretValue& key) {
  return catch_locked_memory("encoding a key", [&]() -> Result<SecretValue> {
    if (key.size() != kStoreKeySize) {
      return make_error(ErrorCode::kInvalidArgument, "a store key is 32 bytes");
    }
    char hex[kStoreKeySize * 2 + 1];
    ::sodium_bin2hex(hex, sizeof hex, reinterpret_cast<const unsigned char*>(key.view().data()),
                     key.size());
    WipedString out(kStoreKeySize * 2 + 1);
    std::memcpy(out.s.data(), hex, kStoreKeySize * 2);
    out.s[kStoreKeySize * 2] = '\n';
    wipe(hex, sizeof hex);
    return SecretValue(out.s);
  });
}

Result<SecretValue> read_key_file(const std::string& path) {
  return catch_locked_memory(path, [&]() -> Result<SecretValue> {
    auto bytes = read_protected_file(path, "secret key file");
    if (!bytes) return tl::unexpected(bytes.error());
    std::string_view v = bytes->view();
    if (v.size() == kStoreKeySize) return SecretValue(v);
    while (!v.empty() && (v.back() == '\n' || v.back() == '\r' || v.back() == ' ')) {
      v.remove_suffix(1);
    }
    if (v.size() == kStoreKeySize * 2 && std::all_of(v.begin(), v.end(), [](char c) {
          return std::isxdigit(static_cast<unsigned char>(c));
        })) {
      unsigned char k[kStoreKeySize];
      std::size_t len = 0;
      if (::sodium_hex2bin(k, sizeof k, v.data(), v.size(), nullptr, &len, nullptr) == 0 &&
          len == kStoreKeySize) {
        SecretValue key(std::string_view(reinterpret_cast<const char*>(k), len));
        wipe(k, sizeof k);
        return key;
      }
      wipe(k, sizeof k);
    }
    auto decoded = decode_base64(v);
    if (decoded && decoded->size() == kStoreKeySize) return std::move(*decoded);
    return make_error(ErrorCode::kInvalidArgument,
                      "secret key file " + path +
                          ": expected 32 raw bytes, 64 hex digits or the base64 of 32 bytes",
                      "make one with `corral secrets keygen --out FILE`");
  });
}

Result<std::string> encrypt_store(std::string_view plaintext, const SecretValue& key) {
  if (!sodium_ready()) return make_error(ErrorCode::kUnavailable, "libsodium cannot initialise");
  if (key.size() != kStoreKeySize) {
    return make_error(ErrorCode::kInvalidArgument, "encrypting secrets: the key is not 32 bytes");
  }
  auto lines = parse_store_text(plaintext, "plain secret file");
  if (!lines) return tl::unexpected(lines.error().wrap("encrypting secrets"));
  constexpr std::size_t kHeader = 8;
  constexpr std::size_t kNonce = crypto_aead_xchacha20poly1305_ietf_NPUBBYTES;
  std::string out(kHeader + kNonce + plaintext.size() + crypto_aead_xchacha20poly1305_ietf_ABYTES,
                  '\0');
  std::memcpy(out.data(), kEncryptedMagic.data(), kEncryptedMagic.size());
  out[7] = static_cast<char>(kEncryptedVersion);
  auto* nonce = reinterpret_cast<unsigned char*>(out.data() + kHeader);
  fill_random(nonce, kNonce);
  unsigned long long clen = 0;
  ::crypto_aead_xchacha20poly1305_ietf_encrypt(
      reinterpret_cast<unsigned char*>(out.data() + kHeader + kNonce), &clen,
      reinterpret_cast<const unsigned char*>(plaintext.data()), plaintext.size(),
      reinterpret_cast<const unsigned char*>(out.data()), kHeader, nullptr, nonce,
      reinterpret_cast<const unsigned char*>(key.view().data()));
  out.resize(kHeader + kNonce + clen);
  return out;
}

Result<SecretValue> decrypt_store(std::string_view file_bytes, const SecretValue& key,
                                  std::string_view what) {
  return catch_locked_memory(std::string(what), [&]() -> Result<SecretValue> {
    if (!sodium_ready()) return make_error(ErrorCode::kUnavailable, "libsodium cannot initialise");
    constexpr std::size_t kHeader = 8;
    constexpr std::size_t kNonce = crypto_aead_xchacha20poly1305_ietf_NPUBBYTES;
    constexpr std::size_t kTag = crypto_aead_xchacha20poly1305_ietf_ABYTES;
    if (key.size() != kStoreKeySize) {
      return make_error(ErrorCode::kInvalidArgument,
                        std::string(what) + ": the key is not 32 bytes");
    }
    if (file_bytes.size() < kHeader + kNonce + kTag ||
        file_bytes.substr(0, kEncryptedMagic.size()) != kEncryptedMagic) {
      return make_error(ErrorCode::kInvalidArgument,
                        std::string(what) + ": not an encrypted secret file (bad header)",
                        "make it with `corral secrets encrypt`");
    }
    if (static_cast<unsigned char>(file_bytes[7]) != kEncryptedVersion) {
      return make_error(ErrorCode::kInvalidArgument,
                        std::string(what) + ": format version " +
                            std::to_string(static_cast<unsigned char>(file_bytes[7])) +
                            " is not known (this corral reads version 1)");
    }
    const auto* nonce = reinterpret_cast<const unsigned char*>(file_bytes.data() + kHeader);
    std::string_view cipher = file_bytes.substr(kHeader + kNonce);
    WipedString plain(cipher.size() - kTag);
    unsigned long long plen = 0;
    if (::crypto_aead_xchacha20poly1305_ietf_decrypt(
            reinterpret_cast<unsigned char*>(plain.s.data()), &plen, nullptr,
            reinterpret_cast<const unsigned char*>(cipher.data()), cipher.size(),
            reinterpret_cast<const unsigned char*>(file_bytes.data()), kHeader, nonce,
            reinterpret_cast<const unsigned char*>(key.view().data())) != 0) {
      return make_error(ErrorCode::kPermissionDenied,
                        std::string(what) +
                            ": authentication failed: the file was modified, or the key is not "
                            "the one it was encrypted with",
                        "check the key file; re-create the file with `corral secrets encrypt`");
    }
    return SecretValue(std::string_view(plain.s.data(), plen));
  });
}

}  // namespace corral::secrets
