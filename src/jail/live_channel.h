// The channels between the daemon and a long-lived sandbox (ADR 0004).
//
// A long-lived sandbox's init holds, at fixed fd numbers, the daemon's ends
// of its two channels and the writable layer's mount fd. It never reads
// them: it only keeps them open, so that a daemon that restarts after a
// crash can take them back with pidfd_getfd() and re-attach; messages sent
// while no daemon was there wait in the socket.
//
//   control channel (SOCK_SEQPACKET, ControlMessage): init -> daemon,
//     a setup failure (kFailure) or the zygote's end (kExited).
//   spawn channel (SOCK_SEQPACKET): daemon -> zygote, one encoded
//     SpawnRequest (jail/spawn_request.h) per message with the process's
//     three stdio fds beside it (SCM_RIGHTS); zygote -> daemon, SpawnReply
//     messages, kStarted carrying the new process's pidfd.
#pragma once

#include <cstdint>

namespace corral {

inline constexpr int kInitHeldControlFd = 500;
inline constexpr int kInitHeldSpawnFd = 501;
inline constexpr int kInitHeldLayerFd = 502;

enum class SpawnReplyType : std::uint32_t {
  kReady = 1,  // the zygote is up: the sandbox can run processes
  kStarted,    // request_id runs as `pid` (pid in the sandbox); pidfd attached
  kFailed,     // request_id could not start: stage, err, detail
  kExited,     // request_id ended with wait status `status`
};

struct SpawnReply {
  SpawnReplyType type;
  std::uint32_t pad;
  std::uint64_t request_id;
  std::int32_t pid;     // kStarted: pid inside the sandbox's pid namespace
  std::int32_t status;  // kExited: wait status
  std::int32_t stage;   // kFailed: Stage
  std::int32_t err;     // kFailed: errno
  char detail[200];     // kFailed: NUL-terminated
};

}  // namespace corral
