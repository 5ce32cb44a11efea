// Daemon benchmarks (issue 3), all against one running `corral serve` and
// baselines measured in the same process:
//   1. create -> first exec output (echo hi) -> destroy, through the API,
//      p50/p95/p99 over --rounds; baselines: `corral run -- echo hi` and
//      `bwrap ... echo hi` (fork/exec'd from here, same rounds).
//   2. exec round trip on a live sandbox (`true`) vs a plain fork/exec of
//      /bin/true from this process.
//   3. a burst of --burst concurrent creates: success rate and wall time.
//   4. a --upload-mib upload and download over the unix socket, MB/s.
//   5. memory per idle sandbox: the daemon's RSS growth, and init + zygote
//      (PSS) per sandbox, with --idle sandboxes open.
// Usage: corral_bench_daemon --socket PATH --daemon-pid PID --corral BIN
//   [--rounds N] [--burst N] [--upload-mib N] [--only exec]
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "http/http_client.h"

using Clock = std::chrono::steady_clock;
using nlohmann::json;

extern char** environ;

namespace {

struct Options {
  std::string socket;
  std::string corral = "corral";
  pid_t daemon_pid = 0;
  int rounds = 200;
  int burst = 50;
  int idle = 50;
  int upload_mib = 256;
  std::string only;  // "exec": only the exec round trip (section 2)
};

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Stats {
  std::vector<double> v;
  double pct(double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t i = static_cast<size_t>(p / 100.0 * (v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
  }
  void print(const char* name) {
    printf("  %-34s p50 %8.2f ms  p95 %8.2f ms  p99 %8.2f ms  (n=%zu)\n", name, pct(50), pct(95),
           pct(99), v.size());
  }
};

class Api {
 public:
  explicit Api(const std::string& socket) {
    endpoint_ = *corral::http::Endpoint::parse("unix:" + socket);
  }
  // One request on a kept-alive connection (reconnects when needed).
  std::pair<int, std::string> call(const std::string& method, const std::string& target,
                                   const std::string& body = {}) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (!client_) {
        auto c = corral::http::Client::connect(endpoint_);
        if (!c) return {0, c.error().message};
        client_.emplace(std::move(*c));
      }
      corral::http::Headers h;
      if (!body.empty()) h.push_back({"content-type", "application/json"});
      auto head = client_->send(method, target, h, body);
      if (!head) {
        client_.reset();
        continue;
      }
      auto all = client_->read_all(std::size_t{1} << 30);
      if (!all) {
        client_.reset();
        continue;
      }
      return {head->status, *all};
    }
    return {0, "connection failed"};
  }
  corral::http::Client* raw() {
    if (!client_) {
      auto c = corral::http::Client::connect(endpoint_);
      if (c) client_.emplace(std::move(*c));
    }
    return client_ ? &*client_ : nullptr;
  }
  void reset() { client_.reset(); }

 private:
  corral::http::Endpoint endpoint_;
  std::optional<corral::http::Client> client_;
};

std::string create(Api& api) {
  auto [status, body] =
      api.call("POST", "/v1/sandboxes", R"({"limits":{"memory":"256Mi","disk":"64Mi"}})");
  if (status != 201) {
    fprintf(stderr, "create failed: %d %s\n", status, body.c_str());
    return "";
  }
  return json::parse(body).value("id", "");
}

int run_argv(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) return -1;
  posix_spawn_file_actions_destroy(&fa);
  int status;
  waitpid(pid, &status, 0);
  return status;
}

std::uint64_t status_kib(pid_t pid, const char* field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::strtoull(line.c_str() + strlen(field), nullptr, 10);
  }
  return 0;
}

std::uint64_t pss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Pss:", 0) == 0) return std::strtoull(line.c_str() + 4, nullptr, 10);
  }
  return 0;
}

std::vector<pid_t> children_named(const char* comm) {
  std::vector<pid_t> out;
  for (const auto& e : std::vector<std::string>{}) (void)e;
  FILE* f = popen(("pgrep -x " + std::string(comm)).c_str(), "r");
  if (!f) return out;
  int pid;
  while (fscanf(f, "%d", &pid) == 1) out.push_back(pid);
  pclose(f);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--socket")
      o.socket = argv[i + 1];
    else if (a == "--corral")
      o.corral = argv[i + 1];
    else if (a == "--daemon-pid")
      o.daemon_pid = std::atoi(argv[i + 1]);
    else if (a == "--rounds")
      o.rounds = std::atoi(argv[i + 1]);
    else if (a == "--burst")
      o.burst = std::atoi(argv[i + 1]);
    else if (a == "--idle")
      o.idle = std::atoi(argv[i + 1]);
    else if (a == "--upload-mib")
      o.upload_mib = std::atoi(argv[i + 1]);
    else if (a == "--only")
      o.only = argv[i + 1];
  }
  if (o.socket.empty()) {
    fprintf(stderr,
            "usage: corral_bench_daemon --socket PATH [--daemon-pid PID] [--corral BIN] [--rounds "
            "N]\n");
    return 2;
  }
  Api api(o.socket);

  const bool all = o.only.empty();
  // 1. create -> first output -> destroy.
  if (all) printf("== create -> first exec output -> destroy (%d rounds)\n", o.rounds);
  Stats to_output, create_only, exec_first, destroy, run_cli, bwrap;
  for (int i = 0; all && i < o.rounds; ++i) {
    auto t0 = Clock::now();
    std::string id = create(api);
    if (id.empty()) return 1;
    double c = ms_since(t0);
    auto t1 = Clock::now();
    auto [st, out] = api.call("POST", "/v1/sandboxes/" + id + "/exec", R"({"argv":["echo","hi"]})");
    if (st != 200 || json::parse(out).value("stdout", "") != "hi\n") {
      fprintf(stderr, "exec failed: %d %s\n", st, out.c_str());
      return 1;
    }
    exec_first.v.push_back(ms_since(t1));
    to_output.v.push_back(ms_since(t0));
    create_only.v.push_back(c);
    auto t2 = Clock::now();
    api.call("DELETE", "/v1/sandboxes/" + id);
    destroy.v.push_back(ms_since(t2));
  }
  for (int i = 0; all && i < o.rounds; ++i) {
    auto t0 = Clock::now();
    run_argv({o.corral, "run", "--", "echo", "hi"});
    run_cli.v.push_back(ms_since(t0));
  }
  const bool have_bwrap = all && access("/usr/bin/bwrap", X_OK) == 0;
  for (int i = 0; have_bwrap && i < o.rounds; ++i) {
    auto t0 = Clock::now();
    run_argv({"/usr/bin/bwrap",
              "--ro-bind",
              "/usr",
              "/usr",
              "--symlink",
              "usr/bin",
              "/bin",
              "--symlink",
              "usr/lib",
              "/lib",
              "--symlink",
              "usr/lib64",
              "/lib64",
              "--proc",
              "/proc",
              "--dev",
              "/dev",
              "--unshare-all",
              "--die-with-parent",
              "echo",
              "hi"});
    bwrap.v.push_back(ms_since(t0));
  }
  if (all) {
    to_output.print("API create -> first output");
    create_only.print("  of which create");
    exec_first.print("  of which first exec");
    destroy.print("API destroy");
    run_cli.print("corral run -- echo hi");
    if (have_bwrap) bwrap.print("bwrap --unshare-all echo hi");
  }

  // 2. exec round trip on a live sandbox vs fork/exec.
  printf("== exec round trip on a live sandbox (%d rounds)\n", o.rounds);
  std::string live = create(api);
  if (live.empty()) return 1;  // create() said why
  Stats exec_rt, fork_exec;
  for (int i = 0; i < 20; ++i)
    api.call("POST", "/v1/sandboxes/" + live + "/exec", R"({"argv":["true"]})");
  for (int i = 0; i < o.rounds; ++i) {
    auto t0 = Clock::now();
    api.call("POST", "/v1/sandboxes/" + live + "/exec", R"({"argv":["true"]})");
    exec_rt.v.push_back(ms_since(t0));
    auto t1 = Clock::now();
    run_argv({"/bin/true"});
    fork_exec.v.push_back(ms_since(t1));
  }
  exec_rt.print("API exec true (live sandbox)");
  fork_exec.print("fork/exec /bin/true");
  printf("  ratio p50: %.2fx\n", exec_rt.pct(50) / fork_exec.pct(50));
  if (!all) {
    api.call("DELETE", "/v1/sandboxes/" + live);
    return 0;
  }

  // 4. upload and download.
  printf("== %d MiB upload and download over the unix socket\n", o.upload_mib);
  {
    api.call("DELETE", "/v1/sandboxes/" + live);
    auto [st, body] = api.call("POST", "/v1/sandboxes",
                               "{\"limits\":{\"disk\":\"" + std::to_string(o.upload_mib + 64) +
                                   "Mi\",\"memory\":\"256Mi\"}}");
    live = json::parse(body).value("id", "");
    const std::uint64_t total = std::uint64_t(o.upload_mib) << 20;
    std::string chunk(1 << 20, 'x');
    std::uint64_t sent = 0;
    corral::http::BodySource src = [&](char* buf, std::size_t cap) -> corral::Result<std::size_t> {
      std::size_t n = std::min<std::uint64_t>(cap, total - sent);
      n = std::min(n, chunk.size());
      memcpy(buf, chunk.data(), n);
      sent += n;
      return n;
    };
    api.reset();
    auto t0 = Clock::now();
    auto* c = api.raw();
    auto head = c->send_streaming("PUT", "/v1/sandboxes/" + live + "/files?path=/workspace/big", {},
                                  src, total);
    auto resp = c->read_all(1 << 20);
    double up = ms_since(t0);
    printf("  upload   %7.1f MB/s  (status %d)\n", total / 1e6 / (up / 1000),
           head ? head->status : 0);
    api.reset();
    c = api.raw();
    t0 = Clock::now();
    head = c->send("GET", "/v1/sandboxes/" + live + "/files?path=/workspace/big", {}, "");
    std::vector<char> buf(1 << 20);
    std::uint64_t got = 0;
    while (true) {
      auto n = c->read_body(buf.data(), buf.size());
      if (!n || *n == 0) break;
      got += *n;
    }
    double down = ms_since(t0);
    printf("  download %7.1f MB/s  (%llu bytes)\n", got / 1e6 / (down / 1000),
           (unsigned long long)got);
    api.reset();
    api.call("DELETE", "/v1/sandboxes/" + live);
  }

  // 3. burst of concurrent creates.
  printf("== burst of %d concurrent creates\n", o.burst);
  {
    std::vector<std::string> ids(o.burst);
    std::vector<std::thread> threads;
    auto t0 = Clock::now();
    for (int i = 0; i < o.burst; ++i) {
      threads.emplace_back([&, i] {
        Api a(o.socket);
        ids[i] = create(a);
      });
    }
    for (auto& t : threads) t.join();
    double wall = ms_since(t0);
    int ok =
        static_cast<int>(std::count_if(ids.begin(), ids.end(), [](auto& s) { return !s.empty(); }));
    printf("  %d/%d succeeded in %.0f ms\n", ok, o.burst, wall);

    // 5. memory per idle sandbox, with these open.
    std::uint64_t daemon_rss = o.daemon_pid ? status_kib(o.daemon_pid, "VmRSS:") : 0;
    std::uint64_t pss_sum = 0;
    auto inits = children_named("corral-init");
    auto zygotes = children_named("corral-zygote");
    for (pid_t p : inits) pss_sum += pss_kib(p);
    for (pid_t p : zygotes) pss_sum += pss_kib(p);
    threads.clear();
    for (int i = 0; i < o.burst; ++i) {
      if (!ids[i].empty())
        threads.emplace_back([&, i] {
          Api a(o.socket);
          a.call("DELETE", "/v1/sandboxes/" + ids[i]);
        });
    }
    for (auto& t : threads) t.join();
    std::uint64_t daemon_rss_after = o.daemon_pid ? status_kib(o.daemon_pid, "VmRSS:") : 0;
    printf("== memory with %d idle sandboxes\n", ok);
    if (o.daemon_pid)
      printf(
          "  daemon RSS %llu KiB with them, %llu KiB after destroying them: %.0f KiB per sandbox\n",
          (unsigned long long)daemon_rss, (unsigned long long)daemon_rss_after,
          ok ? double(daemon_rss - std::min(daemon_rss, daemon_rss_after)) / ok : 0.0);
    printf(
        "  init + zygote PSS: %llu KiB over %zu inits and %zu zygotes (%.0f KiB per sandbox; all "
        "corral-init/zygote on the host)\n",
        (unsigned long long)pss_sum, inits.size(), zygotes.size(),
        inits.empty() ? 0.0 : double(pss_sum) / inits.size());
  }
  return 0;
}
