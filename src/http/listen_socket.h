// Listening sockets of the server: TCP on a numeric address, and unix
// sockets created with an exact mode whatever the process umask. Internal to
// src/http.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "base/result.h"
#include "base/unique_fd.h"
#include "http/http_server.h"

namespace corral::http {

struct Listener {
  UniqueFd fd;  // non-blocking, close-on-exec, listening
  bool is_unix = false;
  std::string path;        // unix: the socket file
  dev_t dev = 0;           // unix: identity of the file we created, so that
  ino_t ino = 0;           // we never unlink a file someone else put there
  std::uint16_t port = 0;  // tcp: the bound port
};

// host: a numeric IPv4/IPv6 address or "localhost"; port 0 picks one.
Result<Listener> listen_tcp_socket(const std::string& host, std::uint16_t port);
Result<Listener> listen_unix_socket(const std::string& path, mode_t mode);
// Removes the socket file of a unix listener if it is still ours.
void unlink_listener(const Listener& listener);

// The peer of an accepted connection: address, and credentials on unix.
Peer peer_of(int fd, const Listener& listener);

// Numeric address parsing shared with the client ("localhost" is 127.0.0.1).
struct SockAddr {
  struct sockaddr_storage storage;
  socklen_t len = 0;
};
Result<SockAddr> numeric_address(const std::string& host, std::uint16_t port);
Result<SockAddr> unix_address(const std::string& path);

}  // namespace corral::http
