// The failure paths of a task that need a real fault (issue 15 point 4 and
// "Bad input and faults"; REQUIREMENTS.md C2, D4, D5; docs/tasks.md
// "Reasons"): a command over its memory limit ends `oom`, one that fills
// its disk `disk_quota` (and so does an input that does not fit); an
// object store whose disk is full fails the output with
// `storage_unavailable`, stores nothing partial, counts the failure in
// corral_object_store_errors_total and lets the same id run again once
// there is room; a snapshot that cannot be stored (over
// serve.snapshots.quota, or a full disk) leaves the task's own result as
// it was, with snapshot_error set and nothing of it in the store.
//
// The full disks are tmpfs mounts of a small size that the test makes in
// its own temp dir and unmounts at the end (never the host's disks).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"
#include "support/skip.h"
#include "support/task_client.h"

namespace corral::testing {
namespace {

using nlohmann::json;

// A tmpfs of `size` mounted on a temp dir of this test; unmounted (lazily:
// a daemon may still hold a directory of it) when it goes.
class SmallDisk {
 public:
  explicit SmallDisk(const std::string& size) : dir_(make_temp_dir("task-small-disk")) {
    const std::string options = "size=" + size + ",mode=0700";
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) == 0)
      mounted_ = true;
    else
      error_ = std::strerror(errno);
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
    host_sh("rm -rf '" + dir_ + "'");
  }
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  const std::string& dir() const { return dir_; }
  bool grow(const std::string& size) {
    return ::mount(nullptr, dir_.c_str(), nullptr, MS_REMOUNT | MS_NOSUID | MS_NODEV,
                   ("size=" + size + ",mode=0700").c_str()) == 0;
  }

 private:
  std::string dir_;
  bool mounted_ = false;
  std::string error_;
};

// serve.object_store on `dir`/objects.
std::string object_store_yaml(const std::string& dir, const std::string& more = {}) {
  return "serve:\n  object_store:\n    kind: local\n    path: " + dir + "/objects\n" + more;
}

// The value of one sample of /metrics ("name{labels}"), -1 when absent.
double metric(TestDaemon& d, const std::string& sample) {
  std::istringstream lines(d.request("GET", "/metrics").body);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(sample + " ", 0) == 0) return std::stod(line.substr(sample.size() + 1));
  return -1;
}

// Every regular file under `root`, relative to it.
std::vector<std::string> files_under(const std::string& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file()) out.push_back(std::filesystem::relative(it->path(), root).string());
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

// C2: the memory limit is hit; the kernel's OOM killer ends the command
// (cgroup v1 here, v2 on most hosts: SandboxService::oom_kills reads the
// counter on both, also when v2's memory.oom.group took the whole sandbox).
TEST(DaemonTaskFaults, ACommandOverItsMemoryLimitEndsWithReasonOom) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  // 200 MB into a shell variable, in a 64 MiB sandbox: the shell is the
  // biggest process, so it is the one the OOM killer ends.
  json body = task_body("oom-1", "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo ${#x}");
  ASSERT_EQ(d.request("POST", "/v1/tasks", body.dump()).status, 202);
  // A command that dies of a signal with no OOM kill stays `signal`.
  ASSERT_EQ(d.request("POST", "/v1/tasks", task_body("oom-not", "kill -9 $$").dump()).status, 202);
  json t = wait_task(d, "oom-1");
  EXPECT_EQ(t.value("status", ""), "failed") << t.dump();
  EXPECT_EQ(t.value("reason", ""), "oom") << t.dump();
  EXPECT_EQ(t["signal"], 9) << t.dump();
  EXPECT_NE(text(t, "detail").find("out-of-memory"), std::string::npos) << t.dump();
  json n = wait_task(d, "oom-not");
  EXPECT_EQ(n.value("reason", ""), "signal") << n.dump();
  EXPECT_EQ(metric(d, R"(corral_tasks_total{status="failed",reason="oom"})"), 1);
}

// C2: the sandbox's disk (limits.disk) fills: the command that fails on it
// ends disk_quota, and so does one killed by SIGXFSZ and an input (inline
// or from the object store) that does not fit; a command that fails with
// room to spare stays exit_code.
TEST(DaemonTaskFaults, AFullSandboxDiskEndsWithReasonDiskQuota) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  // Two files of 10 MB on a 16 MiB disk: the second write gets ENOSPC (one
  // file over the limit would meet RLIMIT_FSIZE instead).
  json fill = task_body("disk-cmd", "head -c 10000000 /dev/zero > /workspace/a && "
                                    "head -c 10000000 /dev/zero > /workspace/b");
  ASSERT_EQ(d.request("POST", "/v1/tasks", fill.dump()).status, 202);
  json input = task_body("disk-input", "true");
  input["sandbox"]["limits"]["disk"] = "2Mi";
  input["inputs"] =
      json::array({{{"path", "/workspace/big"}, {"content", std::string(3 << 20, 'x')}}});
  ASSERT_EQ(d.request("POST", "/v1/tasks", input.dump()).status, 202);
  ASSERT_EQ(d.request("POST", "/v1/tasks", task_body("disk-not", "exit 1").dump()).status, 202);
  // One file past the limit (sparse: the disk itself has room) meets
  // RLIMIT_FSIZE, which is the disk limit: SIGXFSZ is disk_quota too.
  json sparse = task_body("disk-fsize", "");
  sparse.erase("sh");
  sparse["command"] = {"dd", "if=/dev/zero", "of=/workspace/sparse", "bs=1", "count=1",
                       "seek=20000000"};
  ASSERT_EQ(d.request("POST", "/v1/tasks", sparse.dump()).status, 202);

  json t = wait_task(d, "disk-cmd");
  EXPECT_EQ(t.value("status", ""), "failed") << t.dump();
  EXPECT_EQ(t.value("reason", ""), "disk_quota") << t.dump();
  EXPECT_EQ(t["exit_code"], 1) << t.dump();
  json i = wait_task(d, "disk-input");
  EXPECT_EQ(i.value("status", ""), "failed") << i.dump();
  EXPECT_EQ(i.value("reason", ""), "disk_quota") << i.dump();
  EXPECT_NE(text(i, "detail").find("inputs[0]"), std::string::npos) << i.dump();
  EXPECT_TRUE(i["exit_code"].is_null()) << "the command never ran: " << i.dump();
  EXPECT_EQ(wait_task(d, "disk-not").value("reason", ""), "exit_code");
  json f = wait_task(d, "disk-fsize");
  EXPECT_EQ(f.value("reason", ""), "disk_quota") << f.dump();
  EXPECT_EQ(f["signal"], SIGXFSZ) << f.dump();

  // An object-store input that does not fit: the first task's 3 MB output
  // is the second one's input, in a 2 MiB sandbox. The store did nothing
  // wrong: its get is not counted as an error.
  json make = task_body("disk-gen", "head -c 3000000 /dev/urandom > /workspace/o");
  make["outputs"] = json::array({{{"path", "/workspace/o"}}});
  ASSERT_EQ(d.request("POST", "/v1/tasks", make.dump()).status, 202);
  ASSERT_EQ(wait_task(d, "disk-gen").value("status", ""), "succeeded");
  json take = task_body("disk-object", "true");
  take["sandbox"]["limits"]["disk"] = "2Mi";
  take["inputs"] = json::array(
      {{{"path", "/workspace/big"}, {"object", "tasks/disk-gen/1/outputs/0"}}});
  ASSERT_EQ(d.request("POST", "/v1/tasks", take.dump()).status, 202);
  json o = wait_task(d, "disk-object");
  EXPECT_EQ(o.value("reason", ""), "disk_quota") << o.dump();
  EXPECT_NE(text(o, "detail").find("inputs[0]"), std::string::npos) << o.dump();
  EXPECT_EQ(metric(d, R"(corral_object_store_errors_total{op="get"})"), 0);
}

// D5: the object store's disk is full when an output is stored. The task
// fails storage_unavailable (the store's fault, not the task's: the same id
// may run again), nothing partial stays in the store, the failed put is
// counted, and once there is room the same request runs attempt 2.
TEST(DaemonTaskFaults, AFullObjectStoreFailsTheOutputAndTheSameIdRunsAgainOnceThereIsRoom) {
  SmallDisk disk("1m");
  if (!disk.mounted()) CORRAL_SKIP_OR_FAIL("cannot mount a tmpfs for the store: " + disk.error());
  TestDaemon d({}, object_store_yaml(disk.dir()));
  ASSERT_TRUE(d.ready()) << d.output();
  EXPECT_EQ(metric(d, R"(corral_object_store_errors_total{op="put"})"), 0)
      << "registered at 0 before any failure";
  json body = task_body("full-1", "head -c 3000000 /dev/urandom > /workspace/o");
  body["outputs"] = json::array({{{"path", "/workspace/o"}}});
  body["snapshot"] = "never";
  ASSERT_EQ(d.request("POST", "/v1/tasks", body.dump()).status, 202);
  json t = wait_task(d, "full-1");
  EXPECT_EQ(t.value("status", ""), "failed") << t.dump();
  EXPECT_EQ(t.value("reason", ""), "storage_unavailable") << t.dump();
  EXPECT_NE(text(t, "detail").find("outputs[0]"), std::string::npos) << t.dump();
  EXPECT_NE(text(t, "detail").find("No space left"), std::string::npos) << t.dump();
  ASSERT_EQ(t["outputs"].size(), 1u);
  EXPECT_FALSE(t["outputs"][0].value("present", true));
  EXPECT_GE(metric(d, R"(corral_object_store_errors_total{op="put"})"), 1);
  // Nothing partial: no output object, and no temporary file left behind.
  for (const auto& f : files_under(disk.dir() + "/objects")) {
    EXPECT_EQ(f.find("outputs/"), std::string::npos) << f;
    EXPECT_NE(f.rfind("tasks/full-1/1/log/", 0), std::string::npos) << "unexpected: " << f;
  }
  ASSERT_TRUE(disk.grow("16m"));
  auto retry = d.request("POST", "/v1/tasks", body.dump());
  ASSERT_EQ(retry.status, 202) << retry.body;
  EXPECT_EQ(retry.json().value("attempt", 0), 2);
  t = wait_task(d, "full-1");
  EXPECT_EQ(t.value("status", ""), "succeeded") << t.dump();
  auto out = d.request("GET", "/v1/tasks/full-1/outputs/0");
  ASSERT_EQ(out.status, 200);
  EXPECT_EQ(out.body.size(), 3000000u);
  EXPECT_EQ(sha256_hex(out.body), t["outputs"][0].value("sha256", ""));
  d.stop();
}

// D4: a snapshot that cannot be stored does not change the task's result:
// the status, reason and exit code stay the command's, snapshot_id is null,
// snapshot_error says why, and nothing of the snapshot is in the store.
void expect_result_stands_without_snapshot(TestDaemon& d, const std::string& id,
                                           const std::string& objects_dir,
                                           const std::string& error_part) {
  SCOPED_TRACE(id);
  json t = wait_task(d, id);
  EXPECT_EQ(t.value("status", ""), "failed") << t.dump();
  EXPECT_EQ(t.value("reason", ""), "exit_code") << t.dump();
  EXPECT_EQ(t["exit_code"], 3) << t.dump();
  EXPECT_TRUE(t["snapshot_id"].is_null()) << t.dump();
  EXPECT_NE(text(t, "snapshot_error").find(error_part), std::string::npos) << t.dump();
  EXPECT_EQ(t.value("stage", ""), "done");
  auto listed = d.request("GET", "/v1/snapshots?task=" + id).json();
  EXPECT_TRUE(listed["snapshots"].empty()) << listed.dump();
  for (const auto& f : files_under(objects_dir))
    EXPECT_EQ(f.rfind("tasks/", 0), 0u) << "left in the store: " << f << "\nall:\n"
                                        << joined(files_under(objects_dir));
  EXPECT_GE(metric(d, R"(corral_snapshots_total{result="failed"})"), 1);
}

TEST(DaemonTaskFaults, ASnapshotOverTheQuotaIsRefusedAndTheTaskResultStands) {
  TestDaemon d({}, "serve:\n  snapshots:\n    quota: 16Ki\n");
  ASSERT_TRUE(d.ready()) << d.output();
  // 256 KiB that zstd cannot shrink: an archive over the 16 KiB quota.
  json body = task_body("snapq-1", "head -c 262144 /dev/urandom > /workspace/r; exit 3");
  ASSERT_EQ(d.request("POST", "/v1/tasks", body.dump()).status, 202);
  expect_result_stands_without_snapshot(d, "snapq-1", d.data_dir() + "/objects", "quota");
}

TEST(DaemonTaskFaults, ASnapshotOnAFullDiskFailsAndTheTaskResultStands) {
  SmallDisk disk("1m");
  if (!disk.mounted()) CORRAL_SKIP_OR_FAIL("cannot mount a tmpfs for the store: " + disk.error());
  TestDaemon d({}, object_store_yaml(disk.dir()));
  ASSERT_TRUE(d.ready()) << d.output();
  json body = task_body("snapfull-1", "head -c 3000000 /dev/urandom > /workspace/r; exit 3");
  ASSERT_EQ(d.request("POST", "/v1/tasks", body.dump()).status, 202);
  expect_result_stands_without_snapshot(d, "snapfull-1", disk.dir() + "/objects",
                                        "No space left");
  EXPECT_GE(metric(d, R"(corral_object_store_errors_total{op="put"})"), 1);
  d.stop();
}

}  // namespace
}  // namespace corral::testing
