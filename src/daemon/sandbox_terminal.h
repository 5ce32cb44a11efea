// Terminals for processes the daemon starts in a sandbox (E2B's pty.*): a
// pseudo-terminal pair of the sandbox's own devpts instance, so the
// process sees /dev/pts/N inside its sandbox as from a login, and the host's
// devpts is never involved. The daemon keeps the master: what the process
// writes is copied into its stdout file on the writable layer (so followers,
// offsets and redaction stay as for any background process), input and
// window sizes go to the master.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "base/unique_fd.h"
#include "daemon/api_result.h"
#include "fs/confined_root.h"

namespace corral::daemon {

struct SandboxTerminal {
  UniqueFd master;  // the daemon's end
  UniqueFd slave;   // the process's stdin, stdout and stderr
};

// Opens /dev/pts/ptmx through the sandbox's confined root; refused unless
// it is the multiplexer of a devpts file system (a planted file, a FUSE
// mount or a symlink is not). The slave belongs to `owner` (the sandbox
// user's host uid), as a login's terminal does, and starts at cols x rows.
ApiResult<SandboxTerminal> open_sandbox_terminal(const ConfinedRoot& root, uid_t owner,
                                                 std::uint16_t cols, std::uint16_t rows);

// TIOCSWINSZ on the master: the process gets SIGWINCH.
Status set_terminal_size(int master, std::uint16_t cols, std::uint16_t rows);

// Copies what the process writes to its terminal into its stdout file
// (appended), on a thread of its own. The pump keeps a slave open, so the
// master never hangs up while output is still buffered (a pty drops what
// is unread when its last slave closes); the process's end, told by
// process_ended(), makes it copy what is left and stop. A full disk drops
// output rather than let the process block on a terminal nobody drains.
class TerminalPump {
 public:
  static std::shared_ptr<TerminalPump> start(UniqueFd master, UniqueFd slave, UniqueFd output);
  // The process has ended: copy what is buffered, then stop.
  void process_ended();
  // Everything the process wrote is in the output file.
  bool drained() const { return drained_.load(); }

 private:
  TerminalPump() = default;
  UniqueFd wake_;  // eventfd, written by process_ended
  std::atomic<bool> drained_{false};
};

}  // namespace corral::daemon
