// LogRedactor (issue 5, S3 "daemon logs"): whatever the process writes to
// fds 1 and 2, by printf, by write(2) or split across writes, reaches the
// real stdout/stderr redacted. Run in a child so the test's own fds stay.
#include "daemon/log_redactor.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>

#include "secrets/redactor.h"

namespace {

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  return out;
}

TEST(LogRedactor, TheDaemonsOwnOutputIsRedactedEvenWhenAValueIsSplit) {
  const std::string value = "s3cr3t-" + std::to_string(::getpid()) + "-Qw8vNp2xZ";
  int out[2], err[2];
  ASSERT_EQ(::pipe(out), 0);
  ASSERT_EQ(::pipe(err), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::close(out[0]);
    ::close(err[0]);
    ::close(out[1]);
    ::close(err[1]);
    auto set = corral::secrets::RedactionSet::build({{"db", value}});
    if (!set) _exit(2);
    auto redactor = corral::daemon::LogRedactor::start(*set);
    if (!redactor) _exit(3);
    std::printf("listening; key %s\n", value.c_str());
    std::fflush(stdout);
    (void)!::write(2, value.data(), 5);  // half, a pause, the rest
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    (void)!::write(2, value.data() + 5, value.size() - 5);
    (void)!::write(2, "\n", 1);
    redactor->reset();  // flushes what is held and puts the fds back
    _exit(0);
  }
  ::close(out[1]);
  ::close(err[1]);
  std::string got_out, got_err;
  std::thread t([&] { got_err = read_all(err[0]); });
  got_out = read_all(out[0]);
  t.join();
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(got_out, "listening; key [REDACTED:db]\n");
  EXPECT_EQ(got_err, "[REDACTED:db]\n");
  ::close(out[0]);
  ::close(err[0]);
}

}  // namespace
