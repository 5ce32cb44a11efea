// The wire format of a spawn request: what the daemon sends (through init)
// to a sandbox's zygote, one SOCK_SEQPACKET message per request, to start
// one process (ADR 0004). This file is only the bytes: no sockets, no fds
// (the three stdio fds travel beside the message by SCM_RIGHTS).
//
// Layout, every integer little-endian:
//   offset  0  magic "CSPN"
//           4  u16 version (1)
//           6  u16 flags (bit 0: new_session; bit 1: controlling_tty, which
//              needs bit 0; the other bits must be 0)
//           8  u32 total length of the message, header included
//          12  u64 request_id (chosen by the daemon, echoed in the exit message)
//          20  u32 timeout_ms (0: none; the daemon enforces it)
//          24  u32 argc (1..4096)
//          28  u32 envc (0..4096)
//          32  argc strings, then envc strings, then cwd;
//              each a u32 length followed by that many bytes, no terminator.
// Nothing may follow cwd. Both sides check the same limits, so a request the
// daemon could encode is one the zygote accepts, and the decoder, which runs
// in the zygote, trusts nothing: it reads within bounds, checks every count
// against the bytes left before it allocates, and never throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace corral {

inline constexpr char kSpawnMagic[4] = {'C', 'S', 'P', 'N'};
inline constexpr std::uint16_t kSpawnVersion = 1;
inline constexpr std::size_t kSpawnHeaderSize = 32;
inline constexpr std::uint16_t kSpawnFlagNewSession = 1;
inline constexpr std::uint16_t kSpawnFlagControllingTty = 2;

inline constexpr std::size_t kSpawnMaxMessage = 256 * 1024;  // whole message
inline constexpr std::size_t kSpawnMaxArgs = 4096;
inline constexpr std::size_t kSpawnMaxEnv = 4096;
inline constexpr std::size_t kSpawnMaxString = 128 * 1024;  // one argv, env or cwd string

struct SpawnRequest {
  std::uint64_t request_id = 0;
  std::vector<std::string> argv;  // argv[0] non-empty; the program to exec
  std::vector<std::string> env;   // "NAME=value", NAME of [A-Za-z_][A-Za-z0-9_]*
  std::string cwd;                // absolute, or empty for the sandbox's default
  std::uint32_t timeout_ms = 0;   // 0: no per-request timeout
  bool new_session = false;       // setsid() in the child (own process group)
  // The child's stdin (a terminal's slave, which all three stdio fds are)
  // becomes its session's controlling terminal; needs new_session.
  bool controlling_tty = false;

  bool operator==(const SpawnRequest&) const = default;
};

// Checks the request against every limit above; errors (kInvalidArgument)
// name the field and the limit. encode_spawn_request runs it first.
Status validate_spawn_request(const SpawnRequest& request);

Result<std::string> encode_spawn_request(const SpawnRequest& request);

// Decodes exactly one message: the whole of `message`, no more, no less.
// Errors are kInvalidArgument, start with "spawn request: " and never
// quote the message's bytes (they are printable ASCII).
Result<SpawnRequest> decode_spawn_request(std::string_view message);
inline Result<SpawnRequest> decode_spawn_request(std::span<const std::byte> message) {
  return decode_spawn_request(
      std::string_view(reinterpret_cast<const char*>(message.data()), message.size()));
}

}  // namespace corral
