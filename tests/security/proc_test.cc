// /proc inside the sandbox and what leaks through it: the kernel knobs
// (core_pattern, sysrq, modprobe) are not writable, kernel memory and logs
// are not readable, the runtime's binary cannot be reached through
// /proc/<pid>/exe for writing (CVE-2019-5736), and no host file descriptor
// survives into the sandbox (CVE-2024-21626). The processes of one run see
// and signal each other, but not init.
#include <gtest/gtest.h>

#include "security/probe_session.h"

namespace corral::testing {
namespace {

class ProcTest : public ::testing::TestWithParam<Identity> {
 protected:
  void SetUp() override {
    if (!is_root()) CORRAL_SKIP_OR_FAIL("security tests run as root");
  }
};

// Writing any of these from inside would act on the whole host (a
// core_pattern pipe runs as host root; sysrq reboots; modprobe is run by
// the kernel as root). The probe only opens them O_WRONLY.
TEST_P(ProcTest, KernelKnobsNotWritable) {
  const std::vector<std::string> knobs = {
      "/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger",
      "/proc/sys/kernel/modprobe",     "/proc/sys/vm/drop_caches",
      "/proc/sys/kernel/hostname",     "/proc/sys/fs/binfmt_misc/register",
      "/proc/sys/kernel/panic",        "/proc/sys/net/ipv4/ip_forward",
      "/proc/1/attr/current",          "/proc/self/oom_score_adj"};
  std::vector<std::string> args;
  for (const auto& k : knobs) {
    if (!args.empty()) args.push_back("+");
    args.insert(args.end(), {"write-probe", k});
  }
  args.insert(args.end(), {"+", "ls", "/proc/sys"});
  ProbeRun run = run_probe(GetParam().opts, args);
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  for (const auto& k : knobs) {
    json w = run.find("write-probe", "path", k);
    ASSERT_TRUE(w.is_object()) << k << "\n" << run.describe();
    if (k == "/proc/self/oom_score_adj") {
      // Raising one's own oom score is harmless and allowed; only reported.
      std::cout << "[" << GetParam().name << "] " << w.dump() << "\n";
      continue;
    }
    if (w.value("errno", json()) == "ENOENT") continue;  // absent (masked or not built)
    EXPECT_EQ(w.value("ok", true), false)
        << GetParam().name << " can open " << k << " for writing: " << w.dump();
  }
  // /proc/sys must exist (read-only), or the checks above proved nothing.
  EXPECT_TRUE(run.find("ls", "path", "/proc/sys").value("ok", false)) << run.describe();
}

// Kernel memory, kernel log and timers are masked or unreadable. A masked
// file reads as empty (bind of /dev/null); a real one fails to open.
TEST_P(ProcTest, KernelInfoMasked) {
  const std::vector<std::string> files = {"/proc/kcore", "/proc/kmsg", "/proc/keys",
                                          "/proc/timer_list", "/proc/sched_debug",
                                          "/proc/kallsyms"};
  std::vector<std::string> args;
  for (const auto& f : files) {
    if (!args.empty()) args.push_back("+");
    args.insert(args.end(), {"read", f});
  }
  ProbeRun run = run_probe(GetParam().opts, args);
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  for (const auto& f : files) {
    json r = run.find("read", "path", f);
    ASSERT_TRUE(r.is_object()) << f << "\n" << run.describe();
    bool hidden = !r.value("ok", true) || r.value("bytes", 1) == 0;
    if (f == "/proc/kallsyms" || f == "/proc/keys") {
      // kallsyms shows zeros to the unprivileged; keys lists only the
      // caller's own keys. Reported, not required.
      std::cout << "[" << GetParam().name << "] " << r.dump() << "\n";
      continue;
    }
    EXPECT_TRUE(hidden) << GetParam().name << " reads " << f << ": " << r.dump();
  }
}

// CVE-2019-5736: /proc/1/exe (corral's init) and /proc/self/exe cannot be
// opened for writing.
TEST_P(ProcTest, RuntimeBinaryNotWritable) {
  ProbeRun run = run_probe(GetParam().opts, {"proc-exe"});
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  std::vector<json> lines = run.all("proc-exe");
  ASSERT_EQ(lines.size(), 6u) << run.describe();
  for (const json& l : lines) {
    if (l.value("mode", "") == "O_WRONLY") {
      EXPECT_EQ(l.value("ok", true), false) << GetParam().name << ": " << l.dump();
    }
    // What init's exe resolves to, if anything: never a host path of corral.
    if (l.value("path", "") == "/proc/1/exe" && l.value("mode", "") == "readlink") {
      std::string target = l.value("target", "");
      EXPECT_EQ(target.find("corral"), std::string::npos)
          << "init's binary is reachable from inside: " << l.dump();
    }
  }
}

// CVE-2024-21626: no fd of the host is open in the workload; only the
// three standard streams.
TEST_P(ProcTest, NoHostFdsInside) {
  ProbeRun run = run_probe(GetParam().opts, {"fds", "+", "status"});
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  json fds = run.first("fds");
  ASSERT_TRUE(fds.value("ok", false)) << run.describe();
  EXPECT_EQ(fds["fds"], json::array({0, 1, 2})) << run.describe();
  for (const json& fd : run.all("fd")) {
    std::string target = fd.value("target", "");
    EXPECT_EQ(target.find(source_dir()), std::string::npos) << fd.dump();
  }
  // The working directory is inside the sandbox's root, not a leaked host
  // directory.
  EXPECT_EQ(run.first("status").value("cwd", ""), "/workspace") << run.describe();
}

// `corral run` is one trust domain too (ADR 0006): the command's children
// see and signal each other, and init (PID 1, corral's) stays hidden and
// out of reach: signal 0 only.
TEST_P(ProcTest, RunProcessesAreOneTrustDomain) {
  const std::string script =
      "sleep 3601 & export A=$!; "
      "sh -c 'ps -o pid= -p $A >/dev/null; echo seen=$?; kill -TERM $A; echo kill=$?'; "
      "wait $A; echo status=$?; "
      "test -e /proc/1; echo init_proc=$?; kill -0 1 2>/dev/null; echo init_kill=$?";
  RunOutcome out = run_sandbox(GetParam().opts, {"/bin/sh", "-c", script});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_NE(out.out.find("seen=0\n"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("kill=0\n"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("status=143\n"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("init_proc=1\n"), std::string::npos) << "/proc/1 visible: " << out.out;
  EXPECT_NE(out.out.find("init_kill=1\n"), std::string::npos) << "init signalled: " << out.out;
}

INSTANTIATE_TEST_SUITE_P(Identities, ProcTest, ::testing::ValuesIn(identities()),
                         identity_test_name);

}  // namespace
}  // namespace corral::testing
