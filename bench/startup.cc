// corral_bench_startup: how long does it take to start and finish a
// trivial command (/bin/true) with each isolation tool, compared with a
// plain fork+exec?
//
// Every round runs every variant once, in an order that rotates from round
// to round, so a burst of machine noise lands on all variants alike. Each
// run is timed with CLOCK_MONOTONIC from just before posix_spawn() to just
// after wait4() returns: process creation, the tool's whole setup, the
// command, the tool's teardown and the reap. stdin comes from /dev/null,
// stdout and stderr go to /dev/null.
//
// It also reports memory, from one extra untimed run of each variant
// started with fork()+execve(): ru_maxrss from wait4() (the largest RSS of
// the launcher and of every process it reaped, KiB), and the launcher's own
// high-water mark (VmHWM in /proc/PID/status, read at its exit through a
// ptrace exit stop). The timed runs use posix_spawn(), whose vfork-style
// child would make ru_maxrss report this program's own RSS: at execve()
// Linux records the hiwater RSS of the replaced address space, which for a
// vfork child is the parent's.
//
// Usage: corral_bench_startup [--corral PATH] [--rounds N] [--warmup N]
// The last line of stdout is one JSON object with every figure.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

struct Variant {
  std::string name;
  std::vector<std::string> argv;
  std::string skip_reason;     // non-empty: not measured
  std::vector<double> ms;      // one per timed run
  std::vector<double> cpu_ms;  // user+system CPU of the run's whole process tree
  long tree_maxrss_kib = -1;   // ru_maxrss of the memory run
  long launcher_hwm_kib = -1;  // VmHWM of the launcher in the memory run
  int failures = 0;
  std::string first_failure;
};

double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// The absolute path of an executable found on PATH, or "" when absent.
std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(start, end - start) + "/" + name;
    if (end > start && access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

std::vector<char*> c_argv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (const auto& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

struct RunOutcome {
  int status = -1;  // wait status; -1 when the spawn failed
  double ms = 0;
  double cpu_ms = 0;
  std::string stderr_text;  // only when asked for
};

// Spawns argv with stdin/stdout on /dev/null and stderr on /dev/null (or a
// memfd whose content is returned when capture_stderr), waits, and times it.
RunOutcome run_once(const std::vector<std::string>& argv, int devnull, bool capture_stderr) {
  RunOutcome out;
  int err_fd = devnull;
  int memfd = -1;
  if (capture_stderr) {
    memfd = memfd_create("bench-stderr", MFD_CLOEXEC);
    if (memfd >= 0) err_fd = memfd;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, devnull, 0);
  posix_spawn_file_actions_adddup2(&fa, devnull, 1);
  posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
  auto args = c_argv(argv);

  pid_t pid;
  double t0 = now_ms();
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  if (rc == 0) {
    int status = -1;
    rusage ru{};
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
    }
    out.ms = now_ms() - t0;
    out.status = status;
    // wait4() reports the child together with every descendant it reaped.
    out.cpu_ms = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
                 static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
  } else {
    out.stderr_text = std::string("posix_spawn: ") + strerror(rc);
  }
  posix_spawn_file_actions_destroy(&fa);
  if (memfd >= 0) {
    char buf[4096];
    ssize_t n = pread(memfd, buf, sizeof buf - 1, 0);
    if (n > 0) out.stderr_text.assign(buf, static_cast<size_t>(n));
    close(memfd);
  }
  return out;
}

std::string describe_status(int status) {
  if (status == -1) return "could not start";
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by ") + strsignal(WTERMSIG(status));
  return "wait status " + std::to_string(status);
}

std::string first_line(const std::string& s) {
  std::string line = s.substr(0, s.find('\n'));
  return line.size() > 160 ? line.substr(0, 160) + "..." : line;
}

struct MemoryOutcome {
  long launcher_hwm_kib = -1;
  long tree_maxrss_kib = -1;
};

// Runs argv once under ptrace: VmHWM (KiB) of the launcher is read when it
// exits (stopped at PTRACE_EVENT_EXIT, its memory still exists; its own
// children are not traced), ru_maxrss when it is reaped. -1 when the run
// failed.
MemoryOutcome measure_memory(const std::vector<std::string>& argv, int devnull) {
  MemoryOutcome out;
  auto args = c_argv(argv);
  pid_t pid = fork();
  if (pid < 0) return out;
  if (pid == 0) {
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(devnull, 2);
    if (ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) _exit(126);
    execve(args[0], args.data(), environ);  // stops with SIGTRAP once loaded
    _exit(127);
  }
  long hwm = -1;
  bool first_stop = true;
  for (;;) {
    int status;
    rusage ru{};
    if (wait4(pid, &status, __WALL, &ru) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        out.launcher_hwm_kib = hwm;
        out.tree_maxrss_kib = ru.ru_maxrss;
      }
      break;
    }
    if (!WIFSTOPPED(status)) continue;
    int sig = WSTOPSIG(status);
    int event = status >> 16;
    int inject = 0;
    if (first_stop && sig == SIGTRAP) {
      first_stop = false;
      ptrace(PTRACE_SETOPTIONS, pid, nullptr, PTRACE_O_TRACEEXIT | PTRACE_O_EXITKILL);
    } else if (event == PTRACE_EVENT_EXIT) {
      std::ifstream in("/proc/" + std::to_string(pid) + "/status");
      std::string line;
      while (std::getline(in, line)) {
        if (line.rfind("VmHWM:", 0) == 0) hwm = std::strtol(line.c_str() + 6, nullptr, 10);
      }
    } else if (sig != SIGTRAP) {
      inject = sig;  // an ordinary signal: deliver it
    }
    ptrace(PTRACE_CONT, pid, nullptr, reinterpret_cast<void*>(static_cast<long>(inject)));
  }
  return out;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  if (p == 50) {
    size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  }
  // nearest rank
  size_t rank = static_cast<size_t>(std::max(1.0, std::ceil(p / 100.0 * v.size())));
  return v[std::min(rank, v.size()) - 1];
}

bool is_symlink(const char* path, std::string* target) {
  struct stat st;
  if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode)) return false;
  char buf[PATH_MAX];
  ssize_t n = readlink(path, buf, sizeof buf - 1);
  if (n <= 0) return false;
  target->assign(buf, static_cast<size_t>(n));
  return true;
}

bool is_dir(const char* path) {
  struct stat st;
  return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

// bwrap over read-only host directories, following the host's layout: on a
// merged-/usr host /bin, /lib, ... are symlinks into /usr and are recreated
// as symlinks; otherwise they are bound read-only too.
std::vector<std::string> bwrap_argv(const std::string& bwrap, const std::string& cmd) {
  std::vector<std::string> a = {bwrap, "--unshare-all", "--ro-bind", "/usr", "/usr"};
  for (const char* top : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    std::string target;
    if (is_symlink(top, &target)) {
      a.insert(a.end(), {"--symlink", target, top});
    } else if (is_dir(top)) {
      a.insert(a.end(), {"--ro-bind", top, top});
    }
  }
  a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", cmd});
  return a;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

std::string kib(long v) { return v < 0 ? "n/a" : std::to_string(v) + " KiB"; }

// The 1-minute load average: a busy machine makes every figure slower.
std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  in >> one;
  return one.empty() ? "?" : one;
}

[[noreturn]] void usage(const char* argv0, int code) {
  fprintf(code == 0 ? stdout : stderr,
          "usage: %s [--corral PATH] [--rounds N] [--warmup N]\n"
          "  --corral PATH  the corral binary (default: ../corral next to this program)\n"
          "  --rounds N     timed rounds; each runs every variant once (default 200)\n"
          "  --warmup N     untimed rounds first (default 5)\n",
          argv0);
  exit(code);
}

std::string default_corral_path() {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "corral";
  std::string dir(self, static_cast<size_t>(n));
  dir = dir.substr(0, dir.rfind('/'));
  return dir.substr(0, dir.rfind('/')) + "/corral";
}

}  // namespace

int main(int argc, char** argv) {
  std::string corral = default_corral_path();
  int rounds = 200;
  int warmup = 5;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(argv[0], 2);
      return argv[++i];
    };
    if (arg == "--corral") {
      corral = value();
    } else if (arg == "--rounds") {
      rounds = atoi(value().c_str());
    } else if (arg == "--warmup") {
      warmup = atoi(value().c_str());
    } else if (arg == "-h" || arg == "--help") {
      usage(argv[0], 0);
    } else {
      usage(argv[0], 2);
    }
  }
  if (rounds < 1 || warmup < 0) usage(argv[0], 2);

  // Above 2, so that dup2() onto 0, 1 and 2 in the children always copies.
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull >= 0 && devnull <= 2) devnull = fcntl(devnull, F_DUPFD_CLOEXEC, 3);
  if (devnull < 0) {
    perror("/dev/null");
    return 1;
  }
  const std::string true_bin = find_program("true");
  if (true_bin.empty()) {
    fprintf(stderr, "no `true` on PATH\n");
    return 1;
  }

  std::vector<Variant> variants;
  variants.push_back({"fork_exec", {true_bin}});
  {
    Variant v{"unshare", {}};
    std::string unshare = find_program("unshare");
    if (unshare.empty()) v.skip_reason = "unshare (util-linux) is not installed";
    v.argv = {unshare, "--user", "--map-root-user", "--mount", "--pid", "--fork",
              "--ipc", "--uts",  "--cgroup",        "--net",   true_bin};
    variants.push_back(v);
  }
  {
    Variant v{"bwrap", {}};
    std::string bwrap = find_program("bwrap");
    if (bwrap.empty()) v.skip_reason = "bwrap is not installed (scripts/install-deps installs it)";
    v.argv = bwrap_argv(bwrap, true_bin);
    variants.push_back(v);
  }
  {
    Variant v{"corral", {corral, "run", "--", true_bin}};
    if (access(corral.c_str(), X_OK) != 0)
      v.skip_reason = corral + " is not executable (build it: ninja -C build corral)";
    variants.push_back(v);
  }

  // Warm-up: fills caches, and finds out which variants work at all.
  for (auto& v : variants) {
    if (!v.skip_reason.empty()) continue;
    for (int i = 0; i < std::max(1, warmup); ++i) {
      RunOutcome r = run_once(v.argv, devnull, true);
      if (r.status != 0) {
        v.skip_reason = "fails here (" + describe_status(r.status) + ")";
        if (!r.stderr_text.empty()) v.skip_reason += ": " + first_line(r.stderr_text);
        break;
      }
    }
  }
  for (auto& v : variants) {
    if (!v.skip_reason.empty()) printf("skipping %s: %s\n", v.name.c_str(), v.skip_reason.c_str());
  }
  if (!variants[0].skip_reason.empty()) {
    fprintf(stderr, "the fork/exec baseline does not work; nothing to compare with\n");
    return 1;
  }

  const std::string load_before = loadavg();
  printf("%d rounds, each running every variant once in rotating order (%d warm-up rounds)\n",
         rounds, warmup);
  fflush(stdout);
  const size_t n = variants.size();
  for (int round = 0; round < rounds; ++round) {
    for (size_t k = 0; k < n; ++k) {
      Variant& v = variants[(static_cast<size_t>(round) + k) % n];
      if (!v.skip_reason.empty()) continue;
      RunOutcome r = run_once(v.argv, devnull, false);
      if (r.status != 0) {
        if (v.failures++ == 0) v.first_failure = describe_status(r.status);
        continue;
      }
      v.ms.push_back(r.ms);
      v.cpu_ms.push_back(r.cpu_ms);
    }
  }
  for (auto& v : variants) {
    if (!v.skip_reason.empty()) continue;
    MemoryOutcome m = measure_memory(v.argv, devnull);
    v.launcher_hwm_kib = m.launcher_hwm_kib;
    v.tree_maxrss_kib = m.tree_maxrss_kib;
  }
  const std::string load_after = loadavg();

  const double base = percentile(variants[0].ms, 50);
  const double cpu_base = percentile(variants[0].cpu_ms, 50);
  auto ratio = [](double x, double b) { return b > 0 ? x / b : 0.0; };
  auto min_of = [](const std::vector<double>& v) {
    return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end());
  };
  printf("\n%-10s %5s %10s %9s %9s %8s %9s %8s %12s %12s\n", "variant", "runs", "median ms",
         "p90 ms", "min ms", "ratio", "cpu ms", "cpu x", "tree maxrss", "launcher HWM");
  for (auto& v : variants) {
    if (!v.skip_reason.empty()) {
      printf("%-10s %5s  (skipped: %s)\n", v.name.c_str(), "-", v.skip_reason.c_str());
      continue;
    }
    double med = percentile(v.ms, 50);
    double cpu = percentile(v.cpu_ms, 50);
    printf("%-10s %5zu %10.3f %9.3f %9.3f %7.2fx %9.3f %7.2fx %12s %12s\n", v.name.c_str(),
           v.ms.size(), med, percentile(v.ms, 90), min_of(v.ms), ratio(med, base), cpu,
           ratio(cpu, cpu_base), kib(v.tree_maxrss_kib).c_str(), kib(v.launcher_hwm_kib).c_str());
    if (v.failures > 0)
      printf("  %s: %d failed run(s), first: %s\n", v.name.c_str(), v.failures,
             v.first_failure.c_str());
  }
  printf("\ncommands:\n");
  for (auto& v : variants) printf("  %-10s %s\n", v.name.c_str(), join(v.argv).c_str());
  printf(
      "\nratio = median / fork_exec median. cpu ms = median user+system CPU time of the whole\n"
      "process tree (wait4 rusage), cpu x = its ratio to fork_exec's. tree maxrss = ru_maxrss:\n"
      "the largest RSS of the launcher and of every process it reaped. launcher HWM = the\n"
      "launcher's own VmHWM. Both memory figures come from one extra untimed run.\n"
      "load average (1 min): %s before, %s after; %ld online CPUs\n\n",
      load_before.c_str(), load_after.c_str(), sysconf(_SC_NPROCESSORS_ONLN));

  // One JSON object on the last line.
  std::string j = "{\"bench\":\"startup\",\"rounds\":" + std::to_string(rounds) +
                  ",\"warmup\":" + std::to_string(warmup) +
                  ",\"cpus\":" + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) +
                  ",\"loadavg_before\":" + load_before + ",\"loadavg_after\":" + load_after +
                  ",\"variants\":{";
  bool first = true;
  for (auto& v : variants) {
    if (!first) j += ",";
    first = false;
    j += "\"" + v.name + "\":{";
    if (!v.skip_reason.empty()) {
      j += "\"skipped\":\"" + json_escape(v.skip_reason) + "\"}";
      continue;
    }
    char buf[512];
    double med = percentile(v.ms, 50);
    double cpu = percentile(v.cpu_ms, 50);
    snprintf(buf, sizeof buf,
             "\"runs\":%zu,\"failures\":%d,\"median_ms\":%.4f,\"p90_ms\":%.4f,\"min_ms\":%.4f,"
             "\"ratio\":%.3f,\"cpu_median_ms\":%.4f,\"cpu_ratio\":%.3f,\"tree_maxrss_kib\":%ld,"
             "\"launcher_hwm_kib\":%ld}",
             v.ms.size(), v.failures, med, percentile(v.ms, 90), min_of(v.ms), ratio(med, base),
             cpu, ratio(cpu, cpu_base), v.tree_maxrss_kib, v.launcher_hwm_kib);
    j += buf;
  }
  j += "}}";
  printf("%s\n", j.c_str());
  return 0;
}
