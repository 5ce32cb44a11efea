// Posture checks from OUTSIDE (the gVisor habit, STYLE.md): start a real
// sandbox, find its workload among the host's processes and read what the
// kernel says about it, instead of trusting what the sandbox reports about
// itself. Namespaces all differ from the host's; capabilities, no_new_privs
// and seccomp as the policy says; its uids map to an unprivileged host
// range of its own; it sits in its own cgroup with the requested limits;
// killing corral takes it down.
#include <gtest/gtest.h>
#include <linux/capability.h>

#include <set>

#include "security/probe_session.h"

namespace corral::testing {
namespace {

struct IdRange {
  long inside = -1, outside = -1, count = -1;
};

std::vector<IdRange> parse_map(const std::string& text) {
  std::vector<IdRange> out;
  std::istringstream in(text);
  IdRange r;
  while (in >> r.inside >> r.outside >> r.count) out.push_back(r);
  return out;
}

// The cgroup directories of `pid` on the host, one per hierarchy, keyed by
// controller list ("" for v2). Found by trying the usual mount points.
struct CgroupDir {
  std::string controllers;
  std::string path;  // as in /proc/<pid>/cgroup
  std::string dir;   // host directory, empty if not found
};

std::vector<CgroupDir> cgroup_dirs(pid_t pid) {
  std::vector<CgroupDir> out;
  std::istringstream in(slurp("/proc/" + std::to_string(pid) + "/cgroup"));
  std::string line;
  while (std::getline(in, line)) {
    size_t a = line.find(':');
    size_t b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    CgroupDir d;
    d.controllers = line.substr(a + 1, b - a - 1);
    d.path = line.substr(b + 1);
    std::vector<std::string> candidates;
    if (d.controllers.empty()) {
      candidates = {"/sys/fs/cgroup" + d.path, "/sys/fs/cgroup/unified" + d.path};
    } else {
      std::string first = d.controllers.substr(0, d.controllers.find(','));
      if (first.rfind("name=", 0) == 0) first = first.substr(5);
      candidates = {"/sys/fs/cgroup/" + first + d.path,
                    "/sys/fs/cgroup/" + d.controllers + d.path};
    }
    for (const auto& c : candidates) {
      std::string procs = slurp(c + "/cgroup.procs");
      std::istringstream ps(procs);
      long p;
      bool listed = false;
      while (ps >> p) listed |= p == pid;
      if (listed) {
        d.dir = c;
        break;
      }
    }
    out.push_back(d);
  }
  return out;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Everything about one running sandbox's workload, as the host sees it.
void check_workload_posture(pid_t pid, bool root_inside) {
  std::string proc = "/proc/" + std::to_string(pid);
  std::string status = slurp(proc + "/status");
  ASSERT_FALSE(status.empty()) << "cannot read " << proc << "/status";

  const std::uint64_t eff = cap_mask(status_value(status, "CapEff"));
  if (root_inside) {
    // The documented set, and nothing of CAP_SYS_ADMIN & co. (Those act
    // only in the sandbox's own user namespace, checked below.)
    const std::uint64_t forbidden = (1ULL << CAP_SYS_ADMIN) | (1ULL << CAP_SYS_PTRACE) |
                                    (1ULL << CAP_SYS_MODULE) | (1ULL << CAP_NET_ADMIN) |
                                    (1ULL << CAP_SYS_RAWIO) | (1ULL << CAP_MKNOD) |
                                    (1ULL << CAP_DAC_READ_SEARCH) | (1ULL << CAP_SYS_BOOT) |
                                    (1ULL << CAP_SETPCAP) | (1ULL << CAP_BPF);
    EXPECT_EQ(eff & forbidden, 0u) << status_value(status, "CapEff");
  } else {
    EXPECT_EQ(eff, 0u) << "CapEff " << status_value(status, "CapEff");
    EXPECT_EQ(cap_mask(status_value(status, "CapPrm")), 0u);
    EXPECT_EQ(cap_mask(status_value(status, "CapBnd")), 0u);
  }
  EXPECT_EQ(cap_mask(status_value(status, "CapAmb")), 0u);
  EXPECT_EQ(status_value(status, "NoNewPrivs"), "1");
  EXPECT_EQ(status_value(status, "Seccomp"), "2");

  // Host view of its ids: no 0 anywhere (real, effective, saved, fs).
  for (const char* key : {"Uid", "Gid"}) {
    std::istringstream ids(status_value(status, key));
    long id;
    int n = 0;
    while (ids >> id) {
      ++n;
      EXPECT_NE(id, 0) << key << ": " << status_value(status, key);
    }
    EXPECT_EQ(n, 4) << key;
  }

  // Its user namespace maps onto a non-zero host range.
  for (const char* map : {"uid_map", "gid_map"}) {
    std::vector<IdRange> ranges = parse_map(slurp(proc + "/" + map));
    ASSERT_FALSE(ranges.empty()) << map;
    for (const IdRange& r : ranges) {
      EXPECT_GT(r.outside, 0) << map << " maps onto host id 0";
    }
  }

  // Every namespace differs from the host's (this test runs in the host's).
  for (const char* ns : {"user", "mnt", "pid", "ipc", "uts", "cgroup", "net"}) {
    std::string mine = ns_link("/proc/self", ns);
    std::string theirs = ns_link(proc, ns);
    ASSERT_FALSE(theirs.empty()) << "cannot read " << proc << "/ns/" << ns;
    EXPECT_NE(mine, theirs) << "the sandbox shares the host's " << ns << " namespace";
  }
}

TEST(HostPosture, WorkloadMatchesPolicy) {
  if (!is_root()) CORRAL_SKIP_OR_FAIL("security tests run as root");
  std::string token = unique_token("posture");
  BackgroundSandbox box({"--pids", "64", "--memory", "256Mi", "--timeout", "60s"},
                        {"sleep", "30", "/tmp/" + token});
  ASSERT_GT(box.pid(), 0);
  ASSERT_TRUE(box.wait_for("sleep", "state", "sleeping", std::chrono::seconds(30)).has_value())
      << box.out() << box.err();
  pid_t pid = find_workload(box, token);
  ASSERT_GT(pid, 0) << "workload not found among corral's descendants";

  check_workload_posture(pid, /*root_inside=*/false);

  // Its init (PID 1 inside): host root in the host user namespace (it
  // built the sandbox), not dumpable, hidden from the workload.
  pid_t init = proc_ppid(pid);
  std::string init_status = slurp("/proc/" + std::to_string(init) + "/status");
  std::cout << "init " << init << ": CapEff " << status_value(init_status, "CapEff")
            << ", Uid " << status_value(init_status, "Uid") << ", NoNewPrivs "
            << status_value(init_status, "NoNewPrivs") << ", Seccomp "
            << status_value(init_status, "Seccomp") << "\n";
  for (const char* ns : {"user", "mnt", "pid", "net"}) {
    std::cout << "  init ns/" << ns << " "
              << (ns_link("/proc/" + std::to_string(init), ns) == ns_link("/proc/self", ns)
                      ? "= host"
                      : "!= host")
              << "\n";
  }
  // Once the workload runs, init keeps only CAP_KILL (bounding set too),
  // has no_new_privs, and stays non-dumpable.
  EXPECT_EQ(status_value(init_status, "CapEff"), "0000000000000020") << init_status;
  EXPECT_EQ(status_value(init_status, "CapPrm"), "0000000000000020") << init_status;
  EXPECT_EQ(status_value(init_status, "CapBnd"), "0000000000000020") << init_status;
  EXPECT_EQ(status_value(init_status, "NoNewPrivs"), "1") << init_status;
  // init shares every namespace but user with the workload.
  for (const char* ns : {"mnt", "pid", "ipc", "uts", "net"}) {
    EXPECT_EQ(ns_link("/proc/" + std::to_string(init), ns),
              ns_link("/proc/" + std::to_string(pid), ns))
        << "init and workload in different " << ns << " namespaces";
  }

  // Its cgroup: under corral's parent, with the limits asked for.
  std::vector<CgroupDir> dirs = cgroup_dirs(pid);
  bool pids_checked = false, memory_checked = false;
  for (const CgroupDir& d : dirs) {
    bool is_v2 = d.controllers.empty();
    // On v2 the controllers enabled in the hierarchy are listed at its root
    // (a hybrid host may run v2 without any controller).
    std::string v2_controllers;
    if (is_v2 && !d.dir.empty()) {
      std::string root = d.dir.substr(0, d.dir.size() - (d.path == "/" ? 1 : d.path.size()));
      v2_controllers = slurp(root + "/cgroup.controllers");
    }
    bool has_pids = is_v2 ? v2_controllers.find("pids") != std::string::npos
                          : d.controllers.find("pids") != std::string::npos;
    bool has_memory = is_v2 ? v2_controllers.find("memory") != std::string::npos
                            : d.controllers.find("memory") != std::string::npos;
    if (!has_pids && !has_memory) continue;
    if (d.dir.empty()) continue;
    EXPECT_NE(d.path.find("corral"), std::string::npos)
        << "workload not in a corral cgroup: " << d.controllers << ":" << d.path;
    if (has_pids && path_exists(d.dir + "/pids.max")) {
      // --pids counts the workload's processes; corral's init may be
      // counted on top (64 + 1).
      std::string max = trim(slurp(d.dir + "/pids.max"));
      EXPECT_TRUE(max == "64" || max == "65") << d.dir << "/pids.max = " << max;
      pids_checked = true;
    }
    if (has_memory) {
      for (const char* f : {"memory.max", "memory.limit_in_bytes"}) {
        if (!path_exists(d.dir + "/" + f)) continue;
        EXPECT_EQ(trim(slurp(d.dir + "/" + f)), std::to_string(256ULL << 20)) << d.dir << "/" << f;
        memory_checked = true;
      }
    }
  }
  EXPECT_TRUE(pids_checked) << "no pids cgroup with pids.max found for " << pid;
  EXPECT_TRUE(memory_checked) << "no memory cgroup limit found for " << pid;

  // SIGKILL to corral: nothing of the sandbox survives it (init has
  // PDEATHSIG; the pid namespace dies with init).
  box.stop(SIGKILL, std::chrono::seconds(10));
  EXPECT_TRUE(wait_gone(pid, std::chrono::seconds(10))) << "workload survived SIGKILL of corral";
  EXPECT_TRUE(wait_gone(init, std::chrono::seconds(10))) << "init survived SIGKILL of corral";
  for (const CgroupDir& d : dirs) {
    if (!d.dir.empty() && d.path.find("corral") != std::string::npos && path_exists(d.dir)) {
      std::cout << "after SIGKILL of corral, cgroup left behind (for stale cleanup): " << d.dir
                << "\n";
    }
  }
}

TEST(HostPosture, RootWorkloadMatchesPolicy) {
  if (!is_root()) CORRAL_SKIP_OR_FAIL("security tests run as root");
  std::string token = unique_token("rootposture");
  BackgroundSandbox box({"--root", "--timeout", "60s"}, {"sleep", "30", "/tmp/" + token});
  ASSERT_TRUE(box.wait_for("sleep", "state", "sleeping", std::chrono::seconds(30)).has_value())
      << box.out() << box.err();
  pid_t pid = find_workload(box, token);
  ASSERT_GT(pid, 0);
  check_workload_posture(pid, /*root_inside=*/true);
  box.stop(SIGKILL, std::chrono::seconds(10));
  EXPECT_TRUE(wait_gone(pid, std::chrono::seconds(10)));
}

// Each sandbox owns its own host uid range (ARCHITECTURE.md "Isolation"):
// two running at once never overlap, so they never share an owner.
TEST(HostPosture, UidRangesAreUniquePerSandbox) {
  if (!is_root()) CORRAL_SKIP_OR_FAIL("security tests run as root");
  std::string t1 = unique_token("uid1"), t2 = unique_token("uid2");
  BackgroundSandbox a({"--timeout", "60s"}, {"sleep", "30", "/tmp/" + t1});
  BackgroundSandbox b({"--timeout", "60s"}, {"sleep", "30", "/tmp/" + t2});
  ASSERT_TRUE(a.wait_for("sleep", "state", "sleeping", std::chrono::seconds(30)).has_value())
      << a.out() << a.err();
  ASSERT_TRUE(b.wait_for("sleep", "state", "sleeping", std::chrono::seconds(30)).has_value())
      << b.out() << b.err();
  pid_t pa = find_workload(a, t1), pb = find_workload(b, t2);
  ASSERT_GT(pa, 0);
  ASSERT_GT(pb, 0);
  for (const char* map : {"uid_map", "gid_map"}) {
    auto ra = parse_map(slurp("/proc/" + std::to_string(pa) + "/" + map));
    auto rb = parse_map(slurp("/proc/" + std::to_string(pb) + "/" + map));
    ASSERT_FALSE(ra.empty());
    ASSERT_FALSE(rb.empty());
    for (const IdRange& x : ra) {
      for (const IdRange& y : rb) {
        bool overlap = x.outside < y.outside + y.count && y.outside < x.outside + x.count;
        EXPECT_FALSE(overlap) << map << ": [" << x.outside << "+" << x.count << ") and ["
                              << y.outside << "+" << y.count << ") overlap";
      }
    }
  }
  EXPECT_NE(status_value(slurp("/proc/" + std::to_string(pa) + "/status"), "Uid"),
            status_value(slurp("/proc/" + std::to_string(pb) + "/status"), "Uid"));
}

// SIGTERM to corral: a clean stop. The sandbox's processes are gone and so
// is its cgroup (C2 "cleanup: verify").
TEST(HostPosture, TerminatingCorralCleansUp) {
  if (!is_root()) CORRAL_SKIP_OR_FAIL("security tests run as root");
  std::string token = unique_token("term");
  BackgroundSandbox box({"--timeout", "60s"}, {"sleep", "30", "/tmp/" + token});
  ASSERT_TRUE(box.wait_for("sleep", "state", "sleeping", std::chrono::seconds(30)).has_value())
      << box.out() << box.err();
  pid_t pid = find_workload(box, token);
  ASSERT_GT(pid, 0);
  std::vector<CgroupDir> dirs = cgroup_dirs(pid);
  box.stop(SIGTERM, std::chrono::seconds(15));
  EXPECT_TRUE(wait_gone(pid, std::chrono::seconds(10))) << "workload survived SIGTERM of corral";
  for (const CgroupDir& d : dirs) {
    if (d.dir.empty() || d.path.find("corral") == std::string::npos) continue;
    EXPECT_FALSE(path_exists(d.dir)) << "cgroup left after SIGTERM: " << d.dir;
  }
  json report = box.report();
  std::cout << "report after SIGTERM: " << report.dump() << "\n";
  if (report.is_object()) {
    EXPECT_TRUE(report.contains("sandbox_id")) << report.dump();
    if (report.contains("residue")) {
      EXPECT_EQ(report["residue"], json::array()) << report.dump();
    }
  }
}

}  // namespace
}  // namespace corral::testing
