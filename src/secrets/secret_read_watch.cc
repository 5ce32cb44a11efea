#include "secrets/secret_read_watch.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "base/unique_fd.h"

namespace corral::secrets {

struct SecretReadWatch::Impl {
  Sink sink;
  UniqueFd fan;
  UniqueFd stop;  // eventfd: wakes the thread to end
  std::thread thread;
  std::mutex mu;
  struct Watched {
    std::string dir;
    dev_t dev = 0;
  };
  std::map<std::string, Watched> by_sandbox;  // guarded by mu
  std::map<dev_t, std::string> by_dev;        // guarded by mu

  void run();
  void handle(const fanotify_event_metadata& ev);
};

namespace {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string base_name(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

SecretReadWatch::SecretReadWatch(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<SecretReadWatch>> SecretReadWatch::start(Sink sink) {
  auto impl = std::make_unique<Impl>();
  impl->sink = std::move(sink);
  impl->fan.reset(::fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK,
                                  O_RDONLY | O_CLOEXEC | O_LARGEFILE | O_NOATIME));
  if (!impl->fan)
    return make_error(ErrorCode::kUnavailable,
                      std::string("fanotify_init: ") + std::strerror(errno),
                      "secret files cannot be audited without fanotify (CONFIG_FANOTIFY)");
  impl->stop.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl->stop) return errno_error("eventfd");
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<SecretReadWatch>(new SecretReadWatch(std::move(impl)));
}

SecretReadWatch::~SecretReadWatch() {
  std::uint64_t one = 1;
  (void)!::write(impl_->stop.get(), &one, sizeof one);
  if (impl_->thread.joinable()) impl_->thread.join();
}

Status SecretReadWatch::watch(const std::string& sandbox, const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return errno_error("stat " + dir);
  std::lock_guard lock(impl_->mu);
  if (::fanotify_mark(impl_->fan.get(), FAN_MARK_ADD | FAN_MARK_FILESYSTEM,
                      FAN_OPEN | FAN_EVENT_ON_CHILD, AT_FDCWD, dir.c_str()) != 0)
    return make_error(ErrorCode::kUnavailable,
                      "fanotify_mark on " + dir + ": " + std::strerror(errno),
                      "secret files cannot be audited: the kernel refused a filesystem mark");
  impl_->by_sandbox[sandbox] = {dir, st.st_dev};
  impl_->by_dev[st.st_dev] = sandbox;
  return ok();
}

void SecretReadWatch::unwatch(const std::string& sandbox) {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->by_sandbox.find(sandbox);
  if (it == impl_->by_sandbox.end()) return;
  (void)::fanotify_mark(impl_->fan.get(), FAN_MARK_REMOVE | FAN_MARK_FILESYSTEM,
                        FAN_OPEN | FAN_EVENT_ON_CHILD, AT_FDCWD, it->second.dir.c_str());
  impl_->by_dev.erase(it->second.dev);
  impl_->by_sandbox.erase(it);
}

void SecretReadWatch::Impl::handle(const fanotify_event_metadata& ev) {
  UniqueFd fd(ev.fd);  // fanotify's own open of the file: closed here
  if (!fd || (ev.mask & FAN_OPEN) == 0) return;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return;  // the directory itself
  SecretRead read;
  {
    std::lock_guard lock(mu);
    auto it = by_dev.find(st.st_dev);
    if (it == by_dev.end()) return;  // unwatched meanwhile
    read.sandbox = it->second;
  }
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd.get());
  char path[4096];
  ssize_t n = ::readlink(link, path, sizeof path - 1);
  read.file = n > 0 ? base_name(std::string(path, static_cast<std::size_t>(n))) : "?";
  read.pid = ev.pid;
  read.time_ms = now_ms();
  sink(read);
}

void SecretReadWatch::Impl::run() {
  alignas(fanotify_event_metadata) char buf[8192];
  for (;;) {
    pollfd fds[2] = {{fan.get(), POLLIN, 0}, {stop.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents & POLLIN) {
      for (;;) {
        ssize_t len = ::read(fan.get(), buf, sizeof buf);
        if (len <= 0) break;
        auto* ev = reinterpret_cast<const fanotify_event_metadata*>(buf);
        while (FAN_EVENT_OK(ev, len)) {
          if (ev->vers == FANOTIFY_METADATA_VERSION) {
            handle(*ev);
          } else if (ev->fd >= 0) {
            ::close(ev->fd);
          }
          ev = FAN_EVENT_NEXT(ev, len);
        }
      }
    }
    if (fds[1].revents & POLLIN) return;
  }
}

}  // namespace corral::secrets
