// cgroup detection (mountinfo fixtures) and both backends run against a
// fake cgroup tree: plain directories in a temp dir whose control files the
// test creates the way the kernel would (CgroupFakeKernel), so each test can
// assert exactly which file got which value.
#include "jail/cgroup.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace corral {
namespace {

namespace fs = std::filesystem;

// /proc/self/mountinfo of the development host, verbatim (hybrid: v1
// controllers each in their own hierarchy, cpu and cpuacct apart; cgroup2
// at /sys/fs/cgroup/unified).
constexpr const char* kHybridHost =
    "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
    "23 27 0:22 / /sys rw,relatime - sysfs sysfs rw\n"
    "24 27 0:6 / /dev rw,relatime - devtmpfs devtmpfs "
    "rw,size=12334492k,nr_inodes=3083623,mode=755\n"
    "25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24684092k\n"
    "26 24 0:24 / /dev/pts rw,relatime - devpts devpts rw,mode=600,ptmxmode=000\n"
    "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534\n"
    "28 27 0:25 / /mnt/sandboxing/model_tools_env/v1/python ro,nosuid,nodev,relatime - tmpfs "
    "model_tools_unavailable ro,size=4k,mode=755\n"
    "29 26 0:26 / /dev/pts rw,relatime - devpts devpts rw,mode=600,ptmxmode=000\n"
    "30 25 0:27 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24684092k\n"
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices\n"
    "37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
    "38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

// A systemd host in the default unified mode (Debian 11+, Fedora, Ubuntu 21.10+).
constexpr const char* kPureV2 =
    "21 26 0:20 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "26 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n"
    "30 21 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";

// An older systemd host in legacy mode: v1 only, cpu and cpuacct co-mounted.
constexpr const char* kV1Only =
    "26 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "25 21 0:23 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755\n"
    "27 25 0:24 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:10 - cgroup "
    "cgroup rw,xattr,name=systemd\n"
    "30 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:13 - cgroup "
    "cgroup rw,cpu,cpuacct\n"
    "31 25 0:28 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:14 - cgroup "
    "cgroup rw,memory\n"
    "32 25 0:29 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup "
    "rw,pids\n"
    "33 25 0:30 / /sys/fs/cgroup/net_cls,net_prio rw,nosuid,nodev,noexec,relatime shared:16 - "
    "cgroup cgroup rw,net_cls,net_prio\n";

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// --------------------------------------------------------------------------
// mountinfo parsing

TEST(CgroupMountinfo, HybridHostVerbatim) {
  auto mounts = parse_cgroup_mounts(kHybridHost);
  ASSERT_TRUE(mounts) << mounts.error().to_string();
  ASSERT_EQ(mounts->size(), 10u);
  std::map<std::string, CgroupMount> by_point;
  for (const auto& m : *mounts) by_point[m.mount_point] = m;
  EXPECT_EQ(by_point["/sys/fs/cgroup/cpu"].controllers, std::vector<std::string>{"cpu"});
  EXPECT_EQ(by_point["/sys/fs/cgroup/cpuacct"].controllers, std::vector<std::string>{"cpuacct"});
  EXPECT_EQ(by_point["/sys/fs/cgroup/memory"].controllers, std::vector<std::string>{"memory"});
  EXPECT_EQ(by_point["/sys/fs/cgroup/pids"].controllers, std::vector<std::string>{"pids"});
  EXPECT_EQ(by_point["/sys/fs/cgroup/memory"].version, CgroupVersion::kV1);
  EXPECT_EQ(by_point["/sys/fs/cgroup/memory"].root, "/");
  EXPECT_TRUE(by_point["/sys/fs/cgroup/systemd"].controllers.empty());
  EXPECT_EQ(by_point["/sys/fs/cgroup/systemd"].name, "systemd");
  EXPECT_EQ(by_point["/sys/fs/cgroup/unified"].version, CgroupVersion::kV2);
  EXPECT_TRUE(by_point["/sys/fs/cgroup/unified"].controllers.empty());  // read at detect()
}

TEST(CgroupMountinfo, PureV2WithOptionalFields) {
  auto mounts = parse_cgroup_mounts(kPureV2);
  ASSERT_TRUE(mounts) << mounts.error().to_string();
  ASSERT_EQ(mounts->size(), 1u);
  EXPECT_EQ((*mounts)[0].version, CgroupVersion::kV2);
  EXPECT_EQ((*mounts)[0].mount_point, "/sys/fs/cgroup");
}

TEST(CgroupMountinfo, V1OnlyCoMounted) {
  auto mounts = parse_cgroup_mounts(kV1Only);
  ASSERT_TRUE(mounts) << mounts.error().to_string();
  ASSERT_EQ(mounts->size(), 5u);
  EXPECT_EQ((*mounts)[0].name, "systemd");
  EXPECT_EQ((*mounts)[1].mount_point, "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ((*mounts)[1].controllers, (std::vector<std::string>{"cpu", "cpuacct"}));
  EXPECT_EQ((*mounts)[4].controllers, (std::vector<std::string>{"net_cls", "net_prio"}));
}

TEST(CgroupMountinfo, EscapedMountPointAndOvermount) {
  auto mounts = parse_cgroup_mounts(
      "40 31 0:37 / /tmp/my\\040cgroups rw - cgroup2 cgroup2 rw\n"
      "41 31 0:38 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
      "42 31 0:39 / /sys/fs/cgroup/memory rw - tmpfs tmpfs rw\n");
  ASSERT_TRUE(mounts) << mounts.error().to_string();
  ASSERT_EQ(mounts->size(), 1u);  // the memory hierarchy is hidden by the tmpfs on top
  EXPECT_EQ((*mounts)[0].mount_point, "/tmp/my cgroups");
}

TEST(CgroupMountinfo, BrokenLinesNameTheLine) {
  auto no_sep = parse_cgroup_mounts(std::string(kPureV2) +
                                    "31 30 0:27 / /sys/fs/cgroup/x rw cgroup2 cgroup2 rw\n");
  ASSERT_FALSE(no_sep);
  EXPECT_NE(no_sep.error().message.find("line 4"), std::string::npos) << no_sep.error().message;
  EXPECT_NE(no_sep.error().message.find("separator"), std::string::npos);
  EXPECT_FALSE(no_sep.error().hint.empty());

  auto truncated = parse_cgroup_mounts("30 21 0:26 / /sys/fs/cgroup rw - cgroup2\n");
  ASSERT_FALSE(truncated);
  EXPECT_NE(truncated.error().message.find("line 1"), std::string::npos);
  EXPECT_NE(truncated.error().message.find("after"), std::string::npos);

  auto garbage = parse_cgroup_mounts("hello world this is not mountinfo - at all x\n");
  ASSERT_FALSE(garbage);
  EXPECT_NE(garbage.error().message.find("mount ids"), std::string::npos);
}

TEST(CgroupNames, Validation) {
  for (const char* good : {"a", "sb-1", "test-123", "A.b_c-9", "x.y"}) {
    EXPECT_TRUE(valid_cgroup_name(good)) << good;
  }
  for (const char* bad : {"", ".", "..", "a..b", "../x", "a/b", "x y", "a\nb", "é"}) {
    EXPECT_FALSE(valid_cgroup_name(bad)) << bad;
  }
  EXPECT_FALSE(valid_cgroup_name(std::string(129, 'a')));
}

// --------------------------------------------------------------------------
// Fake cgroup trees

class FakeTree {
 public:
  FakeTree() {
    std::string tmpl = (fs::temp_directory_path() / "corral-cgroup-unit-XXXXXX").string();
    char* d = mkdtemp(tmpl.data());
    EXPECT_NE(d, nullptr);
    root_ = d;
  }
  ~FakeTree() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  FakeTree(const FakeTree&) = delete;
  FakeTree& operator=(const FakeTree&) = delete;

  const std::string& root() const { return root_; }
  std::string at(const std::string& rel) const { return root_ + rel; }

  static void write(const std::string& path, const std::string& content) {
    std::ofstream(path, std::ios::trunc) << content;
  }
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  static bool exists(const std::string& path) {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0;
  }

  std::string write_mountinfo(const std::string& text) const {
    std::string p = at("/mountinfo");
    write(p, text);
    return p;
  }

  // A cgroup2 mount root with the files the kernel shows at the root.
  void make_v2_root(const std::string& mount, const std::string& controllers,
                    const std::string& subtree_control = "") {
    fs::create_directories(mount);
    write(mount + "/cgroup.controllers", controllers + "\n");
    write(mount + "/cgroup.subtree_control", subtree_control);
    write(mount + "/cgroup.procs", "1\n");
    v2_controllers_ = controllers;
  }

  // Stands in for cgroupfs: fills each new directory with the control files
  // the kernel would create (for v2, or for the v1 hierarchy it is in), and
  // empties it before rmdir.
  CgroupFakeKernel kernel() {
    CgroupFakeKernel k;
    k.after_mkdir = [this](const std::string& dir) {
      ++mkdirs_;
      populate(dir);
      if (extra_) extra_(dir);
    };
    k.before_rmdir = [](const std::string& dir) {
      for (const auto& e : fs::directory_iterator(dir)) {
        if (e.is_regular_file()) fs::remove(e.path());
      }
    };
    return k;
  }
  // Runs after the standard files are made (e.g. to break one of them).
  void on_mkdir(std::function<void(const std::string&)> f) { extra_ = std::move(f); }
  // v1 hierarchies: mount point -> controllers, to know which files to make.
  void add_v1_hierarchy(const std::string& mount, std::vector<std::string> controllers) {
    fs::create_directories(mount);
    write(mount + "/cgroup.procs", "1\n");
    v1_[mount] = std::move(controllers);
  }
  int mkdirs() const { return mkdirs_; }

 private:
  void populate(const std::string& dir) {
    for (const auto& entry : v1_) {
      const std::string& mount = entry.first;
      const std::vector<std::string>& controllers = entry.second;  // clang 14: no capture of bindings
      if (dir.rfind(mount + "/", 0) != 0) continue;
      auto has = [&](const char* c) {
        return std::find(controllers.begin(), controllers.end(), c) != controllers.end();
      };
      write(dir + "/cgroup.procs", "");
      write(dir + "/tasks", "");
      if (has("memory")) {
        for (const char* f : {"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"}) {
          write(dir + "/" + f, "9223372036854771712\n");
        }
        for (const char* f : {"memory.usage_in_bytes", "memory.memsw.usage_in_bytes",
                              "memory.max_usage_in_bytes", "memory.memsw.max_usage_in_bytes"}) {
          write(dir + "/" + f, "0\n");
        }
        write(dir + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
      }
      if (has("pids")) {
        write(dir + "/pids.max", "max\n");
        write(dir + "/pids.current", "0\n");
        write(dir + "/pids.events", "max 0\n");
      }
      if (has("cpu")) {
        write(dir + "/cpu.cfs_period_us", "100000\n");
        write(dir + "/cpu.cfs_quota_us", "-1\n");
      }
      if (has("cpuacct")) write(dir + "/cpuacct.usage", "0\n");
      if (has("freezer")) write(dir + "/freezer.state", "THAWED\n");
      return;
    }
    // cgroup v2. (The kernel would offer what the parent enabled; a plain
    // file cannot merge "+pids" into "memory cpu", so the fake offers what
    // the mount root offers, and the tests check subtree_control directly.)
    std::string offered = v2_controllers_;
    write(dir + "/cgroup.controllers", offered + "\n");
    write(dir + "/cgroup.subtree_control", "");
    write(dir + "/cgroup.procs", "");
    write(dir + "/cgroup.events", "populated 0\nfrozen 0\n");
    write(dir + "/cgroup.kill", "");
    write(dir + "/cgroup.freeze", "0\n");
    write(dir + "/cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n");
    for (const auto& c : words(offered)) {
      if (c == "memory") {
        write(dir + "/memory.max", "max\n");
        write(dir + "/memory.swap.max", "max\n");
        write(dir + "/memory.oom.group", "0\n");
        write(dir + "/memory.current", "0\n");
        write(dir + "/memory.swap.current", "0\n");
        write(dir + "/memory.peak", "0\n");
        write(dir + "/memory.events",
              "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n");
      } else if (c == "pids") {
        write(dir + "/pids.max", "max\n");
        write(dir + "/pids.current", "0\n");
        write(dir + "/pids.events", "max 0\n");
      } else if (c == "cpu") {
        write(dir + "/cpu.max", "max 100000\n");
      }
    }
  }

  std::string root_;
  std::map<std::string, std::vector<std::string>> v1_;
  std::string v2_controllers_;
  std::function<void(const std::string&)> extra_;
  int mkdirs_ = 0;
};

// --------------------------------------------------------------------------
// Detection

TEST(CgroupDetect, HybridHostPicksV1WithSeparateCpuAndCpuacct) {
  FakeTree t;
  std::string sys = t.at("/sys/fs/cgroup");
  for (const char* c :
       {"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids"}) {
    t.add_v1_hierarchy(sys + "/" + c, {c});
  }
  fs::create_directories(sys + "/systemd");
  t.make_v2_root(sys + "/unified", "hugetlb");
  CgroupOptions o;
  o.mountinfo_path = t.write_mountinfo(replace_all(kHybridHost, "/sys/fs/cgroup", sys));
  o.fake_kernel = t.kernel();
  auto m = CgroupManager::detect(o);
  ASSERT_TRUE(m) << m.error().to_string();
  EXPECT_EQ((*m)->version(), CgroupVersion::kV1);
  std::string d = (*m)->describe();
  EXPECT_NE(d.find("cpuacct at " + sys + "/cpuacct"), std::string::npos) << d;
  EXPECT_NE(d.find("kill freezes first"), std::string::npos) << d;

  auto cg = (*m)->create("sb1", {64u << 20, 0.5, 32});
  ASSERT_TRUE(cg) << cg.error().to_string();
  // One directory per used hierarchy, none elsewhere.
  std::vector<std::string> expected;
  for (const char* c : {"memory", "pids", "cpu", "cpuacct", "freezer"}) {
    expected.push_back(sys + "/" + c + "/corral/sb1");
  }
  auto paths = (*cg)->paths();
  std::sort(paths.begin(), paths.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(paths, expected);
  for (const char* c : {"cpuset", "devices", "blkio", "systemd", "unified"}) {
    EXPECT_FALSE(FakeTree::exists(sys + "/" + c + "/corral")) << c;
  }
  EXPECT_EQ(FakeTree::read(sys + "/memory/corral/sb1/memory.limit_in_bytes"), "67108864");
  EXPECT_EQ(FakeTree::read(sys + "/memory/corral/sb1/memory.memsw.limit_in_bytes"), "67108864");
  EXPECT_EQ(FakeTree::read(sys + "/pids/corral/sb1/pids.max"), "32");
  EXPECT_EQ(FakeTree::read(sys + "/cpu/corral/sb1/cpu.cfs_period_us"), "100000");
  EXPECT_EQ(FakeTree::read(sys + "/cpu/corral/sb1/cpu.cfs_quota_us"), "50000");
  EXPECT_EQ((*cg)->clone_into_fd(), -1);

  // Stats come from memsw (RAM + swap), cpuacct, oom_control, pids.events.
  FakeTree::write(sys + "/memory/corral/sb1/memory.memsw.usage_in_bytes", "4096\n");
  FakeTree::write(sys + "/memory/corral/sb1/memory.usage_in_bytes", "1\n");
  FakeTree::write(sys + "/memory/corral/sb1/memory.memsw.max_usage_in_bytes", "8192\n");
  FakeTree::write(sys + "/memory/corral/sb1/memory.oom_control",
                  "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
  FakeTree::write(sys + "/cpuacct/corral/sb1/cpuacct.usage", "123456789\n");
  FakeTree::write(sys + "/pids/corral/sb1/pids.current", "3\n");
  FakeTree::write(sys + "/pids/corral/sb1/pids.events", "max 7\n");
  auto s = (*cg)->stats();
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_EQ(s->memory_current_bytes, 4096u);
  EXPECT_EQ(s->memory_peak_bytes, 8192u);
  EXPECT_EQ(s->oom_kills, 2u);
  EXPECT_EQ(s->cpu_usage_ns, 123456789u);
  EXPECT_EQ(s->pids_current, 3u);
  EXPECT_EQ(s->pids_max_hits, 7u);

  // add_process writes the pid in every hierarchy.
  ASSERT_TRUE((*cg)->add_process(4242));
  for (const auto& p : expected) EXPECT_EQ(FakeTree::read(p + "/cgroup.procs"), "4242") << p;
  for (const auto& p : expected) FakeTree::write(p + "/cgroup.procs", "");

  auto names = (*m)->list();
  ASSERT_TRUE(names);
  EXPECT_EQ(*names, std::vector<std::string>{"sb1"});

  // kill_all with an empty cgroup returns at once: the freezer is never
  // touched (the file keeps the fake kernel's initial "THAWED\n"; a
  // freeze-thaw cycle would have written "THAWED" without the newline).
  ASSERT_TRUE((*cg)->kill_all());
  EXPECT_EQ(FakeTree::read(sys + "/freezer/corral/sb1/freezer.state"), "THAWED\n");

  auto destroyed = (*cg)->destroy();
  ASSERT_TRUE(destroyed) << destroyed.error().to_string();
  for (const auto& p : expected) EXPECT_FALSE(FakeTree::exists(p)) << p;
  EXPECT_TRUE(FakeTree::exists(sys + "/memory/corral"));  // the shared parent stays
  EXPECT_TRUE((*cg)->destroy());                          // idempotent
}

TEST(CgroupDetect, V1OnlyCoMountedCpuShareOneDirectory) {
  FakeTree t;
  std::string sys = t.at("/sys/fs/cgroup");
  t.add_v1_hierarchy(sys + "/cpu,cpuacct", {"cpu", "cpuacct"});
  t.add_v1_hierarchy(sys + "/memory", {"memory"});
  t.add_v1_hierarchy(sys + "/pids", {"pids"});
  CgroupOptions o;
  o.mountinfo_path = t.write_mountinfo(replace_all(kV1Only, "/sys/fs/cgroup", sys));
  o.fake_kernel = t.kernel();
  auto m = CgroupManager::detect(o);
  ASSERT_TRUE(m) << m.error().to_string();
  EXPECT_EQ((*m)->version(), CgroupVersion::kV1);
  EXPECT_NE((*m)->describe().find("no freezer"), std::string::npos);
  auto cg = (*m)->create("sb", {0, 2.0, 0});
  ASSERT_TRUE(cg) << cg.error().to_string();
  EXPECT_EQ((*cg)->paths().size(), 3u);
  std::string cpu = sys + "/cpu,cpuacct/corral/sb";
  EXPECT_EQ(FakeTree::read(cpu + "/cpu.cfs_quota_us"), "200000");
  EXPECT_EQ(FakeTree::read(sys + "/memory/corral/sb/memory.limit_in_bytes"), "-1");
  EXPECT_EQ(FakeTree::read(sys + "/memory/corral/sb/memory.memsw.limit_in_bytes"), "-1");
  EXPECT_EQ(FakeTree::read(sys + "/pids/corral/sb/pids.max"), "max");
  ASSERT_TRUE((*cg)->destroy());
  EXPECT_FALSE(FakeTree::exists(cpu));
}

TEST(CgroupDetect, PureV2PicksV2) {
  FakeTree t;
  std::string sys = t.at("/sys/fs/cgroup");
  t.make_v2_root(sys, "cpuset cpu io memory hugetlb pids rdma misc", "cpu memory pids");
  CgroupOptions o;
  o.mountinfo_path = t.write_mountinfo(replace_all(kPureV2, "/sys/fs/cgroup", sys));
  auto m = CgroupManager::detect(o);
  ASSERT_TRUE(m) << m.error().to_string();
  EXPECT_EQ((*m)->version(), CgroupVersion::kV2);
  EXPECT_NE((*m)->describe().find("memory pids cpu"), std::string::npos) << (*m)->describe();
}

TEST(CgroupDetect, V2WithoutPidsAndNoV1IsUnavailableWithHint) {
  FakeTree t;
  std::string sys = t.at("/sys/fs/cgroup");
  t.make_v2_root(sys, "cpu memory");
  CgroupOptions o;
  o.mountinfo_path = t.write_mountinfo(replace_all(kPureV2, "/sys/fs/cgroup", sys));
  auto m = CgroupManager::detect(o);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(m.error().message.find("offers [cpu memory]"), std::string::npos) << m.error().message;
  EXPECT_NE(m.error().hint.find("systemd.unified_cgroup_hierarchy=1"), std::string::npos)
      << m.error().hint;
  EXPECT_NE(m.error().hint.find("mount -t cgroup -o memory"), std::string::npos) << m.error().hint;
}

TEST(CgroupDetect, V1MissingPidsSaysWhatToMount) {
  FakeTree t;
  std::string sys = t.at("/sys/fs/cgroup");
  std::string info = replace_all(kV1Only, "/sys/fs/cgroup", sys);
  info = replace_all(info, "rw,pids\n", "rw,devices\n");
  CgroupOptions o;
  o.mountinfo_path = t.write_mountinfo(info);
  auto m = CgroupManager::detect(o);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(m.error().message.find("lack [pids]"), std::string::npos) << m.error().message;
  EXPECT_NE(m.error().hint.find("mount -t cgroup2"), std::string::npos) << m.error().hint;
  EXPECT_NE(m.error().hint.find("mount -t cgroup -o pids cgroup /sys/fs/cgroup/pids"),
            std::string::npos)
      << m.error().hint;
}

TEST(CgroupDetect, BrokenMountinfoIsAClearError) {
  FakeTree t;
  CgroupOptions o;
  o.mountinfo_path = t.write_mountinfo(
      "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
      "41 31 0:38 /sys/fs/cgroup/unified\n");
  auto m = CgroupManager::detect(o);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find(o.mountinfo_path), std::string::npos) << m.error().message;
  EXPECT_NE(m.error().message.find("line 2"), std::string::npos) << m.error().message;

  o.mountinfo_path = t.at("/no-such-mountinfo");
  auto missing = CgroupManager::detect(o);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

TEST(CgroupDetect, InvalidParentName) {
  CgroupOptions o;
  o.parent_name = "../escape";
  auto m = CgroupManager::detect(o);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kInvalidArgument);
}

// --------------------------------------------------------------------------
// v2 backend on a fake tree

class CgroupV2Fake : public ::testing::Test {
 protected:
  void SetUp() override {
    mount_ = t_.at("/cg");
    t_.make_v2_root(mount_, "cpuset cpu io memory hugetlb pids rdma misc");
    options_.mountinfo_path =
        t_.write_mountinfo("30 23 0:26 / " + mount_ + " rw,nosuid - cgroup2 cgroup2 rw\n");
    options_.fake_kernel = t_.kernel();
    options_.kill_timeout = std::chrono::milliseconds(300);
  }
  std::unique_ptr<CgroupManager> manager() {
    auto m = CgroupManager::detect(options_);
    EXPECT_TRUE(m) << m.error().to_string();
    return m ? std::move(*m) : nullptr;
  }
  std::string sb(const std::string& name, const std::string& file = "") const {
    return mount_ + "/corral/" + name + (file.empty() ? "" : "/" + file);
  }

  FakeTree t_;
  std::string mount_;
  CgroupOptions options_;
};

TEST_F(CgroupV2Fake, CreateWritesExactlyTheLimitFiles) {
  auto m = manager();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->version(), CgroupVersion::kV2);
  auto cg = m->create("sb1", {64u << 20, 1.5, 100});
  ASSERT_TRUE(cg) << cg.error().to_string();
  // Controllers handed down root -> corral -> sandbox.
  EXPECT_EQ(FakeTree::read(mount_ + "/cgroup.subtree_control"), "+memory +pids +cpu");
  EXPECT_EQ(FakeTree::read(mount_ + "/corral/cgroup.subtree_control"), "+memory +pids +cpu");
  EXPECT_EQ(FakeTree::read(sb("sb1", "cgroup.subtree_control")), "");  // a leaf
  EXPECT_EQ(FakeTree::read(sb("sb1", "memory.max")), "67108864");
  EXPECT_EQ(FakeTree::read(sb("sb1", "memory.swap.max")), "0");
  EXPECT_EQ(FakeTree::read(sb("sb1", "memory.oom.group")), "1");
  EXPECT_EQ(FakeTree::read(sb("sb1", "pids.max")), "100");
  EXPECT_EQ(FakeTree::read(sb("sb1", "cpu.max")), "150000 100000");
  EXPECT_EQ(FakeTree::read(sb("sb1", "cgroup.procs")), "");  // no process added yet
  EXPECT_EQ((*cg)->paths(), std::vector<std::string>{sb("sb1")});
  EXPECT_EQ((*cg)->name(), "sb1");

  // clone_into_fd is the sandbox directory itself.
  int fd = (*cg)->clone_into_fd();
  ASSERT_GE(fd, 0);
  struct stat a, b;
  ASSERT_EQ(fstat(fd, &a), 0);
  ASSERT_EQ(stat(sb("sb1").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_NE(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);

  ASSERT_TRUE((*cg)->destroy());
  EXPECT_FALSE(FakeTree::exists(sb("sb1")));
  EXPECT_EQ((*cg)->clone_into_fd(), -1);
}

TEST_F(CgroupV2Fake, UnlimitedWritesMax) {
  auto m = manager();
  ASSERT_TRUE(m);
  auto cg = m->create("free", {});
  ASSERT_TRUE(cg) << cg.error().to_string();
  EXPECT_EQ(FakeTree::read(sb("free", "memory.max")), "max");
  EXPECT_EQ(FakeTree::read(sb("free", "memory.swap.max")), "max");
  EXPECT_EQ(FakeTree::read(sb("free", "memory.oom.group")), "1");
  EXPECT_EQ(FakeTree::read(sb("free", "pids.max")), "max");
  EXPECT_EQ(FakeTree::read(sb("free", "cpu.max")), "max 100000");
  ASSERT_TRUE((*cg)->destroy());
}

TEST_F(CgroupV2Fake, EnabledControllersAreNotRewritten) {
  // As the kernel shows them: no '+', its own order.
  FakeTree::write(mount_ + "/cgroup.subtree_control", "cpu memory pids\n");
  auto m = manager();
  ASSERT_TRUE(m);
  auto cg = m->create("sb", {1u << 30, 0, 0});
  ASSERT_TRUE(cg) << cg.error().to_string();
  EXPECT_EQ(FakeTree::read(mount_ + "/cgroup.subtree_control"), "cpu memory pids\n");
  // Only the missing one is added.
  ASSERT_TRUE((*cg)->destroy());
  FakeTree::write(mount_ + "/corral/cgroup.subtree_control", "memory cpu\n");
  auto cg2 = m->create("sb", {1u << 30, 0, 0});
  ASSERT_TRUE(cg2) << cg2.error().to_string();
  EXPECT_EQ(FakeTree::read(mount_ + "/corral/cgroup.subtree_control"), "+pids");
  ASSERT_TRUE((*cg2)->destroy());
}

TEST_F(CgroupV2Fake, FailingLimitWriteFailsClosed) {
  // A directory where memory.max should be: the write fails with EISDIR.
  t_.on_mkdir([this](const std::string& dir) {
    if (dir == sb("bad")) {
      fs::remove(dir + "/memory.max");
      fs::create_directory(dir + "/memory.max");
    }
  });
  auto m = manager();
  ASSERT_TRUE(m);
  auto cg = m->create("bad", {64u << 20, 1, 10});
  ASSERT_FALSE(cg);
  EXPECT_NE(cg.error().message.find("memory.max"), std::string::npos) << cg.error().message;
  EXPECT_EQ(cg.error().sys_errno, EISDIR);
  EXPECT_FALSE(FakeTree::exists(sb("bad"))) << "the half-made cgroup must be removed";
  EXPECT_TRUE(FakeTree::exists(mount_ + "/corral"));  // the shared parent stays
  auto names = m->list();
  ASSERT_TRUE(names);
  EXPECT_TRUE(names->empty());
}

TEST_F(CgroupV2Fake, FailingLastWriteFailsClosed) {
  t_.on_mkdir([this](const std::string& dir) {
    if (dir == sb("bad")) fs::remove(dir + "/cpu.max");  // ENOENT on the last limit
  });
  auto m = manager();
  ASSERT_TRUE(m);
  auto cg = m->create("bad", {64u << 20, 1, 10});
  ASSERT_FALSE(cg);
  EXPECT_NE(cg.error().message.find("cpu.max"), std::string::npos) << cg.error().message;
  EXPECT_FALSE(FakeTree::exists(sb("bad")));
}

TEST_F(CgroupV2Fake, ExistingCgroupIsLeftAlone) {
  auto m = manager();
  ASSERT_TRUE(m);
  auto first = m->create("dup", {});
  ASSERT_TRUE(first);
  FakeTree::write(sb("dup", "cgroup.procs"), "777\n");
  auto second = m->create("dup", {});
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(FakeTree::read(sb("dup", "cgroup.procs")), "777\n");
  FakeTree::write(sb("dup", "cgroup.procs"), "");
  ASSERT_TRUE((*first)->destroy());
}

TEST_F(CgroupV2Fake, InvalidNamesTouchNothing) {
  auto m = manager();
  ASSERT_TRUE(m);
  for (const char* bad : {"", "..", "../../etc", "a/b", "x y"}) {
    auto cg = m->create(bad, {});
    ASSERT_FALSE(cg) << bad;
    EXPECT_EQ(cg.error().code, ErrorCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(FakeTree::exists(mount_ + "/corral"));
  EXPECT_EQ(t_.mkdirs(), 0);
}

TEST_F(CgroupV2Fake, CpuQuotaRange) {
  auto m = manager();
  ASSERT_TRUE(m);
  for (double bad : {-1.0, 0.005, 1e9}) {
    auto cg = m->create("cpu", {0, bad, 0});
    ASSERT_FALSE(cg) << bad;
    EXPECT_EQ(cg.error().code, ErrorCode::kInvalidArgument);
  }
  auto cg = m->create("cpu", {0, 0.01, 0});
  ASSERT_TRUE(cg) << cg.error().to_string();
  EXPECT_EQ(FakeTree::read(sb("cpu", "cpu.max")), "1000 100000");
  ASSERT_TRUE((*cg)->destroy());
}

TEST_F(CgroupV2Fake, StatsProcessesAndAddProcess) {
  auto m = manager();
  ASSERT_TRUE(m);
  auto cg = m->create("st", {});
  ASSERT_TRUE(cg);
  FakeTree::write(sb("st", "memory.current"), "1000\n");
  FakeTree::write(sb("st", "memory.swap.current"), "24\n");
  FakeTree::write(sb("st", "memory.peak"), "5000\n");
  FakeTree::write(sb("st", "memory.events"),
                  "low 0\nhigh 0\nmax 9\noom 3\noom_kill 2\noom_group_kill 1\n");
  FakeTree::write(sb("st", "cpu.stat"), "usage_usec 1234\nuser_usec 1000\nsystem_usec 234\n");
  FakeTree::write(sb("st", "pids.current"), "4\n");
  FakeTree::write(sb("st", "pids.events"), "max 6\n");
  auto s = (*cg)->stats();
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_EQ(s->memory_current_bytes, 1024u);
  EXPECT_EQ(s->memory_peak_bytes, 5000u);
  EXPECT_EQ(s->oom_kills, 2u);
  EXPECT_EQ(s->cpu_usage_ns, 1234000u);
  EXPECT_EQ(s->pids_current, 4u);
  EXPECT_EQ(s->pids_max_hits, 6u);

  // memory.peak is missing before Linux 5.19: then peak is at least current.
  fs::remove(sb("st", "memory.peak"));
  s = (*cg)->stats();
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_EQ(s->memory_peak_bytes, 1024u);

  FakeTree::write(sb("st", "pids.current"), "lots\n");
  auto broken = (*cg)->stats();
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.error().message.find("pids.current"), std::string::npos);

  ASSERT_TRUE((*cg)->add_process(31337));
  EXPECT_EQ(FakeTree::read(sb("st", "cgroup.procs")), "31337");
  // processes() includes cgroups below (e.g. a stale nested one).
  fs::create_directory(sb("st", "nested"));
  FakeTree::write(sb("st", "nested/cgroup.procs"), "12\n");
  auto procs = (*cg)->processes();
  ASSERT_TRUE(procs) << procs.error().to_string();
  EXPECT_EQ(*procs, (std::vector<pid_t>{12, 31337}));
  FakeTree::write(sb("st", "cgroup.procs"), "");
  ASSERT_TRUE((*cg)->destroy());
  EXPECT_FALSE(FakeTree::exists(sb("st")));
}

TEST_F(CgroupV2Fake, KillAllWritesCgroupKillAndWaitsForUnpopulated) {
  auto m = manager();
  ASSERT_TRUE(m);
  auto cg = m->create("k", {});
  ASSERT_TRUE(cg);
  ASSERT_TRUE((*cg)->kill_all());
  EXPECT_EQ(FakeTree::read(sb("k", "cgroup.kill")), "1");

  FakeTree::write(sb("k", "cgroup.events"), "populated 1\nfrozen 0\n");
  FakeTree::write(sb("k", "cgroup.procs"), "4711\n");
  auto st = (*cg)->kill_all();
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kTimeout);
  EXPECT_NE(st.error().message.find("4711"), std::string::npos) << st.error().message;

  FakeTree::write(sb("k", "cgroup.events"), "populated 0\nfrozen 0\n");
  FakeTree::write(sb("k", "cgroup.procs"), "");
  ASSERT_TRUE((*cg)->destroy());
}

TEST_F(CgroupV2Fake, ListAndReopen) {
  auto m = manager();
  ASSERT_TRUE(m);
  auto none = m->list();
  ASSERT_TRUE(none);  // the parent does not exist yet: no sandboxes
  EXPECT_TRUE(none->empty());
  ASSERT_TRUE(m->create("b", {}));
  ASSERT_TRUE(m->create("a", {}));
  auto names = m->list();
  ASSERT_TRUE(names);
  EXPECT_EQ(*names, (std::vector<std::string>{"a", "b"}));

  auto missing = m->open("zzz");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  for (const auto& n : *names) {
    auto cg = m->open(n);
    ASSERT_TRUE(cg) << cg.error().to_string();
    EXPECT_GE((*cg)->clone_into_fd(), 0);
    ASSERT_TRUE((*cg)->destroy());
  }
  names = m->list();
  ASSERT_TRUE(names);
  EXPECT_TRUE(names->empty());
}

TEST_F(CgroupV2Fake, NestedParentGetsControllersAtEachLevel) {
  options_.parent_name = "corral/pool";
  auto m = manager();
  ASSERT_TRUE(m);
  auto cg = m->create("sb", {1u << 30, 1, 5});
  ASSERT_TRUE(cg) << cg.error().to_string();
  EXPECT_EQ(FakeTree::read(mount_ + "/corral/cgroup.subtree_control"), "+memory +pids +cpu");
  EXPECT_EQ(FakeTree::read(mount_ + "/corral/pool/cgroup.subtree_control"), "+memory +pids +cpu");
  EXPECT_EQ(FakeTree::read(mount_ + "/corral/pool/sb/pids.max"), "5");
  ASSERT_TRUE((*cg)->destroy());
}

TEST_F(CgroupV2Fake, V2AtWithoutControllers) {
  options_.fake_kernel = t_.kernel();
  auto m = CgroupManager::v2_at(mount_, {}, options_);
  ASSERT_TRUE(m) << m.error().to_string();
  EXPECT_NE((*m)->describe().find("controllers used: none"), std::string::npos);
  for (CgroupLimits l :
       {CgroupLimits{1u << 20, 0, 0}, CgroupLimits{0, 1, 0}, CgroupLimits{0, 0, 5}}) {
    auto cg = (*m)->create("x", l);
    ASSERT_FALSE(cg);
    EXPECT_EQ(cg.error().code, ErrorCode::kUnavailable) << cg.error().message;
  }
  EXPECT_FALSE(FakeTree::exists(sb("x")));
  auto cg = (*m)->create("x", {});
  ASSERT_TRUE(cg) << cg.error().to_string();
  EXPECT_EQ(FakeTree::read(mount_ + "/cgroup.subtree_control"), "");  // nothing enabled
  auto s = (*cg)->stats();                                            // cpu.stat only
  ASSERT_TRUE(s) << s.error().to_string();
  ASSERT_TRUE((*cg)->destroy());

  auto bad = CgroupManager::v2_at(mount_, {"freezer"}, options_);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kUnavailable);
}

// --------------------------------------------------------------------------
// v1 backend on a fake tree: fail closed across hierarchies

TEST(CgroupV1Fake, FailingMemswWriteRemovesEveryHierarchy) {
  FakeTree t;
  std::string sys = t.at("/sys/fs/cgroup");
  for (const char* c : {"cpu", "cpuacct", "memory", "freezer", "pids"}) {
    t.add_v1_hierarchy(sys + "/" + c, {c});
  }
  t.on_mkdir([&](const std::string& dir) {
    if (dir == sys + "/memory/corral/bad") {
      fs::remove(dir + "/memory.memsw.limit_in_bytes");
      fs::create_directory(dir + "/memory.memsw.limit_in_bytes");
    }
  });
  CgroupOptions o;
  o.mountinfo_path = t.write_mountinfo(replace_all(kHybridHost, "/sys/fs/cgroup", sys));
  o.fake_kernel = t.kernel();
  auto m = CgroupManager::detect(o);
  ASSERT_TRUE(m) << m.error().to_string();
  auto cg = (*m)->create("bad", {32u << 20, 1, 10});
  ASSERT_FALSE(cg);
  EXPECT_NE(cg.error().message.find("memory.memsw.limit_in_bytes"), std::string::npos)
      << cg.error().message;
  for (const char* c : {"cpu", "cpuacct", "memory", "freezer", "pids"}) {
    EXPECT_FALSE(FakeTree::exists(sys + "/" + c + "/corral/bad")) << c;
  }
  // A name that exists in one hierarchy only (a stale half) is refused and
  // the existing directory stays.
  fs::create_directory(sys + "/pids/corral/half");
  auto half = (*m)->create("half", {});
  ASSERT_FALSE(half);
  EXPECT_EQ(half.error().code, ErrorCode::kAlreadyExists);
  EXPECT_TRUE(FakeTree::exists(sys + "/pids/corral/half"));
  EXPECT_FALSE(FakeTree::exists(sys + "/memory/corral/half"));
  // open() finds the stale half for cleanup.
  FakeTree::write(sys + "/pids/corral/half/cgroup.procs", "");
  auto stale = (*m)->open("half");
  ASSERT_TRUE(stale) << stale.error().to_string();
  EXPECT_EQ((*stale)->paths(), std::vector<std::string>{sys + "/pids/corral/half"});
  ASSERT_TRUE((*stale)->destroy());
  EXPECT_FALSE(FakeTree::exists(sys + "/pids/corral/half"));
}

}  // namespace
}  // namespace corral
