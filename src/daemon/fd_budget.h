// The daemon's file descriptors (issue 14): the soft RLIMIT_NOFILE raised
// to the hard limit at start, and the HTTP connection limits sized so that
// connections cannot take the descriptors the daemon's own work needs.
//
// systemd starts services with a soft limit of 1024 (and a hard one of
// 524288); at 1024 the daemon ran out near 1000 connections and then
// answered no one, the unix socket included. Nothing in the daemon uses
// select(), so descriptors above 1023 are safe to use; sandboxes set their
// own RLIMIT_NOFILE (4096, capped by the hard limit), so raising the
// daemon's soft limit gives them nothing.
//
// The reserve is an estimate of what the daemon's own work holds at its
// configured limits, counted from a running daemon (`ls /proc/PID/fd`):
//   - kDaemonBaseFds: 25 open after start (the state store's 3, the audit
//     log, listeners, eventfds and epolls, the factory's channel,
//     fanotify, stdout/stderr); 64 leaves room for the journal's rotation,
//     image work and the accept loop's spare descriptor.
//   - kFdsPerSandbox: 5 per sandbox (its init's pidfd, the zygote's two
//     sockets, its root and layer directories), 7 with a network (the
//     proxy's and DNS listeners), and 1 more per running background
//     process (its pidfd): 16 covers a networked sandbox with 9
//     background processes.
//   - kFdsPerProxyConnection: an egress proxy connection holds the
//     sandbox's socket, the upstream's, and two pipes for splice (4).
//   - kFdsPerRequest: an authenticated connection's socket plus what its
//     request opens: an exec's stdin, stdout and stderr pipes and pidfd, or
//     a file transfer's file and directory. Unauthenticated connections
//     reach no handler but /healthz and the 401: 1 each.
// When these run out anyway, accept() fails with EMFILE and the server
// answers 503 with its spare descriptor (http_server.cc).
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "daemon/daemon_config.h"
#include "http/http_server.h"

namespace corral::daemon {

constexpr std::uint64_t kDaemonBaseFds = 64;
constexpr std::uint64_t kFdsPerSandbox = 16;
constexpr std::uint64_t kFdsPerProxyConnection = 6;
constexpr std::uint64_t kFdsPerRequest = 5;

struct NofileLimit {
  std::uint64_t soft_before = 0;
  std::uint64_t soft = 0;  // now
  std::uint64_t hard = 0;
};

// Sets the soft RLIMIT_NOFILE to the hard one (an unlimited hard limit is
// capped at the kernel's fs.nr_open, which is what setrlimit accepts).
Result<NofileLimit> raise_nofile_limit();
// Descriptors open in this process now (/proc/self/fd).
Result<std::uint64_t> count_open_fds();

struct FdBudgetInput {
  std::uint64_t limit = 0;     // the soft RLIMIT_NOFILE (raised)
  std::uint64_t open_now = 0;  // descriptors already open
  std::uint64_t max_sandboxes = 0;
  std::uint64_t proxy_connections = 0;  // the egress proxy's cap; 0 without a network engine
  DaemonConfig::Connections configured;  // 0: auto
};

struct FdBudget {
  http::ConnectionLimits limits;  // the head timeout copied from the config
  std::uint64_t available = 0;    // limit - open_now
  std::uint64_t reserve = 0;      // the daemon's own work (above)
  std::uint64_t connections = 0;  // what `limits` may hold at most
  std::string warning;            // non-empty: print it at start
};

// The connection limits: configured values as given, "auto" ones at their
// defaults (1024 TCP, 64 unix, 128 unauthenticated, 32 per peer) or, when
// the descriptors left after the reserve do not cover those, to at most
// half of the available descriptors: the defaults if they fit in that
// half, else scaled down (never below 16 TCP, 8 unix, 4 unauthenticated,
// 2 per peer). An error when the limits exceed the descriptors available;
// a warning when the reserve does not fit beside them.
Result<FdBudget> plan_fd_budget(const FdBudgetInput& in);

// "descriptors: 524288 (soft limit raised from 1024); connections: tcp
// 1024 (128 unauthenticated, 32 per peer), unix 64; reserve 29184"
std::string describe(const NofileLimit& limit, const FdBudget& budget);

}  // namespace corral::daemon
