#include "base/environment.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace corral {

namespace {

// The initial environment block [start, end) from fields 50 and 51 of
// /proc/self/stat (Linux 3.5+); false if it cannot be read.
bool env_block(std::uintptr_t* start, std::uintptr_t* end) {
  int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[2048];
  std::size_t len = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf + len, sizeof buf - 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += static_cast<std::size_t>(n);
    if (len == sizeof buf - 1) break;
  }
  ::close(fd);
  buf[len] = '\0';
  // Fields after "(comm)" start at 3; the comm itself may hold spaces.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return false;
  ++p;
  std::uintptr_t fields[2] = {0, 0};
  for (int field = 3; field <= 51; ++field) {
    while (*p == ' ') ++p;
    if (*p == '\0') return false;
    const char* begin = p;
    while (*p != ' ' && *p != '\0' && *p != '\n') ++p;
    if (field >= 50) {
      std::uintptr_t v = 0;
      for (const char* q = begin; q < p; ++q) {
        if (*q < '0' || *q > '9') return false;
        v = v * 10 + static_cast<std::uintptr_t>(*q - '0');
      }
      fields[field - 50] = v;
    }
  }
  if (fields[0] == 0 || fields[1] <= fields[0]) return false;
  *start = fields[0];
  *end = fields[1];
  return true;
}

bool kept(const char* entry, const std::string_view* keep, std::size_t count) {
  const char* eq = std::strchr(entry, '=');
  if (eq == nullptr) return false;
  const std::string_view name(entry, static_cast<std::size_t>(eq - entry));
  for (std::size_t i = 0; i < count; ++i)
    if (keep[i] == name) return true;
  return false;
}

}  // namespace

void scrub_environment(const std::string_view* keep, std::size_t count) noexcept {
  std::uintptr_t start = 0, end = 0;
  const bool have_block = env_block(&start, &end);
  auto in_block = [&](const char* s) {
    auto a = reinterpret_cast<std::uintptr_t>(s);
    return have_block && a >= start && a < end;
  };
  std::size_t out = 0;
  for (std::size_t i = 0; environ != nullptr && environ[i] != nullptr; ++i) {
    char* entry = environ[i];
    if (kept(entry, keep, count)) {
      environ[out++] = entry;
    } else if (!in_block(entry)) {
      // A string set later (setenv, putenv): zeroed where it is.
      explicit_bzero(entry, std::strlen(entry));
    }
  }
  if (environ != nullptr) environ[out] = nullptr;
  if (!have_block) return;
  // The block, except the kept strings that live in it (variables dropped
  // from `environ` earlier are still in it too).
  auto* p = reinterpret_cast<char*>(start);
  auto* const stop = reinterpret_cast<char*>(end);
  while (p < stop) {
    char* run_end = stop;  // up to the nearest kept string at or after p
    for (std::size_t i = 0; i < out; ++i) {
      auto a = reinterpret_cast<std::uintptr_t>(environ[i]);
      if (a >= reinterpret_cast<std::uintptr_t>(p) && a < reinterpret_cast<std::uintptr_t>(run_end))
        run_end = environ[i];
    }
    explicit_bzero(p, static_cast<std::size_t>(run_end - p));
    if (run_end == stop) break;
    p = run_end + std::strlen(run_end) + 1;
  }
}

}  // namespace corral
