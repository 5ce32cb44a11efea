#include "support/sandbox_harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace corral::testing {

namespace {

std::string env_or_die(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    ADD_FAILURE() << name << " is not set; run the tests through ctest";
    return "/nonexistent";
  }
  return v;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string corral_bin() { return env_or_die("CORRAL_BIN"); }
std::string probe_bin() { return env_or_die("CORRAL_PROBE"); }
std::string source_dir() { return env_or_die("CORRAL_SOURCE_DIR"); }

bool must_work() {
  const char* v = std::getenv("CORRAL_MUST_WORK");
  return v != nullptr && std::string_view(v) == "1";
}

std::string make_temp_dir(std::string_view tag) {
  std::string tmpl = "/tmp/corral-test-" + std::string(tag) + "-XXXXXX";
  char* d = mkdtemp(tmpl.data());
  if (d == nullptr) {
    ADD_FAILURE() << "mkdtemp: " << strerror(errno);
    return "/nonexistent";
  }
  chmod(d, 0755);
  return d;
}

RunOutcome run_corral(std::vector<std::string> args, std::string_view stdin_data,
                      std::chrono::seconds timeout) {
  RunOutcome outcome;
  std::string report_dir = make_temp_dir("report");
  std::string report_path = report_dir + "/report.json";
  if (!args.empty() && args[0] == "run") {
    auto dashdash = std::find(args.begin(), args.end(), "--");
    args.insert(dashdash, {"--report", report_path});
  }
  std::vector<char*> argv;
  std::string bin = corral_bin();
  argv.push_back(bin.data());
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0 ||
      pipe2(err_pipe, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2: " << strerror(errno);
    return outcome;
  }
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in_pipe[0], 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  // Feed stdin in a child so a large input cannot deadlock against output.
  pid_t feeder = fork();
  if (feeder == 0) {
    signal(SIGPIPE, SIG_IGN);
    size_t off = 0;
    while (off < stdin_data.size()) {
      ssize_t n = write(in_pipe[1], stdin_data.data() + off, stdin_data.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(in_pipe[1]);

  auto deadline = start + timeout;
  bool killed = false;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      if (!killed) kill(pid, SIGKILL);
      killed = true;
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      continue;
    }
    int r = poll(fds, 2, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? outcome.out : outcome.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  waitpid(feeder, nullptr, 0);
  outcome.wall = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (killed) ADD_FAILURE() << "corral did not finish within " << timeout.count() << "s";
  std::string report = read_file(report_path);
  if (!report.empty()) {
    outcome.report = nlohmann::json::parse(report, nullptr, /*allow_exceptions=*/false);
  }
  unlink(report_path.c_str());
  rmdir(report_dir.c_str());
  return outcome;
}

RunOutcome run_sandbox(std::vector<std::string> opts, std::vector<std::string> cmd,
                       std::string_view stdin_data, std::chrono::seconds timeout) {
  std::vector<std::string> args{"run"};
  args.insert(args.end(), opts.begin(), opts.end());
  args.push_back("--");
  args.insert(args.end(), cmd.begin(), cmd.end());
  return run_corral(std::move(args), stdin_data, timeout);
}

std::string host_sh(const std::string& script, int* status) {
  std::string out;
  FILE* f = popen(script.c_str(), "r");
  if (f == nullptr) {
    if (status) *status = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  int st = pclose(f);
  if (status) *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

}  // namespace corral::testing
