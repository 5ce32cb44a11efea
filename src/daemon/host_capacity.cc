// The daemon's capacity when the config leaves it to the host: memory and
// disk from /proc/meminfo's MemTotal, and the check that one sandbox made
// from the defaults fits.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>

#include "base/unique_fd.h"
#include "daemon/daemon_config.h"
#include "spec/units.h"

namespace corral {

Result<std::uint64_t> parse_meminfo_total(std::string_view meminfo) {
  std::size_t pos = 0;
  while (pos < meminfo.size()) {
    std::size_t nl = meminfo.find('\n', pos);
    std::string_view line =
        meminfo.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? meminfo.size() : nl + 1;
    if (!line.starts_with("MemTotal:")) continue;
    line.remove_prefix(9);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    std::uint64_t kib = 0;
    auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), kib);
    std::string_view unit(end, static_cast<std::size_t>(line.data() + line.size() - end));
    while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
    if (ec != std::errc() || unit != "kB" || kib == 0 || kib > UINT64_MAX / 1024) break;
    return kib * 1024;
  }
  return make_error(ErrorCode::kUnavailable, "/proc/meminfo has no usable MemTotal line",
                    "set serve.capacity.memory and serve.capacity.disk in the config");
}

Status resolve_capacity(DaemonConfig& config) {
  if (config.max_memory_bytes != 0 && config.max_disk_bytes != 0) {
    return resolve_capacity(config, 0);
  }
  UniqueFd fd(::open("/proc/meminfo", O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return tl::unexpected<Error>(
        errno_error("open(/proc/meminfo)", errno,
                    "set serve.capacity.memory and serve.capacity.disk in the config")
            .value()
            .wrap("computing the daemon's capacity"));
  }
  std::string text;
  char buf[4096];
  while (text.size() < 64 * kKiB) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return tl::unexpected<Error>(
          errno_error("read(/proc/meminfo)").value().wrap("computing the daemon's capacity"));
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  auto total = parse_meminfo_total(text);
  if (!total) {
    return tl::unexpected<Error>(std::move(total.error()).wrap("computing the daemon's capacity"));
  }
  return resolve_capacity(config, *total);
}

Status resolve_capacity(DaemonConfig& config, std::uint64_t mem_total_bytes) {
  if ((config.max_memory_bytes == 0 || config.max_disk_bytes == 0) && mem_total_bytes == 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      "computing the daemon's capacity: the host's memory size is unknown");
  }
  if (config.max_memory_bytes == 0) {
    config.max_memory_bytes = mem_total_bytes / 4 * 3 + mem_total_bytes % 4 * 3 / 4;
  }
  if (config.max_disk_bytes == 0) config.max_disk_bytes = mem_total_bytes / 2;

  // One sandbox made from the defaults alone must fit, or every create that
  // does not lower the limits would be refused.
  const Limits& limits = config.default_spec.limits;
  if (limits.memory_bytes > config.max_memory_bytes) {
    return make_error(ErrorCode::kInvalidArgument,
                      "the default sandbox's memory_limit (" + format_size(limits.memory_bytes) +
                          ") is more than the daemon's memory capacity (" +
                          format_size(config.max_memory_bytes) + ")",
                      "lower sandbox.memory_limit, or raise serve.capacity.memory");
  }
  if (limits.disk_bytes > config.max_disk_bytes) {
    return make_error(ErrorCode::kInvalidArgument,
                      "the default sandbox's disk_limit (" + format_size(limits.disk_bytes) +
                          ") is more than the daemon's disk capacity (" +
                          format_size(config.max_disk_bytes) + ")",
                      "lower sandbox.disk_limit, or raise serve.capacity.disk (writable layers "
                      "are tmpfs: their bytes are in RAM)");
  }
  return ok();
}

}  // namespace corral
