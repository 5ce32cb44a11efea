// The daemon's threads at their edges (docs/adr/0007-daemon-threads.md):
// a shutdown that races the teardowns started by inits that exit, and the
// idempotency locks, which must not pile up. Run under ASan and TSan too
// (make test-asan, make test-tsan): there a teardown that outlives
// SandboxService::stop() is a use-after-free report, not only residue.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "daemon/sandbox_service.h"
#include "sdk/local_provider.h"
#include "store/state_store.h"
#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr int kSandboxes = 6;

// Runs `body` in a child process of its own, where it may open a
// LocalProvider (which needs a process with one thread). Returns the
// child's wait status; what it printed goes to *out.
template <typename Body>
int in_child(Body body, std::string* out) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return -1;
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], 1);
    dup2(pipefd[1], 2);
    int rc = body();
    fflush(nullptr);
    _exit(rc);
  }
  close(pipefd[1]);
  char buf[4096];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof buf)) > 0) out->append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  int status = -1;
  waitpid(pid, &status, 0);
  return status;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// After a stop: every sandbox whose init exit the service saw (stored as
// failed) was torn down to the end (cleaned); one whose exit came too late
// is still ready, for the next daemon to reconcile. "failed" or
// "destroying" means a teardown was cut off by the shutdown.
void expect_no_teardown_cut_off(const std::string& state_db, const std::vector<std::string>& ids) {
  auto store = StateStore::open(state_db);
  ASSERT_TRUE(store) << store.error().to_string();
  int cleaned = 0;
  for (const std::string& id : ids) {
    auto r = store->get(id);
    ASSERT_TRUE(r) << id << ": " << r.error().to_string();
    const std::string state(sandbox_state_name(r->state));
    EXPECT_TRUE(state == "cleaned" || state == "ready")
        << id << " is " << state << " after the stop: its teardown was cut off";
    cleaned += state == "cleaned";
  }
  // The race is only tested if the service saw some exits before stopping.
  EXPECT_GT(cleaned, 0) << "no init exit was seen before the stop";
}

// Kills every process of sandbox `id` on the host (its init first of all),
// as a crash or the OOM killer would: the service hears of it through the
// init's pidfd and starts a teardown.
void kill_sandbox_processes(const std::string& id) {
  // cgroup v2 has cgroup.kill; v1 (and v2 too) lists the pids.
  host_sh("for d in /sys/fs/cgroup/corral/" + id + " /sys/fs/cgroup/*/corral/" + id +
          "; do [ -e \"$d/cgroup.kill\" ] && echo 1 > \"$d/cgroup.kill\"; "
          "find \"$d\" -name cgroup.procs -exec cat {} + 2>/dev/null; done | sort -u | "
          "xargs -r kill -9 2>/dev/null; true");
}

// An SDK LocalProvider destroyed while the teardowns of sandboxes whose
// init just exited are running: stop() must wait for them (before the fix
// they ran on detached threads over the freed store, network and journal).
TEST(DaemonThreads, LocalProviderStopWaitsForInitExitTeardowns) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("LocalProvider runs as root");
  const std::string dir = make_temp_dir("threads-local");
  const std::string data = dir + "/data";
  std::string out;
  int status = in_child(
      [&]() -> int {
        sdk::LocalOptions options;
        options.data_dir = data;
        options.destroy_on_close = false;  // the stop itself is under test
        auto p = sdk::LocalProvider::open(options);
        if (!p) {
          fprintf(stderr, "open: %s\n", p.error().to_string().c_str());
          return 2;
        }
        std::vector<std::string> ids;
        for (int i = 0; i < kSandboxes; ++i) {
          api::CreateSandboxRequest req;
          req.spec.network.mode = "none";
        req.spec.limits.disk_bytes = 64u << 20;  // fits the capacity whatever runs beside
          auto info = (*p)->create_sandbox(req, std::nullopt);
          if (!info) {
            fprintf(stderr, "create: %s\n", info.error().to_string().c_str());
            return 3;
          }
          ids.push_back(info->id);
          printf("id %s\n", info->id.c_str());
        }
        for (const std::string& id : ids) kill_sandbox_processes(id);
        // Stop as soon as the first exit is seen: the others' teardowns
        // are then starting or running.
        for (int i = 0; i < 3000; ++i) {
          auto info = (*p)->inspect(ids.back());
          if (info && info->state != "ready" && info->state != "running") break;
          std::this_thread::sleep_for(1ms);
        }
        p->reset();
        return 0;
      },
      &out);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << describe_status(status) << "\n"
      << out;
  std::vector<std::string> ids;
  for (size_t at = out.find("id "); at != std::string::npos; at = out.find("id ", at + 1)) {
    if (at != 0 && out[at - 1] != '\n') continue;
    ids.push_back(out.substr(at + 3, out.find('\n', at) - at - 3));
  }
  ASSERT_EQ(ids.size(), static_cast<size_t>(kSandboxes)) << out;
  expect_no_teardown_cut_off(data + "/state.db", ids);
  // What the stop left running (exits it did not see) goes now.
  std::string again;
  int rc = in_child(
      [&]() -> int {
        sdk::LocalOptions options;
        options.data_dir = data;
        auto p = sdk::LocalProvider::open(options);  // reconciles, destroys on close
        return p ? 0 : 2;
      },
      &again);
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << describe_status(rc) << "\n" << again;
  host_sh("rm -rf '" + dir + "'");
}

// The same through `corral serve` and SIGTERM.
TEST(DaemonThreads, DaemonStopWaitsForInitExitTeardowns) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("the daemon runs as root");
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  std::vector<std::string> ids;
  for (int i = 0; i < kSandboxes; ++i) {
    HttpReply reply;
    std::string id = d.create_sandbox(R"({"network": {"mode": "none"}, "limits": {"disk": "64Mi"}})", &reply);
    ASSERT_FALSE(id.empty()) << reply.status << " " << reply.body;
    ids.push_back(id);
  }
  for (const std::string& id : ids) kill_sandbox_processes(id);
  for (int i = 0; i < 3000; ++i) {
    auto info = d.request("GET", "/v1/sandboxes/" + ids.back()).json();
    const std::string state = info.value("state", "");
    if (state != "ready" && state != "running") break;
    std::this_thread::sleep_for(1ms);
  }
  const int status = d.stop();
  ASSERT_TRUE(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << describe_status(status) << "\n"
      << d.output();
  expect_no_teardown_cut_off(d.data_dir() + "/state.db", ids);
  // The harness's destructor restarts it: the rest is reconciled.
}

// One lock per Idempotency-Key while a create with it runs, and none after:
// many distinct keys leave the map empty (it grew by one per key before).
TEST(DaemonThreads, IdempotencyLocksAreDroppedWhenUnused) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("LocalProvider runs as root");
  const std::string dir = make_temp_dir("threads-idem");
  std::string out;
  int status = in_child(
      [&]() -> int {
        sdk::LocalOptions options;
        options.data_dir = dir + "/data";
        options.max_sandboxes = 1;  // every create after the first is refused, cheaply
        auto p = sdk::LocalProvider::open(options);
        if (!p) {
          fprintf(stderr, "open: %s\n", p.error().to_string().c_str());
          return 2;
        }
        api::CreateSandboxRequest req;
        req.spec.network.mode = "none";
        req.spec.limits.disk_bytes = 64u << 20;  // fits the capacity whatever runs beside
        auto first = (*p)->create_sandbox(req, std::string("idem-first"));
        if (!first) {
          fprintf(stderr, "create: %s\n", first.error().to_string().c_str());
          return 3;
        }
        // Distinct keys from several threads at once, and one key shared.
        std::vector<std::thread> threads;
        std::atomic<int> refused{0};
        for (int t = 0; t < 4; ++t) {
          threads.emplace_back([&, t] {
            for (int i = 0; i < 100; ++i) {
              const std::string key =
                  i % 10 == 0 ? "idem-shared" : "idem-" + std::to_string(t) + "-" + std::to_string(i);
              if (!(*p)->create_sandbox(req, key)) ++refused;
            }
          });
        }
        for (auto& t : threads) t.join();
        // The first key again: answered from the store, under its lock.
        auto again = (*p)->create_sandbox(req, std::string("idem-first"));
        const std::size_t held = (*p)->service().idempotency_locks_held();
        printf("refused %d held %zu same %d\n", refused.load(), held,
               again && again->id == first->id ? 1 : 0);
        if (refused.load() != 400) return 4;
        if (held != 0) return 5;
        if (!again || again->id != first->id) return 6;
        return 0;
      },
      &out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe_status(status) << "\n"
                                                             << out;
  host_sh("rm -rf '" + dir + "'");
}

}  // namespace
}  // namespace corral::testing
