// Reading /proc/<pid>/... of processes that may end at any moment.
//
// A read of such a file fails with ESRCH once its process is gone, and
// libstdc++'s filebuf throws std::ios_base::failure from underflow when
// read() fails, which a std::string built from istreambuf_iterator does not
// catch: a test that sampled a dying sandbox process aborted (CI run of
// 2026-12-02). These helpers use read(2) and answer "" or 0 instead.
// Header-only: the unit tests link no harness.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace corral::testing {

// The whole file, or what was read before an error ("" if it cannot be opened).
inline std::string read_proc_text(const std::string& path) {
  std::string out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

// The parsed /proc/<pid>/stat of a process.
struct ProcStat {
  std::string comm;                 // field 2, without its parentheses
  std::vector<std::string> fields;  // field 3 (state) onward: fields[0] is the state
  bool ok() const { return !fields.empty(); }
  // Field number `n` as proc(5) counts them (3 = state, 4 = ppid, 22 = starttime).
  std::string field(int n) const {
    const std::size_t i = static_cast<std::size_t>(n - 3);
    return n >= 3 && i < fields.size() ? fields[i] : std::string();
  }
};

inline ProcStat proc_stat(pid_t pid) {
  ProcStat s;
  const std::string text = read_proc_text("/proc/" + std::to_string(pid) + "/stat");
  // "pid (comm) state ppid ...": comm may hold anything, the last ") " ends it.
  const std::size_t open = text.find('('), close = text.rfind(") ");
  if (open == std::string::npos || close == std::string::npos || close < open) return s;
  s.comm = text.substr(open + 1, close - open - 1);
  std::istringstream rest(text.substr(close + 2));
  for (std::string f; rest >> f;) s.fields.push_back(f);
  return s;
}

// The parent pid, or 0 when the process is gone.
inline pid_t proc_parent(pid_t pid) {
  return static_cast<pid_t>(std::atoi(proc_stat(pid).field(4).c_str()));
}

// The start time in clock ticks since boot, or 0 when the process is gone.
inline std::uint64_t proc_start_time(pid_t pid) {
  return std::strtoull(proc_stat(pid).field(22).c_str(), nullptr, 10);
}

}  // namespace corral::testing
