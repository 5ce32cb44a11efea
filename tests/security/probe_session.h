// Shared helpers of the security tests: run corral_probe inside a sandbox
// and read its JSON lines; start a sandbox in the background and look at it
// from the host. Header-only (the suite globs *_test.cc; this file is not a
// test itself).
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/sandbox_harness.h"

namespace corral::testing {

using nlohmann::json;

// ------------------------------------------------------------------ probe

// The probe is copied into a fresh directory of its own, so the sandbox
// sees nothing of the build tree: <dir>/probe/corral_probe (and a data
// file, to check that the mount is read-only), mounted at /probe with
// <dir> as the allowed mount root.
class ProbeDir {
 public:
  static const ProbeDir& get() {
    static ProbeDir instance;
    return instance;
  }
  const std::string& root() const { return root_; }
  std::string host_probe_dir() const { return root_ + "/probe"; }
  // Options that make the probe appear at /probe inside.
  std::vector<std::string> options() const {
    return {"--mount-root", root_, "--mount", root_ + "/probe:/probe"};
  }

  ~ProbeDir() {
    if (root_.empty() || root_ == "/nonexistent") return;
    unlink((root_ + "/probe/corral_probe").c_str());
    unlink((root_ + "/probe/data").c_str());
    rmdir((root_ + "/probe").c_str());
    rmdir(root_.c_str());
  }

 private:
  ProbeDir() {
    root_ = make_temp_dir("probe");
    std::string dir = root_ + "/probe";
    mkdir(dir.c_str(), 0755);
    chmod(dir.c_str(), 0755);
    {
      std::ifstream in(probe_bin(), std::ios::binary);
      std::ofstream out(dir + "/corral_probe", std::ios::binary);
      out << in.rdbuf();
    }
    chmod((dir + "/corral_probe").c_str(), 0755);
    {
      std::ofstream out(dir + "/data");
      out << "probe data\n";
    }
    // World-writable on the host: inside, only the mount's read-only flag
    // can refuse a write (checked by the visibility tests).
    chmod((dir + "/data").c_str(), 0666);
  }
  std::string root_;
};

inline constexpr const char* kProbe = "/probe/corral_probe";

// Every line of `out` that parses as a JSON object.
inline std::vector<json> parse_lines(const std::string& out) {
  std::vector<json> lines;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '{') continue;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) lines.push_back(std::move(j));
  }
  return lines;
}

struct ProbeRun {
  RunOutcome outcome;
  std::vector<json> lines;

  // Every line printed by probe command `cmd`.
  std::vector<json> all(const std::string& cmd) const {
    std::vector<json> out;
    for (const json& j : lines) {
      if (j.value("cmd", "") == cmd) out.push_back(j);
    }
    return out;
  }
  // The first line of `cmd` whose `key` equals `value`, or null.
  json find(const std::string& cmd, const std::string& key, const json& value) const {
    for (const json& j : lines) {
      if (j.value("cmd", "") == cmd && j.contains(key) && j[key] == value) return j;
    }
    return json();
  }
  json first(const std::string& cmd) const {
    for (const json& j : lines) {
      if (j.value("cmd", "") == cmd) return j;
    }
    return json();
  }
  // For failure messages: what corral and the probe said.
  std::string describe() const {
    std::ostringstream s;
    s << "corral exit " << outcome.exit_code << "\n--- stdout\n"
      << outcome.out << "--- stderr\n"
      << outcome.err << "--- report\n"
      << outcome.report.dump() << "\n";
    return s.str();
  }
};

// Runs `corral run <probe mount> <opts> -- /probe/corral_probe <args>`.
inline ProbeRun run_probe(std::vector<std::string> opts, std::vector<std::string> args,
                          std::chrono::seconds timeout = std::chrono::seconds(60)) {
  std::vector<std::string> all = ProbeDir::get().options();
  all.insert(all.end(), opts.begin(), opts.end());
  std::vector<std::string> cmd{kProbe};
  cmd.insert(cmd.end(), args.begin(), args.end());
  ProbeRun run;
  run.outcome = run_sandbox(all, cmd, {}, timeout);
  run.lines = parse_lines(run.outcome.out);
  return run;
}

// The two identities every in-sandbox check runs as.
struct Identity {
  const char* name;
  std::vector<std::string> opts;
};
inline void PrintTo(const Identity& id, std::ostream* os) { *os << id.name; }
inline std::vector<Identity> identities() {
  return {{"default-user", {}}, {"root", {"--root"}}};
}

inline bool is_root() { return geteuid() == 0; }

// gtest parameter names: letters, digits and '_' only.
inline std::string identity_test_name(const ::testing::TestParamInfo<Identity>& info) {
  std::string n = info.param.name;
  for (char& c : n) {
    if (c == '-') c = '_';
  }
  return n;
}

// A unique token for marker files and command lines.
inline std::string unique_token(const std::string& tag) {
  static int counter = 0;
  return "corral-" + tag + "-" + std::to_string(getpid()) + "-" + std::to_string(++counter) +
         "-" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000);
}

// ------------------------------------------------------------------ host side

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline bool path_exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

inline std::string proc_cmdline(pid_t pid) {
  std::string s = slurp("/proc/" + std::to_string(pid) + "/cmdline");
  while (!s.empty() && s.back() == '\0') s.pop_back();
  for (char& c : s) {
    if (c == '\0') c = ' ';
  }
  return s;
}

inline pid_t proc_ppid(pid_t pid) {
  std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  size_t close_paren = stat.rfind(')');
  if (close_paren == std::string::npos) return -1;
  std::istringstream in(stat.substr(close_paren + 2));
  std::string state;
  long ppid = -1;
  in >> state >> ppid;
  return static_cast<pid_t>(ppid);
}

// State letter from /proc/<pid>/stat ('Z' zombie), or 0 when gone.
inline char proc_state(pid_t pid) {
  std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  size_t close_paren = stat.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= stat.size()) return 0;
  return stat[close_paren + 2];
}

inline std::vector<pid_t> host_pids() {
  std::vector<pid_t> pids;
  DIR* d = opendir("/proc");
  if (d == nullptr) return pids;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long v = strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0') pids.push_back(static_cast<pid_t>(v));
  }
  closedir(d);
  return pids;
}

inline bool is_descendant(pid_t pid, pid_t ancestor) {
  for (int depth = 0; depth < 64 && pid > 1; ++depth) {
    pid = proc_ppid(pid);
    if (pid == ancestor) return true;
  }
  return false;
}

// Host processes whose command line contains `needle`.
inline std::vector<pid_t> find_host_processes(const std::string& needle) {
  std::vector<pid_t> found;
  for (pid_t pid : host_pids()) {
    if (pid == getpid()) continue;
    if (proc_cmdline(pid).find(needle) != std::string::npos) found.push_back(pid);
  }
  return found;
}

// Value of "Key:" in /proc/<pid>/status, trimmed.
inline std::string status_value(const std::string& status, const std::string& key) {
  std::istringstream in(status);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size() + 1, key + ":") == 0) {
      size_t v = line.find_first_not_of(" \t", key.size() + 1);
      return v == std::string::npos ? "" : line.substr(v);
    }
  }
  return "";
}

inline std::string ns_link(const std::string& proc_dir, const std::string& ns) {
  char buf[256];
  ssize_t n = readlink((proc_dir + "/ns/" + ns).c_str(), buf, sizeof buf - 1);
  return n < 0 ? std::string() : std::string(buf, static_cast<size_t>(n));
}

// A host process we start and own (killed by id in the destructor).
class HostChild {
 public:
  explicit HostChild(std::vector<std::string> argv) {
    pid_ = fork();
    if (pid_ == 0) {
      int null = open("/dev/null", O_RDWR);
      dup2(null, 0);
      dup2(null, 1);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~HostChild() { stop(); }
  pid_t pid() const { return pid_; }
  void stop() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
  pid_t pid_ = -1;
};

// `corral run ... -- /probe/corral_probe ...` started in the background:
// its stdout is read line by line while it runs; stop() ends it.
class BackgroundSandbox {
 public:
  BackgroundSandbox(std::vector<std::string> opts, std::vector<std::string> probe_args) {
    report_dir_ = make_temp_dir("bgreport");
    report_path_ = report_dir_ + "/report.json";
    std::vector<std::string> args{corral_bin(), "run", "--report", report_path_};
    for (const auto& o : ProbeDir::get().options()) args.push_back(o);
    args.insert(args.end(), opts.begin(), opts.end());
    args.push_back("--");
    args.push_back(kProbe);
    args.insert(args.end(), probe_args.begin(), probe_args.end());
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      int null = open("/dev/null", O_RDONLY);
      dup2(null, 0);
      dup2(out[1], 1);
      dup2(err[1], 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
  }
  ~BackgroundSandbox() {
    stop(SIGKILL, std::chrono::seconds(10));
    if (out_fd_ >= 0) close(out_fd_);
    if (err_fd_ >= 0) close(err_fd_);
    unlink(report_path_.c_str());
    rmdir(report_dir_.c_str());
  }

  pid_t pid() const { return pid_; }

  // Reads stdout until a probe line of `cmd` with `key` == `value` appears,
  // or `timeout` passes, or corral exits.
  std::optional<json> wait_for(const std::string& cmd, const std::string& key, const json& value,
                               std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      for (const json& j : parse_lines(out_)) {
        if (j.value("cmd", "") == cmd && j.contains(key) && j[key] == value) return j;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !pump(static_cast<int>(left.count()))) return std::nullopt;
    }
  }

  // Sends `sig` to corral and waits (bounded) for it to exit; returns its
  // exit status (or -1 if it did not exit in time).
  int stop(int sig, std::chrono::seconds grace) {
    if (pid_ <= 0) return exit_status_;
    kill(pid_, sig);
    auto deadline = std::chrono::steady_clock::now() + grace;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        pid_ = -1;
        drain();
        return exit_status_;
      }
      pump(50);
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return -1;
  }

  // Waits for corral to exit on its own.
  int wait(std::chrono::seconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (pid_ > 0 && std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        pid_ = -1;
        drain();
        return exit_status_;
      }
      pump(100);
    }
    return pid_ > 0 ? stop(SIGKILL, std::chrono::seconds(5)) : exit_status_;
  }

  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }
  json report() const {
    std::string text = slurp(report_path_);
    return text.empty() ? json() : json::parse(text, nullptr, false);
  }

 private:
  // Reads what is available within `ms`; false when both pipes are closed.
  bool pump(int ms) {
    pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    if (out_fd_ < 0 && err_fd_ < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      return false;
    }
    int r = poll(fds, 2, ms);
    if (r <= 0) return true;
    char buf[8192];
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      int& fd = i == 0 ? out_fd_ : err_fd_;
      if (n <= 0) {
        close(fd);
        fd = -1;
      } else {
        (i == 0 ? out_ : err_).append(buf, static_cast<size_t>(n));
      }
    }
    return true;
  }
  void drain() {
    for (int i = 0; i < 100 && (out_fd_ >= 0 || err_fd_ >= 0); ++i) {
      if (!pump(20)) break;
    }
  }

  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  int exit_status_ = -1;
  std::string out_, err_;
  std::string report_dir_, report_path_;
};

// The sandboxed probe process started by `sandbox`, found on the host by a
// unique token on its command line, among corral's descendants.
inline pid_t find_workload(const BackgroundSandbox& sandbox, const std::string& token,
                           std::chrono::seconds timeout = std::chrono::seconds(15)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    for (pid_t pid : find_host_processes(token)) {
      std::string cmd = proc_cmdline(pid);
      if (cmd.rfind(kProbe, 0) == 0 && is_descendant(pid, sandbox.pid())) return pid;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

// Waits until `pid` is gone (or a zombie nobody reaps: counted as gone).
inline bool wait_gone(pid_t pid, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    char s = proc_state(pid);
    if (s == 0 || s == 'Z' || s == 'X') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// Parses a hex capability mask from /proc status ("000001ffffffffff").
inline std::uint64_t cap_mask(const std::string& hex) {
  return hex.empty() ? ~0ULL : std::strtoull(hex.c_str(), nullptr, 16);
}

}  // namespace corral::testing
