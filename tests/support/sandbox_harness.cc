#include "support/sandbox_harness.h"

#include "support/proc_files.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "base/paths.h"

namespace corral::testing {

namespace {

std::string env_or(const char* name, const char* built_in) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::string(v) : std::string(built_in);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string corral_bin() { return env_or("CORRAL_BIN", CORRAL_TEST_BIN); }
std::string probe_bin() { return env_or("CORRAL_PROBE", CORRAL_TEST_PROBE); }
std::string source_dir() { return env_or("CORRAL_SOURCE_DIR", CORRAL_TEST_SOURCE_DIR); }

namespace {

// The pid in a temp dir's name ("corral-test-<tag>-p<pid>-XXXXXX"), or 0.
pid_t owner_of_temp_dir(const std::string& name) {
  if (name.rfind("corral-test-", 0) != 0) return 0;
  auto suffix = name.rfind('-');  // mkdtemp's six characters follow
  if (suffix == std::string::npos || name.size() - suffix != 7) return 0;
  auto at = name.rfind("-p", suffix - 1);
  if (at == std::string::npos) return 0;
  char* end = nullptr;
  long pid = std::strtol(name.c_str() + at + 2, &end, 10);
  return (pid > 1 && end == name.c_str() + suffix) ? static_cast<pid_t>(pid) : 0;
}

}  // namespace

void sweep_dead_temp_dirs() {
  DIR* tmp = opendir("/tmp");
  if (tmp == nullptr) return;
  std::vector<std::string> dead;
  while (dirent* e = readdir(tmp)) {
    if (e->d_type != DT_DIR) continue;
    pid_t owner = owner_of_temp_dir(e->d_name);
    if (owner > 0 && kill(owner, 0) != 0 && errno == ESRCH)
      dead.push_back(std::string("/tmp/") + e->d_name);
  }
  closedir(tmp);
  if (dead.empty()) return;
  std::ifstream mounts("/proc/self/mounts");
  std::vector<std::string> below;
  for (std::string line; std::getline(mounts, line);) {
    std::istringstream fields(line);
    std::string dev, where;
    fields >> dev >> where;
    for (const auto& d : dead)
      if (where.rfind(d + "/", 0) == 0) below.push_back(where);
  }
  for (auto it = below.rbegin(); it != below.rend(); ++it) umount2(it->c_str(), MNT_DETACH);
  for (const auto& d : dead) {
    std::error_code ec;
    std::filesystem::remove_all(d, ec);
  }
}

std::string make_temp_dir(std::string_view tag) {
  static std::once_flag swept;
  std::call_once(swept, sweep_dead_temp_dirs);
  std::string tmpl =
      "/tmp/corral-test-" + std::string(tag) + "-p" + std::to_string(getpid()) + "-XXXXXX";
  char* d = mkdtemp(tmpl.data());
  if (d == nullptr) {
    ADD_FAILURE() << "mkdtemp: " << strerror(errno);
    return "/nonexistent";
  }
  chmod(d, 0755);
  return d;
}

// Starts `corral <args...>` (with --report added before "--" for `run`)
// with its stdin, stdout and stderr on pipes. Returns the pid (-1 on
// failure, already reported) and our ends of the pipes.
static pid_t spawn_corral(std::vector<std::string> args, const std::string& report_path, int* in_w,
                          int* out_r, int* err_r) {
  if (!args.empty() && args[0] == "run") {
    auto dashdash = std::find(args.begin(), args.end(), "--");
    args.insert(dashdash, {"--report", report_path});
  }
  std::string bin = corral_bin();
  std::vector<char*> argv;
  argv.push_back(bin.data());
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0 ||
      pipe2(err_pipe, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2: " << strerror(errno);
    return -1;
  }
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
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << strerror(errno);
    close(in_pipe[1]);
    close(out_pipe[0]);
    close(err_pipe[0]);
    return -1;
  }
  *in_w = in_pipe[1];
  *out_r = out_pipe[0];
  *err_r = err_pipe[0];
  return pid;
}

RunOutcome run_corral(std::vector<std::string> args, std::string_view stdin_data,
                      std::chrono::seconds timeout) {
  RunOutcome outcome;
  std::string report_dir = make_temp_dir("report");
  std::string report_path = report_dir + "/report.json";
  int in_w = -1, out_r = -1, err_r = -1;
  auto start = std::chrono::steady_clock::now();
  pid_t pid = spawn_corral(std::move(args), report_path, &in_w, &out_r, &err_r);
  if (pid < 0) {
    rmdir(report_dir.c_str());
    return outcome;
  }
  // Feed stdin in a child so a large input cannot deadlock against output.
  pid_t feeder = fork();
  if (feeder == 0) {
    signal(SIGPIPE, SIG_IGN);
    size_t off = 0;
    while (off < stdin_data.size()) {
      ssize_t n = write(in_w, stdin_data.data() + off, stdin_data.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(in_w);

  auto deadline = start + timeout;
  bool killed = false;
  pollfd fds[2] = {{out_r, POLLIN, 0}, {err_r, POLLIN, 0}};
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

std::string read_host_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
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

// ---------------------------------------------------------------------------
// Added for the `corral run` integration tests.

CorralProcess::CorralProcess(std::vector<std::string> args) {
  report_dir_ = make_temp_dir("report");
  report_path_ = report_dir_ + "/report.json";
  start_ = std::chrono::steady_clock::now();
  pid_ = spawn_corral(std::move(args), report_path_, &in_fd_, &out_fd_, &err_fd_);
}

CorralProcess::~CorralProcess() {
  close_stdin();
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
  if (err_fd_ >= 0) close(err_fd_);
  if (!report_path_.empty()) unlink(report_path_.c_str());
  if (!report_dir_.empty()) rmdir(report_dir_.c_str());
}

void CorralProcess::close_stdin() {
  if (in_fd_ >= 0) close(in_fd_);
  in_fd_ = -1;
}

bool CorralProcess::send_signal(int sig) {
  if (pid_ <= 0 || reaped_) return false;
  return kill(pid_, sig) == 0;
}

bool CorralProcess::pump(int ms) {
  pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
  if (out_fd_ < 0 && err_fd_ < 0) return false;
  int r = poll(fds, 2, ms);
  if (r <= 0) return true;
  char buf[65536];
  for (int i = 0; i < 2; ++i) {
    if (fds[i].fd < 0 || fds[i].revents == 0) continue;
    ssize_t n = read(fds[i].fd, buf, sizeof buf);
    if (n <= 0) {
      close(fds[i].fd);
      (i == 0 ? out_fd_ : err_fd_) = -1;
    } else {
      (i == 0 ? out_ : err_).append(buf, static_cast<size_t>(n));
    }
  }
  return out_fd_ >= 0 || err_fd_ >= 0;
}

bool CorralProcess::wait_for_stdout(std::string_view needle, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (out_.find(needle) != std::string::npos) return true;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    if (!pump(static_cast<int>(left.count()))) return out_.find(needle) != std::string::npos;
  }
}

RunOutcome CorralProcess::wait(std::chrono::seconds timeout) {
  RunOutcome outcome;
  close_stdin();
  if (pid_ <= 0 || reaped_) return outcome;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool killed = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      if (killed) break;  // the outputs stay open (a leaked writer): give up on them
      kill(pid_, SIGKILL);
      killed = true;
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      continue;
    }
    if (!pump(static_cast<int>(left.count()))) break;
  }
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
  outcome.wall = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start_);
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (killed) ADD_FAILURE() << "corral did not finish within " << timeout.count() << "s";
  outcome.out = out_;
  outcome.err = err_;
  std::string report = read_file(report_path_);
  if (!report.empty()) {
    outcome.report = nlohmann::json::parse(report, nullptr, /*allow_exceptions=*/false);
  }
  return outcome;
}

std::uint64_t host_start_time(std::int64_t pid) {
  return proc_start_time(static_cast<pid_t>(pid));
}

std::string interface_with(const std::string& address) {
  ifaddrs* all = nullptr;
  if (address.empty() || getifaddrs(&all) != 0) return "";
  std::string name;
  for (ifaddrs* a = all; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
    if (address == buf) name = a->ifa_name;
  }
  freeifaddrs(all);
  return name;
}

std::vector<std::string> host_processes_matching(std::string_view needle, bool exact) {
  std::vector<std::string> found;
  DIR* d = opendir("/proc");
  if (d == nullptr) return found;
  const pid_t self = getpid();
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long pid = strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid == self) continue;
    std::string cmdline = read_file(std::string("/proc/") + e->d_name + "/cmdline");
    while (!cmdline.empty() && cmdline.back() == '\0') cmdline.pop_back();
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (exact ? cmdline == needle : cmdline.find(needle) != std::string::npos) {
      found.push_back(std::string(e->d_name) + ": " + cmdline);
    }
  }
  closedir(d);
  return found;
}

std::uint64_t free_disk_bytes(const std::string& path) {
  struct statvfs st;
  if (statvfs(path.c_str(), &st) != 0) return 0;
  return static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
}

void expect_sandbox_cleaned_up(const nlohmann::json& report, std::string_view what) {
  SCOPED_TRACE(std::string("cleanup after: ") + std::string(what));
  ASSERT_TRUE(report.is_object()) << "no JSON report";
  EXPECT_EQ(report.value("residue_bytes", std::uint64_t{1}), 0u) << report.dump();
  ASSERT_TRUE(report.contains("residue") && report["residue"].is_array()) << report.dump();
  EXPECT_TRUE(report["residue"].empty()) << report["residue"].dump();

  const std::string id = report.value("sandbox_id", std::string());
  const std::string stage_dir = run_dir() + "/stage";
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mountinfo, line)) {
    EXPECT_EQ(line.find(stage_dir + "/"), std::string::npos)
        << "corral's staging area is in the host mount table: " << line;
    if (!id.empty()) {
      EXPECT_EQ(line.find(id), std::string::npos) << "mount of " << id << " left: " << line;
    }
  }
  if (id.empty()) return;  // no sandbox was started: nothing else to look for
  for (const std::string& pattern :
       {"/sys/fs/cgroup/*/corral/" + id, "/sys/fs/cgroup/corral/" + id}) {
    glob_t g{};
    if (glob(pattern.c_str(), 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) {
        ADD_FAILURE() << "cgroup left after the sandbox ended: " << g.gl_pathv[i];
      }
    }
    globfree(&g);
  }
  const std::string lock = run_dir() + "/sandboxes/" + id + ".lock";
  struct stat st;
  EXPECT_NE(lstat(lock.c_str(), &st), 0) << "lock file left: " << lock;
}

}  // namespace corral::testing
