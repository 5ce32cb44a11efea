// Task inputs read from a volume (issue 15 points 1 and 6; REQUIREMENTS.md
// D2, F4, F6; docs/tasks.md "The request"): a file of a volume of the
// caller's namespace is pushed into the task's sandbox with its sha256
// verified; the path is confined to the volume as a mount's sub-path is
// (the class: "..", an absolute path, a symlink anywhere on the way, in or
// out of the volume), only a regular file is read (a FIFO, a device or a
// directory is refused without being opened), and another namespace's
// volume is 403 at submit.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"
#include "support/skip.h"
#include "support/team_b.h"
#include "support/task_client.h"

namespace corral::testing {
namespace {

using nlohmann::json;

const char* const kKeyB = kTeamBKey;
std::string config_yaml() { return team_b_config(); }

json volume_input(const std::string& volume, const std::string& path) {
  return {{"path", "/workspace/v.txt"}, {"volume", volume}, {"volume_path", path}};
}

// A task that copies its volume input to an output.
json copying_task(const std::string& id, const json& input) {
  json body = task_body(id, "cat /workspace/v.txt > /workspace/out");
  body["inputs"] = json::array({input});
  body["outputs"] = json::array({{{"path", "/workspace/out"}}});
  return body;
}

class TaskVolumeInputs : public ::testing::Test {
 protected:
  void SetUp() override {
    struct stat st {};
    if (::stat("/dev/loop-control", &st) != 0)
      CORRAL_SKIP_OR_FAIL("no /dev/loop-control: volumes need loop devices");
    d_ = std::make_unique<TestDaemon>(std::vector<std::string>{}, config_yaml());
    ASSERT_TRUE(d_->ready()) << d_->output();
    auto r = d_->request("POST", "/v1/volumes", R"({"name":"inputs","quota":"16Mi"})");
    ASSERT_EQ(r.status, 201) << r.body;
    // Filled from the host, through the daemon's own mount of the volume:
    // the test needs a device node, which no sandbox may make.
    const std::string root = d_->data_dir() + "/volumes/mnt/default/inputs";
    ASSERT_EQ(::mkdir((root + "/dir").c_str(), 0755), 0) << root;
    std::ofstream(root + "/dir/v.txt") << kContent;
    ASSERT_EQ(::symlink("/etc/passwd", (root + "/to-passwd").c_str()), 0);
    ASSERT_EQ(::symlink("/etc", (root + "/to-etc").c_str()), 0);
    ASSERT_EQ(::symlink("dir", (root + "/dir-link").c_str()), 0);
    ASSERT_EQ(::symlink("dir/v.txt", (root + "/file-link").c_str()), 0);
    ASSERT_EQ(::mkfifo((root + "/fifo").c_str(), 0644), 0);
    ASSERT_EQ(::mknod((root + "/null").c_str(), S_IFCHR | 0644, makedev(1, 3)), 0);
  }
  void TearDown() override {
    if (d_) d_->request("DELETE", "/v1/volumes/inputs");
  }
  TestDaemon& d() { return *d_; }

  static constexpr const char* kContent = "from the volume\n";
  std::unique_ptr<TestDaemon> d_;
};

TEST_F(TaskVolumeInputs, AFileOfTheVolumeIsPushedWithItsHashVerified) {
  json in = volume_input("inputs", "dir/v.txt");
  in["sha256"] = sha256_hex(kContent);
  ASSERT_EQ(d().request("POST", "/v1/tasks", copying_task("vol-ok", in).dump()).status, 202);
  json wrong = volume_input("inputs", "dir/v.txt");
  wrong["sha256"] = sha256_hex("something else");
  ASSERT_EQ(d().request("POST", "/v1/tasks", copying_task("vol-wrong", wrong).dump()).status, 202);

  json t = wait_task(d(), "vol-ok");
  ASSERT_EQ(t.value("status", ""), "succeeded") << t.dump();
  EXPECT_EQ(d().request("GET", "/v1/tasks/vol-ok/outputs/0").body, kContent);
  // The canonical request keeps where the input came from.
  EXPECT_EQ(t["request"]["inputs"][0].value("volume", ""), "inputs") << t.dump();
  EXPECT_EQ(t["request"]["inputs"][0].value("volume_path", ""), "dir/v.txt") << t.dump();

  json w = wait_task(d(), "vol-wrong");
  EXPECT_EQ(w.value("status", ""), "failed") << w.dump();
  EXPECT_EQ(w.value("reason", ""), "input_mismatch") << w.dump();
  EXPECT_TRUE(w["exit_code"].is_null()) << "the command must not run: " << w.dump();

  // T2: the task kept a copy of the file as its command saw it; a replay
  // after the volume's file changed runs on that copy.
  EXPECT_EQ(t["resolved"]["inputs"][0].value("source", ""), "volume") << t.dump();
  EXPECT_EQ(t["resolved"]["inputs"][0].value("stored_at", ""), "tasks/vol-ok/1/inputs/0");
  std::ofstream(d().data_dir() + "/volumes/mnt/default/inputs/dir/v.txt") << "changed since\n";
  auto replay = d().request("POST", "/v1/tasks/vol-ok/replay", R"({"id":"vol-ok-again"})");
  ASSERT_EQ(replay.status, 202) << replay.body;
  json again = wait_task(d(), "vol-ok-again");
  ASSERT_EQ(again.value("status", ""), "succeeded") << again.dump();
  EXPECT_EQ(d().request("GET", "/v1/tasks/vol-ok-again/outputs/0").body, kContent);
}

// Paths that are not a normal relative path inside the volume are refused
// before anything runs.
TEST_F(TaskVolumeInputs, DotDotAndAbsolutePathsAreRefusedAtSubmit) {
  for (const char* path : {"../inputs/dir/v.txt", "dir/../../x", "/dir/v.txt", "/etc/passwd",
                           "dir//v.txt", "dir/./v.txt", "", "dir/"}) {
    SCOPED_TRACE(path);
    auto r = d().request("POST", "/v1/tasks",
                         copying_task("vol-path", volume_input("inputs", path)).dump());
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(r.json()["error"].value("field", ""), "inputs[0].volume_path") << r.body;
  }
  EXPECT_EQ(d().request("GET", "/v1/tasks/vol-path").status, 404) << "a refused task is stored";
}

// A symlink anywhere on the way (out of the volume or inside it), and a
// FIFO, a device or a directory: the task fails input_missing saying why,
// its command never runs, and a FIFO never hangs it.
TEST_F(TaskVolumeInputs, SymlinksAndFilesThatAreNotRegularAreRefused) {
  struct Case {
    std::string path, why;
  };
  const std::vector<Case> cases = {
      {"to-passwd", "symbolic link"},    {"to-etc/passwd", "symbolic link"},
      {"dir-link/v.txt", "symbolic link"}, {"file-link", "symbolic link"},
      {"fifo", "FIFO"},                    {"null", "device"},
      {"dir", "directory"},                {"dir/none.txt", "does not exist"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    auto r = d().request(
        "POST", "/v1/tasks",
        copying_task("vol-bad-" + std::to_string(i), volume_input("inputs", cases[i].path)).dump());
    ASSERT_EQ(r.status, 202) << cases[i].path << ": " << r.body;
  }
  ASSERT_EQ(d().request("POST", "/v1/tasks",
                        copying_task("vol-unknown", volume_input("no-such-volume", "dir/v.txt"))
                            .dump())
                .status,
            202);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].path);
    json t = wait_task(d(), "vol-bad-" + std::to_string(i));
    EXPECT_EQ(t.value("status", ""), "failed") << t.dump();
    EXPECT_EQ(t.value("reason", ""), "input_missing") << t.dump();
    EXPECT_NE(text(t, "detail").find(cases[i].why), std::string::npos) << t.dump();
    EXPECT_TRUE(t["exit_code"].is_null()) << t.dump();
  }
  json u = wait_task(d(), "vol-unknown");
  EXPECT_EQ(u.value("reason", ""), "input_missing") << u.dump();
  EXPECT_NE(text(u, "detail").find("no volume"), std::string::npos) << u.dump();
}

// F4: a volume of another namespace is 403 at submit, over either
// listener, and the task is not stored.
TEST_F(TaskVolumeInputs, AnotherNamespacesVolumeIsForbidden) {
  const std::string body = copying_task("vol-b", volume_input("inputs", "dir/v.txt")).dump();
  auto r = d().request("POST", "/v1/tasks", body, true, false,
                       {{"authorization", std::string("Bearer ") + kKeyB}});
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(r.json()["error"].value("code", ""), "forbidden") << r.body;
  EXPECT_EQ(r.json()["error"].value("field", ""), "inputs[0].volume") << r.body;
  EXPECT_EQ(d().request("GET", "/v1/tasks/vol-b").status, 404);
  // The owner's namespace may.
  ASSERT_EQ(d().request("POST", "/v1/tasks", body).status, 202);
  EXPECT_EQ(wait_task(d(), "vol-b").value("status", ""), "succeeded");
}

}  // namespace
}  // namespace corral::testing
