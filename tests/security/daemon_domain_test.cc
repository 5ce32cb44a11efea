// One trust domain per sandbox (ADR 0006): every process of a daemon
// sandbox (execs, background processes, their children) sees and signals
// the others, as on one machine, while corral's init and zygote, other
// sandboxes and the host stay invisible and out of reach, for the
// sandbox's default user and for its root. Attacks run inside with signal
// 0 and open-without-reading probes; their effect is checked from the host
// and through the daemon's process API.
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <sstream>
#include <string>

#include "security/probe_session.h"
#include "security/sandbox_procs.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using nlohmann::json;

// Runs `script` in sandbox `id`; its `key=value` lines, plus "stdout" and
// "all" (the whole answer, for messages).
std::map<std::string, std::string> run_in(TestDaemon& d, const std::string& id,
                                          const std::string& script) {
  json r = d.exec(id, script);
  std::map<std::string, std::string> out;
  out["stdout"] = r.value("stdout", "");
  out["all"] = r.dump();
  std::istringstream in(out["stdout"]);
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq != std::string::npos && eq > 0 && line.find(' ') > eq)
      out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

struct Who {
  const char* name;
  const char* spec;
  friend void PrintTo(const Who& w, std::ostream* os) { *os << w.name; }
};

class DaemonDomainTest : public ::testing::TestWithParam<Who> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("security tests run as root");
    ASSERT_TRUE(d_.ready()) << d_.output();
    sandbox_ = d_.create_sandbox(GetParam().spec);
    ASSERT_FALSE(sandbox_.empty()) << d_.output();
    json r = d_.exec(sandbox_, "command -v ps pgrep pkill");
    if (r.value("exit_code", 1) != 0)
      CORRAL_SKIP_OR_FAIL("ps, pgrep and pkill (procps) in the base");
  }
  void TearDown() override {
    if (!sandbox_.empty()) d_.request("DELETE", "/v1/sandboxes/" + sandbox_);
  }

  std::map<std::string, std::string> run(const std::string& script) {
    return run_in(d_, sandbox_, script);
  }

  // The process's final state from the daemon (waits up to 30 s).
  json wait_for(const std::string& process_id) {
    return d_
        .request("POST",
                 "/v1/sandboxes/" + sandbox_ + "/processes/" + process_id + "/wait?timeout=30")
        .json();
  }

  TestDaemon d_;
  std::string sandbox_;
};

// The `ps -eo pid=,args=` line of `pid`, or "".
std::string ps_line(const std::string& ps, const std::string& pid) {
  std::istringstream in(ps);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::string p;
    l >> p;
    if (p == pid) return line;
  }
  return "";
}

// A background process is listed by a later exec's ps and pgrep, and that
// exec's pkill ends it: the daemon reports it killed by the signal.
TEST_P(DaemonDomainTest, BackgroundProcessIsSeenAndStoppedByALaterExec) {
  Sleeper s = start_sleeper(d_, sandbox_);
  ASSERT_GT(s.pid, 0) << "background sleep not found on the host";
  const std::string inner = inner_pid(s.pid);
  // A bracket in the pattern, so that it does not match the shell running it.
  const std::string pattern = "'^slee[p] " + s.token + "$'";
  auto out = run("ps -eo pid=,args=; pgrep -f " + pattern + " | sed 's/^/pgrep=/'");
  EXPECT_NE(ps_line(out["stdout"], inner).find("sleep " + s.token), std::string::npos)
      << "an exec's ps does not show the background process " << inner << ": " << out["all"];
  EXPECT_EQ(out["pgrep"], inner) << out["all"];

  out = run("pkill -TERM -f " + pattern + "; echo pkill=$?");
  EXPECT_EQ(out["pkill"], "0") << "an exec could not signal a background process: " << out["all"];
  json end = wait_for(s.process_id);
  EXPECT_EQ(end.value("state", ""), "exited") << end.dump();
  EXPECT_EQ(end.value("signal", json()), json(SIGTERM)) << end.dump();
}

// The children of a background process are one with later execs too.
TEST_P(DaemonDomainTest, ChildOfABackgroundProcessIsStoppedByAnExec) {
  const std::string token = sleep_token();
  json body{{"cmd", "sleep " + token + " & wait $!; echo child=$?"}};
  HttpReply started = d_.request("POST", "/v1/sandboxes/" + sandbox_ + "/processes", body.dump());
  ASSERT_EQ(started.status, 201) << started.body;
  const std::string cmdline = std::string("sleep") + '\0' + token + '\0';
  pid_t child = -1;
  for (int i = 0; i < 500 && child < 0; ++i) {
    child = find_by_cmdline(cmdline);
    if (child < 0) usleep(10000);
  }
  ASSERT_GT(child, 0);
  auto out = run("pkill -TERM -f '^slee[p] " + token + "$'; echo pkill=$?");
  EXPECT_EQ(out["pkill"], "0") << out["all"];
  json end = wait_for(started.json().value("id", ""));
  EXPECT_EQ(end.value("exit_code", json()), json(0)) << end.dump();
  HttpReply output = d_.request(
      "GET", "/v1/sandboxes/" + sandbox_ + "/processes/" + end.value("id", "") + "/output");
  EXPECT_NE(output.body.find("child=143"), std::string::npos)
      << "the child did not end by SIGTERM: " << output.body;
}

// Children of one exec see and signal their siblings.
TEST_P(DaemonDomainTest, ChildrenOfAnExecSeeAndSignalEachOther) {
  auto out =
      run("sleep 3601 & export A=$!; "
          "sh -c 'ps -o pid= -p $A >/dev/null; echo seen=$?; kill -TERM $A; echo kill=$?'; "
          "wait $A; echo status=$?");
  EXPECT_EQ(out["seen"], "0") << out["all"];
  EXPECT_EQ(out["kill"], "0") << out["all"];
  EXPECT_EQ(out["status"], "143") << out["all"];
}

// corral's init and zygote: not in /proc, no status, cmdline, environ or
// memory, no signal (EPERM: they exist), no ptrace, for root inside too.
TEST_P(DaemonDomainTest, InitAndZygoteStayHiddenAndUntouchable) {
  Sleeper s = start_sleeper(d_, sandbox_);
  ASSERT_GT(s.pid, 0);
  const pid_t zygote = parent_of(s.pid);
  ASSERT_GT(zygote, 0);
  const pid_t init = parent_of(zygote);
  ASSERT_GT(init, 0);
  ASSERT_EQ(status_field(proc_status(zygote), "Name"), "corral-zygote");
  ASSERT_EQ(status_field(proc_status(init), "Name"), "corral-init");
  const std::string z = inner_pid(zygote), i = inner_pid(init);
  ASSERT_EQ(i, "1");
  ASSERT_FALSE(z.empty());
  // ptrace(PTRACE_SEIZE) does not stop its target, so even a broken
  // sandbox is not harmed; process_vm_readv reads into a local buffer.
  const std::string py =
      "import ctypes,sys\n"
      "libc=ctypes.CDLL(None,use_errno=True)\n"
      "p=int(sys.argv[1])\n"
      "r=libc.ptrace(0x4206,p,0,0)\n"
      "print('ptrace.%d=%d' % (p, 0 if r==0 else ctypes.get_errno()))\n"
      "b=ctypes.create_string_buffer(8)\n"
      "class V(ctypes.Structure): _fields_=[('b',ctypes.c_void_p),('n',ctypes.c_size_t)]\n"
      "v=V(ctypes.cast(b,ctypes.c_void_p),8)\n"
      "r=libc.process_vm_readv(p,ctypes.byref(v),1,ctypes.byref(v),1,0)\n"
      "print('vmread.%d=%d' % (p, 0 if r>=0 else ctypes.get_errno()))\n";
  std::string script = "cat > /tmp/probe.py <<'EOF'\n" + py + "EOF\n";
  script += "ps -eo pid=,args=; pgrep corral; echo pgrep=$?\n";
  script += "for p in " + z + " " + i +
            "; do\n"
            "  test -e /proc/$p; echo exists.$p=$?\n"
            "  ls /proc | grep -qx $p; echo listed.$p=$?\n"
            "  cat /proc/$p/status >/dev/null 2>&1; echo status.$p=$?\n"
            "  cat /proc/$p/cmdline >/dev/null 2>&1; echo cmdline.$p=$?\n"
            "  ( : </proc/$p/environ ) 2>/dev/null; echo environ.$p=$?\n"
            "  ( : </proc/$p/mem ) 2>/dev/null; echo mem.$p=$?\n"
            "  readlink /proc/$p/exe >/dev/null 2>&1; echo exe.$p=$?\n"
            "  kill -0 $p 2>/dev/null; echo kill.$p=$?\n"
            "  kill -0 $p 2>&1 | grep -qi 'not permitted'; echo eperm.$p=$?\n"
            "  command -v python3 >/dev/null && python3 /tmp/probe.py $p\n"
            "done\n";
  auto out = run(script);
  EXPECT_TRUE(ps_line(out["stdout"], inner_pid(s.pid)).size() > 0) << "control: " << out["all"];
  EXPECT_EQ(out["pgrep"], "1") << "corral's processes listed inside: " << out["all"];
  for (const std::string& p : {z, i}) {
    const char* who = p == z ? "the zygote" : "init";
    EXPECT_EQ(ps_line(out["stdout"], p), "") << who << " in ps: " << out["all"];
    for (const char* probe : {"exists", "status", "cmdline", "environ", "mem", "exe", "kill"}) {
      const std::string key = std::string(probe) + "." + p;
      ASSERT_TRUE(out.count(key)) << key << ": " << out["all"];
      EXPECT_NE(out[key], "0") << GetParam().name << ": " << probe << " of " << who
                               << " succeeded: " << out["all"];
    }
    EXPECT_EQ(out["listed." + p], "1") << who << " listed in /proc: " << out["all"];
    // Refused, not missing: the probe named a live process.
    EXPECT_EQ(out["eperm." + p], "0") << out["all"];
    for (const char* probe : {"ptrace", "vmread"}) {
      const std::string key = std::string(probe) + "." + p;
      if (out.count(key)) {
        EXPECT_NE(out[key], "0") << who << ": " << out["all"];
      }
    }
  }
  if (!out.count("ptrace." + z)) std::cout << "[note] no python3 inside: ptrace probe not run\n";
  EXPECT_EQ(kill(zygote, 0), 0);
  EXPECT_EQ(kill(init, 0), 0);
  json still = d_.exec(sandbox_, "true");
  EXPECT_EQ(still.value("exit_code", 1), 0) << "the sandbox no longer starts processes";
}

// Root inside holds CAP_SETUID, but the commands' user namespace does not
// map the zygote's uid: root can become any other id of the block, never
// that one, and signal 0 still finds the zygote refused from any of them.
TEST(DaemonDomain, NoIdInsideIsTheZygotes) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("security tests run as root");
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string sandbox = d.create_sandbox(R"({"root": true})");
  ASSERT_FALSE(sandbox.empty()) << d.output();
  if (d.exec(sandbox, "command -v python3").value("exit_code", 1) != 0)
    CORRAL_SKIP_OR_FAIL("python3 in the base");
  Sleeper s = start_sleeper(d, sandbox);
  ASSERT_GT(s.pid, 0);
  const std::string z = inner_pid(parent_of(s.pid));
  ASSERT_FALSE(z.empty());
  auto out = run_in(d, sandbox,
                    "python3 - <<'EOF'\n"
                    "import os\n"
                    "def probe(uid):\n"
                    "    pid = os.fork()\n"
                    "    if pid == 0:\n"
                    "        try:\n"
                    "            os.setresgid(uid, uid, uid); os.setresuid(uid, uid, uid)\n"
                    "        except OSError as e:\n"
                    "            print('setuid.%d=%d' % (uid, e.errno), flush=True); os._exit(0)\n"
                    "        print('setuid.%d=0' % uid, flush=True)\n"
                    "        try:\n"
                    "            os.kill(" +
                        z +
                        ", 0); print('kill.%d=0' % uid, flush=True)\n"
                        "        except OSError as e:\n"
                        "            print('kill.%d=%d' % (uid, e.errno), flush=True)\n"
                        "        os._exit(0)\n"
                        "    os.waitpid(pid, 0)\n"
                        "for uid in (0, 1000, 65534, 65535):\n"
                        "    probe(uid)\n"
                        "EOF\n");
  for (const char* uid : {"0", "1000", "65534"}) {
    EXPECT_EQ(out[std::string("setuid.") + uid], "0") << "control: " << out["all"];
    EXPECT_EQ(out[std::string("kill.") + uid], std::to_string(EPERM))
        << "uid " << uid << " signalled the zygote: " << out["all"];
  }
  EXPECT_EQ(out["setuid.65535"], std::to_string(EINVAL))
      << "root became the zygote's uid: " << out["all"];
  EXPECT_EQ(out.count("kill.65535"), 0u) << out["all"];
  d.request("DELETE", "/v1/sandboxes/" + sandbox);
}

// Processes of another sandbox and of the host: not listed, not in /proc,
// no signal. Their host pids are the only names the sandbox could try.
TEST_P(DaemonDomainTest, OtherSandboxesAndTheHostAreOutOfReach) {
  const std::string other = d_.create_sandbox(GetParam().spec);
  ASSERT_FALSE(other.empty());
  Sleeper theirs = start_sleeper(d_, other);
  Sleeper ours = start_sleeper(d_, sandbox_);
  ASSERT_GT(theirs.pid, 0);
  ASSERT_GT(ours.pid, 0);
  const std::string host_token = sleep_token();
  HostChild host({"/bin/sleep", host_token});
  ASSERT_GT(host.pid(), 0);

  const std::vector<pid_t> targets = {theirs.pid, host.pid(), d_.pid(), getpid()};
  std::string script = "ps -eo pid=,args=\n";
  for (pid_t t : targets) {
    const std::string p = std::to_string(t);
    script += "test -e /proc/" + p + "; echo exists." + p + "=$?\n";
    script += "kill -0 " + p + " 2>/dev/null; echo kill." + p + "=$?\n";
  }
  auto out = run(script);
  const std::string& ps = out["stdout"];
  ASSERT_NE(ps.find("sleep " + ours.token), std::string::npos) << "control: " << out["all"];
  EXPECT_EQ(ps.find("sleep " + theirs.token), std::string::npos)
      << "another sandbox's process listed: " << out["all"];
  EXPECT_EQ(ps.find("sleep " + host_token), std::string::npos)
      << "a host process listed: " << out["all"];
  for (pid_t t : targets) {
    const std::string p = std::to_string(t);
    if (!ps_line(ps, p).empty()) continue;  // the number names one of ours inside
    EXPECT_NE(out["exists." + p], "0") << "host pid " << p << " in /proc: " << out["all"];
    EXPECT_NE(out["kill." + p], "0") << "host pid " << p << " signalled: " << out["all"];
  }
  EXPECT_EQ(kill(theirs.pid, 0), 0) << "the other sandbox's process is gone";
  EXPECT_EQ(kill(host.pid(), 0), 0);
  d_.request("DELETE", "/v1/sandboxes/" + other);
}

// A peer of the same sandbox and user is one principal (docs/isolation.md):
// its environ is readable, as ps e shows it; its memory is never written
// (Landlock: /proc is not writable), never traced (seccomp refuses ptrace
// and process_vm_*), and read through /proc/<pid>/mem only where the
// host's Yama allows reading a non-descendant's memory.
TEST_P(DaemonDomainTest, PeerMemoryIsNeverTracedOrWritten) {
  Sleeper s = start_sleeper(d_, sandbox_);
  ASSERT_GT(s.pid, 0);
  const std::string p = inner_pid(s.pid);
  auto out =
      run("( : </proc/" + p +
          "/environ ) 2>/dev/null; echo environ=$?\n"
          "( : <>/proc/" +
          p +
          "/mem ) 2>/dev/null; echo memrw=$?\n"
          "( : </proc/" +
          p +
          "/mem ) 2>/dev/null; echo memro=$?\n"
          "command -v python3 >/dev/null && python3 -c '\n"
          "import ctypes\n"
          "libc=ctypes.CDLL(None,use_errno=True)\n"
          "r=libc.ptrace(0x4206," +
          p +
          ",0,0)\n"
          "print(\"ptrace=%d\" % (0 if r==0 else ctypes.get_errno()))\n"
          "b=ctypes.create_string_buffer(8)\n"
          "class V(ctypes.Structure): _fields_=[(\"b\",ctypes.c_void_p),(\"n\",ctypes.c_size_t)]\n"
          "v=V(ctypes.cast(b,ctypes.c_void_p),8)\n"
          "r=libc.process_vm_readv(" +
          p +
          ",ctypes.byref(v),1,ctypes.byref(v),1,0)\n"
          "print(\"vmread=%d\" % (0 if r>=0 else ctypes.get_errno()))\n"
          "'\n");
  EXPECT_EQ(out["environ"], "0") << out["all"];
  EXPECT_NE(out["memrw"], "0") << "a peer's memory opened for writing: " << out["all"];
  const std::string yama = read_text("/proc/sys/kernel/yama/ptrace_scope");
  const bool yama_refuses = !yama.empty() && yama[0] != '0';
  if (yama_refuses) {
    EXPECT_NE(out["memro"], "0") << "Yama ptrace_scope " << yama << ": " << out["all"];
  } else {
    EXPECT_EQ(out["memro"], "0") << "documented: readable without Yama: " << out["all"];
  }
  if (out.count("ptrace")) {
    EXPECT_NE(out["ptrace"], "0") << out["all"];
  }
  if (out.count("vmread")) {
    EXPECT_NE(out["vmread"], "0") << out["all"];
  }
  EXPECT_EQ(kill(s.pid, 0), 0);
}

INSTANTIATE_TEST_SUITE_P(Identities, DaemonDomainTest,
                         ::testing::Values(Who{"user", "{}"}, Who{"root", R"({"root": true})"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace corral::testing
