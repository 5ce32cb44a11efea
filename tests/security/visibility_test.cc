// What of the host a sandbox can see and touch (F1, F4, F6): nothing but
// the read-only base and what was mounted on purpose. Host secrets, home
// directories, the project tree, host /tmp, host processes and devices are
// out of sight; the base and the mounts are not writable.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "security/probe_session.h"

namespace corral::testing {
namespace {

class VisibilityTest : public ::testing::TestWithParam<Identity> {
 protected:
  void SetUp() override {
    if (!is_root()) CORRAL_SKIP_OR_FAIL("security tests run as root");
  }
};

std::vector<std::string> host_entries(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    names.push_back(e.path().filename().string());
  }
  return names;
}

// F1: host secrets are absent or unreadable, also for root inside.
TEST_P(VisibilityTest, HostSecretsUnreadable) {
  ProbeRun run = run_probe(GetParam().opts, {"read", "/etc/shadow", "+", "read", "/etc/gshadow",
                                             "+", "read", "/etc/sudoers", "+", "read",
                                             "/etc/ssh/ssh_host_ed25519_key", "+", "read",
                                             "/root/.bash_history"});
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  std::vector<json> reads = run.all("read");
  ASSERT_EQ(reads.size(), 5u) << run.describe();
  for (const json& r : reads) {
    EXPECT_EQ(r.value("ok", true), false) << GetParam().name << " read a host secret: " << r.dump();
  }
}

// F1: /root and /home hold nothing of the host. /home may hold the
// sandbox user's own home (docs/cli.md: HOME=/home/sandbox).
TEST_P(VisibilityTest, HomesHoldNothingOfTheHost) {
  ProbeRun run = run_probe(GetParam().opts, {"ls", "/root", "+", "ls", "/home"});
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  json root = run.find("ls", "path", "/root");
  json home = run.find("ls", "path", "/home");
  ASSERT_TRUE(root.is_object() && home.is_object()) << run.describe();
  if (root.value("ok", false)) {
    std::vector<std::string> listing = host_entries("/root");
    std::set<std::string> host(listing.begin(), listing.end());
    for (const auto& name : root["entries"]) {
      EXPECT_FALSE(host.count(name.get<std::string>()))
          << "host /root/" << name << " visible inside: " << root.dump();
    }
  }
  if (home.value("ok", false)) {
    for (const auto& name : home["entries"]) {
      EXPECT_EQ(name, "sandbox") << "unexpected /home entry inside: " << home.dump();
    }
  }
}

// F1: the project tree, the test's working directory and the probe's host
// directory are not visible under their host paths (only at /probe).
TEST_P(VisibilityTest, ProjectTreeInvisible) {
  char cwd[4096] = {0};
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  std::string src = source_dir();
  std::string probe_host = ProbeDir::get().root();
  ProbeRun run = run_probe(GetParam().opts, {"stat", src, "+", "stat", src + "/CMakeLists.txt",
                                             "+", "stat", cwd, "+", "stat", probe_host, "+",
                                             "ls", "/work"});
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  for (const json& s : run.all("stat")) {
    EXPECT_EQ(s.value("ok", true), false) << "host path visible inside: " << s.dump();
    EXPECT_EQ(s.value("errno", json()), "ENOENT") << s.dump();
  }
  // /work (where the repositories live on the dev machines) is not part of
  // the base.
  EXPECT_EQ(run.find("ls", "path", "/work").value("ok", true), false) << run.describe();
}

// F1: host /tmp is not the sandbox's /tmp.
TEST_P(VisibilityTest, HostTmpInvisible) {
  std::string canary = make_temp_dir("canary");
  std::string name = std::filesystem::path(canary).filename();
  ProbeRun run = run_probe(GetParam().opts, {"ls", "/tmp", "+", "stat", canary});
  rmdir(canary.c_str());
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  json tmp = run.find("ls", "path", "/tmp");
  ASSERT_TRUE(tmp.value("ok", false)) << "no /tmp inside: " << run.describe();
  for (const auto& e : tmp["entries"]) {
    EXPECT_NE(e.get<std::string>(), name) << "host /tmp visible inside";
    EXPECT_EQ(e.get<std::string>().rfind("corral-test-", 0), std::string::npos)
        << "host test dir visible in /tmp: " << e;
  }
  EXPECT_EQ(run.first("stat").value("ok", true), false);
}

// F1/F4: the base is read-only for everyone inside, root included; user
// mounts are read-only unless asked (:rw). The probe opens O_WRONLY and
// never writes. (/etc is the sandbox's own generated copy in its writable
// layer, so root may write it; see WritesStayInTheLayer.)
TEST_P(VisibilityTest, BaseAndMountsNotWritable) {
  const std::vector<std::string> targets = {
      "/usr/bin/env", "/bin/sh", "/usr/lib/os-release", "/lib/x86_64-linux-gnu/libc.so.6",
      "/usr/bin", "/probe/data", "/probe/corral_probe"};
  std::vector<std::string> args;
  for (const auto& t : targets) {
    if (!args.empty()) args.push_back("+");
    args.insert(args.end(), {"write-probe", t});
  }
  // Control: the base is readable (so the test cannot pass on an empty root).
  args.insert(args.end(), {"+", "read", "/usr/bin/env", "+", "read", "/probe/data"});
  ProbeRun run = run_probe(GetParam().opts, args);
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  for (const auto& t : targets) {
    json w = run.find("write-probe", "path", t);
    ASSERT_TRUE(w.is_object()) << t << "\n" << run.describe();
    json e = w.value("errno", json());
    if (e == "ENOENT") continue;  // not in this base
    EXPECT_EQ(w.value("ok", true), false) << GetParam().name << " can open " << t
                                          << " for writing: " << w.dump();
    // EISDIR: a directory cannot be opened for writing at all; the
    // directory's mount flag is checked by WritesStayInTheLayer.
    EXPECT_TRUE(e == "EROFS" || e == "EACCES" || e == "EPERM" || e == "ETXTBSY" ||
                e == "EISDIR")
        << w.dump();
  }
  // /probe/data is 0666 on the host, so only the mount's ro flag refuses.
  EXPECT_EQ(run.find("write-probe", "path", "/probe/data").value("errno", json()), "EROFS")
      << "a mount without :rw must be read-only (F4)";
  EXPECT_TRUE(run.find("read", "path", "/usr/bin/env").value("ok", false)) << run.describe();
  EXPECT_TRUE(run.find("read", "path", "/probe/data").value("ok", false)) << run.describe();
}

// F1: what the sandbox writes stays in its writable layer: root inside
// creates (empty) files in its /etc, /usr/local and /tmp; none appears on
// the host. Creating a new base file under /usr must fail.
TEST_P(VisibilityTest, WritesStayInTheLayer) {
  std::string token = unique_token("canary");
  const std::vector<std::string> paths = {"/etc/" + token, "/tmp/" + token, "/usr/" + token,
                                          "/usr/local/" + token, "/workspace/" + token};
  std::vector<std::string> args;
  for (const auto& p : paths) {
    if (!args.empty()) args.push_back("+");
    args.insert(args.end(), {"mkfile", p, "0"});
  }
  ProbeRun run = run_probe(GetParam().opts, args);
  for (const auto& p : paths) {
    // A broken sandbox would have created it on the host: report, clean up.
    EXPECT_FALSE(path_exists(p)) << "sandbox write reached the host: " << p;
    if (path_exists(p)) unlink(p.c_str());
  }
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  for (const char* base : {"/usr/", "/usr/local/"}) {
    json m = run.find("mkfile", "path", base + token);
    EXPECT_NE(m.value("errno", json()), json()) << "created a file in the base: " << m.dump();
  }
  std::cout << "[" << GetParam().name << "] ";
  for (const json& m : run.all("mkfile")) {
    std::cout << m.value("path", "") << "=" << m.value("errno", json()).dump() << " ";
  }
  std::cout << "\n";
}

// Controls for the write checks: the places meant to be writable are.
TEST_P(VisibilityTest, WritableLayerWorks) {
  ProbeRun run = run_probe(GetParam().opts, {"mkfile", "/tmp/w", "4096", "+", "mkfile",
                                             "/workspace/w", "4096"});
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  for (const json& m : run.all("mkfile")) {
    EXPECT_EQ(m.value("written", 0), 4096) << m.dump();
  }
}

// Host processes are invisible: a host process we start is neither listed
// in /proc inside nor reachable by kill(pid, 0).
TEST_P(VisibilityTest, HostProcessesInvisible) {
  std::string marker = std::to_string(3000 + getpid() % 1000);  // unique sleep argument
  HostChild sleeper({"/bin/sleep", marker});
  ASSERT_GT(sleeper.pid(), 0);
  ProbeRun run = run_probe(GetParam().opts, {"status", "+", "ps", "+", "kill0",
                                             std::to_string(sleeper.pid()), "+", "kill0",
                                             std::to_string(getpid()), "+", "stat",
                                             "/proc/" + std::to_string(sleeper.pid())});
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  json status = run.first("status");
  // hidepid=invisible: the workload sees itself and its own children; a
  // few more would be acceptable, the host's many are not.
  EXPECT_LE(status.value("visible_pids", 1000), 4) << run.describe();
  for (const json& p : run.all("proc")) {
    EXPECT_EQ(p.value("cmdline", "").find("sleep " + marker), std::string::npos)
        << "host process visible: " << p.dump();
  }
  for (const json& k : run.all("kill0")) {
    EXPECT_EQ(k.value("errno", json()), "ESRCH") << "host pid reachable inside: " << k.dump();
  }
  EXPECT_EQ(run.first("stat").value("ok", true), false) << run.describe();
}

// A minimal /dev: no disks, no kernel memory, no kvm/fuse/tun.
TEST_P(VisibilityTest, DevIsMinimal) {
  const std::set<std::string> allowed = {"null",   "zero",  "full",   "random", "urandom",
                                         "tty",    "ptmx",  "pts",    "shm",    "fd",
                                         "stdin",  "stdout", "stderr", "core",  "mqueue",
                                         "console"};
  ProbeRun run = run_probe(GetParam().opts, {"ls", "/dev"});
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  json dev = run.first("ls");
  ASSERT_TRUE(dev.value("ok", false)) << run.describe();
  for (const auto& e : dev["entries"]) {
    EXPECT_TRUE(allowed.count(e.get<std::string>())) << "/dev/" << e << " inside";
  }
}

// Never any cgroupfs inside (cgroup v1 release_agent escape); /sys absent
// or read-only; /proc/sys read-only.
TEST_P(VisibilityTest, NoCgroupfsAndReadOnlySys) {
  ProbeRun run = run_probe(GetParam().opts, {"mounts"});
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  ASSERT_TRUE(run.first("mounts").value("ok", false)) << run.describe();
  for (const json& m : run.all("mount")) {
    std::string fstype = m.value("fstype", "");
    std::string target = m.value("target", "");
    std::string options = m.value("options", "");
    EXPECT_NE(fstype, "cgroup") << m.dump();
    EXPECT_NE(fstype, "cgroup2") << m.dump();
    EXPECT_NE(fstype, "debugfs") << m.dump();
    EXPECT_NE(fstype, "securityfs") << m.dump();
    EXPECT_NE(fstype, "bpf") << m.dump();
    if (fstype == "sysfs" || target == "/sys" || target.rfind("/sys/", 0) == 0 ||
        target == "/proc/sys") {
      EXPECT_EQ(options.rfind("ro", 0), 0u) << "writable " << target << ": " << m.dump();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Identities, VisibilityTest, ::testing::ValuesIn(identities()),
                         identity_test_name);

}  // namespace
}  // namespace corral::testing
