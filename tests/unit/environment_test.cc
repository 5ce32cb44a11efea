// scrub_environment (issue 12, item 7): what a process forked from the
// daemon keeps of its environment, as /proc/<pid>/environ shows it.
#include "base/environment.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace corral {
namespace {

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  return out;
}

// In a child: sets two variables, scrubs keeping `keep`, and sends back
// /proc/self/environ, then "|", then getenv of both.
std::string scrubbed(const std::string_view* keep, std::size_t count) {
  int p[2];
  if (pipe(p) != 0) return "<pipe>";
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    setenv("SCRUB_TEST_SECRET", "value-set-later-0123456789", 1);
    setenv("SCRUB_TEST_KEEP", "kept-value", 1);
    scrub_environment(keep, count);
    int fd = open("/proc/self/environ", O_RDONLY);
    std::string env = fd >= 0 ? read_all(fd) : "<no environ>";
    const char* a = getenv("SCRUB_TEST_SECRET");
    const char* b = getenv("SCRUB_TEST_KEEP");
    const char* path = getenv("PATH");
    env += std::string("|") + (a ? a : "-") + "|" + (b ? b : "-") + "|" + (path ? "path" : "-");
    (void)!write(p[1], env.data(), env.size());
    _exit(0);
  }
  close(p[1]);
  std::string out = read_all(p[0]);
  close(p[0]);
  waitpid(pid, nullptr, 0);
  return out;
}

TEST(ScrubEnvironment, DropsEverythingButTheKeptNamesFromProcEnviron) {
  ASSERT_NE(getenv("PATH"), nullptr) << "the test needs an inherited variable";
  const std::string path = std::string("PATH=") + getenv("PATH");
  const std::string before = [] {
    int fd = open("/proc/self/environ", O_RDONLY);
    std::string s = read_all(fd);
    close(fd);
    return s;
  }();
  ASSERT_NE(before.find(path), std::string::npos);

  const std::string_view keep[] = {"SCRUB_TEST_KEEP"};
  std::string out = scrubbed(keep, 1);
  // The block from exec: nothing of it left (PATH was in it).
  EXPECT_EQ(out.find(path), std::string::npos) << out;
  EXPECT_EQ(out.find("value-set-later"), std::string::npos) << out;
  EXPECT_NE(out.find("|-|kept-value|-"), std::string::npos) << out;

  // Keeping an inherited variable keeps its bytes where they are.
  const std::string_view keep_path[] = {"PATH"};
  out = scrubbed(keep_path, 1);
  EXPECT_NE(out.find(path), std::string::npos) << out;
  EXPECT_NE(out.find("|-|-|path"), std::string::npos) << out;
  EXPECT_EQ(out.find('='), out.find(path) + 4) << "only PATH is left: " << out;

  // Keeping nothing: no variable at all.
  out = scrubbed(nullptr, 0);
  EXPECT_EQ(out.find('='), std::string::npos) << out;
  EXPECT_NE(out.find("|-|-|-"), std::string::npos) << out;
}

}  // namespace
}  // namespace corral
