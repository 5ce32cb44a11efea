#include "daemon/log_redactor.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <thread>

#include "base/fs.h"
#include "base/unique_fd.h"

namespace corral::daemon {

struct LogRedactor::Impl {
  std::shared_ptr<const secrets::RedactionSet> set;
  UniqueFd original[2];  // the real stdout and stderr
  UniqueFd read_end[2];  // what fds 1 and 2 now write into
  std::thread thread;

  void run();
};

LogRedactor::LogRedactor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<LogRedactor>> LogRedactor::start(
    std::shared_ptr<const secrets::RedactionSet> set) {
  auto impl = std::make_unique<Impl>();
  impl->set = std::move(set);
  std::fflush(stdout);
  std::fflush(stderr);
  for (int i = 0; i < 2; ++i) {
    const int fd = i + 1;
    impl->original[i].reset(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
    if (!impl->original[i]) return errno_error("dup of fd " + std::to_string(fd));
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return errno_error("pipe2");
    impl->read_end[i].reset(p[0]);
    // dup2 clears O_CLOEXEC on fd 1/2, as they must be.
    if (::dup2(p[1], fd) < 0) {
      int e = errno;
      ::close(p[1]);
      return errno_error("dup2", e);
    }
    ::close(p[1]);
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<LogRedactor>(new LogRedactor(std::move(impl)));
}

LogRedactor::~LogRedactor() {
  std::fflush(stdout);
  std::fflush(stderr);
  // Back to the real fds: the pipes' write ends close, the thread reads
  // to EOF, flushes and ends.
  for (int i = 0; i < 2; ++i) (void)::dup2(impl_->original[i].get(), i + 1);
  if (impl_->thread.joinable()) impl_->thread.join();
}

void LogRedactor::Impl::run() {
  secrets::RedactStream streams[2] = {secrets::RedactStream(set), secrets::RedactStream(set)};
  bool open[2] = {true, true};
  std::string buf(16 * 1024, '\0');
  std::string clean;
  while (open[0] || open[1]) {
    pollfd fds[2] = {{open[0] ? read_end[0].get() : -1, POLLIN, 0},
                     {open[1] ? read_end[1].get() : -1, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(read_end[i].get(), buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      clean.clear();
      if (n <= 0) {
        open[i] = false;
        streams[i].finish(clean);
      } else {
        streams[i].feed(std::string_view(buf.data(), static_cast<std::size_t>(n)), clean);
      }
      (void)write_all(original[i].get(), clean);  // the terminal gone: nothing to do about it
    }
  }
}

}  // namespace corral::daemon
