#include "http/http_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>
#include <vector>

#include "http/listen_socket.h"
#include "http/server_connection.h"

namespace corral::http {

Result<std::string> BodyReader::read_all(std::size_t limit) {
  std::string out;
  if (auto n = declared_length()) {
    if (*n > limit) {
      return make_error(ErrorCode::kResourceExhausted, "request body of " + std::to_string(*n) +
                                                           " bytes exceeds the limit of " +
                                                           std::to_string(limit) + " bytes");
    }
    out.reserve(static_cast<std::size_t>(*n));
  }
  std::size_t step = 64 * 1024;
  while (true) {
    std::size_t old = out.size();
    // One byte more than the limit tells "exactly at the limit" from "over".
    std::size_t want = std::min(step, limit + 1 - old);
    // A declared length needs no bigger buffer (resize zeroes what it adds):
    // its bytes, and one more to see the end.
    if (auto n = declared_length(); n && *n >= old) {
      want = std::min<std::size_t>(want, static_cast<std::size_t>(*n) - old + 1);
    }
    out.resize(old + want);
    auto n = read(out.data() + old, want);
    if (!n) return tl::unexpected(n.error());
    out.resize(old + *n);
    if (*n == 0) return out;
    if (out.size() > limit) {
      return make_error(ErrorCode::kResourceExhausted,
                        "request body exceeds the limit of " + std::to_string(limit) + " bytes");
    }
  }
}

// Connections are served one per thread. Threads that finish a connection
// wait a while for the next one instead of exiting: creating a thread
// (stack mapping, clone) is a noticeable part of a short request such as
// an exec of `true`.
constexpr std::size_t kMaxIdleThreads = 8;
constexpr std::chrono::seconds kIdleThreadLinger{10};

struct Server::Impl {
  Handler handler;
  ServerOptions options;
  UniqueFd stop_fd;  // eventfd: stop() writes, run() polls
  int stop_errno = 0;
  std::atomic<bool> stop_requested{false};
  std::atomic<bool> stopping{false};  // seen by connection threads

  std::vector<Listener> listeners;

  // An admitted connection waiting for a thread.
  struct Accepted {
    int fd;
    Peer peer;
    io::Clock::time_point at;
  };

  std::mutex mu;
  std::condition_variable cv;       // active / threads changed
  std::condition_variable work_cv;  // a connection was queued, or stopping
  std::set<int> conn_fds;           // open connections, for shutdown on stop
  std::deque<Accepted> queue;       // handed to idle threads
  std::size_t active = 0;           // admitted connections not yet closed
  std::size_t threads = 0;          // connection threads alive
  std::size_t idle = 0;             // of which waiting for work
  bool running = false;

  void accept_from(const Listener& listener);
  void start_connection(UniqueFd fd, const Listener& listener);
  void connection_thread(Accepted first);
  void close_listeners();
};

void Server::Impl::close_listeners() {
  for (auto& l : listeners) {
    unlink_listener(l);
    l.fd.reset();
  }
  listeners.clear();
}

void Server::Impl::accept_from(const Listener& listener) {
  // A bounded batch per wake-up, so one busy listener cannot starve the
  // others or the stop event.
  for (int i = 0; i < 64; ++i) {
    int fd = ::accept4(listener.fd.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of fds or memory: pause instead of spinning on a ready listener.
        struct pollfd p = {stop_fd.get(), POLLIN, 0};
        ::poll(&p, 1, 50);
      }
      return;  // EAGAIN, ECONNABORTED, EINTR, ...: back to poll
    }
    start_connection(UniqueFd(fd), listener);
  }
}

void Server::Impl::start_connection(UniqueFd fd, const Listener& listener) {
  auto accepted = io::Clock::now();
  Peer peer = peer_of(fd.get(), listener);
  {
    std::unique_lock<std::mutex> lock(mu);
    if (active >= options.max_connections) {
      lock.unlock();
      reject_overloaded(fd.get());
      return;
    }
    ++active;
    conn_fds.insert(fd.get());
    // Every queued connection has an idle thread of its own waiting.
    if (idle > queue.size()) {
      queue.push_back(Accepted{fd.release(), std::move(peer), accepted});
      work_cv.notify_one();
      return;
    }
    ++threads;
  }
  int raw = fd.release();
  try {
    std::thread([this, first = Accepted{raw, peer, accepted}]() mutable {
      connection_thread(std::move(first));
    }).detach();
  } catch (const std::system_error&) {
    // No thread for it (EAGAIN): answered like any other overload.
    reject_overloaded(raw);
    std::lock_guard<std::mutex> lock(mu);
    conn_fds.erase(raw);
    ::close(raw);
    --active;
    --threads;
    cv.notify_all();
  }
}

void Server::Impl::connection_thread(Accepted next) {
  for (;;) {
    ConnectionEnv env{handler, options, stopping};
    serve_connection(next.fd, next.peer, env, next.at);
    std::unique_lock<std::mutex> lock(mu);
    // Unregister and close under the lock: stop() must never shut down an
    // fd number that was closed and reused meanwhile.
    conn_fds.erase(next.fd);
    ::close(next.fd);
    --active;
    cv.notify_all();
    if (idle >= kMaxIdleThreads || stopping.load()) break;
    ++idle;
    work_cv.wait_for(lock, kIdleThreadLinger, [&] { return !queue.empty() || stopping.load(); });
    --idle;
    if (queue.empty()) break;  // lingered long enough, or stopping
    next = std::move(queue.front());
    queue.pop_front();
  }
  std::lock_guard<std::mutex> lock(mu);
  --threads;
  cv.notify_all();
}

Server::Server(Handler handler, ServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->handler = std::move(handler);
  impl_->options = std::move(options);
  impl_->options.max_connections = std::max<std::size_t>(impl_->options.max_connections, 1);
  impl_->stop_fd.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl_->stop_fd) impl_->stop_errno = errno;  // reported by listen_*()
}

Server::~Server() {
  stop();
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait(lock, [&] { return !impl_->running; });
  lock.unlock();
  impl_->close_listeners();
}

Status Server::listen_tcp(const std::string& host, std::uint16_t port) {
  if (!impl_->stop_fd) return errno_error("eventfd", impl_->stop_errno);
  auto l = listen_tcp_socket(host, port);
  if (!l) return tl::unexpected(std::move(l).error().wrap("listening on tcp"));
  impl_->listeners.push_back(std::move(*l));
  return ok();
}

Status Server::listen_unix(const std::string& path, mode_t mode) {
  if (!impl_->stop_fd) return errno_error("eventfd", impl_->stop_errno);
  auto l = listen_unix_socket(path, mode);
  if (!l) return tl::unexpected(std::move(l).error().wrap("listening on unix socket " + path));
  impl_->listeners.push_back(std::move(*l));
  return ok();
}

std::uint16_t Server::bound_port() const {
  for (const auto& l : impl_->listeners) {
    if (!l.is_unix) return l.port;
  }
  return 0;
}

void Server::run() {
  Impl& s = *impl_;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.running) return;
    s.running = true;
  }
  std::vector<struct pollfd> fds;
  fds.push_back({s.stop_fd.get(), POLLIN, 0});
  for (const auto& l : s.listeners) fds.push_back({l.fd.get(), POLLIN, 0});
  while (s.stop_fd && !s.stop_requested.load()) {
    int r = ::poll(fds.data(), fds.size(), -1);
    if (r < 0) {
      if (errno == EINTR) continue;
      break;  // cannot happen with valid fds; stop rather than spin
    }
    if (fds[0].revents != 0) break;
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) s.accept_from(s.listeners[i - 1]);
    }
  }

  s.stopping.store(true);
  s.close_listeners();
  std::unique_lock<std::mutex> lock(s.mu);
  // Ends every connection's blocking wait: reads see end of stream, writes
  // fail, and each thread finishes its request and exits; idle threads
  // wake up and exit too (they use this object).
  for (int fd : s.conn_fds) ::shutdown(fd, SHUT_RDWR);
  s.work_cv.notify_all();
  s.cv.wait(lock, [&] { return s.active == 0 && s.threads == 0; });
  s.running = false;
  s.cv.notify_all();
}

void Server::stop() {
  // Only an atomic store and write(2): both async-signal-safe.
  impl_->stop_requested.store(true);
  if (impl_->stop_fd) {
    std::uint64_t one = 1;
    ssize_t n = ::write(impl_->stop_fd.get(), &one, sizeof(one));
    (void)n;  // EAGAIN only when the counter is full: already signalled
  }
}

std::size_t Server::active_connections() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->active;
}

}  // namespace corral::http
