#include "daemon/api_keys.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "base/strings.h"
#include "base/fs.h"
#include "base/random.h"
#include "base/scope_guard.h"
#include "base/unique_fd.h"
#include "spec/units.h"

namespace corral {
namespace {

constexpr std::size_t kMaxKeyFileBytes = 1024 * 1024;
constexpr std::string_view kKeyPrefix = "crl_";
constexpr std::size_t kKeyRandomBytes = 32;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool parse_digest(std::string_view hex, Sha256::Digest& out) {
  if (hex.size() != out.size() * 2) return false;
  for (std::size_t i = 0; i < out.size(); ++i) {
    int hi = hex_value(hex[2 * i]);
    int lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::string mode_text(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// The keys of one key file, checked as the header says.
Status load_key_file(const std::string& path, std::vector<Sha256::Digest>& out) {
  const std::string quoted = quote_for_message(path);
  // O_NOFOLLOW: a symlink is refused (ELOOP) rather than followed; O_NONBLOCK:
  // a FIFO must not hang the daemon (it is refused below).
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW));
  if (!fd) {
    int err = errno;
    if (err == ELOOP) {
      return make_error(ErrorCode::kPermissionDenied, "key file " + quoted + " is a symbolic link",
                        "give the path of the file itself (a link could be pointed elsewhere)");
    }
    return errno_error("open(" + path + ")", err, "check serve.api_keys.files in the config");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error("fstat(" + path + ")");
  if (!S_ISREG(st.st_mode)) {
    return make_error(ErrorCode::kInvalidArgument, "key file " + quoted + " is not a regular file",
                      "give the path of a file holding one key per line");
  }
  const uid_t euid = ::geteuid();
  if (st.st_uid != 0 && st.st_uid != euid) {
    return make_error(ErrorCode::kPermissionDenied,
                      "key file " + quoted + " is owned by uid " + std::to_string(st.st_uid) +
                          ", not by root or by the daemon's uid " + std::to_string(euid),
                      "chown root " + path + " (or the user the daemon runs as)");
  }
  if ((st.st_mode & 077) != 0) {
    return make_error(ErrorCode::kPermissionDenied,
                      "key file " + quoted + " has mode " + mode_text(st.st_mode) +
                          ": group or others may access it; run chmod 600 " + path,
                      "a key file must be readable and writable by its owner only");
  }
  if (static_cast<std::uint64_t>(st.st_size) > kMaxKeyFileBytes) {
    return make_error(ErrorCode::kInvalidArgument, "key file " + quoted + " is larger than 1 MiB",
                      "a key file holds one key per line; check the path");
  }

  auto read = read_up_to(fd.get(), kMaxKeyFileBytes + 1, path);
  if (!read) return tl::unexpected<Error>(read.error());
  std::string text = std::move(*read);
  if (text.size() > kMaxKeyFileBytes) {
    return make_error(ErrorCode::kInvalidArgument, "key file " + quoted + " is larger than 1 MiB");
  }

  std::size_t keys = 0;
  std::size_t line_no = 0;
  std::string_view rest(text);
  while (!rest.empty()) {
    std::size_t nl = rest.find('\n');
    std::string_view line = trim(rest.substr(0, nl));
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    if (!ApiKeys::valid_key(line)) {
      // Never the line itself: it may be a key with a typo.
      return make_error(ErrorCode::kInvalidArgument,
                        "key file " + quoted + " line " + std::to_string(line_no) +
                            ": not a valid key (expected " + std::to_string(ApiKeys::kMinKeyBytes) +
                            " to " + std::to_string(ApiKeys::kMaxKeyBytes) +
                            " printable ASCII characters without spaces)",
                        "one key per line; comments start with #");
    }
    Sha256 h;
    h.update(line);
    out.push_back(h.final());
    ++keys;
  }
  if (keys == 0) {
    return make_error(ErrorCode::kInvalidArgument, "key file " + quoted + " holds no keys",
                      "add a key, or make one with corral serve's key generation");
  }
  return ok();
}

}  // namespace

bool ApiKeys::valid_key(std::string_view key) {
  if (key.size() < kMinKeyBytes || key.size() > kMaxKeyBytes) return false;
  for (char c : key) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

Status ApiKeys::add(const std::string& ns, const std::vector<std::string>& sha256_hex_hashes,
                   const std::vector<std::string>& key_files, const std::string& where) {
  std::vector<Sha256::Digest> added;
  for (std::size_t i = 0; i < sha256_hex_hashes.size(); ++i) {
    Sha256::Digest digest{};
    if (!parse_digest(sha256_hex_hashes[i], digest)) {
      return make_error(ErrorCode::kInvalidArgument,
                        where + "sha256[" + std::to_string(i) +
                            "]: " + quote_for_message(sha256_hex_hashes[i]) +
                            " is not a SHA-256 digest (expected 64 hex digits)",
                        "make one with: printf %s \"$KEY\" | sha256sum");
    }
    added.push_back(digest);
  }
  for (const std::string& file : key_files) {
    CORRAL_TRY_CTX(load_key_file(file, added), "loading API keys");
  }
  for (const Sha256::Digest& d : added) {
    bool known = false;  // listed twice for one namespace: kept once
    for (std::size_t i = 0; i < digests_.size(); ++i) {
      if (digests_[i] != d) continue;
      if (namespaces_[i] != ns)
        return make_error(ErrorCode::kInvalidArgument,
                          "loading API keys: one key is in namespaces " + namespaces_[i] +
                              " and " + ns,
                          "a key belongs to one namespace: give each namespace its own keys");
      known = true;
    }
    if (known) continue;
    digests_.push_back(d);
    namespaces_.push_back(ns);
  }
  return ok();
}

Result<ApiKeys> ApiKeys::load(const std::vector<std::string>& sha256_hex_hashes,
                              const std::vector<std::string>& key_files) {
  ApiKeys keys;
  CORRAL_TRY(keys.add(std::string(kDefaultNamespace), sha256_hex_hashes, key_files, "api_keys."));
  return keys;
}

Status ApiKeys::add_namespace(const std::string& name,
                              const std::vector<std::string>& sha256_hex_hashes,
                              const std::vector<std::string>& key_files) {
  return add(name, sha256_hex_hashes, key_files, "api_keys.namespaces[" + name + "].");
}

bool ApiKeys::verify(std::string_view presented_key) const {
  return namespace_of(presented_key).has_value();
}

std::optional<std::string> ApiKeys::namespace_of(std::string_view presented_key) const {
  Sha256 h;
  h.update(presented_key);
  const Sha256::Digest presented = h.final();
  // Every byte of every digest, no branch on the data: `diff` is zero only
  // for equal digests, and (diff - 1) >> 31 turns that into 1 without a
  // comparison the compiler could make into an early exit. The index of the
  // match is picked with a mask, not a branch.
  unsigned found = 0;
  std::size_t index = 0;
  for (std::size_t k = 0; k < digests_.size(); ++k) {
    const Sha256::Digest& stored = digests_[k];
    unsigned diff = 0;
    for (std::size_t i = 0; i < stored.size(); ++i) {
      diff |= static_cast<unsigned>(stored[i] ^ presented[i]);
    }
    const unsigned match = (diff - 1u) >> 31;  // diff is in 0..255
    index |= k & (std::size_t{0} - match);
    found |= match;
  }
  if (found == 0) return std::nullopt;
  return namespaces_[index];
}

Result<std::string> ApiKeys::parse_bearer(std::string_view header) {
  auto bad = [](std::string what) {
    return make_error(ErrorCode::kInvalidArgument, std::move(what),
                      "send the header Authorization: Bearer <key>");
  };
  // Spaces and tabs around a field value are not part of it (RFC 9110 5.5).
  while (!header.empty() && (header.front() == ' ' || header.front() == '\t')) {
    header.remove_prefix(1);
  }
  while (!header.empty() && (header.back() == ' ' || header.back() == '\t')) {
    header.remove_suffix(1);
  }
  constexpr std::string_view kScheme = "bearer";
  if (header.size() < kScheme.size()) return bad("the Authorization header is not a Bearer key");
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    char c = header[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kScheme[i]) return bad("the Authorization header is not a Bearer key");
  }
  header.remove_prefix(kScheme.size());
  if (header.empty() || header.front() != ' ') {
    return bad("the Authorization header is not a Bearer key");
  }
  while (!header.empty() && header.front() == ' ') header.remove_prefix(1);
  if (!valid_key(header)) {
    return bad("the Authorization header's key is malformed (expected " +
               std::to_string(kMinKeyBytes) + " to " + std::to_string(kMaxKeyBytes) +
               " printable ASCII characters without spaces)");
  }
  return std::string(header);
}

Result<std::string> ApiKeys::generate_into(const std::string& path) {
  const std::string quoted = quote_for_message(path);
  std::size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  if (dir.empty()) dir = "/";
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty() || base == "." || base == ".." || path.find('\0') != std::string::npos) {
    return make_error(ErrorCode::kInvalidArgument,
                      "writing a new API key: " + quoted + " is not a file path",
                      "give a path such as /etc/corral/api-keys");
  }
  auto wrap = [](tl::unexpected<Error> e) {
    return tl::unexpected<Error>(std::move(e.value()).wrap("writing a new API key"));
  };

  UniqueFd dirfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dirfd) return wrap(errno_error("open(" + dir + ")"));
  struct stat st {};
  if (::fstat(dirfd.get(), &st) != 0) return wrap(errno_error("fstat(" + dir + ")"));
  const uid_t euid = ::geteuid();
  if (st.st_uid != 0 && st.st_uid != euid) {
    return wrap(make_error(ErrorCode::kPermissionDenied,
                           "directory " + quote_for_message(dir) + " is owned by uid " +
                               std::to_string(st.st_uid) + ", not by root or by uid " +
                               std::to_string(euid),
                           "keep key files in a directory only root can change, such as "
                           "/etc/corral"));
  }
  if ((st.st_mode & 022) != 0) {
    return wrap(make_error(ErrorCode::kPermissionDenied,
                           "directory " + quote_for_message(dir) + " has mode " +
                               mode_text(st.st_mode) + ": group or others may replace files in it",
                           "chmod go-w " + dir + ", or choose another directory"));
  }

  std::uint8_t random[kKeyRandomBytes + 6];
  fill_random(random, sizeof random);
  std::string key(kKeyPrefix);
  key.append(to_hex(random, kKeyRandomBytes));
  const std::string tmp = "." + base + ".tmp-" + to_hex(random + kKeyRandomBytes, 6);

  UniqueFd fd(::openat(dirfd.get(), tmp.c_str(),
                       O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600));
  if (!fd) return wrap(errno_error("openat(" + dir + "/" + tmp + ", O_CREAT|O_EXCL)"));
  ScopeGuard remove_tmp([&] { ::unlinkat(dirfd.get(), tmp.c_str(), 0); });

  // The umask can only take bits away; make the mode exact anyway.
  if (::fchmod(fd.get(), 0600) != 0) return wrap(errno_error("fchmod(" + tmp + ", 0600)"));
  const std::string content = key + "\n";
  std::size_t written = 0;
  while (written < content.size()) {
    ssize_t n = ::write(fd.get(), content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return wrap(errno_error("write(" + tmp + ")"));
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return wrap(errno_error("fsync(" + tmp + ")"));
  if (::close(fd.release()) != 0) return wrap(errno_error("close(" + tmp + ")"));

  // Into place, never over an existing file: renameat2(RENAME_NOREPLACE),
  // or link + unlink on a file system without it (both fail with EEXIST).
  int err = 0;
  if (::renameat2(dirfd.get(), tmp.c_str(), dirfd.get(), base.c_str(), RENAME_NOREPLACE) != 0) {
    err = errno;
    if (err == EINVAL || err == ENOSYS) {
      err = ::linkat(dirfd.get(), tmp.c_str(), dirfd.get(), base.c_str(), 0) == 0 ? 0 : errno;
      if (err == 0) ::unlinkat(dirfd.get(), tmp.c_str(), 0);
    }
  }
  if (err == EEXIST) {
    return wrap(make_error(ErrorCode::kAlreadyExists, quoted + " already exists",
                           "corral never overwrites a key file: remove it first, or choose "
                           "another path"));
  }
  if (err != 0) return wrap(errno_error("renameat2(" + tmp + " -> " + path + ")", err));
  remove_tmp.dismiss();
  if (::fsync(dirfd.get()) != 0) return wrap(errno_error("fsync(" + dir + ")"));
  return key;
}

}  // namespace corral
