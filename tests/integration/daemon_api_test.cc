// The API's behaviour at its edges against a real `corral serve`
// (docs/api.md): authentication, JSON errors with their stable codes,
// body limits, unknown ids, routes and methods, exec on a destroyed
// sandbox, capacity, Idempotency-Key, and the Prometheus text of /metrics.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using nlohmann::json;

const char kUnknownId[] = "sb-000000000000";

// The error body's code ("" when the body is not an API error).
std::string code_of(const HttpReply& r) {
  json j = r.json();
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return "";
  return j["error"].value("code", "");
}

std::string header_of(const HttpReply& r, std::string_view name) {
  auto v = http::find_header(r.headers, name);
  return v ? std::string(*v) : std::string();
}

std::string describe(const HttpReply& r) {
  return "HTTP " + std::to_string(r.status) + " " + r.body.substr(0, 600);
}

// Expects `r` to be an API error with `status` and `code`.
void expect_error(const HttpReply& r, int status, std::string_view code, std::string_view what) {
  EXPECT_EQ(r.status, status) << what << ": " << describe(r);
  EXPECT_EQ(code_of(r), code) << what << ": " << describe(r);
  EXPECT_EQ(header_of(r, "content-type"), "application/json") << what;
  json j = r.json();
  if (j.is_object() && j.contains("error")) {
    EXPECT_FALSE(j["error"].value("message", "").empty()) << what << ": an error needs a message";
  }
}

// One daemon for the tests that need no special configuration.
class DaemonApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new TestDaemon(); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(daemon_->ready()) << daemon_->output(); }

  TestDaemon& d() { return *daemon_; }

  // Creates a small sandbox; destroyed by the test (or by the daemon's
  // destructor at the end of the suite).
  std::string small_sandbox(const std::string& body = R"({"limits": {"memory": "128Mi", "disk": "16Mi"}})") {
    HttpReply r;
    std::string id = d().create_sandbox(body, &r);
    EXPECT_FALSE(id.empty()) << describe(r);
    return id;
  }

  static TestDaemon* daemon_;
};

TestDaemon* DaemonApi::daemon_ = nullptr;

// ---- authentication ----------------------------------------------------------

TEST_F(DaemonApi, TcpWithoutKeyIsRefusedWithJson401) {
  for (const std::string target : {"/v1/sandboxes", "/metrics", "/v1/no-such-route"}) {
    HttpReply r = d().request("GET", target, "", /*via_tcp=*/true, /*with_key=*/false);
    expect_error(r, 401, "unauthorized", "GET " + target + " over TCP without a key");
    EXPECT_EQ(header_of(r, "www-authenticate"), "Bearer") << target;
  }
}

TEST_F(DaemonApi, TcpWithWrongKeyIsRefused) {
  const std::vector<std::string> wrong = {
      "Bearer " + std::string(40, 'x'),              // well formed, unknown
      "Bearer " + d().api_key() + "x",               // the key plus one byte
      "Basic " + d().api_key(),                      // another scheme
      "Bearer",                                      // no key at all
  };
  for (const auto& value : wrong) {
    HttpReply r = d().request("GET", "/v1/sandboxes", "", true, false, {{"authorization", value}});
    expect_error(r, 401, "unauthorized", "Authorization: " + value.substr(0, 12) + "...");
    EXPECT_EQ(header_of(r, "www-authenticate"), "Bearer");
  }
  // The right key works over TCP, also with another case of the scheme.
  HttpReply ok = d().request("GET", "/v1/sandboxes", "", true, false,
                             {{"authorization", "bearer " + d().api_key()}});
  EXPECT_EQ(ok.status, 200) << describe(ok);
  EXPECT_TRUE(ok.json().contains("sandboxes")) << describe(ok);
}

TEST_F(DaemonApi, UnixSocketNeedsNoKey) {
  HttpReply r = d().request("GET", "/v1/sandboxes");  // unix socket, no header
  EXPECT_EQ(r.status, 200) << describe(r);
  EXPECT_TRUE(r.json()["sandboxes"].is_array()) << describe(r);
}

TEST_F(DaemonApi, HealthzNeedsNoKey) {
  for (bool tcp : {true, false}) {
    HttpReply r = d().request("GET", "/healthz", "", tcp, /*with_key=*/false);
    EXPECT_EQ(r.status, 200) << describe(r);
    json j = r.json();
    EXPECT_EQ(j.value("status", ""), "ok") << describe(r);
    EXPECT_TRUE(j.contains("sandboxes") && j["sandboxes"].is_number_integer()) << describe(r);
  }
}

// ---- request bodies ----------------------------------------------------------------

TEST_F(DaemonApi, MalformedJsonIsBadJson) {
  for (const std::string body : {"{", "{\"limits\": }", "[1, 2", "not json", "{\"a\":1}{"}) {
    HttpReply r = d().request("POST", "/v1/sandboxes", body);
    expect_error(r, 400, "bad_json", "body " + body);
  }
  // Also on the exec and mkdir routes (the body is read before the id is).
  HttpReply r = d().request("POST", std::string("/v1/sandboxes/") + kUnknownId + "/exec", "{\"cmd\":");
  expect_error(r, 400, "bad_json", "exec body");
}

TEST_F(DaemonApi, UnknownFieldIsNamed) {
  HttpReply r = d().request("POST", "/v1/sandboxes", R"({"imagee": "debian-12"})");
  expect_error(r, 400, "unknown_field", "top-level unknown field");
  json e = r.json()["error"];
  EXPECT_EQ(e.value("field", ""), "imagee") << r.body;
  EXPECT_NE(e.value("message", "").find("imagee"), std::string::npos) << r.body;

  r = d().request("POST", "/v1/sandboxes", R"({"limits": {"memroy": "1Gi"}})");
  expect_error(r, 400, "unknown_field", "nested unknown field");
  e = r.json()["error"];
  EXPECT_EQ(e.value("field", ""), "limits.memroy") << r.body;
  EXPECT_NE(e.value("message", "").find("memroy"), std::string::npos) << r.body;
}

TEST_F(DaemonApi, WrongTypeSaysWhatWasExpected) {
  HttpReply r = d().request("POST", "/v1/sandboxes", R"({"limits": {"pids": "many"}})");
  expect_error(r, 400, "wrong_type", "pids as a string");
  EXPECT_EQ(r.json()["error"].value("field", ""), "limits.pids") << r.body;
  EXPECT_NE(r.json()["error"].value("message", "").find("integer"), std::string::npos) << r.body;

  r = d().request("POST", "/v1/sandboxes", R"({"env": ["A=1"]})");
  expect_error(r, 400, "wrong_type", "env as an array");
  EXPECT_EQ(r.json()["error"].value("field", ""), "env") << r.body;

  r = d().request("POST", "/v1/sandboxes", "[]");
  expect_error(r, 400, "wrong_type", "the body as an array");
}

TEST_F(DaemonApi, OversizedCreateBodyIs413) {
  // 2 MiB of valid JSON: over the 1 MiB limit of the JSON routes.
  std::string body = R"({"env": {"BIG": ")" + std::string(2u << 20, 'x') + R"("}})";
  HttpReply r = d().request("POST", "/v1/sandboxes", body);
  expect_error(r, 413, "body_too_large", "2 MiB create body");
  // The daemon is fine afterwards.
  EXPECT_EQ(d().request("GET", "/healthz").status, 200);
}

TEST_F(DaemonApi, OtherContentTypeIs415) {
  HttpReply r = d().request("POST", "/v1/sandboxes", "{}", false, true,
                            {{"content-type", "text/plain"}});
  expect_error(r, 415, "unsupported_media_type", "text/plain create");
}

// ---- ids, routes, methods ----------------------------------------------------------

TEST_F(DaemonApi, UnknownSandboxIs404Everywhere) {
  const std::string base = std::string("/v1/sandboxes/") + kUnknownId;
  struct Case {
    std::string method, target, body;
  };
  const std::vector<Case> cases = {
      {"GET", base, ""},
      {"DELETE", base, ""},
      {"POST", base + "/exec", R"({"cmd": "true"})"},
      {"POST", base + "/timeout", R"({"extend_by": 60})"},
      {"POST", base + "/processes", R"({"cmd": "true"})"},
      {"GET", base + "/processes", ""},
      {"GET", base + "/files?path=/workspace/a", ""},
      {"PUT", base + "/files?path=/workspace/a", "data"},
      {"DELETE", base + "/files?path=/workspace/a", ""},
      {"GET", base + "/files/list?path=/workspace", ""},
      {"GET", base + "/files/stat?path=/workspace", ""},
      {"POST", base + "/files/mkdir", R"({"path": "/workspace/d"})"},
      {"POST", base + "/files/rename", R"({"from": "/workspace/a", "to": "/workspace/b"})"},
  };
  for (const auto& c : cases) {
    http::Headers h;
    if (c.method == "PUT") h.push_back({"content-type", "application/octet-stream"});
    HttpReply r = d().request(c.method, c.target, c.body, false, true, h);
    expect_error(r, 404, "not_found", c.method + " " + c.target);
  }
  // Over TCP too (with the key), and for an id of another shape.
  expect_error(d().request("GET", base, "", true), 404, "not_found", "GET over TCP");
  expect_error(d().request("GET", "/v1/sandboxes/not-an-id"), 404, "not_found", "malformed id");
}

TEST_F(DaemonApi, UnknownRouteIs404AndWrongMethodIs405) {
  for (const std::string target : {"/v1/nothing", "/v2/sandboxes", "/", "/v1/sandboxes/x/y/z/w/v"}) {
    HttpReply r = d().request("GET", target);
    expect_error(r, 404, "not_found", "GET " + target);
  }
  HttpReply r = d().request("PUT", "/v1/sandboxes", "{}");
  expect_error(r, 405, "method_not_allowed", "PUT /v1/sandboxes");
  std::string message = r.json()["error"].value("message", "");
  EXPECT_NE(message.find("POST"), std::string::npos) << message;
  EXPECT_NE(message.find("GET"), std::string::npos) << message;

  r = d().request("GET", std::string("/v1/sandboxes/") + kUnknownId + "/exec");
  expect_error(r, 405, "method_not_allowed", "GET .../exec");
  r = d().request("POST", "/healthz", "{}");
  // /healthz is only GET; a POST is not a known route of the table.
  EXPECT_TRUE(r.status == 404 || r.status == 405) << describe(r);
}

// ---- state -------------------------------------------------------------------------

TEST_F(DaemonApi, ExecOnDestroyedSandboxIsConflict) {
  std::string id = small_sandbox();
  ASSERT_FALSE(id.empty());
  HttpReply del = d().request("DELETE", "/v1/sandboxes/" + id);
  ASSERT_EQ(del.status, 200) << describe(del);
  EXPECT_EQ(del.json().value("state", ""), "cleaned") << describe(del);

  HttpReply r = d().request("POST", "/v1/sandboxes/" + id + "/exec", R"({"cmd": "echo hi"})");
  expect_error(r, 409, "conflict", "exec on a destroyed sandbox");
  r = d().request("PUT", "/v1/sandboxes/" + id + "/files?path=/workspace/a", "x", false, true,
                  {{"content-type", "application/octet-stream"}});
  expect_error(r, 409, "conflict", "upload to a destroyed sandbox");
  r = d().request("POST", "/v1/sandboxes/" + id + "/processes", R"({"cmd": "sleep 1"})");
  expect_error(r, 409, "conflict", "process in a destroyed sandbox");

  // The record stays readable, and a second DELETE is harmless.
  HttpReply get = d().request("GET", "/v1/sandboxes/" + id);
  EXPECT_EQ(get.status, 200) << describe(get);
  EXPECT_EQ(get.json().value("state", ""), "cleaned");
  HttpReply again = d().request("DELETE", "/v1/sandboxes/" + id);
  EXPECT_EQ(again.status, 200) << describe(again);
}

TEST_F(DaemonApi, CommandTimeoutIsAResultNotAnError) {
  std::string id = small_sandbox();
  ASSERT_FALSE(id.empty());
  HttpReply r = d().request("POST", "/v1/sandboxes/" + id + "/exec",
                            R"({"cmd": "sleep 30", "timeout": "300ms"})");
  EXPECT_EQ(r.status, 200) << describe(r);
  json j = r.json();
  EXPECT_EQ(j.value("timed_out", false), true) << describe(r);
  EXPECT_EQ(j.value("exit_code", -1), 124) << describe(r);
  EXPECT_LT(j.value("duration_ms", 999999), 10000) << describe(r);
  // The sandbox keeps working.
  EXPECT_EQ(d().exec(id, "echo alive").value("stdout", ""), "alive\n");
  EXPECT_EQ(d().request("DELETE", "/v1/sandboxes/" + id).status, 200);
}

// ---- idempotency ----------------------------------------------------------------------

TEST_F(DaemonApi, IdempotencyKeyReturnsTheSameSandbox) {
  const std::string key = "api-test-" + std::to_string(::getpid()) + "-" +
                          std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  const std::string body = R"({"limits": {"memory": "128Mi", "disk": "16Mi"}})";
  HttpReply first = d().request("POST", "/v1/sandboxes", body, false, true, {{"idempotency-key", key}});
  ASSERT_EQ(first.status, 201) << describe(first);
  const std::string id = first.json().value("id", "");
  ASSERT_FALSE(id.empty());

  HttpReply second = d().request("POST", "/v1/sandboxes", body, false, true, {{"idempotency-key", key}});
  EXPECT_EQ(second.status, 200) << describe(second);
  EXPECT_EQ(second.json().value("id", ""), id) << describe(second);

  // The same request written differently (bytes instead of a unit) is the same request.
  HttpReply same = d().request("POST", "/v1/sandboxes",
                               R"({"limits": {"disk": 16777216, "memory": "128Mi"}})", false, true,
                               {{"idempotency-key", key}});
  EXPECT_EQ(same.status, 200) << describe(same);
  EXPECT_EQ(same.json().value("id", ""), id) << describe(same);

  // The same key with another request.
  HttpReply other = d().request("POST", "/v1/sandboxes", R"({"limits": {"memory": "256Mi"}})", false,
                                true, {{"idempotency-key", key}});
  expect_error(other, 409, "idempotency_mismatch", "same key, different body");

  // Only one sandbox was made for the key.
  json list = d().request("GET", "/v1/sandboxes").json();
  int with_id = 0;
  for (const auto& s : list["sandboxes"]) with_id += s.value("id", "") == id ? 1 : 0;
  EXPECT_EQ(with_id, 1) << list.dump();

  // A key out of bounds is refused.
  HttpReply too_long = d().request("POST", "/v1/sandboxes", body, false, true,
                                   {{"idempotency-key", std::string(201, 'k')}});
  expect_error(too_long, 400, "invalid_value", "201-character key");

  EXPECT_EQ(d().request("DELETE", "/v1/sandboxes/" + id).status, 200);
}

// ---- capacity ---------------------------------------------------------------------------

// max_sandboxes 2, memory 3Gi, disk 3Gi: the count, the memory sum and the
// disk sum each refuse with their own code, and room comes back on delete.
TEST(DaemonApiCapacity, CreatesBeyondCapacityAreRefused) {
  TestDaemon d({}, "serve:\n  capacity:\n    max_sandboxes: 2\n    memory: 3Gi\n    disk: 3Gi\n");
  ASSERT_TRUE(d.ready()) << d.output();

  HttpReply r;
  std::string a = d.create_sandbox(R"({"limits": {"memory": "2Gi", "disk": "64Mi"}})", &r);
  ASSERT_FALSE(a.empty()) << describe(r);

  // Memory: 2Gi + 2Gi > 3Gi.
  r = d.request("POST", "/v1/sandboxes", R"({"limits": {"memory": "2Gi", "disk": "64Mi"}})");
  expect_error(r, 429, "over_capacity", "memory over capacity");
  EXPECT_EQ(r.json()["error"].value("field", ""), "limits.memory") << describe(r);

  // Disk: 64Mi + 3Gi > 3Gi.
  r = d.request("POST", "/v1/sandboxes", R"({"limits": {"memory": "64Mi", "disk": "3Gi"}})");
  expect_error(r, 507, "insufficient_storage", "disk over capacity");
  EXPECT_EQ(r.json()["error"].value("field", ""), "limits.disk") << describe(r);

  // Count: the second fits, the third does not.
  std::string b = d.create_sandbox(R"({"limits": {"memory": "64Mi", "disk": "64Mi"}})", &r);
  ASSERT_FALSE(b.empty()) << describe(r);
  r = d.request("POST", "/v1/sandboxes", R"({"limits": {"memory": "64Mi", "disk": "64Mi"}})");
  expect_error(r, 429, "over_capacity", "count over capacity");
  EXPECT_NE(r.json()["error"].value("message", "").find("max_sandboxes"), std::string::npos)
      << describe(r);

  // A refused create left nothing behind: two live sandboxes.
  EXPECT_EQ(d.request("GET", "/healthz").json().value("sandboxes", -1), 2);

  // Deleting one makes room again.
  ASSERT_EQ(d.request("DELETE", "/v1/sandboxes/" + b).status, 200);
  std::string c = d.create_sandbox(R"({"limits": {"memory": "64Mi", "disk": "64Mi"}})", &r);
  EXPECT_FALSE(c.empty()) << describe(r);
  for (const auto& id : {a, c}) {
    if (!id.empty()) {
      EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
    }
  }
}

// A retry of a create that succeeded must find its sandbox even when the
// daemon is full now: the retry asks for nothing new.
TEST(DaemonApiCapacity, IdempotentRetryAtCapacityReturnsTheSandbox) {
  TestDaemon d({}, "serve:\n  capacity:\n    max_sandboxes: 1\n");
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string body = R"({"limits": {"memory": "128Mi", "disk": "16Mi"}})";
  const http::Headers key = {{"idempotency-key", "retry-at-capacity"}};
  HttpReply first = d.request("POST", "/v1/sandboxes", body, false, true, key);
  ASSERT_EQ(first.status, 201) << describe(first);
  const std::string id = first.json().value("id", "");

  HttpReply retry = d.request("POST", "/v1/sandboxes", body, false, true, key);
  EXPECT_EQ(retry.status, 200) << "the retry of an acknowledged create was refused: " << describe(retry);
  EXPECT_EQ(retry.json().value("id", ""), id) << describe(retry);
  // A new create is still refused.
  expect_error(d.request("POST", "/v1/sandboxes", body), 429, "over_capacity", "a second sandbox");
  EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
}

// ---- metrics -----------------------------------------------------------------------------

// Checks `text` against the Prometheus text exposition format 0.0.4:
// comment lines are HELP or TYPE, every sample line is
// `name{label="value",...} value`, every family has one TYPE line before
// its samples. Returns the problems found; fills samples (series -> value).
std::vector<std::string> check_exposition(const std::string& text,
                                          std::map<std::string, double>* samples,
                                          std::map<std::string, std::string>* types) {
  std::vector<std::string> problems;
  if (text.empty() || text.back() != '\n') problems.push_back("the text does not end with a newline");
  static const std::regex help(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .*$)");
  static const std::regex type(
      R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$)");
  static const std::regex sample(
      R"re(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")*,?\})? ([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?Inf|NaN)(?: -?[0-9]+)?$)re");
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::smatch m;
    if (line.empty()) continue;
    if (line[0] == '#') {
      if (std::regex_match(line, m, type)) {
        const std::string name = m[1].str();
        if (types->count(name)) problems.push_back("line " + std::to_string(n) + ": a second TYPE for " + name);
        (*types)[name] = m[2].str();
      } else if (!std::regex_match(line, help)) {
        problems.push_back("line " + std::to_string(n) + ": a comment that is neither HELP nor TYPE: " + line);
      }
      continue;
    }
    if (!std::regex_match(line, m, sample)) {
      problems.push_back("line " + std::to_string(n) + ": not a sample: " + line);
      continue;
    }
    std::string name = m[1].str();
    std::string family = name;
    for (std::string suffix : {"_bucket", "_sum", "_count"}) {
      if (family.size() > suffix.size() && family.ends_with(suffix) &&
          types->count(family.substr(0, family.size() - suffix.size())) &&
          (*types)[family.substr(0, family.size() - suffix.size())] == "histogram") {
        family = family.substr(0, family.size() - suffix.size());
        break;
      }
    }
    if (!types->count(family)) problems.push_back("line " + std::to_string(n) + ": no TYPE before " + name);
    std::string value = m[3].str();
    double v = value == "+Inf" || value == "Inf" ? 1e308 : value == "-Inf" ? -1e308 : std::strtod(value.c_str(), nullptr);
    (*samples)[name + m[2].str()] = v;
  }
  return problems;
}

TEST_F(DaemonApi, MetricsAreValidExpositionText) {
  // Something to count: a create and an exec.
  std::string id = small_sandbox();
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(d().exec(id, "true").value("exit_code", -1), 0);

  HttpReply r = d().request("GET", "/metrics", "", /*via_tcp=*/true);
  ASSERT_EQ(r.status, 200) << describe(r);
  EXPECT_EQ(header_of(r, "content-type").rfind("text/plain; version=0.0.4", 0), 0u)
      << header_of(r, "content-type");

  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;
  auto problems = check_exposition(r.body, &samples, &types);
  std::string all;
  for (const auto& p : problems) all += "\n  " + p;
  EXPECT_TRUE(problems.empty()) << "the metrics text is not valid exposition format:" << all
                                << "\n--- text ---\n" << r.body.substr(0, 4000);

  EXPECT_EQ(types["corral_sandbox_creations_total"], "counter") << r.body;
  EXPECT_EQ(types["corral_exec_total"], "counter") << r.body;
  EXPECT_EQ(types["corral_sandbox_create_seconds"], "histogram") << r.body;
  EXPECT_EQ(types["corral_sandboxes_live"], "gauge") << r.body;
  EXPECT_GE(samples["corral_sandbox_creations_total"], 1) << r.body;
  EXPECT_GE(samples["corral_exec_total"], 1) << r.body;
  EXPECT_GE(samples["corral_sandboxes_live"], 1) << r.body;
  EXPECT_NE(r.body.find("corral_sandbox_create_seconds_bucket{le="), std::string::npos) << r.body;
  // The +Inf bucket holds every observation.
  auto inf = samples.find("corral_sandbox_create_seconds_bucket{le=\"+Inf\"}");
  ASSERT_NE(inf, samples.end()) << r.body;
  EXPECT_EQ(inf->second, samples["corral_sandbox_create_seconds_count"]) << r.body;
  EXPECT_GE(inf->second, 1) << r.body;

  EXPECT_EQ(d().request("DELETE", "/v1/sandboxes/" + id).status, 200);
}

}  // namespace
}  // namespace corral::testing
