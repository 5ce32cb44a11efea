#include "jail/spawn_request.h"

#include <cstring>

namespace corral {

namespace {

tl::unexpected<Error> bad(std::string what) {
  return make_error(ErrorCode::kInvalidArgument, "spawn request: " + std::move(what));
}

tl::unexpected<Error> too_big(std::string what, std::string hint) {
  return make_error(ErrorCode::kInvalidArgument, "spawn request: " + std::move(what),
                    std::move(hint));
}

constexpr const char* kBigHint =
    "pass large inputs through a file or stdin instead of argv or the environment";

bool is_env_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool is_env_char(char c) { return is_env_start(c) || (c >= '0' && c <= '9'); }

// One string's limits, shared by the encoder and the decoder. `field` is
// "argv[3]", "env[0]" or "cwd": never the string's own bytes.
Status check_string(std::string_view field, std::string_view s) {
  if (s.size() > kSpawnMaxString) {
    return too_big(std::string(field) + " is " + std::to_string(s.size()) +
                       " bytes, more than the limit of " + std::to_string(kSpawnMaxString),
                   kBigHint);
  }
  if (s.find('\0') != std::string_view::npos) {
    return bad(std::string(field) + " contains a NUL byte (strings become C strings for execve)");
  }
  return ok();
}

Status check_arg(std::size_t i, std::string_view s) {
  std::string field = "argv[" + std::to_string(i) + "]";
  CORRAL_TRY(check_string(field, s));
  if (i == 0 && s.empty()) return bad("argv[0] is empty (it names the program to run)");
  return ok();
}

Status check_env(std::size_t i, std::string_view s) {
  std::string field = "env[" + std::to_string(i) + "]";
  CORRAL_TRY(check_string(field, s));
  std::size_t eq = s.find('=');
  if (eq == std::string_view::npos) return bad(field + " has no '=' (expected NAME=value)");
  if (eq == 0) return bad(field + " has an empty name (expected NAME=value)");
  if (!is_env_start(s[0])) {
    return bad(field + " has an invalid name (it must start with a letter or '_')");
  }
  for (std::size_t k = 1; k < eq; ++k) {
    if (!is_env_char(s[k])) {
      return bad(field + " has an invalid name (only letters, digits and '_' are allowed)");
    }
  }
  return ok();
}

Status check_cwd(std::string_view s) {
  CORRAL_TRY(check_string("cwd", s));
  if (!s.empty() && s.front() != '/') return bad("cwd is not an absolute path");
  return ok();
}

Status check_argc(std::uint64_t argc) {
  if (argc == 0) return bad("argv is empty (it needs at least the program to run)");
  if (argc > kSpawnMaxArgs) {
    return too_big("argv has " + std::to_string(argc) + " entries, more than the limit of " +
                       std::to_string(kSpawnMaxArgs),
                   kBigHint);
  }
  return ok();
}

Status check_envc(std::uint64_t envc) {
  if (envc > kSpawnMaxEnv) {
    return too_big("env has " + std::to_string(envc) + " entries, more than the limit of " +
                       std::to_string(kSpawnMaxEnv),
                   kBigHint);
  }
  return ok();
}

Status check_total(std::uint64_t total) {
  if (total > kSpawnMaxMessage) {
    return too_big("the message is " + std::to_string(total) + " bytes, more than the limit of " +
                       std::to_string(kSpawnMaxMessage),
                   kBigHint);
  }
  return ok();
}

void put_u16(std::string& out, std::uint16_t v) {
  out.push_back(static_cast<char>(v & 0xff));
  out.push_back(static_cast<char>(v >> 8));
}
void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_string(std::string& out, std::string_view s) {
  put_u32(out, static_cast<std::uint32_t>(s.size()));  // <= kSpawnMaxString, checked
  out.append(s);
}

// Reads little-endian integers and length-prefixed strings from a buffer,
// never past its end. Every read checks what is left first.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}

  std::size_t left() const { return data_.size() - pos_; }
  std::size_t pos() const { return pos_; }

  // Callers check left() >= n first.
  std::uint64_t le(std::size_t n) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) {
      v |= std::uint64_t{static_cast<unsigned char>(data_[pos_ + i])} << (8 * i);
    }
    pos_ += n;
    return v;
  }

  Result<std::string_view> string(std::string_view field) {
    if (left() < 4) {
      return bad("truncated: the length of " + std::string(field) + " is cut off at byte " +
                 std::to_string(pos_));
    }
    std::uint64_t len = le(4);
    if (len > kSpawnMaxString) {
      return too_big(std::string(field) + " is " + std::to_string(len) +
                         " bytes, more than the limit of " + std::to_string(kSpawnMaxString),
                     kBigHint);
    }
    if (len > left()) {
      return bad("truncated: " + std::string(field) + " is " + std::to_string(len) +
                 " bytes but only " + std::to_string(left()) + " are left");
    }
    std::string_view s = data_.substr(pos_, static_cast<std::size_t>(len));
    pos_ += static_cast<std::size_t>(len);
    return s;
  }

 private:
  std::string_view data_;
  std::size_t pos_ = 0;
};

}  // namespace

Status validate_spawn_request(const SpawnRequest& r) {
  if (r.controlling_tty && !r.new_session)
    return bad("controlling_tty needs new_session (a terminal belongs to a session leader)");
  CORRAL_TRY(check_argc(r.argv.size()));
  CORRAL_TRY(check_envc(r.env.size()));
  // With at most 8192 strings of at most 128 KiB each, the sum fits easily
  // in 64 bits; each string is checked before it is counted.
  std::uint64_t total = kSpawnHeaderSize;
  for (std::size_t i = 0; i < r.argv.size(); ++i) {
    CORRAL_TRY(check_arg(i, r.argv[i]));
    total += 4 + r.argv[i].size();
  }
  for (std::size_t i = 0; i < r.env.size(); ++i) {
    CORRAL_TRY(check_env(i, r.env[i]));
    total += 4 + r.env[i].size();
  }
  CORRAL_TRY(check_cwd(r.cwd));
  total += 4 + r.cwd.size();
  CORRAL_TRY(check_total(total));
  return ok();
}

Result<std::string> encode_spawn_request(const SpawnRequest& r) {
  CORRAL_TRY(validate_spawn_request(r));
  std::size_t total = kSpawnHeaderSize + 4 + r.cwd.size();
  for (const auto& s : r.argv) total += 4 + s.size();
  for (const auto& s : r.env) total += 4 + s.size();
  std::string out;
  out.reserve(total);
  out.append(kSpawnMagic, sizeof kSpawnMagic);
  put_u16(out, kSpawnVersion);
  put_u16(out, static_cast<std::uint16_t>((r.new_session ? kSpawnFlagNewSession : 0) |
                                          (r.controlling_tty ? kSpawnFlagControllingTty : 0)));
  put_u32(out, static_cast<std::uint32_t>(total));  // <= kSpawnMaxMessage, checked
  put_u64(out, r.request_id);
  put_u32(out, r.timeout_ms);
  put_u32(out, static_cast<std::uint32_t>(r.argv.size()));
  put_u32(out, static_cast<std::uint32_t>(r.env.size()));
  for (const auto& s : r.argv) put_string(out, s);
  for (const auto& s : r.env) put_string(out, s);
  put_string(out, r.cwd);
  if (out.size() != total) {
    return make_error(ErrorCode::kInternal, "spawn request: encoded " + std::to_string(out.size()) +
                                                " bytes, expected " + std::to_string(total));
  }
  return out;
}

Result<SpawnRequest> decode_spawn_request(std::string_view message) {
  CORRAL_TRY(check_total(message.size()));
  if (message.size() < kSpawnHeaderSize) {
    return bad("truncated: " + std::to_string(message.size()) + " bytes, shorter than the " +
               std::to_string(kSpawnHeaderSize) + "-byte header");
  }
  Reader in(message);
  if (std::memcmp(message.data(), kSpawnMagic, sizeof kSpawnMagic) != 0) {
    return bad("bad magic (expected \"CSPN\")");
  }
  in.le(4);
  std::uint64_t version = in.le(2);
  if (version != kSpawnVersion) {
    return bad("unsupported version " + std::to_string(version) + " (this side speaks " +
               std::to_string(kSpawnVersion) + ")");
  }
  std::uint64_t flags = in.le(2);
  if ((flags & ~std::uint64_t{kSpawnFlagNewSession | kSpawnFlagControllingTty}) != 0) {
    return bad("unknown flags " + std::to_string(flags));
  }
  if ((flags & kSpawnFlagControllingTty) != 0 && (flags & kSpawnFlagNewSession) == 0) {
    return bad("flags: controlling_tty without new_session");
  }
  std::uint64_t total = in.le(4);
  CORRAL_TRY(check_total(total));
  if (total != message.size()) {
    return bad(std::string(total > message.size() ? "truncated" : "trailing bytes") +
               ": the header says " + std::to_string(total) + " bytes, the message has " +
               std::to_string(message.size()));
  }
  SpawnRequest r;
  r.request_id = in.le(8);
  r.timeout_ms = static_cast<std::uint32_t>(in.le(4));
  r.new_session = (flags & kSpawnFlagNewSession) != 0;
  r.controlling_tty = (flags & kSpawnFlagControllingTty) != 0;
  std::uint64_t argc = in.le(4);
  std::uint64_t envc = in.le(4);
  CORRAL_TRY(check_argc(argc));
  CORRAL_TRY(check_envc(envc));
  // Every string takes at least its 4-byte length: refuse counts the bytes
  // left cannot hold before reserving anything (both are <= 4096 here).
  std::uint64_t strings = argc + envc + 1;
  if (strings * 4 > in.left()) {
    return bad("truncated: " + std::to_string(argc) + " argv and " + std::to_string(envc) +
               " env entries need at least " + std::to_string(strings * 4) + " bytes, only " +
               std::to_string(in.left()) + " are left");
  }
  r.argv.reserve(static_cast<std::size_t>(argc));
  r.env.reserve(static_cast<std::size_t>(envc));
  for (std::size_t i = 0; i < argc; ++i) {
    std::string field = "argv[" + std::to_string(i) + "]";
    auto s = in.string(field);
    if (!s) return tl::unexpected<Error>(std::move(s).error());
    CORRAL_TRY(check_arg(i, *s));
    r.argv.emplace_back(*s);
  }
  for (std::size_t i = 0; i < envc; ++i) {
    std::string field = "env[" + std::to_string(i) + "]";
    auto s = in.string(field);
    if (!s) return tl::unexpected<Error>(std::move(s).error());
    CORRAL_TRY(check_env(i, *s));
    r.env.emplace_back(*s);
  }
  auto cwd = in.string("cwd");
  if (!cwd) return tl::unexpected<Error>(std::move(cwd).error());
  CORRAL_TRY(check_cwd(*cwd));
  r.cwd = std::string(*cwd);
  if (in.left() != 0) {
    return bad("trailing bytes: " + std::to_string(in.left()) + " bytes after cwd");
  }
  return r;
}

}  // namespace corral
