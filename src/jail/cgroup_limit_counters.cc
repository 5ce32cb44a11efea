#include "jail/cgroup_limit_counters.h"

#include <cerrno>
#include <charconv>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>

namespace corral {

namespace {

// "key value" lines; nullopt when the file does not exist.
Result<std::optional<std::map<std::string, std::uint64_t>>> read_keyed_file(
    const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return std::optional<std::map<std::string, std::uint64_t>>();
    return make_error(ErrorCode::kSystem, "reading " + path + " failed");
  }
  std::map<std::string, std::uint64_t> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string key, value;
    if (!(words >> key >> value)) continue;
    std::uint64_t v = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc() || end != value.data() + value.size())
      return make_error(ErrorCode::kSystem, path + ": \"" + key + "\" is not a counter: " + value);
    out[key] = v;
  }
  return std::optional<std::map<std::string, std::uint64_t>>(std::move(out));
}

std::uint64_t get(const std::map<std::string, std::uint64_t>& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? 0 : it->second;
}

}  // namespace

Result<CgroupLimitCounters> read_limit_counters(const std::vector<std::string>& dirs) {
  CgroupLimitCounters c;
  for (const std::string& dir : dirs) {
    auto cpu = read_keyed_file(dir + "/cpu.stat");
    if (!cpu) return tl::unexpected(cpu.error());
    if (*cpu) {
      const auto& m = **cpu;
      if (m.count("nr_throttled")) c.cpu_throttled_periods = get(m, "nr_throttled");
      if (m.count("throttled_usec")) c.cpu_throttled_ns = get(m, "throttled_usec") * 1000;
      if (m.count("throttled_time")) c.cpu_throttled_ns = get(m, "throttled_time");
    }
    if (std::ifstream failcnt(dir + "/memory.failcnt"); failcnt) {  // v1: one number
      std::uint64_t v = 0;
      if (!(failcnt >> v))
        return make_error(ErrorCode::kSystem, dir + "/memory.failcnt is not a counter");
      c.memory_limit_hits = v;
      continue;
    }
    auto events = read_keyed_file(dir + "/memory.events");
    if (!events) return tl::unexpected(events.error());
    if (*events) c.memory_limit_hits = get(**events, "max");
  }
  return c;
}

}  // namespace corral
