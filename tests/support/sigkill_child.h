// Durability under kill -9 (REQUIREMENTS.md D6), the scaffolding the store's
// unit tests share (state_store_test.cc, task_table_test.cc): a forked
// child writes to the store and acknowledges each call that returned with
// one line on a pipe; the parent kills it with SIGKILL at a chosen moment
// and gets back every whole line, that is, everything acknowledged. What
// the lines mean, and what the store must then hold, is each test's own.
// Header-only: the unit tests link no harness.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace corral::testing {

// In the child: one line, in one write(2), so that the parent reads whole
// lines only. A child that cannot write exits with status 4.
inline void acknowledge(int fd, const std::string& line) {
  const std::string l = line + "\n";
  if (::write(fd, l.data(), l.size()) != static_cast<ssize_t>(l.size())) _exit(4);
}

// Where `run_for` is counted from: the fork (a kill may land while the
// child still opens the store), or the child's first acknowledged line (so
// that a loaded host, slow to fork and open, still leaves the child its
// whole window of writes; at most 60 s are waited for that line).
enum class KillClock { kFromFork, kFromFirstLine };

// Forks, runs `child(fd)` (which must not return: it _exits, or runs until
// killed), kills it with SIGKILL after `run_for` and returns the lines it
// acknowledged on `fd`. A child that ended by itself before the kill fails
// the test (nullopt): it did not run to the moment it was meant to die at.
inline std::optional<std::vector<std::string>> lines_acknowledged_before_sigkill(
    const std::function<void(int fd)>& child, std::chrono::microseconds run_for,
    KillClock clock = KillClock::kFromFork) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2: " << errno;
    return std::nullopt;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << errno;
    return std::nullopt;
  }
  if (pid == 0) {
    ::close(fds[0]);
    child(fds[1]);
    _exit(0);
  }
  ::close(fds[1]);
  std::string buf;
  auto drain = [&](int timeout_ms) {
    pollfd pfd{fds[0], POLLIN, 0};
    if (::poll(&pfd, 1, timeout_ms) <= 0) return false;
    char chunk[4096];
    ssize_t n = ::read(fds[0], chunk, sizeof chunk);
    if (n <= 0) return n < 0 && errno == EINTR;
    buf.append(chunk, static_cast<std::size_t>(n));
    return true;
  };
  if (clock == KillClock::kFromFirstLine) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (buf.find('\n') == std::string::npos && std::chrono::steady_clock::now() < give_up) {
      if (!drain(100) && ::waitpid(pid, nullptr, WNOHANG) == pid) {
        ADD_FAILURE() << "the child ended before its first line";
        ::close(fds[0]);
        return std::nullopt;
      }
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + run_for;
  while (std::chrono::steady_clock::now() < deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    drain(static_cast<int>(left.count()));
  }
  const bool killed = ::kill(pid, SIGKILL) == 0;
  int status = 0;
  const bool reaped = ::waitpid(pid, &status, 0) == pid;
  while (drain(0)) {
  }
  ::close(fds[0]);
  if (!killed || !reaped || !WIFSIGNALED(status)) {
    ADD_FAILURE() << "the child failed early, status " << status;
    return std::nullopt;
  }
  // Whole lines only: each was written by one write() after its call returned.
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(buf.substr(start, nl - start));
  return lines;
}

}  // namespace corral::testing
