// The launcher sequence (src/jail/launch.h), in process, as root: a launch
// is undone completely (init reaped, cgroup and lock file gone), and a step
// that fails undoes only what the launch made itself, never a lock file or
// cgroup that was there before.
#include "jail/launch.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/paths.h"
#include "base/unique_fd.h"
#include "jail/cgroup.h"
#include "jail/fs_util.h"
#include "jail/sandbox_planner.h"
#include "support/skip.h"

namespace corral::testing {
namespace {

bool exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

std::string lock_path_of(const std::string& id) { return run_dir() + "/sandboxes/" + id + ".lock"; }

// A real cgroup whose v1 `tasks` files are handed out read-only, so that
// init's join (a write) fails as a refused one would.
class UnjoinableCgroup final : public Cgroup {
 public:
  explicit UnjoinableCgroup(std::unique_ptr<Cgroup> real) : real_(std::move(real)) {}
  const std::string& name() const override { return real_->name(); }
  Status add_process(pid_t pid) override { return real_->add_process(pid); }
  int clone_into_fd() const override { return real_->clone_into_fd(); }
  Result<std::vector<UniqueFd>> open_self_join() const override {
    std::vector<UniqueFd> fds;
    for (const std::string& dir : real_->paths()) {
      fds.emplace_back(open((dir + "/tasks").c_str(), O_RDONLY | O_CLOEXEC));
      if (!fds.back()) return errno_error("open " + dir + "/tasks");
    }
    return fds;
  }
  Result<CgroupStats> stats() const override { return real_->stats(); }
  Result<std::vector<pid_t>> processes() const override { return real_->processes(); }
  Status kill_all() override { return real_->kill_all(); }
  Status destroy() override { return real_->destroy(); }
  std::vector<std::string> paths() const override { return real_->paths(); }

 private:
  std::unique_ptr<Cgroup> real_;
};

class UnjoinableCgroups final : public CgroupManager {
 public:
  explicit UnjoinableCgroups(CgroupManager& real) : real_(real) {}
  CgroupVersion version() const override { return real_.version(); }
  std::string describe() const override { return real_.describe(); }
  Result<std::unique_ptr<Cgroup>> create(std::string_view name,
                                         const CgroupLimits& limits) override {
    auto cg = real_.create(name, limits);
    if (!cg) return tl::unexpected<Error>(cg.error());
    return std::unique_ptr<Cgroup>(std::make_unique<UnjoinableCgroup>(std::move(*cg)));
  }
  Result<std::unique_ptr<Cgroup>> open(std::string_view name) override { return real_.open(name); }
  Result<std::vector<std::string>> list() const override { return real_.list(); }

 private:
  CgroupManager& real_;
};

// The cgroup lines of /proc/<pid>/cgroup, as the host sees them.
std::vector<std::string> cgroup_lines(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class Launch : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("launching a sandbox needs root");
    auto manager = CgroupManager::detect();
    if (!manager) CORRAL_SKIP_OR_FAIL("no usable cgroup hierarchy: " + manager.error().message);
    cgroups_ = std::move(*manager);
    spec_.argv = {"true"};
    Stage failed_stage = Stage::kPlan;
    auto prepared = prepare_sandbox(spec_, RunOptions{}, failed_stage);
    ASSERT_TRUE(prepared.has_value()) << prepared.error().message;
    prepared_ = std::move(*prepared);
    options_.cgroups = cgroups_.get();
  }

  SandboxSpec spec_;
  std::unique_ptr<CgroupManager> cgroups_;
  std::unique_ptr<PreparedSandbox> prepared_;
  LaunchOptions options_;
};

TEST_F(Launch, ALaunchedInitIsUndoneCompletely) {
  auto launched = launch_init(spec_, *prepared_, options_);
  ASSERT_TRUE(launched.has_value()) << launched.error().error.message;
  LaunchedInit& init = *launched;
  const std::string id = prepared_->id;
  const pid_t pid = init.pid;
  EXPECT_GT(pid, 0);
  EXPECT_EQ(init.lock_path, lock_path_of(id));
  EXPECT_TRUE(exists(init.lock_path));
  EXPECT_TRUE(cgroups_->open(id).has_value()) << "no cgroup " << id;
  EXPECT_TRUE(prepared_->bind_fds.empty()) << "the launcher kept its copies of the mount sources";

  EXPECT_TRUE(undo_launch(init).empty());
  EXPECT_NE(kill(pid, 0), 0) << "init " << pid << " is still there (or was not reaped)";
  EXPECT_FALSE(exists(lock_path_of(id)));
  EXPECT_FALSE(cgroups_->open(id).has_value()) << "cgroup " << id << " is left";
  EXPECT_TRUE(undo_launch(init).empty()) << "a second undo finds nothing to do";
}

// By "go", init is in its cgroup in every hierarchy the sandbox uses: on
// v1 it moved itself there (Cgroup::open_self_join), on v2 it was cloned
// there. Nothing the workload does can run outside the limits.
TEST_F(Launch, InitIsInEveryHierarchyOfItsCgroupBeforeGo) {
  auto launched = launch_init(spec_, *prepared_, options_);
  ASSERT_TRUE(launched.has_value()) << launched.error().error.message;
  const std::string suffix = "/corral/" + prepared_->id;
  const auto lines = cgroup_lines(launched->pid);
  std::ostringstream all;
  for (const auto& l : lines) all << l << "\n";
  const std::vector<std::string> wanted =
      cgroups_->version() == CgroupVersion::kV1
          ? std::vector<std::string>{"memory", "pids", "cpu", "cpuacct"}
          : std::vector<std::string>{""};
  for (const std::string& controller : wanted) {
    bool found = false;
    for (const auto& l : lines) {
      // "N:ctrl[,ctrl]:path" on v1, "0::path" on v2.
      const auto first = l.find(':');
      const auto second = l.find(':', first + 1);
      if (first == std::string::npos || second == std::string::npos) continue;
      const std::string ctrls = "," + l.substr(first + 1, second - first - 1) + ",";
      const bool named = controller.empty() ? ctrls == ",," : ctrls.find("," + controller + ",") !=
                                                                  std::string::npos;
      if (!named) continue;
      found = true;
      EXPECT_TRUE(l.size() >= suffix.size() &&
                  l.compare(l.size() - suffix.size(), suffix.size(), suffix) == 0)
          << "init is outside its cgroup for '" << controller << "': " << l;
    }
    EXPECT_TRUE(found) << "no line for '" << controller << "' in\n" << all.str();
  }
  EXPECT_TRUE(undo_launch(*launched).empty());
}

// Cgroup v1: an init that cannot join its cgroup says so, never gets "go",
// and the launch is undone (init reaped, cgroup and lock file gone).
TEST_F(Launch, AnInitThatCannotJoinItsCgroupNeverRunsAndIsUndone) {
  if (cgroups_->version() != CgroupVersion::kV1)
    GTEST_SKIP() << "v1 only: on v2 init is cloned into its cgroup, there is no join to fail";
  UnjoinableCgroups unjoinable(*cgroups_);
  options_.cgroups = &unjoinable;
  const std::string id = prepared_->id;
  auto launched = launch_init(spec_, *prepared_, options_);
  ASSERT_FALSE(launched.has_value()) << "a sandbox started outside its cgroup";
  EXPECT_EQ(launched.error().step, LaunchStep::kCgroupAttach);
  EXPECT_EQ(launched.error().stage, Stage::kCgroup);
  EXPECT_NE(launched.error().error.message.find("joining the sandbox's cgroup"), std::string::npos)
      << launched.error().error.message;
  EXPECT_TRUE(launched.error().residue.empty());
  EXPECT_FALSE(exists(lock_path_of(id))) << "the failed launch left its lock file";
  EXPECT_FALSE(cgroups_->open(id).has_value()) << "the failed launch left its cgroup";
}

TEST_F(Launch, ALockFileThatWasThereStopsTheLaunchAndStays) {
  const std::string id = prepared_->id;
  const std::string lock = lock_path_of(id);
  ASSERT_TRUE(mkdir_p(run_dir() + "/sandboxes", 0700).has_value());
  UniqueFd theirs(open(lock.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  ASSERT_TRUE(theirs) << lock;

  auto launched = launch_init(spec_, *prepared_, options_);
  ASSERT_FALSE(launched.has_value());
  EXPECT_EQ(launched.error().step, LaunchStep::kAliveLock);
  EXPECT_EQ(launched.error().stage, Stage::kPlan);
  EXPECT_EQ(launched.error().error.sys_errno, EEXIST);
  EXPECT_EQ(launched.error().error.message.rfind("creating " + lock + ": ", 0), 0u)
      << launched.error().error.message;
  EXPECT_TRUE(launched.error().residue.empty());
  EXPECT_TRUE(exists(lock)) << "the launch removed a lock file it had not made";
  EXPECT_FALSE(cgroups_->open(id).has_value()) << "a cgroup was made after the lock failed";
  unlink(lock.c_str());
}

TEST_F(Launch, ACgroupThatWasThereStopsTheLaunchAndOnlyTheLockGoes) {
  const std::string id = prepared_->id;
  auto theirs = cgroups_->create(id, CgroupLimits{});
  ASSERT_TRUE(theirs.has_value()) << theirs.error().message;

  auto launched = launch_init(spec_, *prepared_, options_);
  ASSERT_FALSE(launched.has_value());
  EXPECT_EQ(launched.error().step, LaunchStep::kCgroup);
  EXPECT_EQ(launched.error().stage, Stage::kCgroup);
  EXPECT_TRUE(launched.error().residue.empty());
  EXPECT_FALSE(exists(lock_path_of(id))) << "the failed launch left its lock file";
  EXPECT_TRUE(cgroups_->open(id).has_value()) << "the launch removed a cgroup it had not made";
  EXPECT_TRUE((*theirs)->destroy().has_value());
}

}  // namespace
}  // namespace corral::testing
