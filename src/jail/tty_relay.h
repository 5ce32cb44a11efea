// When corral runs on a terminal, the sandbox gets a pty of its own (from
// its private devpts) and never the host's terminal: a sandboxed process
// cannot inject keystrokes into the user's shell (TIOCSTI) or change its
// settings. This relays bytes between our terminal and the pty master,
// with our terminal in raw mode for the duration.
#pragma once

#include <poll.h>
#include <termios.h>

#include "base/unique_fd.h"

namespace corral {

class TtyRelay {
 public:
  explicit TtyRelay(UniqueFd master);
  ~TtyRelay();
  TtyRelay(const TtyRelay&) = delete;
  TtyRelay& operator=(const TtyRelay&) = delete;

  // Fills up to `max` pollfds (stdin, master); returns how many.
  int add_poll_fds(pollfd* fds, int max);
  void on_poll(const pollfd* fds);
  void sync_window_size();
  // Copies what the sandbox wrote before it ended.
  void drain();

 private:
  bool copy(int from, int to);
  UniqueFd master_;
  bool stdin_open_ = true;
  bool master_open_ = true;
  bool raw_ = false;
  termios saved_{};
  int polled_ = 0;
};

}  // namespace corral
