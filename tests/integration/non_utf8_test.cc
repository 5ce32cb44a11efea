// Bytes that are not UTF-8, through every way they reach corral's JSON: the
// CLI's flags, API bodies and headers, file names and outputs from inside a
// sandbox, paths from the daemon's configuration that end up in error
// messages (sent by the sandbox factory). nlohmann's dump() throws on such
// a string, and an exception there ended the process in std::terminate:
// the CLI with status 134, the daemon or its sandbox factory with every
// create after it. Each path must give a clear answer and keep serving.
// (tests/unit/json_text_test.cc checks that no strict dump() is left.)
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using nlohmann::json;

const std::string kBad = "x\xff\xfey";  // never UTF-8
// A sandbox that fits the daemon's capacity however many other tests run.
const std::string kSmall = R"({"network": {"mode": "none"}, "limits": {"disk": "64Mi"}})";

// corral exited by itself, not in std::terminate or a sanitizer's abort.
void expect_clear_refusal(const RunOutcome& r, const std::string& what) {
  EXPECT_TRUE(r.exit_code == 2 || r.exit_code == 125) << what << ": exit " << r.exit_code << "\n"
                                                      << r.err;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << what << "\n" << r.err;
  EXPECT_EQ(r.err.find("type_error"), std::string::npos) << what << "\n" << r.err;
  EXPECT_FALSE(r.err.empty()) << what;
}

// Every flag of `corral create` that carries text into the request body,
// and the idempotency key (a header): refused by name before anything is
// sent. No daemon is needed: the socket names nothing.
TEST(NonUtf8, CliCreateRefusesEveryFlagByName) {
  const std::vector<std::vector<std::string>> cases = {
      {"--env", "K=" + kBad},
      {"--env", kBad + "=v"},
      {"--image", kBad},
      {"--workdir", "/w" + kBad},
      {"--hostname", kBad},
      {"--network", kBad},
      {"--network-template", kBad},
      {"--allow", kBad + ".example.com"},
      {"--deny", kBad + ".example.com"},
      {"--dns", kBad},
      {"--gateway", kBad},
      {"--secret", kBad},
      {"--memory", kBad},
      {"--timeout", kBad},
      {"--lifetime", kBad},
      {"--expected-duration", kBad},
      {"--idempotency-key", kBad},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args{"create", "--url", "unix:/nonexistent/corral.sock"};
    args.insert(args.end(), c.begin(), c.end());
    RunOutcome r = run_corral(args);
    expect_clear_refusal(r, c[0]);
    EXPECT_EQ(r.exit_code, 2) << c[0] << "\n" << r.err;
  }
  // The message names what is wrong.
  RunOutcome env = run_corral({"create", "--url", "unix:/nonexistent/corral.sock", "--env",
                               "K=" + kBad});
  EXPECT_NE(env.err.find("env.K"), std::string::npos) << env.err;
  EXPECT_NE(env.err.find("not UTF-8"), std::string::npos) << env.err;
}

TEST(NonUtf8, CliExecRefusesCommandEnvAndCwd) {
  const std::vector<std::vector<std::string>> cases = {
      {"--", "echo", kBad},
      {"--sh", "echo " + kBad},
      {"--env", "K=" + kBad, "--", "true"},
      {"--cwd", "/" + kBad, "--", "true"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args{"exec", "--url", "unix:/nonexistent/corral.sock", "sb-none"};
    args.insert(args.end(), c.begin(), c.end());
    RunOutcome r = run_corral(args);
    expect_clear_refusal(r, c[0] + " " + c[1]);
    EXPECT_NE(r.err.find("not UTF-8"), std::string::npos) << c[0] << "\n" << r.err;
  }
}

// API bodies and headers from clients, and bytes from inside a sandbox
// (output, file names), against a running daemon that must keep serving.
TEST(NonUtf8, DaemonAnswersAndKeepsServing) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("the daemon runs as root");
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  auto alive = [&](const std::string& after) {
    EXPECT_EQ(d.request("GET", "/v1/sandboxes").status, 200) << "after " << after << "\n"
                                                             << d.output();
  };
  // A body that is not UTF-8 is not JSON: 400.
  for (const std::string& body : {R"({"env": {"K": ")" + kBad + R"("}})",
                                  R"({"env": {")" + kBad + R"(": "v"}})",
                                  R"({"image": ")" + kBad + R"("})"}) {
    HttpReply r = d.request("POST", "/v1/sandboxes", body);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_TRUE(r.json().is_object()) << r.body;
    alive("a body");
  }
  // An Idempotency-Key of bytes: refused or used, never a crash.
  {
    HttpReply r = d.request("POST", "/v1/sandboxes", kSmall, false,
                            true, {{"idempotency-key", kBad}});
    EXPECT_TRUE(r.status == 400 || r.status == 201) << r.status << " " << r.body;
    HttpReply again = d.request("POST", "/v1/sandboxes", R"({"network": {"mode": "none"}, "limits": {"disk": "64Mi"}, "env": {"A": "b"}})",
                                false, true, {{"idempotency-key", kBad}});
    EXPECT_TRUE(again.status == 400 || again.status == 409) << again.status << " " << again.body;
    alive("an Idempotency-Key");
  }
  std::string id = d.create_sandbox(kSmall);
  ASSERT_FALSE(id.empty()) << d.output();
  // Output, a file name and a symlink target made inside the sandbox.
  json r = d.exec(id, "printf 'x\\377\\376y'; printf 'e\\377' >&2; touch \"/workspace/n$(printf "
                      "'\\377')\"; ln -s \"/t$(printf '\\376')\" /workspace/l; "
                      "mkdir \"/workspace/d$(printf '\\377')\"");
  EXPECT_EQ(r.value("exit_code", -1), 0) << r.dump();
  EXPECT_TRUE(r.contains("stdout_b64")) << r.dump();
  HttpReply list = d.request("GET", "/v1/sandboxes/" + id + "/files/list?path=/workspace");
  EXPECT_EQ(list.status, 200) << list.body;
  EXPECT_TRUE(list.json().is_object()) << list.body;
  HttpReply stat = d.request("GET", "/v1/sandboxes/" + id + "/files/stat?path=/workspace/n%FF");
  EXPECT_EQ(stat.status, 200) << stat.body;
  HttpReply missing = d.request("GET", "/v1/sandboxes/" + id + "/files/stat?path=/workspace/%FE%FF");
  EXPECT_EQ(missing.status, 404) << missing.body;
  EXPECT_TRUE(missing.json().is_object()) << missing.body;
  // A command that is not found, named with bytes (the zygote's failure
  // message quotes it): the request is JSON, so the bytes come from a file.
  json nf = d.exec(id, "cp /bin/true \"/workspace/t$(printf '\\377')\"; exec \"/workspace/"
                       "nope$(printf '\\377')\"");
  EXPECT_EQ(nf.value("exit_code", -1), 127) << nf.dump();
  alive("sandbox bytes");
  EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
  // The audit log was written throughout (its records are replaced, not
  // refused) and is still one valid chain.
  RunOutcome verify = run_corral({"audit", "verify", "--log", d.data_dir() + "/audit.log"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

// A configured mount root whose path is not UTF-8 is quoted in the error
// that the sandbox factory sends back when a mount lies outside it. Before,
// the daemon threw while sending the request (and the factory while sending
// the error): now a create is refused with a message, and the next works.
TEST(NonUtf8, ConfiguredPathInAFactoryErrorMessage) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("the daemon runs as root");
  const std::string dir = make_temp_dir("non-utf8");
  const std::string root = dir + "/root" + kBad;
  ASSERT_EQ(mkdir(root.c_str(), 0755), 0);
  const std::string outside = dir + "/outside";
  ASSERT_EQ(mkdir(outside.c_str(), 0755), 0);
  TestDaemon d({}, "serve:\n  mount_roots: [\"" + root + "\"]\n");
  ASSERT_TRUE(d.ready()) << d.output();
  HttpReply r;
  std::string refused = d.create_sandbox(
      R"({"network": {"mode": "none"}, "limits": {"disk": "64Mi"}, "mounts": [{"source": ")" + outside +
          R"(", "target": "/data"}]})",
      &r);
  EXPECT_TRUE(refused.empty()) << r.body;
  EXPECT_EQ(r.status, 400) << r.body << "\n" << d.output();
  EXPECT_NE(r.json().value("error", json::object()).value("message", "").find("mount roots"),
            std::string::npos)
      << r.body;
  std::string id = d.create_sandbox(kSmall);
  EXPECT_FALSE(id.empty()) << "the factory no longer serves creates\n" << d.output();
  if (!id.empty()) {
    EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
  }
  d.stop();
  host_sh("rm -rf '" + dir + "'");
}

}  // namespace
}  // namespace corral::testing
