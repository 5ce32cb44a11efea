// cgroups on the real hierarchy, as root: the detected backend (v1 on the
// hybrid development hosts, v2 on most others) with real processes, real
// limits and real kills; and, on hybrid hosts, the v2 kill/processes path on
// the cgroup2 mount that holds none of memory/pids/cpu.
#include "jail/cgroup.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "base/scope_guard.h"
#include "support/sandbox_harness.h"
#include "sys/syscalls.h"

namespace corral {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

bool path_exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// The first of `dirs` holding `file`, joined; "" if none does.
std::string find_file(const std::vector<std::string>& dirs, const std::string& file) {
  for (const auto& d : dirs) {
    if (path_exists(d + "/" + file)) return d + "/" + file;
  }
  return {};
}

// A forked child that blocks until start() (so the parent can put it in a
// cgroup first), then runs `body` and _exits with its result. The body may
// write a line to `report` (a pipe the parent reads with read_report()).
// Killed and reaped when it goes out of scope.
class Child {
 public:
  explicit Child(std::function<int(int report_fd)> body) {
    int go[2], rep[2];
    if (pipe2(go, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe2: " << strerror(errno);
      return;
    }
    pid_ = fork();
    if (pid_ == 0) {
      ::close(go[1]);
      ::close(rep[0]);
      char c;
      if (::read(go[0], &c, 1) != 1) _exit(120);
      _exit(body(rep[1]));
    }
    ::close(go[0]);
    ::close(rep[1]);
    go_ = go[1];
    report_ = rep[0];
  }
  ~Child() {
    if (go_ >= 0) ::close(go_);
    if (report_ >= 0) ::close(report_);
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  void start() {
    ASSERT_EQ(::write(go_, "g", 1), 1);
    ::close(go_);
    go_ = -1;
  }
  // Reads up to a newline from the child's report pipe.
  std::string read_report() {
    std::string out;
    char c;
    while (::read(report_, &c, 1) == 1 && c != '\n') out.push_back(c);
    return out;
  }
  // waitpid status.
  int wait() {
    int status = 0;
    EXPECT_EQ(::waitpid(pid_, &status, 0), pid_);
    reaped_ = true;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int go_ = -1;
  int report_ = -1;
  bool reaped_ = false;
};

void report(int fd, const std::string& line) {
  std::string l = line + "\n";
  (void)!::write(fd, l.data(), l.size());
}

[[noreturn]] void sleep_forever() {
  for (;;) ::pause();
}

std::unique_ptr<CgroupManager> detect_or_skip(std::string* why) {
  if (geteuid() != 0) {
    *why = "cgroup integration tests need root";
    return nullptr;
  }
  auto m = CgroupManager::detect();
  if (!m) {
    *why = "no usable cgroups: " + m.error().to_string();
    return nullptr;
  }
  return std::move(*m);
}

std::string test_name(const char* tag) { return "test-" + std::to_string(getpid()) + "-" + tag; }

bool contains(const std::vector<pid_t>& v, pid_t p) {
  return std::find(v.begin(), v.end(), p) != v.end();
}

TEST(CgroupReal, LifecycleLimitsStatsKillDestroy) {
  std::string why;
  auto m = detect_or_skip(&why);
  if (!m) CORRAL_SKIP_OR_FAIL(why);
  std::printf("[ INFO     ] %s\n", m->describe().c_str());

  const std::string name = test_name("life");
  auto cg = m->create(name, {256u << 20, 0.5, 64});
  ASSERT_TRUE(cg) << cg.error().to_string();
  std::vector<std::string> paths = (*cg)->paths();
  ScopeGuard cleanup([&] { (void)(*cg)->destroy(); });

  // The limits, as the kernel shows them.
  if (m->version() == CgroupVersion::kV1) {
    EXPECT_EQ(read_text(find_file(paths, "memory.limit_in_bytes")), "268435456");
    std::string memsw = find_file(paths, "memory.memsw.limit_in_bytes");
    if (!memsw.empty()) {
      EXPECT_EQ(read_text(memsw), "268435456");
    }
    EXPECT_EQ(read_text(find_file(paths, "pids.max")), "64");
    EXPECT_EQ(read_text(find_file(paths, "cpu.cfs_period_us")), "100000");
    EXPECT_EQ(read_text(find_file(paths, "cpu.cfs_quota_us")), "50000");
    EXPECT_EQ((*cg)->clone_into_fd(), -1);
    // One `tasks` file per hierarchy, for init to join by itself.
    auto join = (*cg)->open_self_join();
    ASSERT_TRUE(join) << join.error().to_string();
    EXPECT_EQ(join->size(), paths.size());
  } else {
    EXPECT_EQ(read_text(find_file(paths, "memory.max")), "268435456");
    std::string swap = find_file(paths, "memory.swap.max");
    if (!swap.empty()) {
      EXPECT_EQ(read_text(swap), "0");
    }
    EXPECT_EQ(read_text(find_file(paths, "memory.oom.group")), "1");
    EXPECT_EQ(read_text(find_file(paths, "pids.max")), "64");
    EXPECT_EQ(read_text(find_file(paths, "cpu.max")), "50000 100000");
    EXPECT_GE((*cg)->clone_into_fd(), 0);
    auto join = (*cg)->open_self_join();
    ASSERT_TRUE(join) << join.error().to_string();
    EXPECT_TRUE(join->empty()) << "v2 clones init into its cgroup: nothing to join";
  }
  auto listed = m->list();
  ASSERT_TRUE(listed) << listed.error().to_string();
  EXPECT_TRUE(std::find(listed->begin(), listed->end(), name) != listed->end());

  // A child that burns a little CPU, forks three sleepers, and sleeps.
  Child child([](int rep) -> int {
    volatile std::uint64_t x = 0;
    for (std::uint64_t i = 0; i < 20'000'000; ++i) x = x + i;
    for (int i = 0; i < 3; ++i) {
      if (fork() == 0) sleep_forever();
    }
    report(rep, "ready");
    sleep_forever();
  });
  ASSERT_GT(child.pid(), 0);
  ASSERT_TRUE((*cg)->add_process(child.pid()));
  child.start();
  ASSERT_EQ(child.read_report(), "ready");

  auto procs = (*cg)->processes();
  ASSERT_TRUE(procs) << procs.error().to_string();
  EXPECT_TRUE(contains(*procs, child.pid()));
  EXPECT_EQ(procs->size(), 4u);

  auto s = (*cg)->stats();
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_EQ(s->pids_current, 4u);
  EXPECT_GT(s->memory_current_bytes, 0u);
  EXPECT_LE(s->memory_current_bytes, 256u << 20);
  EXPECT_GE(s->memory_peak_bytes, s->memory_current_bytes);
  EXPECT_GT(s->cpu_usage_ns, 0u);
  EXPECT_EQ(s->oom_kills, 0u);
  EXPECT_EQ(s->pids_max_hits, 0u);

  auto killed = (*cg)->kill_all();
  ASSERT_TRUE(killed) << killed.error().to_string();
  int status = child.wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  procs = (*cg)->processes();
  ASSERT_TRUE(procs);
  EXPECT_TRUE(procs->empty()) << procs->size() << " left";

  auto destroyed = (*cg)->destroy();
  ASSERT_TRUE(destroyed) << destroyed.error().to_string();
  for (const auto& p : paths) EXPECT_FALSE(path_exists(p)) << p;
  listed = m->list();
  ASSERT_TRUE(listed);
  EXPECT_TRUE(std::find(listed->begin(), listed->end(), name) == listed->end());
}

TEST(CgroupReal, MemoryLimitOomKills) {
  std::string why;
  auto m = detect_or_skip(&why);
  if (!m) CORRAL_SKIP_OR_FAIL(why);
  constexpr std::uint64_t kLimit = 32u << 20;
  auto cg = m->create(test_name("oom"), {kLimit, 0, 0});
  ASSERT_TRUE(cg) << cg.error().to_string();
  ScopeGuard cleanup([&] { (void)(*cg)->destroy(); });

  // Touches 1 MiB at a time, up to 512 MiB: far past the limit.
  Child child([](int) {
    for (int i = 0; i < 512; ++i) {
      char* p = static_cast<char*>(std::malloc(1 << 20));
      if (p == nullptr) return 3;
      std::memset(p, 0x5a, 1 << 20);
    }
    return 0;
  });
  ASSERT_GT(child.pid(), 0);
  ASSERT_TRUE((*cg)->add_process(child.pid()));
  child.start();
  int status = child.wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the allocating child was not OOM-killed; status " << status;

  auto s = (*cg)->stats();
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_GE(s->oom_kills, 1u);
  EXPECT_LE(s->memory_peak_bytes, kLimit);
  EXPECT_GT(s->memory_peak_bytes, kLimit / 2);
  auto destroyed = (*cg)->destroy();
  EXPECT_TRUE(destroyed) << destroyed.error().to_string();
}

TEST(CgroupReal, PidsLimitRefusesForks) {
  std::string why;
  auto m = detect_or_skip(&why);
  if (!m) CORRAL_SKIP_OR_FAIL(why);
  auto cg = m->create(test_name("pids"), {0, 0, 3});
  ASSERT_TRUE(cg) << cg.error().to_string();
  ScopeGuard cleanup([&] { (void)(*cg)->destroy(); });

  // Tries ten forks; with itself counted, only two fit under pids.max = 3.
  Child child([](int rep) -> int {
    int ok = 0, eagain = 0, other = 0;
    for (int i = 0; i < 10; ++i) {
      pid_t p = fork();
      if (p == 0) sleep_forever();
      if (p > 0) {
        ++ok;
      } else if (errno == EAGAIN) {
        ++eagain;
      } else {
        ++other;
      }
    }
    report(rep, std::to_string(ok) + " " + std::to_string(eagain) + " " + std::to_string(other));
    sleep_forever();
  });
  ASSERT_GT(child.pid(), 0);
  ASSERT_TRUE((*cg)->add_process(child.pid()));
  child.start();
  EXPECT_EQ(child.read_report(), "2 8 0");  // forked, refused with EAGAIN, other errors

  auto s = (*cg)->stats();
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_GE(s->pids_max_hits, 1u);
  EXPECT_EQ(s->pids_current, 3u);

  ASSERT_TRUE((*cg)->kill_all());
  int status = child.wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  auto destroyed = (*cg)->destroy();
  EXPECT_TRUE(destroyed) << destroyed.error().to_string();
}

// Every process forks as fast as it can (up to pids.max): kill_all must
// still leave nothing behind.
void fork_bomb_then_kill(CgroupManager& m, const std::string& name) {
  // Memory enough that pids.max binds first: at 256 MiB an ASan build's
  // 200 children hit the memory limit and stalled in reclaim.
  auto cg = m.create(name, {1024u << 20, 1, 200});
  ASSERT_TRUE(cg) << cg.error().to_string();
  ScopeGuard cleanup([&] { (void)(*cg)->destroy(); });
  Child child([](int rep) -> int {
    report(rep, "go");
    for (;;) (void)fork();
  });
  ASSERT_TRUE((*cg)->add_process(child.pid()));
  child.start();
  ASSERT_EQ(child.read_report(), "go");
  // Wait (bounded) until the bomb has hit pids.max: slower builds (ASan)
  // fork more slowly, and slower still on a busy host (30 s at most).
  auto s = (*cg)->stats();
  for (int i = 0; i < 600 && s && s->pids_max_hits == 0; ++i) {
    ::usleep(50 * 1000);
    s = (*cg)->stats();
  }
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_GT(s->pids_current, 10u);
  EXPECT_GE(s->pids_max_hits, 1u);

  auto killed = (*cg)->kill_all();
  ASSERT_TRUE(killed) << killed.error().to_string();
  int status = child.wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  auto procs = (*cg)->processes();
  ASSERT_TRUE(procs);
  EXPECT_TRUE(procs->empty()) << procs->size() << " left";
  auto destroyed = (*cg)->destroy();
  ASSERT_TRUE(destroyed) << destroyed.error().to_string();
  for (const auto& p : (*cg)->paths()) EXPECT_FALSE(path_exists(p)) << p;
}

// cgroup.kill on v2; freeze, kill, thaw on v1.
TEST(CgroupReal, KillAllStopsAForkBomb) {
  std::string why;
  auto m = detect_or_skip(&why);
  if (!m) CORRAL_SKIP_OR_FAIL(why);
  fork_bomb_then_kill(*m, test_name("bomb"));
}

// v1 with the freezer hierarchy hidden (a mountinfo copy without it): the
// kill loop alone, racing the forks, must still win.
TEST(CgroupReal, V1KillLoopWithoutFreezer) {
  std::string why;
  auto m = detect_or_skip(&why);
  if (!m) CORRAL_SKIP_OR_FAIL(why);
  // A plain skip: a host runs one cgroup version, and the v2 tests above run
  // on a v2 host; this one has nothing to test there.
  if (m->version() != CgroupVersion::kV1) GTEST_SKIP() << "v1 backend only; this host uses v2";
  std::string dir = testing::make_temp_dir("cgroup");
  std::string fixture = dir + "/mountinfo";
  ScopeGuard rm([&] {
    ::unlink(fixture.c_str());
    ::rmdir(dir.c_str());
  });
  {
    std::ifstream in("/proc/self/mountinfo");
    std::ofstream out(fixture);
    for (std::string line; std::getline(in, line);) {
      if (line.find(" - cgroup ") != std::string::npos &&
          line.find("freezer") != std::string::npos) {
        continue;
      }
      out << line << "\n";
    }
  }
  CgroupOptions o;
  o.mountinfo_path = fixture;
  auto plain = CgroupManager::detect(o);
  ASSERT_TRUE(plain) << plain.error().to_string();
  ASSERT_NE((*plain)->describe().find("no freezer"), std::string::npos) << (*plain)->describe();
  fork_bomb_then_kill(**plain, test_name("bomb-nofreeze"));
}

TEST(CgroupReal, ReopenByNameForStaleCleanup) {
  std::string why;
  auto m = detect_or_skip(&why);
  if (!m) CORRAL_SKIP_OR_FAIL(why);
  const std::string name = test_name("stale");
  auto cg = m->create(name, {64u << 20, 0, 8});
  ASSERT_TRUE(cg) << cg.error().to_string();
  ScopeGuard cleanup([&] { (void)(*cg)->destroy(); });
  Child child([](int) -> int { sleep_forever(); });
  ASSERT_TRUE((*cg)->add_process(child.pid()));
  child.start();

  // As a restarted daemon would: a fresh manager, find it, open it, destroy it.
  auto m2 = CgroupManager::detect();
  ASSERT_TRUE(m2) << m2.error().to_string();
  auto again = (*m2)->create(name, {});
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kAlreadyExists);
  auto stale = (*m2)->open(name);
  ASSERT_TRUE(stale) << stale.error().to_string();
  EXPECT_EQ((*stale)->paths(), (*cg)->paths());
  auto destroyed = (*stale)->destroy();
  ASSERT_TRUE(destroyed) << destroyed.error().to_string();
  int status = child.wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  for (const auto& p : (*cg)->paths()) EXPECT_FALSE(path_exists(p)) << p;
}

// The v2 backend's kill, processes and clone_into_fd on the real cgroup2
// mount, with no controllers. On a pure-v2 host the tests above already run
// the v2 backend with limits; on a hybrid host this is the only real v2 run.
TEST(CgroupReal, V2KillAndCloneIntoCgroupWithoutControllers) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("cgroup integration tests need root");
  std::string text = read_text("/proc/self/mountinfo");
  auto mounts = parse_cgroup_mounts(text);
  ASSERT_TRUE(mounts) << mounts.error().to_string();
  auto v2 = std::find_if(mounts->begin(), mounts->end(),
                         [](const CgroupMount& mt) { return mt.version == CgroupVersion::kV2; });
  if (v2 == mounts->end()) CORRAL_SKIP_OR_FAIL("no cgroup2 mount on this host");
  if (!path_exists(v2->mount_point + "/cgroup.kill") &&
      !path_exists(v2->mount_point + "/cgroup.procs")) {
    CORRAL_SKIP_OR_FAIL("cgroup2 at " + v2->mount_point + " is not usable");
  }
  std::string offered = read_text(v2->mount_point + "/cgroup.controllers");
  auto has = [&](const char* c) {
    std::istringstream in(offered);
    for (std::string w; in >> w;) {
      if (w == c) return true;
    }
    return false;
  };
  if (!(has("memory") && has("pids") && has("cpu"))) {
    std::printf(
        "[ NOTE     ] cgroup2 at %s offers only [%s]: memory, pids and cpu are bound to v1 "
        "hierarchies on this host, so the v2 backend runs here without controllers (kill, "
        "processes, clone_into_fd, destroy). Its limit writes (memory.max, memory.swap.max, "
        "memory.oom.group, pids.max, cpu.max, subtree_control) are covered only by the "
        "fake-tree unit tests (unit.CgroupV2Fake.*).\n",
        v2->mount_point.c_str(), offered.c_str());
  }
  auto m = CgroupManager::v2_at(v2->mount_point, {});
  ASSERT_TRUE(m) << m.error().to_string();
  auto cg = (*m)->create(test_name("v2"), {});
  ASSERT_TRUE(cg) << cg.error().to_string();
  ScopeGuard cleanup([&] { (void)(*cg)->destroy(); });
  std::string dir = (*cg)->paths().at(0);
  std::string rel = dir.substr(v2->mount_point.size());  // as /proc/<pid>/cgroup shows it

  // One child moved in with cgroup.procs, one born inside with clone3.
  Child moved([](int rep) -> int {
    if (fork() == 0) sleep_forever();
    report(rep, "ready");
    sleep_forever();
  });
  ASSERT_TRUE((*cg)->add_process(moved.pid()));
  moved.start();
  ASSERT_EQ(moved.read_report(), "ready");

  int fd = (*cg)->clone_into_fd();
  ASSERT_GE(fd, 0);
  clone_args args{};
  args.flags = CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<std::uint64_t>(fd);
  pid_t born = sys::clone3(&args, sizeof args);
  if (born == 0) sleep_forever();
  ASSERT_GT(born, 0) << "clone3(CLONE_INTO_CGROUP): " << strerror(errno);
  ScopeGuard reap([&] {
    ::kill(born, SIGKILL);
    ::waitpid(born, nullptr, 0);
  });
  std::string born_cgroup = read_text("/proc/" + std::to_string(born) + "/cgroup");
  EXPECT_NE(born_cgroup.find("0::" + rel), std::string::npos) << born_cgroup;

  auto procs = (*cg)->processes();
  ASSERT_TRUE(procs) << procs.error().to_string();
  EXPECT_TRUE(contains(*procs, moved.pid()));
  EXPECT_TRUE(contains(*procs, born));
  EXPECT_EQ(procs->size(), 3u);
  EXPECT_EQ(read_text(dir + "/cgroup.events").rfind("populated 1", 0), 0u);
  auto s = (*cg)->stats();  // cpu.stat only, without controllers
  ASSERT_TRUE(s) << s.error().to_string();

  auto killed = (*cg)->kill_all();
  ASSERT_TRUE(killed) << killed.error().to_string();
  int status = moved.wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  ASSERT_EQ(::waitpid(born, &status, 0), born);
  reap.dismiss();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  EXPECT_EQ(read_text(dir + "/cgroup.events").rfind("populated 0", 0), 0u);

  auto destroyed = (*cg)->destroy();
  ASSERT_TRUE(destroyed) << destroyed.error().to_string();
  EXPECT_FALSE(path_exists(dir));
}

}  // namespace
}  // namespace corral
