// Real workloads under the seccomp allowlist (docs/seccomp.md): language
// runtimes, compilers, build tools, version control, databases, archivers,
// HTTP clients and package managers run inside a `corral run` sandbox on
// the host base and must do their ordinary work. A syscall the allowlist
// forgot shows up here as a failing program (ENOSYS or EPERM), with the
// program's own stderr in the failure message.
#include <string>
#include <vector>

#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

bool host_has(const std::string& tool) {
  int status = 0;
  host_sh("command -v " + tool + " >/dev/null 2>&1", &status);
  return status == 0;
}

#define REQUIRE_TOOLS(...)                                                                   \
  do {                                                                                       \
    for (const char* tool : {__VA_ARGS__}) {                                                 \
      if (!host_has(tool)) {                                                                 \
        CORRAL_SKIP_OR_FAIL(std::string(tool) + " is not installed (scripts/install-deps)"); \
      }                                                                                      \
    }                                                                                        \
  } while (0)

// Runs `script` with sh inside a sandbox of the host base (loopback-only
// network, the default user), `input` on its stdin.
RunOutcome sandboxed(const std::string& script, std::string_view input = {},
                     std::vector<std::string> opts = {}) {
  opts.insert(opts.end(), {"--memory", "2Gi", "--pids", "512", "--timeout", "240s"});
  return run_sandbox(opts, {"/bin/sh", "-c", script}, input, std::chrono::seconds(280));
}

std::string describe(const RunOutcome& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out + "--- stderr\n" + r.err;
}

TEST(Workloads, Python3ThreadsAndMultiprocessing) {
  REQUIRE_TOOLS("python3");
  const std::string program = R"PY(
import concurrent.futures, multiprocessing as mp, os, queue, threading

def square(x):
    return x * x

def child(q):
    q.put(os.getpid())

if __name__ == "__main__":
    results = queue.Queue()
    threads = [threading.Thread(target=lambda i=i: results.put(square(i))) for i in range(16)]
    for t in threads: t.start()
    for t in threads: t.join()
    threaded = sum(results.get() for _ in range(16))
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        pooled = sum(ex.map(square, range(100)))
    for method in ("fork", "spawn", "forkserver"):
        ctx = mp.get_context(method)
        with ctx.Pool(2) as pool:
            assert sum(pool.map(square, range(100))) == 328350, method
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,))
        p.start()
        assert q.get(timeout=60) != os.getpid()
        p.join()
        assert p.exitcode == 0, (method, p.exitcode)
        lock, value = ctx.Lock(), ctx.Value("i", 0)
        with lock: value.value += 1
    with concurrent.futures.ProcessPoolExecutor(2) as ex:
        procs = sum(ex.map(square, range(10)))
    print("python ok", threaded, pooled, procs, os.cpu_count() >= 1)
)PY";
  RunOutcome r = sandboxed("cat > /tmp/w.py && python3 /tmp/w.py", program);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("python ok 1240 328350 285 True"), std::string::npos) << describe(r);
}

TEST(Workloads, NodeWorkersChildProcessesCryptoAndHttpOnLoopback) {
  REQUIRE_TOOLS("node");
  const std::string program = R"JS(
const { Worker } = require('worker_threads');
const { execFileSync } = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const http = require('http');
const w = new Worker('require("worker_threads").parentPort.postMessage(6 * 7)', { eval: true });
w.on('message', (n) => {
  const echoed = execFileSync('/bin/echo', ['child']).toString().trim();
  fs.writeFileSync('/tmp/n.txt', crypto.createHash('sha256').update('x').digest('hex'));
  const digest = fs.readFileSync('/tmp/n.txt', 'utf8').slice(0, 8);
  fs.watch('/tmp').close();
  const server = http.createServer((req, res) => res.end('pong')).listen(0, '127.0.0.1', () => {
    http.get({ host: '127.0.0.1', port: server.address().port, path: '/' }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => {
        console.log('node ok', n, echoed, digest, body, crypto.randomBytes(4).length);
        server.close();
      });
    });
  });
});
)JS";
  RunOutcome r = sandboxed("cat > /tmp/w.js && node /tmp/w.js", program);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("node ok 42 child 2d711642 pong 4"), std::string::npos) << describe(r);
}

TEST(Workloads, GccAndGxxCompileAndRunThreadedPrograms) {
  REQUIRE_TOOLS("gcc", "g++");
  const std::string script = R"SH(
set -e
cd /tmp
cat > c.c <<'EOF'
#include <pthread.h>
#include <stdio.h>
static void* run(void* p) { *(int*)p *= 2; return NULL; }
int main(void) { int v = 21; pthread_t t; pthread_create(&t, NULL, run, &v); pthread_join(t, NULL); printf("c %d\n", v); return 0; }
EOF
cat > cc.cc <<'EOF'
#include <future>
#include <iostream>
#include <thread>
#include <vector>
int main() {
  std::vector<std::thread> ts; int sum = 0; std::mutex m;
  for (int i = 0; i < 4; ++i) ts.emplace_back([&, i] { std::lock_guard<std::mutex> l(m); sum += i; });
  for (auto& t : ts) t.join();
  std::cout << "c++ " << sum + std::async(std::launch::async, [] { return 36; }).get() << "\n";
}
EOF
gcc -O2 -Wall -pthread -o c c.c
g++ -O2 -Wall -std=c++17 -pthread -o cc cc.cc
./c && ./cc
)SH";
  RunOutcome r = sandboxed(script);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("c 42\nc++ 42\n"), std::string::npos) << describe(r);
}

TEST(Workloads, MakeRunsParallelJobs) {
  REQUIRE_TOOLS("make", "gcc");
  const std::string script = R"SH(
set -e
mkdir -p /tmp/m && cd /tmp/m
printf 'int a(void){return 1;}\n' > a.c
printf 'int b(void){return 2;}\n' > b.c
printf '#include <stdio.h>\nint a(void);int b(void);\nint main(void){printf("make %%d\\n",a()+b());return 0;}\n' > main.c
printf 'prog: a.o b.o main.o\n\t$(CC) -o $@ $^\n%%.o: %%.c\n\t$(CC) -c -o $@ $<\n' > Makefile
make -j4 -s
./prog
)SH";
  RunOutcome r = sandboxed(script);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("make 3\n"), std::string::npos) << describe(r);
}

TEST(Workloads, GitInitCommitBranchAndLog) {
  REQUIRE_TOOLS("git");
  const std::string script = R"SH(
set -e
export HOME=/tmp GIT_CONFIG_NOSYSTEM=1
git config --global user.email t@example.invalid
git config --global user.name test
git config --global init.defaultBranch main
git init -q /tmp/repo && cd /tmp/repo
echo one > f && git add f && git commit -qm one
git checkout -qb side && echo two >> f && git commit -qam two
git checkout -q main && git merge -q side
git gc -q
echo "git ok $(git rev-list --count HEAD) $(git status --porcelain | wc -l) $(git fsck 2>&1 | wc -l)"
)SH";
  RunOutcome r = sandboxed(script);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("git ok 2 0 0"), std::string::npos) << describe(r);
}

TEST(Workloads, Sqlite3WithWalAndIndexes) {
  REQUIRE_TOOLS("sqlite3");
  const std::string script = R"SH(
set -e
sqlite3 /tmp/db.sqlite <<'EOF'
PRAGMA journal_mode=WAL;
CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1000) INSERT INTO t(v) SELECT hex(randomblob(8)) FROM n;
CREATE INDEX tv ON t(v);
EOF
echo "sqlite ok $(sqlite3 /tmp/db.sqlite 'SELECT count(*) FROM t; PRAGMA integrity_check;' | tr '\n' ' ')"
)SH";
  RunOutcome r = sandboxed(script);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("sqlite ok 1000 ok"), std::string::npos) << describe(r);
}

TEST(Workloads, TarWithZstdCreatesAndExtracts) {
  REQUIRE_TOOLS("tar", "zstd");
  const std::string script = R"SH(
set -e
mkdir -p /tmp/src/sub && cd /tmp
head -c 300000 /dev/urandom > src/rand
seq 1 100000 > src/sub/seq
ln -s ../rand src/sub/link
tar --zstd -cf a.tar.zst src
zstd -q -T2 -19 -f src/sub/seq -o seq.zst
mkdir out && tar --zstd -xf a.tar.zst -C out
zstd -q -d -f seq.zst -o seq.out
cmp src/rand out/src/rand && cmp src/sub/seq seq.out && test -L out/src/sub/link
echo "tar ok $(tar --zstd -tf a.tar.zst | wc -l)"
)SH";
  RunOutcome r = sandboxed(script);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("tar ok 5"), std::string::npos) << describe(r);
}

TEST(Workloads, CurlFileUrlAndALoopbackServer) {
  REQUIRE_TOOLS("curl", "python3");
  const std::string script = R"SH(
set -e
cd /tmp && echo served > index.txt
curl -sS file:///tmp/index.txt
python3 -m http.server 18080 --bind 127.0.0.1 >/dev/null 2>&1 &
for i in $(seq 1 100); do curl -sS -o /dev/null http://127.0.0.1:18080/ 2>/dev/null && break; sleep 0.1; done
echo "curl $(curl -sS http://127.0.0.1:18080/index.txt)"
kill $!
)SH";
  RunOutcome r = sandboxed(script);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("served\ncurl served\n"), std::string::npos) << describe(r);
}

TEST(Workloads, PipOfflineVersionDownloadAndInstall) {
  REQUIRE_TOOLS("python3");
  int status = 0;
  host_sh("python3 -m pip --version >/dev/null 2>&1", &status);
  if (status != 0) CORRAL_SKIP_OR_FAIL("python3-pip is not installed (scripts/install-deps)");
  // A one-module wheel made inside the sandbox, so nothing is fetched.
  const std::string script = R"SH(
set -e
export HOME=/tmp PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
python3 -m pip --version | cut -c1-4
mkdir -p /tmp/wheels && cd /tmp/wheels
python3 - <<'EOF'
import zipfile, hashlib, base64
files = {
    "corraldemo.py": "VALUE = 42\n",
    "corraldemo-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: corraldemo\nVersion: 1.0\n",
    "corraldemo-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
with zipfile.ZipFile("corraldemo-1.0-py3-none-any.whl", "w") as z:
    for name, text in files.items():
        data = text.encode()
        z.writestr(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("corraldemo-1.0.dist-info/RECORD,,")
    z.writestr("corraldemo-1.0.dist-info/RECORD", "\n".join(record) + "\n")
EOF
python3 -m pip download -q --no-index --find-links /tmp/wheels -d /tmp/dl corraldemo
python3 -m pip install -q --no-index --find-links /tmp/dl --target /tmp/site corraldemo
PYTHONPATH=/tmp/site python3 -c 'import corraldemo; print("pip ok", corraldemo.VALUE)'
)SH";
  RunOutcome r = sandboxed(script);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("pip "), std::string::npos) << describe(r);
  EXPECT_NE(r.out.find("pip ok 42"), std::string::npos) << describe(r);
}

TEST(Workloads, JavaVersionAndASourceFileProgramWithThreads) {
  REQUIRE_TOOLS("java");
  // Debian's JDK keeps its configuration in /etc/java-<N>-openjdk, which
  // the host base's curated /etc does not copy: bind it read-only.
  std::string etc = host_sh("ls -d /etc/java-*-openjdk 2>/dev/null | head -1");
  while (!etc.empty() && etc.back() == '\n') etc.pop_back();
  std::vector<std::string> opts;
  if (!etc.empty()) opts = {"--mount-root", "/etc", "--mount", etc + ":" + etc};
  const std::string program = R"JAVA(
import java.util.concurrent.*;
public class Hello {
  public static void main(String[] args) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(4);
    Future<Integer> f = pool.submit(() -> 6 * 7);
    int n = f.get();
    pool.shutdown();
    Process p = new ProcessBuilder("/bin/echo", "child").start();
    String out = new String(p.getInputStream().readAllBytes()).trim();
    System.out.println("java ok " + n + " " + out + " " + p.waitFor());
  }
}
)JAVA";
  RunOutcome r = sandboxed(
      "set -e; java -version 2>&1 | head -1; cat > /tmp/Hello.java && "
      "java -Xmx256m /tmp/Hello.java",
      program, opts);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("version"), std::string::npos) << describe(r);
  EXPECT_NE(r.out.find("java ok 42 child 0"), std::string::npos) << describe(r);
}

// The same filter in a long-lived sandbox: every exec is started by the
// zygote, which installed the filter on itself first and then still sets
// ids, enters Landlock and clones with CLONE_VM | CLONE_VFORK under it.
TEST(Workloads, DaemonExecsRunThreadsSubprocessesAndACompilerUnderTheZygotesFilter) {
  REQUIRE_TOOLS("python3", "gcc");
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string id = d.create_sandbox();
  ASSERT_FALSE(id.empty()) << d.output();
  nlohmann::json r = d.exec(
      id,
      "python3 -c 'import multiprocessing as mp, threading; t = threading.Thread(target=print, "
      "args=(\"thread\",)); t.start(); t.join(); print(\"pool\", sum(mp.Pool(2).map(abs, "
      "range(-4, 4))))' && printf 'int main(void){return 7;}' > /tmp/s.c && gcc -o /tmp/s "
      "/tmp/s.c && { /tmp/s; echo \"exit $?\"; } && grep Seccomp: /proc/self/status");
  EXPECT_EQ(r.value("exit_code", -1), 0) << r.dump();
  const std::string out = r.value("stdout", "");
  EXPECT_NE(out.find("thread\npool 16\nexit 7\nSeccomp:\t2\n"), std::string::npos) << r.dump();
}

}  // namespace
}  // namespace corral::testing
