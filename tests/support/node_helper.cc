#include "support/node_helper.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "base/subprocess.h"
#include "support/sandbox_harness.h"

extern char** environ;

namespace corral::testing {

Result<std::unique_ptr<NodeHelper>> NodeHelper::start(const std::string& script,
                                                      const std::vector<std::string>& args,
                                                      const std::string& needs,
                                                      const std::vector<std::string>& node_flags,
                                                      const std::vector<std::string>& env) {
  auto node = find_program("node");
  if (!node)
    return make_error(ErrorCode::kUnavailable, "node is not installed (scripts/install-deps)");
  const std::string npm = source_dir() + "/tests/npm";
  if (!needs.empty() && !std::filesystem::exists(npm + "/" + needs))
    return make_error(ErrorCode::kUnavailable,
                      npm + "/" + needs + " is missing (run scripts/install-deps: npm ci)");
  // Everything exec needs is made before fork: the child only dups and execs.
  std::vector<std::string> argv_s{*node};
  argv_s.insert(argv_s.end(), node_flags.begin(), node_flags.end());
  argv_s.push_back(npm + "/" + script);
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) env_s.emplace_back(*e);
  env_s.insert(env_s.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);

  int in[2];
  int out[2];
  if (pipe2(in, O_CLOEXEC) != 0) return errno_error("pipe2");
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return errno_error("pipe2");
  }
  pid_t pid = fork();
  if (pid < 0) {
    auto failed = errno_error("fork");
    for (int fd : {in[0], in[1], out[0], out[1]}) close(fd);
    return failed;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(in[0], 0);
    dup2(out[1], 1);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  std::unique_ptr<NodeHelper> helper(new NodeHelper);
  helper->pid_ = pid;
  helper->stdin_fd_ = in[1];
  // Node starts in seconds on a busy host; 120 s bounds a hang, it is not
  // a speed expectation.
  std::string line;
  for (int waited_ms = 0; line.find('\n') == std::string::npos && waited_ms < 120'000;) {
    pollfd p{out[0], POLLIN, 0};
    int r = poll(&p, 1, 500);
    waited_ms += 500;
    if (r <= 0) continue;
    char buf[256];
    ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    line.append(buf, static_cast<std::size_t>(n));
  }
  close(out[0]);
  if (line.rfind("PORT ", 0) != 0)
    return make_error(ErrorCode::kInternal, script + " did not start: " + line);
  helper->port_ = std::atoi(line.c_str() + 5);
  return helper;
}

NodeHelper::~NodeHelper() {
  if (stdin_fd_ >= 0) close(stdin_fd_);  // it exits when its stdin ends
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
}

}  // namespace corral::testing
