// `corral run` on a terminal: the sandbox gets a pty of its own devpts
// (so /dev/pts/0 inside, whatever the host's terminal is), relayed to
// corral's terminal. util-linux `script` provides the terminal.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

// Output lines without the terminal's \r, and without the "^@" that the
// pty echoes when `script` forwards the end of its (empty) stdin.
std::vector<std::string> terminal_lines(std::string out) {
  for (auto pos = out.find("^@"); pos != std::string::npos; pos = out.find("^@")) out.erase(pos, 2);
  std::vector<std::string> lines;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

TEST(run_tty, SandboxGetsItsOwnPty) {
  int st = -1;
  host_sh("command -v script >/dev/null 2>&1", &st);
  if (st != 0) CORRAL_SKIP_OR_FAIL("util-linux `script` is not installed");

  // Hold a host pty for the whole test: /dev/pts/0 of the host is then
  // taken (by us or by someone else), so the terminal `script` makes for
  // corral is never /dev/pts/0 and only the sandbox's own devpts can give
  // that name out.
  int held = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(grantpt(held), 0);
  ASSERT_EQ(unlockpt(held), 0);

  std::string dir = make_temp_dir("run-tty");
  std::string report_path = dir + "/report.json";
  std::string inner = "tty; " + corral_bin() + " run --report " + report_path +
                      " -- sh -c 'tty; test -t 0 && echo is-a-tty; test -t 1 && echo "
                      "out-is-a-tty; echo /dev/pts/*'";
  std::string out =
      host_sh("script -qec " + shell_quote(inner) + " /dev/null </dev/null 2>&1", &st);
  close(held);
  EXPECT_EQ(st, 0) << out;

  std::vector<std::string> lines = terminal_lines(out);
  ASSERT_GE(lines.size(), 5u) << out;
  const std::string& host_tty = lines[0];
  EXPECT_EQ(host_tty.rfind("/dev/pts/", 0), 0u) << "script gave no pty: " << out;
  EXPECT_NE(host_tty, "/dev/pts/0");
  EXPECT_EQ(lines[1], "/dev/pts/0") << out;
  EXPECT_EQ(lines[2], "is-a-tty") << out;
  EXPECT_EQ(lines[3], "out-is-a-tty") << out;
  // Only the sandbox's own pty exists in its /dev/pts: the host's terminals
  // (ours, script's) are not visible.
  EXPECT_EQ(lines[4], "/dev/pts/0 /dev/pts/ptmx") << out;

  std::ifstream in(report_path);
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json report = nlohmann::json::parse(ss.str(), nullptr, false);
  EXPECT_TRUE(report.is_object()) << ss.str();
  if (report.is_object()) {
    EXPECT_EQ(report["exit_code"], 0);
    expect_sandbox_cleaned_up(report, "tty run");
  }
  std::filesystem::remove_all(dir);
}

TEST(run_tty, NoPtyWhenNotOnATerminal) {
  RunOutcome r = run_sandbox({}, {"sh", "-c", "test -t 0 || echo stdin-not-tty; "
                                              "test -t 1 || echo stdout-not-tty"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "stdin-not-tty\nstdout-not-tty\n");
}

}  // namespace
}  // namespace corral::testing
