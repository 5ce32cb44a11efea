// The client verbs of the `corral` binary (create, ls, inspect, exec, cp,
// rm) against a real `corral serve`: on its unix socket (--url unix:...)
// and on TCP with the API key (CORRAL_URL + CORRAL_API_KEY, or
// --api-key-file). Exit codes, streamed output and copied bytes are checked
// from outside, as a user sees them.
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_daemon_fixture.h"
#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

void write_file(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

std::string random_bytes(std::size_t n, std::uint32_t seed) {
  std::string data(n, '\0');
  std::mt19937 rng(seed);
  for (char& c : data) c = static_cast<char>(rng() & 0xff);
  return data;
}

class CliClient : public CliDaemonTest {
 protected:
  CliClient() : CliDaemonTest("cli-client") {}

  // `corral VERB --url unix:... ARGS...`
  RunOutcome corral(const std::string& verb, std::vector<std::string> args,
                    std::string_view stdin_data = {}) {
    args.insert(args.begin(), {verb, "--url", daemon_->unix_url()});
    return run_corral(args, stdin_data);
  }

  std::string create(std::vector<std::string> opts = {}) {
    RunOutcome r = corral("create", std::move(opts));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string id = r.out;
    if (!id.empty() && id.back() == '\n') id.pop_back();
    EXPECT_TRUE(std::regex_match(id, std::regex("sb-[0-9a-f]{12}"))) << "create printed: " << r.out;
    return id;
  }
};

TEST_F(CliClient, CreateLsInspectRm) {
  std::string id = create();
  ASSERT_FALSE(id.empty());

  RunOutcome ls = corral("ls", {});
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_TRUE(ls.out.starts_with("ID ")) << ls.out;
  EXPECT_NE(ls.out.find("MEM"), std::string::npos) << ls.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(ls.out, m, std::regex(id + " +ready +[0-9]+s +in [0-9]+m +[0-9.]+[KMG]?i?/2Gi +[0-9.]+[KMG]?i?/2Gi")))
      << ls.out;

  RunOutcome js = corral("ls", {"--json"});
  EXPECT_EQ(js.exit_code, 0) << js.err;
  auto list = nlohmann::json::parse(js.out, nullptr, false);
  ASSERT_TRUE(list.is_object()) << js.out;
  ASSERT_EQ(list["sandboxes"].size(), 1u);
  EXPECT_EQ(list["sandboxes"][0]["id"], id);

  RunOutcome inspect = corral("inspect", {id});
  EXPECT_EQ(inspect.exit_code, 0) << inspect.err;
  auto info = nlohmann::json::parse(inspect.out, nullptr, false);
  ASSERT_TRUE(info.is_object()) << inspect.out;
  EXPECT_EQ(info["id"], id);
  EXPECT_EQ(info["state"], "ready");
  EXPECT_NE(inspect.out.find("\n  \"id\""), std::string::npos) << "not pretty-printed";

  RunOutcome rm = corral("rm", {id});
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_EQ(rm.out, id + "\n");
  EXPECT_EQ(rm.err, "");  // no residue warning

  ls = corral("ls", {});
  EXPECT_EQ(ls.out.find(id), std::string::npos) << ls.out;
  ls = corral("ls", {"--all"});
  EXPECT_TRUE(std::regex_search(ls.out, std::regex(id + " +cleaned +[0-9]+s +- +- +-"))) << ls.out;
  inspect = corral("inspect", {id});
  EXPECT_EQ(nlohmann::json::parse(inspect.out, nullptr, false).value("state", ""), "cleaned");

  // Unknown ids: the API's message, exit 1.
  RunOutcome unknown = corral("inspect", {"sb-000000000000"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("corral: error: no sandbox with id \"sb-000000000000\""),
            std::string::npos)
      << unknown.err;
  unknown = corral("rm", {"sb-000000000000"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("corral: error:"), std::string::npos) << unknown.err;
}

TEST_F(CliClient, CreateOptionsAndJson) {
  RunOutcome r = corral("create", {"--memory", "256Mi", "--pids", "64", "--disk", "64Mi",
                                   "--cpus", "0.5", "--timeout", "20s", "--lifetime", "5m",
                                   "--env", "ROLE=worker", "--env", "EMPTY=", "--hostname",
                                   "box1", "--workdir", "/tmp", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto info = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(info.is_object()) << r.out;
  const std::string id = info.value("id", "");
  ASSERT_FALSE(id.empty());
  const auto& spec = info["spec"];
  EXPECT_EQ(spec["limits"]["memory_bytes"], 256ull << 20) << spec.dump();
  EXPECT_EQ(spec["limits"]["pids"], 64) << spec.dump();
  EXPECT_EQ(spec["limits"]["disk_bytes"], 64ull << 20) << spec.dump();
  EXPECT_EQ(spec["limits"]["timeout_ms"], 20000) << spec.dump();
  EXPECT_EQ(spec["limits"]["max_lifetime_ms"], 300000) << spec.dump();
  EXPECT_EQ(spec["hostname"], "box1");

  RunOutcome e = corral("exec", {id, "--sh", "echo \"$ROLE:$EMPTY:$(hostname):$(pwd)\""});
  EXPECT_EQ(e.exit_code, 0) << e.err;
  EXPECT_EQ(e.out, "worker::box1:/tmp\n");

  // The idempotency key returns the same sandbox.
  RunOutcome k1 = corral("create", {"--idempotency-key", "cli-test-1"});
  RunOutcome k2 = corral("create", {"--idempotency-key", "cli-test-1"});
  EXPECT_EQ(k1.exit_code, 0) << k1.err;
  EXPECT_EQ(k1.out, k2.out);
  RunOutcome rm = corral("rm", {"--all"});
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_NE(rm.out.find(id), std::string::npos);
  EXPECT_NE(rm.out.find(k1.out), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(corral("ls", {"--json"}).out)["sandboxes"].size(), 0u);
}

TEST_F(CliClient, ExecExitCodesPassThrough) {
  std::string id = create({"--timeout", "60s"});
  ASSERT_FALSE(id.empty());

  RunOutcome r = corral("exec", {id, "--", "sh", "-c", "echo to-out; echo to-err >&2; exit 7"});
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_EQ(r.out, "to-out\n");
  EXPECT_EQ(r.err, "to-err\n");

  r = corral("exec", {id, "--", "corral-no-such-command-xyz"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.err.find("corral-no-such-command-xyz"), std::string::npos) << r.err;

  r = corral("exec", {id, "--sh", "kill -KILL $$"});
  EXPECT_EQ(r.exit_code, 137) << r.err;

  r = corral("exec", {"--timeout", "1s", id, "--", "sleep", "30"});
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_LT(r.wall, std::chrono::seconds(15));

  // Options, env and cwd.
  r = corral("exec", {"--env", "A=1", "--env", "B=two words", "--cwd", "/tmp", id, "--sh",
                      "echo \"$A|$B|$(pwd)\""});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1|two words|/tmp\n");

  // -i: stdin (every byte value) is sent with the request.
  std::string input = random_bytes(300000, 11);
  r = corral("exec", {"-i", id, "--", "cat"}, input);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.out.size(), input.size());
  EXPECT_TRUE(r.out == input) << "stdout differs from stdin";
  // Without -i the command reads an empty stdin.
  r = corral("exec", {id, "--", "wc", "-c"}, "ignored");
  EXPECT_EQ(r.out, "0\n");

  // corral's own failures: 125.
  r = corral("exec", {"sb-000000000000", "--", "true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("corral: error: no sandbox"), std::string::npos) << r.err;
  r = corral("exec", {id});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("no command given"), std::string::npos) << r.err;
  r = corral("exec", {id, "--sh", "true", "--", "true"});
  EXPECT_EQ(r.exit_code, 125);
  r = corral("exec", {"--env", "1X=y", id, "--", "true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_EQ(corral("rm", {id}).exit_code, 0);
}

TEST_F(CliClient, ExecStreamsOutputWhileTheCommandRuns) {
  std::string id = create();
  ASSERT_FALSE(id.empty());
  CorralProcess p({"exec", "--url", daemon_->unix_url(), id, "--sh",
                   "echo first; sleep 4; echo second"});
  ASSERT_TRUE(p.started());
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(p.wait_for_stdout("first\n", std::chrono::milliseconds(3000)))
      << "stdout so far: " << p.out() << " stderr: " << p.err();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(3500));
  EXPECT_EQ(p.out().find("second"), std::string::npos) << "second arrived before the sleep ended";
  RunOutcome r = p.wait(std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "first\nsecond\n");
  EXPECT_EQ(corral("rm", {id}).exit_code, 0);
}

TEST_F(CliClient, CpBothWaysKeepsEveryByte) {
  std::string id = create();
  ASSERT_FALSE(id.empty());
  const std::string data = random_bytes(5 << 20, 5);
  const std::string local = dir_ + "/payload.bin";
  write_file(local, data);
  chmod(local.c_str(), 0750);

  // Upload into a directory (trailing slash): the file keeps its name and mode.
  RunOutcome r = corral("cp", {local, id + ":/workspace/"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  RunOutcome check = corral("exec", {id, "--sh", "sha256sum /workspace/payload.bin | cut -d' ' -f1; stat -c %a /workspace/payload.bin"});
  EXPECT_EQ(check.out, host_sh("sha256sum '" + local + "' | cut -d' ' -f1") + "750\n") << check.err;
  // A directory without the slash works the same.
  ASSERT_EQ(corral("exec", {id, "--", "mkdir", "/workspace/dir"}).exit_code, 0);
  r = corral("cp", {local, id + ":/workspace/dir"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(corral("exec", {id, "--", "cmp", "/workspace/dir/payload.bin", "/workspace/payload.bin"}).exit_code, 0);

  // Download to a file, and into a directory.
  r = corral("cp", {id + ":/workspace/payload.bin", dir_ + "/back.bin"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(read_host_file(dir_ + "/back.bin") == data) << "downloaded bytes differ";
  host_sh("mkdir '" + dir_ + "/sub'");
  r = corral("cp", {id + ":/workspace/payload.bin", dir_ + "/sub"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(read_host_file(dir_ + "/sub/payload.bin") == data);

  // stdin to a sandbox file, that file to stdout.
  const std::string piped = random_bytes(3 << 20, 6);
  r = corral("cp", {"-", id + ":/workspace/piped.bin"}, piped);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = corral("cp", {id + ":/workspace/piped.bin", "-"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.out.size(), piped.size());
  EXPECT_TRUE(r.out == piped) << "stdout differs";

  // A file made inside comes out whole.
  corral("exec", {id, "--sh", "seq 1 200000 > /workspace/seq.txt"});
  r = corral("cp", {id + ":/workspace/seq.txt", "-"});
  EXPECT_EQ(r.out, host_sh("seq 1 200000"));

  // Failures: nothing half-written is left behind.
  r = corral("cp", {id + ":/workspace/missing", dir_ + "/sub/missing"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("corral: error:"), std::string::npos) << r.err;
  EXPECT_EQ(host_sh("ls -A '" + dir_ + "/sub'"), "payload.bin\n");
  r = corral("cp", {id + ":/../etc/shadow", dir_ + "/sub/x"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  r = corral("cp", {dir_ + "/does-not-exist", id + ":/workspace/x"});
  EXPECT_EQ(r.exit_code, 1);
  r = corral("cp", {dir_, id + ":/workspace/x"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << r.err;
  r = corral("cp", {local, "sb-000000000000:/workspace/x"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no sandbox"), std::string::npos) << r.err;
  EXPECT_EQ(corral("rm", {id}).exit_code, 0);
}

TEST_F(CliClient, OverTcpWithTheApiKey) {
  setenv("CORRAL_URL", daemon_->tcp_url().c_str(), 1);
  // No key: refused before anything is sent, with what to do.
  RunOutcome r = run_corral({"ls"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("CORRAL_API_KEY"), std::string::npos) << r.err;
  // A wrong key: the daemon's 401 message.
  setenv("CORRAL_API_KEY", "not-the-key", 1);
  r = run_corral({"ls"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("corral: error: the API key is not valid"), std::string::npos) << r.err;

  setenv("CORRAL_API_KEY", daemon_->api_key().c_str(), 1);
  r = run_corral({"create"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string id = r.out.substr(0, r.out.size() - 1);
  r = run_corral({"exec", id, "--sh", "echo over tcp; exit 5"});
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_EQ(r.out, "over tcp\n");
  const std::string data = random_bytes(1 << 20, 9);
  write_file(dir_ + "/up.bin", data);
  EXPECT_EQ(run_corral({"cp", dir_ + "/up.bin", id + ":/workspace/up.bin"}).exit_code, 0);
  r = run_corral({"cp", id + ":/workspace/up.bin", "-"});
  EXPECT_TRUE(r.out == data) << r.err;

  // --api-key-file instead of the variable; --url wins over CORRAL_URL.
  unsetenv("CORRAL_API_KEY");
  setenv("CORRAL_URL", "http://127.0.0.1:1", 1);
  r = run_corral({"ls", "--url", daemon_->tcp_url(), "--api-key-file",
                  daemon_->data_dir() + "/api-key"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(id), std::string::npos) << r.out;
  r = run_corral({"rm", id, "--url", daemon_->tcp_url(), "--api-key-file",
                  daemon_->data_dir() + "/api-key"});
  EXPECT_EQ(r.exit_code, 0) << r.err;

  // Nobody listening: a clear error.
  r = run_corral({"ls", "--url", "unix:" + dir_ + "/none.sock"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is the corral daemon running?"), std::string::npos) << r.err;
}

TEST_F(CliClient, UsageErrorsAndHelp) {
  for (const char* verb : {"create", "ls", "inspect", "exec", "cp", "rm"}) {
    RunOutcome h = run_corral({verb, "--help"});
    EXPECT_EQ(h.exit_code, 0) << verb;
    EXPECT_TRUE(h.out.starts_with(std::string("usage: corral ") + verb)) << h.out;
    EXPECT_NE(h.out.find("--url"), std::string::npos) << verb;
  }
  RunOutcome r = corral("create", {"--memory", "2GG"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--memory"), std::string::npos) << r.err;
  r = corral("create", {"--env", "1X=y"});
  EXPECT_EQ(r.exit_code, 2);
  r = corral("create", {"--frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown option \"--frobnicate\""), std::string::npos) << r.err;
  r = corral("cp", {"a", "b"});
  EXPECT_EQ(r.exit_code, 2);
  r = corral("cp", {"sb-1:/a", "sb-2:/b"});
  EXPECT_EQ(r.exit_code, 2);
  r = corral("rm", {});
  EXPECT_EQ(r.exit_code, 2);
  r = corral("inspect", {});
  EXPECT_EQ(r.exit_code, 2);
  r = run_corral({"ls", "--url", "https://127.0.0.1:1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("https is not supported"), std::string::npos) << r.err;
  // None of this made a sandbox.
  EXPECT_EQ(nlohmann::json::parse(corral("ls", {"--json", "--all"}).out)["sandboxes"].size(), 0u);
}

}  // namespace
}  // namespace corral::testing
