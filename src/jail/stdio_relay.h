// The sandbox's stdin, stdout and stderr. Pipes and sockets are handed in
// as they are (nothing can be reopened through them). Anything else, a
// regular file, a terminal, a device, is replaced by a pipe that the
// launcher copies: otherwise the sandbox could reopen the host file
// through /proc/self/fd/N with new rights (read a log it may only append
// to, or talk to the user's terminal).
#pragma once

#include <poll.h>

#include <array>
#include <string>

#include "base/result.h"
#include "base/unique_fd.h"

namespace corral {

class StdioRelay {
 public:
  // `tty`: stdio will be a pty instead (only stdin/stdout are then left
  // alone; stderr is still checked).
  static Result<StdioRelay> create(bool tty);
  StdioRelay(StdioRelay&&) = default;
  StdioRelay& operator=(StdioRelay&&) = default;

  // The fd the sandbox gets as fd n (0, 1, 2).
  int child_fd(int n) const { return child_[n].valid() ? child_[n].get() : n; }
  // After the sandbox's init exists: drop our copies of its ends.
  void close_child_ends();

  int add_poll_fds(pollfd* fds, int max);
  void on_poll(const pollfd* fds);
  // Copies what is left once the sandbox is gone.
  void drain();

 private:
  StdioRelay() = default;
  bool pump_in();
  bool pump_out(int n);
  std::array<UniqueFd, 3> child_;   // the sandbox's ends
  std::array<UniqueFd, 3> ours_;    // our ends: write for 0, read for 1 and 2
  std::array<int, 3> polled_{-1, -1, -1};
  std::string pending_;  // stdin bytes read but not yet taken by the sandbox
};

}  // namespace corral
