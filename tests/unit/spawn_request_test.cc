#include "jail/spawn_request.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace corral {
namespace {

// Builds a message by hand, independently of the encoder, so that the
// decoder can be fed what the encoder refuses to write.
struct Raw {
  std::string magic = "CSPN";
  std::uint16_t version = 1;
  std::uint16_t flags = 0;
  std::int64_t total = -1;  // -1: the real size
  std::uint64_t request_id = 7;
  std::uint32_t timeout_ms = 0;
  std::int64_t argc = -1;  // -1: argv.size()
  std::int64_t envc = -1;
  std::vector<std::string> argv = {"/bin/true"};
  std::vector<std::string> env;
  std::string cwd;
  std::string trailer;  // raw bytes after cwd

  static void u16(std::string& o, std::uint16_t v) {
    o.push_back(static_cast<char>(v & 0xff));
    o.push_back(static_cast<char>(v >> 8));
  }
  static void u32(std::string& o, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) o.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  static void u64(std::string& o, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) o.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  static void str(std::string& o, const std::string& s) {
    u32(o, static_cast<std::uint32_t>(s.size()));
    o += s;
  }

  std::string bytes() const {
    std::string body;
    for (const auto& s : argv) str(body, s);
    for (const auto& s : env) str(body, s);
    str(body, cwd);
    body += trailer;
    std::string o = magic;
    u16(o, version);
    u16(o, flags);
    u32(o, static_cast<std::uint32_t>(total >= 0 ? total : 32 + body.size()));
    u64(o, request_id);
    u32(o, timeout_ms);
    u32(o, static_cast<std::uint32_t>(argc >= 0 ? argc : argv.size()));
    u32(o, static_cast<std::uint32_t>(envc >= 0 ? envc : env.size()));
    return o + body;
  }
};

void set_u32(std::string& msg, std::size_t offset, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) msg[offset + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

SpawnRequest sample() {
  SpawnRequest r;
  r.request_id = 0x0102030405060708ull;
  r.argv = {"/usr/bin/python3", "-c", "print('hi')"};
  r.env = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "EMPTY="};
  r.cwd = "/workspace";
  r.timeout_ms = 30000;
  r.new_session = true;
  return r;
}

// The error of a failed call, after checking the common promises.
template <typename T>
Error error_of(const Result<T>& r) {
  EXPECT_FALSE(r.has_value()) << "expected an error";
  if (r.has_value()) return Error{};
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(r.error().message.starts_with("spawn request: ")) << r.error().message;
  return r.error();
}

void expect_round_trip(const SpawnRequest& r) {
  auto bytes = encode_spawn_request(r);
  ASSERT_TRUE(bytes.has_value()) << bytes.error().to_string();
  auto back = decode_spawn_request(*bytes);
  ASSERT_TRUE(back.has_value()) << back.error().to_string();
  EXPECT_EQ(*back, r);
  auto again = encode_spawn_request(*back);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, *bytes);
}

// A request whose encoding is exactly `size` bytes: argv[1..] padded with 'x'.
SpawnRequest request_of_size(std::size_t size) {
  SpawnRequest r;
  r.argv = {"a"};
  std::size_t used = kSpawnHeaderSize + 4 + 1 + 4;  // header, argv[0], empty cwd
  while (used < size) {
    std::size_t room = size - used - 4;
    std::size_t n = room < kSpawnMaxString ? room : kSpawnMaxString;
    r.argv.emplace_back(n, 'x');
    used += 4 + n;
  }
  return r;
}

// --- round trips ---

TEST(spawn_request, RoundTripSample) { expect_round_trip(sample()); }

TEST(spawn_request, RoundTripMinimal) {
  SpawnRequest r;
  r.argv = {"x"};
  expect_round_trip(r);
  auto bytes = encode_spawn_request(r);
  ASSERT_TRUE(bytes);
  EXPECT_EQ(bytes->size(), kSpawnHeaderSize + 4 + 1 + 4);
}

TEST(spawn_request, RoundTripEmptyEnvAndCwd) {
  SpawnRequest r = sample();
  r.env.clear();
  r.cwd.clear();
  r.new_session = false;
  r.timeout_ms = 0;
  expect_round_trip(r);
}

TEST(spawn_request, RoundTripExtremeScalars) {
  SpawnRequest r = sample();
  r.request_id = UINT64_MAX;
  r.timeout_ms = UINT32_MAX;
  expect_round_trip(r);
  r.request_id = 0;
  expect_round_trip(r);
}

TEST(spawn_request, RoundTripLargeArgv) {
  SpawnRequest r;
  for (std::size_t i = 0; i < kSpawnMaxArgs; ++i) r.argv.push_back("arg" + std::to_string(i));
  for (std::size_t i = 0; i < kSpawnMaxEnv; ++i) r.env.push_back("V" + std::to_string(i) + "=");
  r.argv[1].clear();  // empty arguments after argv[0] are fine
  expect_round_trip(r);
}

TEST(spawn_request, RoundTripUnicode) {
  SpawnRequest r;
  r.argv = {"/bin/echo", "héllo wörld", "日本語", "\xF0\x9F\x98\x80"};
  r.env = {"GREETING=привет", "_X=λ=μ"};
  r.cwd = "/home/ñ/目录";
  expect_round_trip(r);
}

TEST(spawn_request, RoundTripBinaryBytesOtherThanNul) {
  std::string all;
  for (int c = 1; c < 256; ++c) all.push_back(static_cast<char>(c));
  SpawnRequest r;
  r.argv = {all, "\xff\xfe", "\n\t\r"};
  r.env = {"B=" + all};
  r.cwd = "/" + all;
  expect_round_trip(r);
}

TEST(spawn_request, ExactLayout) {
  SpawnRequest r;
  r.request_id = 0x1122334455667788ull;
  r.argv = {"ab"};
  r.env = {"K=V"};
  r.cwd = "/";
  r.timeout_ms = 0x01020304;
  r.new_session = true;
  auto bytes = encode_spawn_request(r);
  ASSERT_TRUE(bytes);
  const std::string expected =
      std::string("CSPN") + std::string("\x01\x00\x01\x00", 4) +
      std::string("\x32\x00\x00\x00", 4) +  // 50 bytes
      std::string("\x88\x77\x66\x55\x44\x33\x22\x11", 8) + std::string("\x04\x03\x02\x01", 4) +
      std::string("\x01\x00\x00\x00", 4) + std::string("\x01\x00\x00\x00", 4) +
      std::string("\x02\x00\x00\x00", 4) + "ab" + std::string("\x03\x00\x00\x00", 4) + "K=V" +
      std::string("\x01\x00\x00\x00", 4) + "/";
  EXPECT_EQ(*bytes, expected);
}

TEST(spawn_request, DecodesFromBytes) {
  auto bytes = encode_spawn_request(sample());
  ASSERT_TRUE(bytes);
  std::span<const std::byte> span(reinterpret_cast<const std::byte*>(bytes->data()), bytes->size());
  auto back = decode_spawn_request(span);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, sample());
}

// --- limits, at the edge and one over, on both sides ---

TEST(spawn_request, ArgvCount) {
  SpawnRequest r;
  r.argv.assign(kSpawnMaxArgs, "a");
  expect_round_trip(r);
  r.argv.push_back("a");
  EXPECT_NE(error_of(encode_spawn_request(r)).message.find("limit of 4096"), std::string::npos);
  Raw raw;
  raw.argv.assign(kSpawnMaxArgs + 1, "a");
  EXPECT_NE(error_of(decode_spawn_request(raw.bytes())).message.find("argv has 4097 entries"),
            std::string::npos);
}

TEST(spawn_request, ArgvEmpty) {
  SpawnRequest r;
  EXPECT_NE(error_of(encode_spawn_request(r)).message.find("argv is empty"), std::string::npos);
  Raw raw;
  raw.argv.clear();
  EXPECT_NE(error_of(decode_spawn_request(raw.bytes())).message.find("argv is empty"),
            std::string::npos);
}

TEST(spawn_request, EnvCount) {
  SpawnRequest r;
  r.argv = {"a"};
  r.env.assign(kSpawnMaxEnv, "A=");
  expect_round_trip(r);
  r.env.push_back("A=");
  EXPECT_NE(error_of(encode_spawn_request(r)).message.find("env has 4097 entries"),
            std::string::npos);
  Raw raw;
  raw.env.assign(kSpawnMaxEnv + 1, "A=");
  EXPECT_NE(error_of(decode_spawn_request(raw.bytes())).message.find("limit of 4096"),
            std::string::npos);
}

TEST(spawn_request, StringLength) {
  for (int field = 0; field < 3; ++field) {
    SCOPED_TRACE(field);
    SpawnRequest r;
    r.argv = {"a"};
    std::string at_limit(kSpawnMaxString, 'x');
    if (field == 0) r.argv.push_back(at_limit);
    if (field == 1) r.env.push_back("A=" + at_limit.substr(2));
    if (field == 2) r.cwd = "/" + at_limit.substr(1);
    expect_round_trip(r);
    if (field == 0) r.argv.back() += 'x';
    if (field == 1) r.env.back() += 'x';
    if (field == 2) r.cwd += 'x';
    Error e = error_of(encode_spawn_request(r));
    EXPECT_NE(e.message.find("131073 bytes, more than the limit of 131072"), std::string::npos)
        << e.message;
    EXPECT_FALSE(e.hint.empty());
    Raw raw;
    if (field == 0) raw.argv = r.argv;
    if (field == 1) raw.env = r.env;
    if (field == 2) raw.cwd = r.cwd;
    e = error_of(decode_spawn_request(raw.bytes()));
    EXPECT_NE(e.message.find("131073 bytes, more than the limit of 131072"), std::string::npos)
        << e.message;
  }
}

TEST(spawn_request, TotalSize) {
  SpawnRequest r = request_of_size(kSpawnMaxMessage);
  auto bytes = encode_spawn_request(r);
  ASSERT_TRUE(bytes) << bytes.error().to_string();
  EXPECT_EQ(bytes->size(), kSpawnMaxMessage);
  expect_round_trip(r);

  r.argv.back() += 'x';
  EXPECT_NE(
      error_of(encode_spawn_request(r)).message.find("262145 bytes, more than the limit of 262144"),
      std::string::npos);
  Raw raw;
  raw.argv = r.argv;
  EXPECT_NE(error_of(decode_spawn_request(raw.bytes())).message.find("limit of 262144"),
            std::string::npos);
  // A header that claims more than the limit, on a small message.
  raw = Raw{};
  raw.total = kSpawnMaxMessage + 1;
  EXPECT_NE(error_of(decode_spawn_request(raw.bytes())).message.find("limit of 262144"),
            std::string::npos);
}

TEST(spawn_request, NulBytes) {
  const std::string nul("a\0b", 3);
  for (int field = 0; field < 3; ++field) {
    SCOPED_TRACE(field);
    SpawnRequest r;
    r.argv = {"a"};
    Raw raw;
    if (field == 0) raw.argv = r.argv = {"a", nul};
    if (field == 1) raw.env = r.env = {"A=" + nul};
    if (field == 2) raw.cwd = r.cwd = "/" + nul;
    EXPECT_NE(error_of(encode_spawn_request(r)).message.find("NUL"), std::string::npos);
    EXPECT_NE(error_of(decode_spawn_request(raw.bytes())).message.find("NUL"), std::string::npos);
  }
  SpawnRequest r;
  r.argv = {std::string(1, '\0')};
  error_of(encode_spawn_request(r));
}

TEST(spawn_request, Argv0MustNotBeEmpty) {
  SpawnRequest r;
  r.argv = {"", "x"};
  EXPECT_NE(error_of(encode_spawn_request(r)).message.find("argv[0] is empty"), std::string::npos);
  Raw raw;
  raw.argv = r.argv;
  error_of(decode_spawn_request(raw.bytes()));
}

TEST(spawn_request, EnvEntries) {
  for (const char* good : {"A=", "_=", "a1_Z=x", "A=b=c", "_9=\xff", "X==="}) {
    SCOPED_TRACE(good);
    SpawnRequest r;
    r.argv = {"a"};
    r.env = {good};
    expect_round_trip(r);
  }
  for (const char* bad :
       {"", "A", "=x", "=", "1A=x", "A-B=x", "A B=x", "\xc3\xa9=x", "A.B=", "9=x"}) {
    SCOPED_TRACE(bad);
    SpawnRequest r;
    r.argv = {"a"};
    r.env = {"OK=1", bad};
    Error e = error_of(encode_spawn_request(r));
    EXPECT_NE(e.message.find("env[1]"), std::string::npos) << e.message;
    Raw raw;
    raw.env = r.env;
    e = error_of(decode_spawn_request(raw.bytes()));
    EXPECT_NE(e.message.find("env[1]"), std::string::npos) << e.message;
  }
}

TEST(spawn_request, Cwd) {
  for (const char* good : {"", "/", "/a/b", "/a/../b"}) {
    SCOPED_TRACE(good);
    SpawnRequest r;
    r.argv = {"a"};
    r.cwd = good;
    expect_round_trip(r);
  }
  for (const char* bad : {"a", "./a", " /a", "~"}) {
    SCOPED_TRACE(bad);
    SpawnRequest r;
    r.argv = {"a"};
    r.cwd = bad;
    EXPECT_NE(error_of(encode_spawn_request(r)).message.find("absolute"), std::string::npos);
    Raw raw;
    raw.cwd = bad;
    error_of(decode_spawn_request(raw.bytes()));
  }
}

// --- malformed messages ---

TEST(spawn_request, TruncatedAtEveryByte) {
  auto bytes = encode_spawn_request(sample());
  ASSERT_TRUE(bytes);
  for (std::size_t n = 0; n < bytes->size(); ++n) {
    SCOPED_TRACE(n);
    std::string cut = bytes->substr(0, n);
    error_of(decode_spawn_request(cut));
    // The same, with a header that agrees with the cut size.
    if (n >= kSpawnHeaderSize) {
      set_u32(cut, 8, static_cast<std::uint32_t>(n));
      error_of(decode_spawn_request(cut));
    }
  }
}

TEST(spawn_request, TrailingBytes) {
  Raw raw;
  raw.trailer = "x";
  EXPECT_NE(error_of(decode_spawn_request(raw.bytes())).message.find("trailing bytes"),
            std::string::npos);
  auto bytes = encode_spawn_request(sample());
  ASSERT_TRUE(bytes);
  EXPECT_NE(error_of(decode_spawn_request(*bytes + "x")).message.find("trailing bytes"),
            std::string::npos);
  EXPECT_NE(error_of(decode_spawn_request(*bytes + std::string(1, '\0'))).message.find("says"),
            std::string::npos);
}

TEST(spawn_request, WrongMagicVersionFlags) {
  Raw raw;
  ASSERT_TRUE(decode_spawn_request(raw.bytes()));
  raw.magic = "CSPM";
  EXPECT_NE(error_of(decode_spawn_request(raw.bytes())).message.find("magic"), std::string::npos);
  raw.magic = "cspn";
  error_of(decode_spawn_request(raw.bytes()));
  for (std::uint16_t v : {0, 2, 0x100, 0xffff}) {
    raw = Raw{};
    raw.version = v;
    EXPECT_NE(error_of(decode_spawn_request(raw.bytes())).message.find("version"),
              std::string::npos);
  }
  // 2 is controlling_tty without new_session: a terminal needs a session.
  for (std::uint16_t f : {2, 4, 7, 0x8000}) {
    raw = Raw{};
    raw.flags = f;
    EXPECT_NE(error_of(decode_spawn_request(raw.bytes())).message.find("flags"), std::string::npos)
        << f;
  }
  raw = Raw{};
  raw.flags = 1;
  auto r = decode_spawn_request(raw.bytes());
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->new_session);
  EXPECT_FALSE(r->controlling_tty);
  raw.flags = 3;
  r = decode_spawn_request(raw.bytes());
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->new_session && r->controlling_tty);
}

TEST(spawn_request, ControllingTtyNeedsANewSession) {
  SpawnRequest r = sample();
  r.new_session = true;
  r.controlling_tty = true;
  expect_round_trip(r);
  r.new_session = false;
  EXPECT_NE(error_of(encode_spawn_request(r)).message.find("new_session"), std::string::npos);
}

TEST(spawn_request, CountsLargerThanTheBuffer) {
  Raw raw;
  raw.argc = 4096;  // within the limit, but 4 bytes each do not fit
  Error e = error_of(decode_spawn_request(raw.bytes()));
  EXPECT_NE(e.message.find("need at least"), std::string::npos) << e.message;
  raw = Raw{};
  raw.envc = 4096;
  e = error_of(decode_spawn_request(raw.bytes()));
  EXPECT_NE(e.message.find("need at least"), std::string::npos) << e.message;
  raw = Raw{};
  raw.argc = 0xffffffff;
  EXPECT_NE(error_of(decode_spawn_request(raw.bytes())).message.find("limit of 4096"),
            std::string::npos);
  raw = Raw{};
  raw.envc = 0xffffffff;
  error_of(decode_spawn_request(raw.bytes()));
  // One string more than there is.
  raw = Raw{};
  raw.argv = {"a", "b"};
  raw.argc = 3;
  error_of(decode_spawn_request(raw.bytes()));
  // One string fewer: the last argv is taken as an env entry or cwd.
  raw = Raw{};
  raw.argv = {"a", "/b"};
  raw.argc = 1;
  EXPECT_NE(error_of(decode_spawn_request(raw.bytes())).message.find("trailing bytes"),
            std::string::npos);
}

TEST(spawn_request, LengthNearUint32Max) {
  Raw raw;
  raw.argv = {"abc", "def"};
  std::string base = raw.bytes();
  const std::size_t argv1_len = kSpawnHeaderSize + 4 + 3;  // offset of argv[1]'s length
  for (std::uint32_t len : {0xffffffffu, 0xfffffffcu, 0xfffffff0u, 0x80000000u, 0x7fffffffu,
                            static_cast<std::uint32_t>(kSpawnMaxString + 1)}) {
    SCOPED_TRACE(len);
    std::string msg = base;
    set_u32(msg, argv1_len, len);
    EXPECT_NE(error_of(decode_spawn_request(msg)).message.find("limit of 131072"),
              std::string::npos);
    set_u32(msg, kSpawnHeaderSize, len);  // argv[0]'s length too
    error_of(decode_spawn_request(msg));
  }
  // Within the string limit, but past the end of the buffer.
  std::string msg = base;
  set_u32(msg, argv1_len, static_cast<std::uint32_t>(kSpawnMaxString));
  EXPECT_NE(error_of(decode_spawn_request(msg)).message.find("truncated"), std::string::npos);
  msg = base;
  set_u32(msg, argv1_len, 4 + 3 + 1);  // swallows cwd's length and one byte more
  error_of(decode_spawn_request(msg));
  // The total length field itself.
  msg = base;
  set_u32(msg, 8, 0xffffffffu);
  error_of(decode_spawn_request(msg));
  set_u32(msg, 8, 0);
  error_of(decode_spawn_request(msg));
}

TEST(spawn_request, ErrorsArePrintable) {
  Raw raw;
  raw.argv = {"\x01\xff", "a"};
  raw.env = {"\x1b[31m\xff=1"};
  Error e = error_of(decode_spawn_request(raw.bytes()));
  for (char c : e.message) {
    EXPECT_TRUE(static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f);
  }
}

}  // namespace
}  // namespace corral
