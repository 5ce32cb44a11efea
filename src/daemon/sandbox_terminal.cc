#include "daemon/sandbox_terminal.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

#include "base/scope_guard.h"

namespace corral::daemon {

namespace {

constexpr unsigned kPtmxMajor = 5, kPtmxMinor = 2;

api::ApiError terminal_error(const std::string& what) {
  return api::make_api_error(api::ApiErrorCode::kInternal, "terminal: " + what);
}

}  // namespace

ApiResult<SandboxTerminal> open_sandbox_terminal(const ConfinedRoot& root, uid_t owner,
                                                 std::uint16_t cols, std::uint16_t rows) {
  // /dev through the confined root (the file API does not enter kernel
  // file systems itself), then one name at a time without following a
  // symlink: "pts", which must be a devpts mount, and its "ptmx".
  auto dev = root.open_directory("/dev");
  if (!dev)
    return tl::unexpected(terminal_error("the sandbox has no /dev: " + dev.error().message));
  UniqueFd pts(openat(dev->get(), "pts", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct statfs pts_fs;
  if (!pts || fstatfs(pts.get(), &pts_fs) != 0 || pts_fs.f_type != DEVPTS_SUPER_MAGIC)
    return tl::unexpected(terminal_error("the sandbox's /dev/pts is not a devpts file system"));
  UniqueFd master(openat(pts.get(), "ptmx", O_RDWR | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC));
  if (!master) return tl::unexpected(terminal_error(std::string("open ptmx: ") + strerror(errno)));
  struct statfs fs;
  struct stat st;
  if (fstatfs(master.get(), &fs) != 0 || fs.f_type != DEVPTS_SUPER_MAGIC ||
      fstat(master.get(), &st) != 0 || !S_ISCHR(st.st_mode) || major(st.st_rdev) != kPtmxMajor ||
      minor(st.st_rdev) != kPtmxMinor)
    return tl::unexpected(terminal_error("/dev/pts/ptmx is not a devpts multiplexer"));
  int unlock = 0;
  if (ioctl(master.get(), TIOCSPTLCK, &unlock) != 0)
    return tl::unexpected(terminal_error(std::string("unlock: ") + strerror(errno)));
  UniqueFd slave(ioctl(master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!slave) return tl::unexpected(terminal_error(std::string("TIOCGPTPEER: ") + strerror(errno)));
  if (fchown(slave.get(), owner, static_cast<gid_t>(-1)) != 0)
    return tl::unexpected(terminal_error(std::string("chown: ") + strerror(errno)));
  if (auto st2 = set_terminal_size(master.get(), cols, rows); !st2)
    return tl::unexpected(terminal_error(st2.error().message));
  return SandboxTerminal{std::move(master), std::move(slave)};
}

Status set_terminal_size(int master, std::uint16_t cols, std::uint16_t rows) {
  if (cols == 0 || rows == 0)
    return make_error(ErrorCode::kInvalidArgument, "a terminal has at least one column and row");
  winsize ws{};
  ws.ws_col = cols;
  ws.ws_row = rows;
  if (ioctl(master, TIOCSWINSZ, &ws) != 0) return errno_error("TIOCSWINSZ");
  return ok();
}

std::shared_ptr<TerminalPump> TerminalPump::start(UniqueFd master, UniqueFd slave,
                                                  UniqueFd output) {
  std::shared_ptr<TerminalPump> pump(new TerminalPump());
  pump->wake_ = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!pump->wake_) {
    pump->drained_.store(true);
    return pump;
  }
  std::thread([pump, master = std::move(master), slave = std::move(slave),
               output = std::move(output)] {
    ScopeGuard done([&] { pump->drained_.store(true); });
    std::string buf(64 * 1024, '\0');
    bool disk_full = false;
    auto copy = [&](ssize_t n) {
      std::size_t off = 0;
      while (!disk_full && off < static_cast<std::size_t>(n)) {
        ssize_t w = write(output.get(), buf.data() + off, static_cast<std::size_t>(n) - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
          disk_full = true;
        else
          off += static_cast<std::size_t>(w);
      }
    };
    for (;;) {
      pollfd fds[2] = {{master.get(), POLLIN, 0}, {pump->wake_.get(), POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents != 0) break;
      if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      ssize_t n = read(master.get(), buf.data(), buf.size());
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return;
      copy(n);
    }
    // The process ended: what it wrote is buffered in the terminal. Copy it
    // (bounded: a child that lives on and keeps writing does not hold the
    // pump), then close every end.
    (void)fcntl(master.get(), F_SETFL, fcntl(master.get(), F_GETFL) | O_NONBLOCK);
    for (std::size_t total = 0; total < (16u << 20);) {
      ssize_t n = read(master.get(), buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      copy(n);
      total += static_cast<std::size_t>(n);
    }
  }).detach();
  return pump;
}

void TerminalPump::process_ended() {
  if (wake_) (void)!eventfd_write(wake_.get(), 1);
}

}  // namespace corral::daemon
