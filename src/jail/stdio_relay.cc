#include "jail/stdio_relay.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"

namespace corral {

namespace {

bool needs_relay(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return false;  // closed: the sandbox gets it closed too
  return !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

}  // namespace

Result<StdioRelay> StdioRelay::create(bool tty) {
  StdioRelay relay;
  for (int n = tty ? 2 : 0; n < 3; ++n) {
    if (!needs_relay(n)) continue;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return errno_error("pipe2(stdio relay)");
    if (n == 0) {
      relay.child_[0].reset(p[0]);
      relay.ours_[0].reset(p[1]);
      fcntl(p[1], F_SETFL, O_NONBLOCK);
    } else {
      relay.child_[n].reset(p[1]);
      relay.ours_[n].reset(p[0]);
    }
  }
  return relay;
}

void StdioRelay::close_child_ends() {
  for (auto& fd : child_) fd.reset();
}

int StdioRelay::add_poll_fds(pollfd* fds, int max) {
  int k = 0;
  polled_ = {-1, -1, -1};
  for (int n = 0; n < 3 && k < max; ++n) {
    if (!ours_[n].valid()) continue;
    polled_[n] = k;
    fds[k++] = {ours_[n].get(), static_cast<short>(n == 0 ? POLLOUT : POLLIN), 0};
  }
  return k;
}

bool StdioRelay::pump_in() {
  // Never block: a sandbox that stops reading must not stall the launcher
  // (its timeout still has to fire). Unwritten bytes wait in pending_.
  if (pending_.empty()) {
    char buf[65536];
    ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && errno == EINTR) return true;
    if (n <= 0) return false;
    pending_.assign(buf, static_cast<size_t>(n));
  }
  ssize_t w = write(ours_[0].get(), pending_.data(), pending_.size());
  if (w < 0) return errno == EAGAIN || errno == EINTR;
  pending_.erase(0, static_cast<size_t>(w));
  return true;
}

bool StdioRelay::pump_out(int n) {
  char buf[65536];
  ssize_t r = read(ours_[n].get(), buf, sizeof buf);
  if (r < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (r <= 0) return false;
  // Our own stdout gone: keep draining the sandbox.
  (void)write_all(n, std::string_view(buf, static_cast<size_t>(r)));
  return true;
}

void StdioRelay::on_poll(const pollfd* fds) {
  for (int n = 0; n < 3; ++n) {
    if (polled_[n] < 0) continue;
    short rev = fds[polled_[n]].revents;
    if (rev == 0) continue;
    bool keep = n == 0 ? ((rev & POLLOUT) && pump_in()) : pump_out(n);
    if (!keep) ours_[n].reset();
  }
}

void StdioRelay::drain() {
  ours_[0].reset();
  for (int n = 1; n < 3; ++n) {
    if (!ours_[n].valid()) continue;
    fcntl(ours_[n].get(), F_SETFL, O_NONBLOCK);
    char buf[65536];
    ssize_t r;
    while ((r = read(ours_[n].get(), buf, sizeof buf)) > 0) {
      (void)write_all(n, std::string_view(buf, static_cast<size_t>(r)));
    }
    ours_[n].reset();
  }
}

}  // namespace corral
