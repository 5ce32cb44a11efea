#include "http/http_server.h"

#include <fcntl.h>
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

#include "http/connection_table.h"
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
  std::unique_ptr<ConnectionTable> table;  // admission; owns the open connections' fds
  UniqueFd stop_fd;  // eventfd: stop() writes, run() polls
  int stop_errno = 0;
  std::atomic<bool> stop_requested{false};
  std::atomic<bool> stopping{false};  // seen by connection threads

  std::vector<Listener> listeners;
  // Kept open to be closed when accept() finds no free descriptor: the
  // pending connection then gets its 503 instead of waiting unanswered in
  // the backlog (see refuse_without_descriptor). Used by run()'s thread only.
  UniqueFd spare_fd;
  std::atomic<std::uint64_t> no_descriptor{0};
  io::Clock::time_point last_warning{};
  std::uint64_t warned_no_descriptor = 0;

  // An admitted connection waiting for a thread.
  struct Accepted {
    ConnectionTable::Slot* slot;
    Peer peer;
    io::Clock::time_point at;
  };

  std::mutex mu;
  std::condition_variable cv;       // active / threads changed
  std::condition_variable work_cv;  // a connection was queued, or stopping
  std::deque<Accepted> queue;       // handed to idle threads
  std::size_t active = 0;           // admitted connections not yet closed
  std::size_t threads = 0;          // connection threads alive
  std::size_t idle = 0;             // of which waiting for work
  bool running = false;

  void accept_from(const Listener& listener);
  void refuse_without_descriptor(const Listener& listener, int accept_errno);
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
      if (errno == EMFILE || errno == ENFILE) {
        refuse_without_descriptor(listener, errno);
      } else if (errno == ENOBUFS || errno == ENOMEM) {
        // Out of memory: pause instead of spinning on a ready listener.
        struct pollfd p = {stop_fd.get(), POLLIN, 0};
        ::poll(&p, 1, 50);
      }
      return;  // EAGAIN, ECONNABORTED, EINTR, ...: back to poll
    }
    start_connection(UniqueFd(fd), listener);
  }
}

// The process (EMFILE) or the host (ENFILE) is out of file descriptors:
// the connection limits are sized to leave room (the daemon's fd budget),
// so something else took them. Rather than leave clients hanging in the
// backlog, free the spare descriptor, accept one connection with it,
// answer 503 overloaded and close it, then take the spare back. If another
// thread grabbed the freed number first, pause briefly instead of spinning.
void Server::Impl::refuse_without_descriptor(const Listener& listener, int accept_errno) {
  bool answered = false;
  if (spare_fd) {
    spare_fd.reset();
    int fd = ::accept4(listener.fd.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      // Counted before the answer: a client that has its 503 finds it in
      // the stats (and /metrics).
      no_descriptor.fetch_add(1);
      reject_overloaded(fd, "the server is out of file descriptors; retry later");
      ::close(fd);
      answered = true;
    }
    spare_fd.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  } else {
    spare_fd.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  }
  if (options.warn) {
    std::uint64_t total = no_descriptor.load();
    auto now = io::Clock::now();
    if (now - last_warning >= std::chrono::seconds(10) && total != warned_no_descriptor) {
      options.warn(std::string("accept() failed with ") +
                   (accept_errno == EMFILE ? "EMFILE (the process" : "ENFILE (the host") +
                   " is out of file descriptors): " + std::to_string(total - warned_no_descriptor) +
                   " connection(s) answered 503 overloaded since the last warning; raise the "
                   "descriptor limit (RLIMIT_NOFILE, LimitNOFILE= in a systemd unit)");
      last_warning = now;
      warned_no_descriptor = total;
    }
  }
  if (!answered) {
    struct pollfd p = {stop_fd.get(), POLLIN, 0};
    ::poll(&p, 1, 50);
  }
}

void Server::Impl::start_connection(UniqueFd fd, const Listener& listener) {
  auto accepted = io::Clock::now();
  Peer peer = peer_of(fd.get(), listener);
  ConnectionTable::Slot* slot = table->admit(fd.get(), peer);
  if (slot == nullptr) {
    reject_overloaded(fd.get());
    return;
  }
  int raw = fd.release();  // the table's now
  {
    std::unique_lock<std::mutex> lock(mu);
    ++active;
    // Every queued connection has an idle thread of its own waiting.
    if (idle > queue.size()) {
      queue.push_back(Accepted{slot, std::move(peer), accepted});
      work_cv.notify_one();
      return;
    }
    ++threads;
  }
  try {
    std::thread([this, first = Accepted{slot, peer, accepted}]() mutable {
      connection_thread(std::move(first));
    }).detach();
  } catch (const std::system_error&) {
    // No thread for it (EAGAIN): answered like any other overload.
    reject_overloaded(raw);
    table->release(slot);
    std::lock_guard<std::mutex> lock(mu);
    --active;
    --threads;
    cv.notify_all();
  }
}

void Server::Impl::connection_thread(Accepted next) {
  for (;;) {
    ConnectionEnv env{handler, options, stopping, *table, next.slot};
    serve_connection(next.slot->fd, next.peer, env, next.at);
    // Closed under the table's lock: stop() and evictions must never shut
    // down an fd number that was closed and reused meanwhile.
    table->release(next.slot);
    std::unique_lock<std::mutex> lock(mu);
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
  ConnectionLimits& limits = impl_->options.connections;
  limits.tcp = std::max<std::size_t>(limits.tcp, 1);
  limits.unix_socket = std::max<std::size_t>(limits.unix_socket, 1);
  limits.unauthenticated = std::clamp<std::size_t>(limits.unauthenticated, 1, limits.tcp);
  limits.unauthenticated_per_peer =
      std::clamp<std::size_t>(limits.unauthenticated_per_peer, 1, limits.unauthenticated);
  impl_->table = std::make_unique<ConnectionTable>(limits, bool(impl_->options.authenticate));
  impl_->spare_fd.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
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
  s.table->shutdown_all();
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

ConnectionStats Server::connection_stats() const {
  ConnectionStats st = impl_->table->stats();
  st.refused_no_descriptor = impl_->no_descriptor.load();
  return st;
}

}  // namespace corral::http
