// The diagnostics' CPU throttling and memory-limit counters (T1) read from
// fixture cgroup directories as cgroup v1 and v2 kernels write them
// (src/jail/cgroup_limit_counters.h); this host runs v1, so v2 is checked
// on files only.
#include "jail/cgroup_limit_counters.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/temp_dir.h"

namespace corral {
namespace {

class TempDir : public ::corral::testing::TempDir {
 public:
  TempDir() : ::corral::testing::TempDir("corral-cg-counters") {}
};

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(CgroupLimitCounters, V2FromCpuStatAndMemoryEvents) {
  TempDir t;
  const std::string dir = t.file("corral/sb");
  // As Linux 6.1 writes them with the cpu and memory controllers on.
  write(dir + "/cpu.stat",
        "usage_usec 1234\nuser_usec 1000\nsystem_usec 234\ncore_sched.force_idle_usec 0\n"
        "nr_periods 50\nnr_throttled 7\nthrottled_usec 2500\nnr_bursts 0\nburst_usec 0\n");
  write(dir + "/memory.events", "low 0\nhigh 0\nmax 9\noom 3\noom_kill 2\noom_group_kill 1\n");
  auto c = read_limit_counters({dir});
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->cpu_throttled_periods, 7u);
  EXPECT_EQ(c->cpu_throttled_ns, 2'500'000u);
  EXPECT_EQ(c->memory_limit_hits, 9u);
}

TEST(CgroupLimitCounters, V2WithoutTheCpuControllerReadsZero) {
  TempDir t;
  const std::string dir = t.file("sb");
  write(dir + "/cpu.stat", "usage_usec 10\nuser_usec 5\nsystem_usec 5\n");
  auto c = read_limit_counters({dir});
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->cpu_throttled_periods, 0u);
  EXPECT_EQ(c->cpu_throttled_ns, 0u);
  EXPECT_EQ(c->memory_limit_hits, 0u);
}

TEST(CgroupLimitCounters, V1OneDirectoryPerHierarchy) {
  TempDir t;
  const std::string cpu = t.file("cpu,cpuacct/corral/sb");
  const std::string mem = t.file("memory/corral/sb");
  const std::string pids = t.file("pids/corral/sb");
  write(cpu + "/cpu.stat", "nr_periods 40\nnr_throttled 12\nthrottled_time 345000000\n");
  write(cpu + "/cpuacct.usage", "123\n");
  write(mem + "/memory.failcnt", "11\n");
  write(mem + "/memory.memsw.failcnt", "99\n");
  write(pids + "/pids.events", "max 3\n");
  auto c = read_limit_counters({mem, cpu, pids});
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->cpu_throttled_periods, 12u);
  EXPECT_EQ(c->cpu_throttled_ns, 345'000'000u);
  EXPECT_EQ(c->memory_limit_hits, 11u);
}

TEST(CgroupLimitCounters, AGarbledFileIsAnErrorNamingIt) {
  TempDir t;
  const std::string dir = t.file("sb");
  write(dir + "/cpu.stat", "nr_throttled lots\n");
  auto c = read_limit_counters({dir});
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("cpu.stat"), std::string::npos) << c.error().message;
  write(dir + "/cpu.stat", "nr_throttled 1\n");
  write(dir + "/memory.failcnt", "x\n");
  ASSERT_FALSE(read_limit_counters({dir}));
  // Directories that do not exist (a controller not mounted) read zero.
  auto none = read_limit_counters({t.file("missing")});
  ASSERT_TRUE(none) << none.error().to_string();
  EXPECT_EQ(none->memory_limit_hits, 0u);
}

}  // namespace
}  // namespace corral
