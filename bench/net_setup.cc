// corral_bench_net_setup: how long does the network plumbing of one
// sandbox take (ADR 0005; target: setup <= 2 ms, no `ip` process)?
//
// A helper child unshares a network namespace and waits: it stands for a
// sandbox's init. Each round then times, with CLOCK_MONOTONIC:
//   - slot: NetSlot::acquire + release (lock file, flock, one RTM_GETLINK);
//   - setup: setup_sandbox_link (veth with its peer born in the namespace,
//     addresses, up, default route, IPv6 off on both ends);
//   - teardown: teardown_sandbox_link (delete and verify);
// and, as the baseline in the same run, the same with `ip` processes
// (fork/exec, waited for):
//   - ip_add / ip_del: `ip link add H type veth peer name eth0 netns PID`
//     and `ip link del H`: the veth alone, one process each;
//   - ip_add_1q: ip_add with one queue each way on both ends, as
//     setup_sandbox_link asks (`numtxqueues 1 numrxqueues 1`): without it,
//     creating a veth waits for an RCU grace period;
//   - ip_full: everything setup_sandbox_link does, the usual way: ip link
//     add, sysctl, ip addr add, ip link set up on the host end, then
//     nsenter + sysctl / ip for the sandbox end (8 processes).
// "cpu mean" is the mean user+system CPU time of the calling thread (ours)
// or of the `ip` processes (wait4). Rounds alternate which of the two goes
// first. The pool is a throwaway
// one (10.218.0.0/16, interfaces "cnb<n>", lock files in a temporary
// directory), so a running daemon is not disturbed.
//
// Usage: corral_bench_net_setup [--rounds N] [--warmup N] [--no-ip]
// Needs root. The last line of stdout is one JSON object with every figure.
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "netns/net_slot.h"
#include "netns/sandbox_link.h"

extern char** environ;

namespace {

using corral::net::NetSlot;
using corral::net::NetSlotPool;

double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double tv_ms(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) * 1e3 + static_cast<double>(tv.tv_usec) / 1e3;
}

// CPU time (user + system) of this thread, or of the reaped children.
double cpu_ms(int who) {
  rusage ru{};
  getrusage(who, &ru);
  return tv_ms(ru.ru_utime) + tv_ms(ru.ru_stime);
}

std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  in >> one;
  return one.empty() ? "?" : one;
}

struct Series {
  std::string name;
  std::vector<double> ms;
  std::vector<double> cpu_ms;  // user+system CPU: this thread's, or the ip processes'
  int failures = 0;
  std::string first_failure;

  void fail(const std::string& why) {
    if (failures++ == 0) first_failure = why;
  }
  double pct(double p) const { return pct_of(ms, p); }
  // The mean, not a percentile: CPU time is accounted in ticks, so one
  // run reads 0 or a whole tick, and only the mean is meaningful.
  double cpu_mean() const {
    double sum = 0;
    for (double v : cpu_ms) sum += v;
    return cpu_ms.empty() ? 0 : sum / static_cast<double>(cpu_ms.size());
  }
  static double pct_of(const std::vector<double>& values, double p) {
    if (values.empty()) return 0;
    std::vector<double> v = values;
    std::sort(v.begin(), v.end());
    std::size_t i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
  }
  double min() const { return ms.empty() ? 0 : *std::min_element(ms.begin(), ms.end()); }
};

// Runs argv (argv[0] an absolute path) with stdio on /dev/null; true when it
// exits 0.
bool run(const std::vector<std::string>& argv, std::string* why) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  for (int fd = 0; fd < 3; ++fd)
    posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0);
  pid_t pid;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    *why = argv[0] + ": posix_spawn: " + strerror(rc);
    return false;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  *why = cmd + ": exit status " + std::to_string(status);
  return false;
}

std::string find_tool(const char* name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    std::string p = std::string(dir) + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

[[noreturn]] void usage(const char* argv0, int code) {
  fprintf(code == 0 ? stdout : stderr,
          "usage: %s [--rounds N] [--warmup N] [--no-ip]\n"
          "  --rounds N  timed rounds (default 200)\n"
          "  --warmup N  untimed rounds first (default 5)\n"
          "  --no-ip     skip the `ip` baseline\n",
          argv0);
  exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 200;
  int warmup = 5;
  bool with_ip = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) {
      rounds = atoi(argv[++i]);
    } else if (a == "--warmup" && i + 1 < argc) {
      warmup = atoi(argv[++i]);
    } else if (a == "--no-ip") {
      with_ip = false;
    } else if (a == "-h" || a == "--help") {
      usage(argv[0], 0);
    } else {
      usage(argv[0], 2);
    }
  }
  if (rounds < 1) usage(argv[0], 2);
  if (geteuid() != 0) {
    fprintf(stderr, "corral_bench_net_setup: needs root (CAP_NET_ADMIN)\n");
    return 1;
  }
  const std::string ip = find_tool("ip");
  const std::string sysctl = find_tool("sysctl");
  const std::string nsenter = find_tool("nsenter");
  std::string ip_skip;
  if (!with_ip)
    ip_skip = "--no-ip";
  else if (ip.empty() || sysctl.empty() || nsenter.empty())
    ip_skip = "ip, sysctl or nsenter is missing";

  // The stand-in for a sandbox's init: a child in a new network namespace,
  // until its pipe closes.
  int hold[2];
  int ready[2];
  if (pipe2(hold, O_CLOEXEC) != 0 || pipe2(ready, O_CLOEXEC) != 0) {
    perror("pipe2");
    return 1;
  }
  pid_t child = fork();
  if (child < 0) {
    perror("fork");
    return 1;
  }
  if (child == 0) {
    close(hold[1]);
    close(ready[0]);
    char ok = unshare(CLONE_NEWNET) == 0 ? 'y' : 'n';
    (void)write(ready[1], &ok, 1);
    char c;
    (void)read(hold[0], &c, 1);
    _exit(0);
  }
  close(hold[0]);
  close(ready[1]);
  char ok = 'n';
  (void)read(ready[0], &ok, 1);
  close(ready[0]);
  const std::string ns_path = "/proc/" + std::to_string(child) + "/ns/net";
  int netns = ok == 'y' ? open(ns_path.c_str(), O_RDONLY | O_CLOEXEC) : -1;
  char lock_dir_tmpl[] = "/tmp/corral-bench-net-XXXXXX";
  const char* lock_dir = mkdtemp(lock_dir_tmpl);
  auto finish = [&](int code) {
    if (netns >= 0) close(netns);
    close(hold[1]);
    waitpid(child, nullptr, 0);
    if (lock_dir != nullptr) {
      std::string cmd = "rm -rf '" + std::string(lock_dir) + "'";
      if (system(cmd.c_str()) != 0) fprintf(stderr, "could not remove %s\n", lock_dir);
    }
    return code;
  };
  if (netns < 0 || lock_dir == nullptr) {
    fprintf(stderr, "corral_bench_net_setup: could not make the namespace or the lock dir\n");
    return finish(1);
  }
  auto pool = NetSlotPool::make("10.218.0.0/16", "cnb", lock_dir);
  if (!pool) {
    fprintf(stderr, "%s\n", pool.error().to_string().c_str());
    return finish(1);
  }

  Series slot_s{"slot"}, setup_s{"setup"}, teardown_s{"teardown"}, total_s{"setup+teardown"};
  Series ip_add{"ip_add"}, ip_add_1q{"ip_add_1q"}, ip_del{"ip_del"}, ip_full{"ip_full"};
  const std::string pid = std::to_string(child);
  const std::string enter = "--net=" + ns_path;

  auto ours = [&](bool timed) {
    double t0 = now_ms();
    auto slot = NetSlot::acquire(*pool);
    double t1 = now_ms();
    if (!slot) {
      if (timed) slot_s.fail(slot.error().to_string());
      return;
    }
    std::string why;
    double c2 = cpu_ms(RUSAGE_THREAD);
    double t2 = now_ms();
    auto st = corral::net::setup_sandbox_link(*slot, netns);
    double t3 = now_ms();
    double c3 = cpu_ms(RUSAGE_THREAD);
    if (!st) why = st.error().to_string();
    auto td = corral::net::teardown_sandbox_link(*slot);
    double t4 = now_ms();
    double c4 = cpu_ms(RUSAGE_THREAD);
    if (!td && why.empty()) why = td.error().to_string();
    if (!timed) return;
    slot_s.ms.push_back(t1 - t0);
    if (!why.empty()) {
      setup_s.fail(why);
      return;
    }
    setup_s.ms.push_back(t3 - t2);
    teardown_s.ms.push_back(t4 - t3);
    total_s.ms.push_back(t4 - t2);
    setup_s.cpu_ms.push_back(c3 - c2);
    teardown_s.cpu_ms.push_back(c4 - c3);
    total_s.cpu_ms.push_back(c4 - c2);
  };
  // Host end "cnbip0" (outside the slot names), its peer eth0 inside.
  auto theirs = [&](bool timed) {
    const std::string h = "cnbip0";
    std::string why;
    double c0 = cpu_ms(RUSAGE_CHILDREN);
    double t0 = now_ms();
    bool good =
        run({ip, "link", "add", h, "type", "veth", "peer", "name", "eth0", "netns", pid}, &why);
    double t1 = now_ms();
    double c1 = cpu_ms(RUSAGE_CHILDREN);
    good = good && run({ip, "link", "del", h}, &why);
    double t2 = now_ms();
    double c2 = cpu_ms(RUSAGE_CHILDREN);
    if (timed) {
      if (good) {
        ip_add.ms.push_back(t1 - t0);
        ip_del.ms.push_back(t2 - t1);
        ip_add.cpu_ms.push_back(c1 - c0);
        ip_del.cpu_ms.push_back(c2 - c1);
      } else {
        ip_add.fail(why);
      }
    }
    const std::vector<std::string> one_queue = {"numtxqueues", "1", "numrxqueues", "1"};
    std::vector<std::string> add_1q = {ip, "link", "add", h};
    add_1q.insert(add_1q.end(), one_queue.begin(), one_queue.end());
    for (const char* a : {"type", "veth", "peer", "name", "eth0"}) add_1q.push_back(a);
    add_1q.insert(add_1q.end(), one_queue.begin(), one_queue.end());
    add_1q.push_back("netns");
    add_1q.push_back(pid);
    double q0c = cpu_ms(RUSAGE_CHILDREN);
    double q0 = now_ms();
    bool good_1q = run(add_1q, &why);
    double q1 = now_ms();
    double q1c = cpu_ms(RUSAGE_CHILDREN);
    good_1q = good_1q && run({ip, "link", "del", h}, &why);
    if (timed) {
      if (good_1q) {
        ip_add_1q.ms.push_back(q1 - q0);
        ip_add_1q.cpu_ms.push_back(q1c - q0c);
      } else {
        ip_add_1q.fail(why);
      }
    }
    // The same work as setup_sandbox_link.
    double fc0 = cpu_ms(RUSAGE_CHILDREN);
    double f0 = now_ms();
    bool full =
        run({ip, "link", "add", h, "type", "veth", "peer", "name", "eth0", "netns", pid}, &why) &&
        run({sysctl, "-q", "-w", "net.ipv6.conf." + h + ".disable_ipv6=1"}, &why) &&
        run({ip, "addr", "add", "10.218.255.253/30", "dev", h}, &why) &&
        run({ip, "link", "set", h, "up"}, &why) &&
        run({nsenter, enter, sysctl, "-q", "-w", "net.ipv6.conf.eth0.disable_ipv6=1"}, &why) &&
        run({nsenter, enter, ip, "addr", "add", "10.218.255.254/30", "dev", "eth0"}, &why) &&
        run({nsenter, enter, ip, "link", "set", "eth0", "up"}, &why) &&
        run({nsenter, enter, ip, "route", "add", "default", "via", "10.218.255.253"}, &why);
    double f1 = now_ms();
    double fc1 = cpu_ms(RUSAGE_CHILDREN);
    std::string ignored;
    (void)run({ip, "link", "del", h}, &ignored);
    if (timed) {
      if (full) {
        ip_full.ms.push_back(f1 - f0);
        ip_full.cpu_ms.push_back(fc1 - fc0);
      } else {
        ip_full.fail(why);
      }
    }
  };

  printf("== network setup: %d rounds (+%d warm-up), %ld CPUs, load %s\n", rounds, warmup,
         sysconf(_SC_NPROCESSORS_ONLN), loadavg().c_str());
  const std::string load_before = loadavg();
  for (int r = 0; r < warmup + rounds; ++r) {
    const bool timed = r >= warmup;
    if (r % 2 == 0) {
      ours(timed);
      if (ip_skip.empty()) theirs(timed);
    } else {
      if (ip_skip.empty()) theirs(timed);
      ours(timed);
    }
  }
  const std::string load_after = loadavg();

  const double base = ip_add.ms.empty() ? 0 : ip_add.pct(0.5);
  printf("\n%-16s %5s %9s %9s %9s %9s %9s\n", "variant", "runs", "p50 ms", "p95 ms", "min ms",
         "vs ip_add", "cpu mean");
  std::string json = "{\"bench\":\"net_setup\",\"rounds\":" + std::to_string(rounds) +
                     ",\"loadavg_before\":" + load_before + ",\"loadavg_after\":" + load_after +
                     ",\"variants\":[";
  bool first = true;
  for (Series* s :
       {&slot_s, &setup_s, &teardown_s, &total_s, &ip_add, &ip_add_1q, &ip_del, &ip_full}) {
    bool is_ip = s == &ip_add || s == &ip_add_1q || s == &ip_del || s == &ip_full;
    if (is_ip && !ip_skip.empty()) {
      printf("%-16s skipped: %s\n", s->name.c_str(), ip_skip.c_str());
      continue;
    }
    char ratio[32] = "n/a";
    if (base > 0) snprintf(ratio, sizeof ratio, "%.2f", s->pct(0.5) / base);
    char cpu[32] = "n/a";
    if (!s->cpu_ms.empty()) snprintf(cpu, sizeof cpu, "%.3f", s->cpu_mean());
    printf("%-16s %5zu %9.3f %9.3f %9.3f %9s %9s\n", s->name.c_str(), s->ms.size(), s->pct(0.5),
           s->pct(0.95), s->min(), ratio, cpu);
    if (s->failures > 0)
      printf("  %d failures, first: %s\n", s->failures, s->first_failure.c_str());
    char buf[256];
    snprintf(buf, sizeof buf,
             "%s{\"name\":\"%s\",\"runs\":%zu,\"failures\":%d,\"p50_ms\":%.4f,\"p95_ms\":%.4f,"
             "\"min_ms\":%.4f,\"cpu_mean_ms\":%s}",
             first ? "" : ",", s->name.c_str(), s->ms.size(), s->failures, s->pct(0.5),
             s->pct(0.95), s->min(), s->cpu_ms.empty() ? "null" : cpu);
    json += buf;
    first = false;
  }
  json += "]}";
  const double setup_p50 = setup_s.pct(0.5);
  printf("\nsetup p50 %.3f ms, p95 %.3f ms: target <= 2 ms %s\n", setup_p50, setup_s.pct(0.95),
         setup_s.ms.empty() ? "NOT MEASURED"
         : setup_p50 <= 2.0 ? "met"
                            : "MISSED");
  printf("%s\n", json.c_str());
  const bool failed = setup_s.failures > 0 || slot_s.failures > 0;
  return finish(failed ? 1 : 0);
}
