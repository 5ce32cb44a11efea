#include "jail/tty_relay.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>

namespace corral {

TtyRelay::TtyRelay(UniqueFd master) : master_(std::move(master)) {
  if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_) == 0) {
    termios raw = saved_;
    cfmakeraw(&raw);
    raw_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  sync_window_size();
}

TtyRelay::~TtyRelay() {
  if (raw_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
}

void TtyRelay::sync_window_size() {
  winsize ws;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 || ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0)
    ioctl(master_.get(), TIOCSWINSZ, &ws);
}

int TtyRelay::add_poll_fds(pollfd* fds, int max) {
  int n = 0;
  polled_ = 0;
  if (stdin_open_ && n < max) {
    fds[n++] = {STDIN_FILENO, POLLIN, 0};
    polled_ |= 1;
  }
  if (master_open_ && n < max) {
    fds[n++] = {master_.get(), POLLIN, 0};
    polled_ |= 2;
  }
  return n;
}

bool TtyRelay::copy(int from, int to) {
  char buf[16384];
  ssize_t n = read(from, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) return false;
  ssize_t off = 0;
  while (off < n) {
    ssize_t w = write(to, buf + off, static_cast<size_t>(n - off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    off += w;
  }
  return true;
}

void TtyRelay::on_poll(const pollfd* fds) {
  int i = 0;
  if (polled_ & 1) {
    if (fds[i].revents != 0 && !copy(STDIN_FILENO, master_.get())) {
      // Our input ended (a pipe into --tty): pass it on as the terminal's
      // end-of-file character, as typing Ctrl-D would.
      stdin_open_ = false;
      termios t;
      char eof = tcgetattr(master_.get(), &t) == 0 ? static_cast<char>(t.c_cc[VEOF]) : '\x04';
      (void)!write(master_.get(), &eof, 1);
    }
    ++i;
  }
  if (polled_ & 2) {
    if (fds[i].revents != 0 && !copy(master_.get(), STDOUT_FILENO)) master_open_ = false;
  }
}

void TtyRelay::drain() {
  if (!master_open_) return;
  int flags = fcntl(master_.get(), F_GETFL);
  fcntl(master_.get(), F_SETFL, flags | O_NONBLOCK);
  char buf[16384];
  for (;;) {
    ssize_t n = read(master_.get(), buf, sizeof buf);
    if (n <= 0) break;
    ssize_t off = 0;
    while (off < n) {
      ssize_t w = write(STDOUT_FILENO, buf + off, static_cast<size_t>(n - off));
      if (w <= 0) break;
      off += w;
    }
  }
  master_open_ = false;
}

}  // namespace corral
