#include "http/listen_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace corral::http {
namespace {

constexpr int kBacklog = 256;

std::string dir_of(const std::string& path) {
  std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// An existing file at the socket path: a socket nobody accepts on is stale
// (left by a crashed daemon) and may be replaced; anything else is not ours.
Status check_existing(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return ok();
    return errno_error("lstat(" + path + ")");
  }
  if (!S_ISSOCK(st.st_mode)) {
    return make_error(ErrorCode::kAlreadyExists, path + " exists and is not a socket",
                      "remove it or choose another socket path");
  }
  auto addr = unix_address(path);
  if (!addr) return tl::unexpected(addr.error());
  // Non-blocking: a live server with a full backlog answers EAGAIN rather
  // than blocking us.
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!probe) return errno_error("socket(AF_UNIX)");
  if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr->storage), addr->len) == 0 ||
      errno == EAGAIN) {
    return make_error(ErrorCode::kAlreadyExists, "another server listens on " + path,
                      "stop the other daemon first");
  }
  if (errno == ECONNREFUSED) return ok();  // stale
  return errno_error("connect(" + path + ")");
}

}  // namespace

Result<SockAddr> numeric_address(const std::string& host, std::uint16_t port) {
  SockAddr a;
  std::memset(&a.storage, 0, sizeof(a.storage));
  std::string h = host == "localhost" ? "127.0.0.1" : host;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
  if (::inet_pton(AF_INET, h.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    a.len = sizeof(sockaddr_in);
    return a;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
  if (::inet_pton(AF_INET6, h.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    a.len = sizeof(sockaddr_in6);
    return a;
  }
  // No name resolution: the corral binary is static (no NSS), and the daemon
  // is reached on loopback or through a TLS terminator anyway.
  return make_error(ErrorCode::kInvalidArgument,
                    "address \"" + host + "\" is not a numeric IPv4/IPv6 address",
                    "use an address such as 127.0.0.1 or ::1, or \"localhost\"");
}

Result<SockAddr> unix_address(const std::string& path) {
  SockAddr a;
  std::memset(&a.storage, 0, sizeof(a.storage));
  auto* un = reinterpret_cast<sockaddr_un*>(&a.storage);
  if (path.empty() || path.size() >= sizeof(un->sun_path) || path.find('\0') != std::string::npos) {
    return make_error(ErrorCode::kInvalidArgument,
                      "unix socket path \"" + path + "\" is empty or longer than " +
                          std::to_string(sizeof(un->sun_path) - 1) + " bytes");
  }
  un->sun_family = AF_UNIX;
  std::memcpy(un->sun_path, path.data(), path.size());
  a.len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  return a;
}

Result<Listener> listen_tcp_socket(const std::string& host, std::uint16_t port) {
  auto addr = numeric_address(host, port);
  if (!addr) return tl::unexpected(addr.error());
  int family = addr->storage.ss_family;
  Listener l;
  l.fd.reset(::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!l.fd) return errno_error("socket");
  int one = 1;
  ::setsockopt(l.fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (family == AF_INET6) ::setsockopt(l.fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  std::string where = host + ":" + std::to_string(port);
  if (::bind(l.fd.get(), reinterpret_cast<const sockaddr*>(&addr->storage), addr->len) != 0) {
    int err = errno;
    return errno_error("bind(" + where + ")", err,
                       err == EADDRINUSE ? "is another daemon listening there?" : "");
  }
  if (::listen(l.fd.get(), kBacklog) != 0) return errno_error("listen(" + where + ")");
  struct sockaddr_storage bound;
  socklen_t len = sizeof(bound);
  if (::getsockname(l.fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return errno_error("getsockname");
  }
  l.port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                   : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  return l;
}

// The mode must be exact from the first moment anyone can connect, and the
// umask is process-wide (changing it would race with other threads). So:
// bind to a temporary name in the same directory, chmod it before listen()
// (connecting to a socket that does not listen is refused), listen, then
// rename() it over the final path, which is atomic.
Result<Listener> listen_unix_socket(const std::string& path, mode_t mode) {
  CORRAL_TRY(unix_address(path));
  CORRAL_TRY(check_existing(path));
  static std::atomic<unsigned> counter{0};
  std::string tmp = dir_of(path) + "/.corral-" + std::to_string(::getpid()) + "-" +
                    std::to_string(counter.fetch_add(1)) + ".sock";
  auto tmp_addr = unix_address(tmp);
  if (!tmp_addr) return tl::unexpected(tmp_addr.error().wrap("temporary socket name"));

  Listener l;
  l.is_unix = true;
  l.path = path;
  l.fd.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!l.fd) return errno_error("socket(AF_UNIX)");
  auto bind_tmp = [&] {
    return ::bind(l.fd.get(), reinterpret_cast<const sockaddr*>(&tmp_addr->storage), tmp_addr->len);
  };
  int rc = bind_tmp();
  struct stat st;
  if (rc != 0 && errno == EADDRINUSE && ::lstat(tmp.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
    // Left by a daemon that crashed in this very function with our pid
    // (pids repeat in containers).
    ::unlink(tmp.c_str());
    rc = bind_tmp();
  }
  if (rc != 0) return errno_error("bind(" + tmp + ")");
  auto cleanup_tmp = [&] { ::unlink(tmp.c_str()); };
  if (::chmod(tmp.c_str(), mode & 0777) != 0) {
    auto e = errno_error("chmod(" + tmp + ")");
    cleanup_tmp();
    return e;
  }
  if (::listen(l.fd.get(), kBacklog) != 0) {
    auto e = errno_error("listen(" + path + ")");
    cleanup_tmp();
    return e;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    auto e = errno_error("rename(" + tmp + " -> " + path + ")");
    cleanup_tmp();
    return e;
  }
  if (::lstat(path.c_str(), &st) == 0) {
    l.dev = st.st_dev;
    l.ino = st.st_ino;
  }
  return l;
}

void unlink_listener(const Listener& listener) {
  if (!listener.is_unix || listener.ino == 0) return;
  struct stat st;
  if (::lstat(listener.path.c_str(), &st) == 0 && st.st_dev == listener.dev &&
      st.st_ino == listener.ino) {
    ::unlink(listener.path.c_str());
  }
}

Peer peer_of(int fd, const Listener& listener) {
  Peer peer;
  if (listener.is_unix) {
    peer.kind = Peer::kUnix;
    peer.address = listener.path;
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      peer.pid = cred.pid;
      peer.uid = cred.uid;
      peer.gid = cred.gid;
    }
    return peer;
  }
  peer.kind = Peer::kTcp;
  int one = 1;
  // Responses are written whole or in large pieces: Nagle only adds latency.
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return peer;
  char text[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
    peer.host = text;
    peer.address = peer.host + ":" + std::to_string(ntohs(a->sin_port));
  } else if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
    peer.host = text;
    peer.address = "[" + peer.host + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  return peer;
}

}  // namespace corral::http
