// One accepted connection of the server: reads request heads, hands each
// request to the handler with a streaming body reader and response writer,
// and keeps the connection usable (or closes it) afterwards. Internal to
// src/http; http_server.cc owns the threads and the fds.
#pragma once

#include <atomic>
#include <string>
#include <string_view>

#include "http/connection_table.h"
#include "http/http_server.h"
#include "http/socket_io.h"

namespace corral::http {

struct ConnectionEnv {
  const Handler& handler;
  const ServerOptions& options;
  const std::atomic<bool>& stopping;  // the server is shutting down
  ConnectionTable& table;             // admission: told when requests begin and end
  ConnectionTable::Slot* slot;        // this connection's entry
};

// Serves requests on `fd` (non-blocking) until the peer leaves, a timeout
// passes, an error makes the connection unusable, or the server stops. Does
// not close fd.
void serve_connection(int fd, const Peer& peer, const ConnectionEnv& env,
                      io::Clock::time_point accepted);

// Over the connection cap: a 503 without blocking the accept loop.
void reject_overloaded(int fd,
                       std::string_view message = "too many connections; retry later");

// {"error":{"code":"...","message":"..."}}
std::string json_error(std::string_view code, std::string_view message);

}  // namespace corral::http
