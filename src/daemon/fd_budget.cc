#include "daemon/fd_budget.h"

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <memory>

namespace corral::daemon {
namespace {

// The defaults of "auto", and the least that is still a working daemon.
constexpr http::ConnectionLimits kWanted{1024, 64, 128, 32, std::chrono::milliseconds(10000)};
constexpr http::ConnectionLimits kLeast{16, 8, 4, 2, std::chrono::milliseconds(10000)};

// At most what `l` may hold: unauthenticated connections 1 descriptor, the
// others kFdsPerRequest.
std::uint64_t cost(const http::ConnectionLimits& l) {
  return l.unauthenticated + (l.tcp - l.unauthenticated + l.unix_socket) * kFdsPerRequest;
}

std::size_t pick(std::uint32_t configured, std::size_t scaled, std::size_t least) {
  return configured != 0 ? configured : std::max(scaled, least);
}

// `wanted` scaled by num/den for the auto fields.
http::ConnectionLimits sized(const DaemonConfig::Connections& c, std::uint64_t num,
                             std::uint64_t den) {
  auto scale = [&](std::size_t v) {
    return static_cast<std::size_t>(std::min<std::uint64_t>(v, v * num / den));
  };
  http::ConnectionLimits l;
  l.tcp = pick(c.tcp, scale(kWanted.tcp), kLeast.tcp);
  l.unix_socket = pick(c.unix_socket, scale(kWanted.unix_socket), kLeast.unix_socket);
  l.unauthenticated = pick(c.unauthenticated, std::min(kWanted.unauthenticated, l.tcp / 8),
                           std::min(kLeast.unauthenticated, l.tcp));
  l.unauthenticated_per_peer =
      pick(c.unauthenticated_per_peer,
           std::min(kWanted.unauthenticated_per_peer, l.unauthenticated / 4),
           std::min(kLeast.unauthenticated_per_peer, l.unauthenticated));
  l.unauthenticated_head_timeout = std::chrono::milliseconds(c.unauthenticated_head_timeout_ms);
  return l;
}

std::string limits_text(const http::ConnectionLimits& l) {
  return "tcp " + std::to_string(l.tcp) + " (" + std::to_string(l.unauthenticated) +
         " unauthenticated, " + std::to_string(l.unauthenticated_per_peer) + " per peer), unix " +
         std::to_string(l.unix_socket);
}

}  // namespace

Result<NofileLimit> raise_nofile_limit() {
  struct rlimit r;
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return errno_error("getrlimit(RLIMIT_NOFILE)");
  NofileLimit out;
  out.soft_before = r.rlim_cur;
  rlim_t target = r.rlim_max;
  if (target == RLIM_INFINITY) {
    // setrlimit refuses more than fs.nr_open.
    std::uint64_t nr_open = 1048576;
    std::ifstream in("/proc/sys/fs/nr_open");
    in >> nr_open;
    target = static_cast<rlim_t>(nr_open);
  }
  if (r.rlim_cur != RLIM_INFINITY && r.rlim_cur < target) {
    struct rlimit raised = {target, r.rlim_max};
    if (::setrlimit(RLIMIT_NOFILE, &raised) != 0)
      return errno_error("setrlimit(RLIMIT_NOFILE, soft " + std::to_string(target) + ")");
    r.rlim_cur = target;
  }
  out.soft = r.rlim_cur;
  out.hard = r.rlim_max;
  return out;
}

Result<std::uint64_t> count_open_fds() {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir("/proc/self/fd"), ::closedir);
  if (!dir) return errno_error("opendir(/proc/self/fd)");
  std::uint64_t n = 0;
  while (struct dirent* e = ::readdir(dir.get())) {
    if (e->d_name[0] != '.') ++n;
  }
  return n > 0 ? n - 1 : 0;  // not the directory's own descriptor
}

Result<FdBudget> plan_fd_budget(const FdBudgetInput& in) {
  FdBudget b;
  b.available = in.limit > in.open_now ? in.limit - in.open_now : 0;
  b.reserve = kDaemonBaseFds + kFdsPerSandbox * in.max_sandboxes +
              kFdsPerProxyConnection * in.proxy_connections;
  const std::uint64_t room = b.available > b.reserve ? b.available - b.reserve : 0;
  const std::uint64_t wanted = cost(sized(in.configured, 1, 1));
  // Short of descriptors, connections may take up to half of what there
  // is: the reserve is a worst case (every sandbox at once, every proxy
  // connection open) that rarely comes, and connections are what keeps
  // the daemon reachable, the unix socket included.
  const std::uint64_t share =
      room >= wanted ? wanted : std::max(room, std::min(wanted, b.available / 2));
  b.limits = sized(in.configured, share, wanted);
  b.connections = cost(b.limits);
  const std::string hint =
      "raise the hard RLIMIT_NOFILE (LimitNOFILE= in the systemd unit, ulimit -Hn; "
      "docs/operations.md, \"File descriptors\")";
  if (b.connections > b.available) {
    return make_error(ErrorCode::kResourceExhausted,
                      "the descriptor limit RLIMIT_NOFILE " + std::to_string(in.limit) +
                          " leaves " + std::to_string(b.available) +
                          " descriptors, too few for HTTP connections " + limits_text(b.limits) +
                          ", which may need " + std::to_string(b.connections),
                      hint + ", or lower serve.connections");
  }
  if (b.connections + b.reserve > b.available) {
    b.warning = "the descriptor limit RLIMIT_NOFILE " + std::to_string(in.limit) + " leaves " +
                std::to_string(b.available) + " descriptors; HTTP connections (" +
                limits_text(b.limits) + ") may need " + std::to_string(b.connections) +
                " and the daemon's own work up to " + std::to_string(b.reserve) + " (" +
                std::to_string(in.max_sandboxes) + " sandboxes, " +
                std::to_string(in.proxy_connections) +
                " egress proxy connections): beyond, new connections get 503 overloaded and "
                "sandbox work fails; " +
                hint;
  }
  return b;
}

std::string describe(const NofileLimit& limit, const FdBudget& budget) {
  std::string out = "descriptors " + std::to_string(limit.soft);
  if (limit.soft_before != limit.soft)
    out += " (soft limit raised from " + std::to_string(limit.soft_before) + ")";
  out += "; connections " + limits_text(budget.limits);
  return out;
}

}  // namespace corral::daemon
