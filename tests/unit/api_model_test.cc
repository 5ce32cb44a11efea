#include "api/api_model.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace corral::api {
namespace {

using std::chrono::milliseconds;

// ---- helpers ----------------------------------------------------------------

void expect_same_spec(const SandboxSpec& a, const SandboxSpec& b) {
  EXPECT_DOUBLE_EQ(a.limits.cpus, b.limits.cpus);
  EXPECT_EQ(a.limits.memory_bytes, b.limits.memory_bytes);
  EXPECT_EQ(a.limits.disk_bytes, b.limits.disk_bytes);
  EXPECT_EQ(a.limits.inodes, b.limits.inodes);
  EXPECT_EQ(a.limits.pids, b.limits.pids);
  EXPECT_EQ(a.limits.timeout, b.limits.timeout);
  EXPECT_EQ(a.limits.max_lifetime, b.limits.max_lifetime);
  EXPECT_EQ(a.argv, b.argv);
  EXPECT_EQ(a.env, b.env);
  EXPECT_EQ(a.workdir, b.workdir);
  ASSERT_EQ(a.mounts.size(), b.mounts.size());
  for (std::size_t i = 0; i < a.mounts.size(); ++i) {
    EXPECT_EQ(a.mounts[i].source, b.mounts[i].source);
    EXPECT_EQ(a.mounts[i].target, b.mounts[i].target);
    EXPECT_EQ(a.mounts[i].writable, b.mounts[i].writable);
  }
  EXPECT_EQ(a.image, b.image);
  EXPECT_EQ(a.root, b.root);
  EXPECT_EQ(a.hostname, b.hostname);
  EXPECT_EQ(a.network.mode, b.network.mode);
  EXPECT_EQ(a.network.allow_domains, b.network.allow_domains);
  EXPECT_EQ(a.network.dns_servers, b.network.dns_servers);
  EXPECT_EQ(a.network.template_name, b.network.template_name);
  EXPECT_EQ(a.network.allow, b.network.allow);
  EXPECT_EQ(a.network.deny, b.network.deny);
  EXPECT_EQ(a.network.remove, b.network.remove);
  EXPECT_EQ(a.network.timeout_ms, b.network.timeout_ms);
  EXPECT_EQ(a.network.rate_per_second, b.network.rate_per_second);
  EXPECT_EQ(a.network.rate_burst, b.network.rate_burst);
  EXPECT_EQ(a.network.gateway, b.network.gateway);
}

void expect_same_result(const ExecResult& a, const ExecResult& b) {
  EXPECT_EQ(a.exit_code, b.exit_code);
  EXPECT_EQ(a.signal, b.signal);
  EXPECT_EQ(a.timed_out, b.timed_out);
  EXPECT_EQ(a.stdout_data, b.stdout_data);
  EXPECT_EQ(a.stderr_data, b.stderr_data);
  EXPECT_EQ(a.stdout_truncated, b.stdout_truncated);
  EXPECT_EQ(a.stderr_truncated, b.stderr_truncated);
  EXPECT_EQ(a.duration_ms, b.duration_ms);
  EXPECT_EQ(a.process_id, b.process_id);
}

void expect_same_error(const ApiError& a, const ApiError& b) {
  EXPECT_EQ(a.http_status, b.http_status);
  EXPECT_EQ(a.code, b.code);
  EXPECT_EQ(a.message, b.message);
  EXPECT_EQ(a.field, b.field);
  EXPECT_EQ(a.hint, b.hint);
}

bool contains(std::string_view text, std::string_view needle) {
  return text.find(needle) != std::string_view::npos;
}

// A spec that differs from the defaults in every field.
SandboxSpec full_spec() {
  SandboxSpec s;
  s.limits.cpus = 1.5;
  s.limits.memory_bytes = 512 * kMiB;
  s.limits.disk_bytes = 3 * kGiB;
  s.limits.inodes = 100000;
  s.limits.pids = 64;
  s.limits.timeout = milliseconds(1500);
  s.limits.max_lifetime = milliseconds(1200'000);
  s.env = {{"PATH", "/usr/bin"}, {"LANG", "C.UTF-8"}, {"EMPTY", ""}, {"A_1", "x=y"}};
  s.workdir = "/work";
  s.mounts = {{"/srv/data", "/data", false}, {"/srv/out", "/out", true}};
  s.image = "debian-12";
  s.root = true;
  s.hostname = "box.example";
  return s;
}

// Parses `body` with `parse`, expects a refusal and returns the error.
template <typename Parse>
Error refused(Parse parse, std::string_view body) {
  auto r = parse(body);
  EXPECT_FALSE(r.has_value()) << "accepted: " << body;
  if (r.has_value()) return {};
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << r.error().message;
  return r.error();
}

Error create_refused(std::string_view body) { return refused(parse_create_sandbox, body); }
Error exec_refused(std::string_view body) { return refused(parse_exec, body); }

SandboxSpec create_ok(std::string_view body) {
  auto r = parse_create_sandbox(body);
  EXPECT_TRUE(r.has_value()) << body << ": " << r.error().message;
  return r ? r->spec : SandboxSpec{};
}

// ---- errors -------------------------------------------------------------------

// The code table itself: api_error_code_test.cc.

TEST(ApiErrors, RoundTrip) {
  ApiError full = make_api_error(ApiErrorCode::kInvalidValue, "limits.memory: must be at least 4Mi",
                                 "limits.memory", "give at least 4Mi");
  std::string json = to_json(full);
  EXPECT_EQ(json,
            R"({"error":{"code":"invalid_value","message":"limits.memory: must be at least 4Mi",)"
            R"("field":"limits.memory","hint":"give at least 4Mi"}})");
  expect_same_error(parse_api_error(400, json), full);

  ApiError bare = make_api_error(ApiErrorCode::kNotFound, "no sandbox \"sb-1\"");
  expect_same_error(parse_api_error(404, to_json(bare)), bare);
}

TEST(ApiErrors, UnparseableBodiesBecomeInternal) {
  ApiError e = parse_api_error(502, "<html>Bad Gateway</html>");
  EXPECT_TRUE(e.is(ApiErrorCode::kInternal)) << e.code;
  EXPECT_EQ(e.http_status, 502);
  EXPECT_EQ(e.message, "<html>Bad Gateway</html>");

  e = parse_api_error(500, std::string(5000, 'x'));
  EXPECT_EQ(e.message.size(), 1024u + 3);
  EXPECT_TRUE(e.message.ends_with("..."));

  e = parse_api_error(503, "");
  EXPECT_TRUE(e.is(ApiErrorCode::kInternal)) << e.code;
  EXPECT_TRUE(contains(e.message, "503")) << e.message;

  e = parse_api_error(400, R"({"error": "a string"})");
  EXPECT_TRUE(e.is(ApiErrorCode::kInternal)) << e.code;
}

TEST(ApiErrors, ToApiErrorMapsCodes) {
  auto parse_error = parse_create_sandbox(R"({"limits": {"pids": 0}})");
  ASSERT_FALSE(parse_error.has_value());
  ApiError e = to_api_error(parse_error.error());
  EXPECT_TRUE(e.is(ApiErrorCode::kInvalidValue)) << e.code;
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.field, "limits.pids");
  EXPECT_EQ(e.message, "limits.pids: must be between 1 and 65536, found 0");
  EXPECT_EQ(e.hint, "");

  struct Case {
    ErrorCode code;
    std::string_view api_code;
    int status;
  };
  const Case cases[] = {
      {ErrorCode::kNotFound, "not_found", 404},
      {ErrorCode::kAlreadyExists, "conflict", 409},
      {ErrorCode::kPermissionDenied, "path_escape", 400},
      {ErrorCode::kResourceExhausted, "over_capacity", 429},
      {ErrorCode::kTimeout, "request_timeout", 408},
      {ErrorCode::kUnavailable, "unavailable", 503},
      {ErrorCode::kSystem, "internal", 500},
      {ErrorCode::kInternal, "internal", 500},
      {ErrorCode::kInvalidArgument, "invalid_value", 400},
  };
  for (const auto& c : cases) {
    ApiError mapped = to_api_error(Error{c.code, "open(/x): it failed", "try again", 0});
    EXPECT_EQ(mapped.code, c.api_code);
    EXPECT_EQ(mapped.http_status, c.status);
    EXPECT_EQ(mapped.message, "open(/x): it failed");
    EXPECT_EQ(mapped.hint, "try again");
    EXPECT_EQ(mapped.field, "");
  }
  // A known code before ": " wins over the ErrorCode mapping.
  ApiError conflict = to_api_error(
      Error{ErrorCode::kUnavailable, "conflict: the sandbox is being destroyed", "h", 0});
  EXPECT_TRUE(conflict.is(ApiErrorCode::kConflict)) << conflict.code;
  EXPECT_EQ(conflict.http_status, 409);
  EXPECT_EQ(conflict.message, "the sandbox is being destroyed");
  EXPECT_EQ(conflict.hint, "h");
  // An unknown prefix is just part of the message.
  ApiError plain = to_api_error(Error{ErrorCode::kNotFound, "image: not there", "", 0});
  EXPECT_TRUE(plain.is(ApiErrorCode::kNotFound)) << plain.code;
  EXPECT_EQ(plain.message, "image: not there");
}

TEST(ApiErrors, InvalidUtf8NeverThrows) {
  ApiError e = make_api_error(ApiErrorCode::kInternal, "bad \xff\xfe bytes", "f\xc3", "h\x80");
  std::string json;
  EXPECT_NO_THROW(json = to_json(e));
  ApiError back = parse_api_error(500, json);
  EXPECT_TRUE(back.is(ApiErrorCode::kInternal)) << back.code;
  EXPECT_TRUE(contains(back.message, "bad ")) << back.message;
}

// ---- create: accepted ----------------------------------------------------------

TEST(ApiCreate, EmptyObjectGivesDefaults) {
  expect_same_spec(create_ok("{}"), SandboxSpec{});
  expect_same_spec(create_ok(" \n{ }\n"), SandboxSpec{});
}

TEST(ApiCreate, HeaderExample) {
  SandboxSpec s = create_ok(R"({
    "image": "debian-12",
    "limits": {"memory": "512Mi", "cpus": 1.5, "pids": 128, "disk": "1Gi", "inodes": 100000,
               "timeout": "30s"},
    "max_lifetime": "10m",
    "env": {"NAME": "value", "_x1": ""},
    "mounts": [{"source": "/srv/data", "target": "/data", "writable": false},
               {"source": "/srv/out", "target": "/out//", "writable": true}],
    "workdir": "/workspace", "hostname": "sandbox", "root": false,
    "network": {"mode": "none"}
  })");
  EXPECT_EQ(s.image, "debian-12");
  EXPECT_EQ(s.limits.memory_bytes, 512 * kMiB);
  EXPECT_DOUBLE_EQ(s.limits.cpus, 1.5);
  EXPECT_EQ(s.limits.pids, 128u);
  EXPECT_EQ(s.limits.disk_bytes, kGiB);
  EXPECT_EQ(s.limits.inodes, 100000u);
  EXPECT_EQ(s.limits.timeout, milliseconds(30'000));
  EXPECT_EQ(s.limits.max_lifetime, milliseconds(600'000));
  EXPECT_EQ(s.env,
            (std::vector<std::pair<std::string, std::string>>{{"NAME", "value"}, {"_x1", ""}}));
  ASSERT_EQ(s.mounts.size(), 2u);
  EXPECT_EQ(s.mounts[1].target, "/out");  // normalized
  EXPECT_TRUE(s.mounts[1].writable);
  EXPECT_TRUE(s.argv.empty());
}

TEST(ApiCreate, NumbersAndStringsForQuantities) {
  SandboxSpec s = create_ok(
      R"({"limits": {"memory": 536870912, "cpus": "500m", "disk": 1048576, "timeout": 30},
          "max_lifetime": 600})");
  EXPECT_EQ(s.limits.memory_bytes, 512 * kMiB);
  EXPECT_DOUBLE_EQ(s.limits.cpus, 0.5);
  EXPECT_EQ(s.limits.disk_bytes, kMiB);
  EXPECT_EQ(s.limits.timeout, milliseconds(30'000));
  EXPECT_EQ(s.limits.max_lifetime, milliseconds(600'000));
  s = create_ok(R"({"limits": {"cpus": 2, "memory": "4Mi", "timeout": "1ms"},
                    "max_lifetime": "168h"})");
  EXPECT_DOUBLE_EQ(s.limits.cpus, 2.0);
  EXPECT_EQ(s.limits.memory_bytes, 4 * kMiB);
  EXPECT_EQ(s.limits.timeout, milliseconds(1));
  EXPECT_EQ(s.limits.max_lifetime, milliseconds(7 * 24 * 3600'000LL));
  s = create_ok(R"({"limits": {"cpus": 1024, "pids": 65536}, "max_lifetime": 1})");
  EXPECT_DOUBLE_EQ(s.limits.cpus, 1024.0);
  EXPECT_EQ(s.limits.pids, 65536u);
}

TEST(ApiCreate, RoundTrip) {
  CreateSandboxRequest request;
  request.spec = full_spec();
  std::string json = to_json(request);
  auto back = parse_create_sandbox(json);
  ASSERT_TRUE(back.has_value()) << json << ": " << back.error().message;
  expect_same_spec(back->spec, request.spec);
  EXPECT_TRUE(contains(json, R"("timeout":"1500ms")")) << json;
  EXPECT_TRUE(contains(json, R"("max_lifetime":1200)")) << json;

  CreateSandboxRequest defaults;
  auto back2 = parse_create_sandbox(to_json(defaults));
  ASSERT_TRUE(back2.has_value()) << back2.error().message;
  expect_same_spec(back2->spec, defaults.spec);
}

// ---- create: env on top of the daemon's defaults --------------------------------------

SandboxSpec env_defaults() {
  SandboxSpec defaults;
  defaults.env = {{"LANG", "C.UTF-8"}, {"PATH", "/usr/bin"}, {"HTTP_PROXY", "http://proxy:3128"}};
  return defaults;
}

using Env = std::vector<std::pair<std::string, std::string>>;

TEST(ApiCreate, EnvMergesWithTheDefaults) {
  const SandboxSpec defaults = env_defaults();
  // Kept, replaced in place, added at the end.
  auto r = parse_create_sandbox_over(R"({"env": {"PATH": "/opt/bin", "DEBUG": "1"}})", defaults);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->spec.env, (Env{{"LANG", "C.UTF-8"},
                              {"PATH", "/opt/bin"},
                              {"HTTP_PROXY", "http://proxy:3128"},
                              {"DEBUG", "1"}}));
  EXPECT_TRUE(r->env_unset.empty());

  // No env, or an empty one: the defaults as they are.
  for (const char* body : {"{}", R"({"env": {}})", R"({"limits": {"pids": 9}})"}) {
    auto kept = parse_create_sandbox_over(body, defaults);
    ASSERT_TRUE(kept.has_value()) << body << ": " << kept.error().message;
    EXPECT_EQ(kept->spec.env, defaults.env) << body;
  }

  // An empty string is a value, not a removal.
  auto empty = parse_create_sandbox_over(R"({"env": {"LANG": ""}})", defaults);
  ASSERT_TRUE(empty.has_value()) << empty.error().message;
  EXPECT_EQ(empty->spec.env.at(0), (std::pair<std::string, std::string>{"LANG", ""}));
  EXPECT_EQ(empty->spec.env.size(), 3u);
}

TEST(ApiCreate, EnvNullRemovesADefault) {
  const SandboxSpec defaults = env_defaults();
  auto r = parse_create_sandbox_over(
      R"({"env": {"HTTP_PROXY": null, "NOT_A_DEFAULT": null, "X": "1"}})", defaults);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->spec.env, (Env{{"LANG", "C.UTF-8"}, {"PATH", "/usr/bin"}, {"X", "1"}}));
  EXPECT_EQ(r->env_unset, (std::vector<std::string>{"HTTP_PROXY", "NOT_A_DEFAULT"}));

  // The client side encodes the removals as null, and they parse back.
  std::string json = to_json(*r);
  EXPECT_TRUE(contains(json, R"("HTTP_PROXY":null)")) << json;
  auto again = parse_create_sandbox_over(json, defaults);
  ASSERT_TRUE(again.has_value()) << json << ": " << again.error().message;
  EXPECT_EQ(again->spec.env, r->spec.env);
  EXPECT_EQ(again->env_unset, r->env_unset);

  // Without defaults a null removes nothing, and still round-trips.
  auto bare = parse_create_sandbox(R"({"env": {"A": null}})");
  ASSERT_TRUE(bare.has_value()) << bare.error().message;
  EXPECT_TRUE(bare->spec.env.empty());
  EXPECT_TRUE(contains(to_json(*bare), R"("env":{"A":null})")) << to_json(*bare);

  // A name that spec.env sets is not also sent as null.
  CreateSandboxRequest both;
  both.spec.env = {{"A", "1"}};
  both.env_unset = {"A"};
  EXPECT_TRUE(contains(to_json(both), R"("env":{"A":"1"})")) << to_json(both);
}

TEST(ApiCreate, EnvNullIsOnlyForCreate) {
  // An exec's env has no defaults to remove.
  Error e = exec_refused(R"({"argv": ["ls"], "env": {"A": null}})");
  EXPECT_EQ(e.message, "wrong_type: env.A: expected a string value, found null");
  // The stored spec holds the merged env: no nulls there either.
  auto stored = spec_from_json(R"({"env": {"A": null}})");
  ASSERT_FALSE(stored.has_value());
  EXPECT_TRUE(stored.error().message.starts_with("wrong_type: env.A:")) << stored.error().message;
  // Other create fields do not take null.
  e = create_refused(R"({"env": null})");
  EXPECT_TRUE(e.message.starts_with("wrong_type: env: expected an object")) << e.message;
  // Names are checked for null values too.
  e = create_refused(R"({"env": {"1X": null}})");
  EXPECT_TRUE(contains(e.message, "invalid variable name")) << e.message;
}

TEST(ApiCreate, EnvWithDefaultsIsBounded) {
  SandboxSpec defaults;
  for (int i = 0; i < 4000; ++i) defaults.env.emplace_back("D" + std::to_string(i), "x");
  std::string body = R"({"env": {)";
  for (int i = 0; i < 97; ++i) {
    if (i > 0) body.append(",");
    body.append("\"N" + std::to_string(i) + "\": \"x\"");
  }
  body.append("}}");
  auto over = parse_create_sandbox_over(body, defaults);
  ASSERT_FALSE(over.has_value());
  EXPECT_TRUE(contains(over.error().message, "more than 4096 variables with the daemon's defaults"))
      << over.error().message;
  EXPECT_EQ(over.error().hint, "env");
  // Replacing defaults does not add to the count.
  defaults.env.resize(4096);
  for (int i = 4000; i < 4096; ++i) defaults.env[i] = {"D" + std::to_string(i), "x"};
  auto replaced = parse_create_sandbox_over(R"({"env": {"D0": "y", "D4095": null}})", defaults);
  ASSERT_TRUE(replaced.has_value()) << replaced.error().message;
  EXPECT_EQ(replaced->spec.env.size(), 4095u);
  EXPECT_EQ(replaced->spec.env.front().second, "y");
}

// ---- create: refused, one test per class -------------------------------------------

TEST(ApiCreate, UnknownFieldIsNamedWithItsPath) {
  Error e = create_refused(R"({"limits": {"memroy": "1Gi"}})");
  EXPECT_EQ(e.message,
            R"(unknown_field: unknown field "limits.memroy" (known: memory, cpus, pids, disk, )"
            R"(inodes, timeout))");
  EXPECT_EQ(e.hint, "limits.memroy");
  ApiError api = to_api_error(e);
  EXPECT_TRUE(api.is(ApiErrorCode::kUnknownField)) << api.code;
  EXPECT_EQ(api.http_status, 400);
  EXPECT_EQ(api.field, "limits.memroy");
  EXPECT_TRUE(api.message.starts_with("unknown field \"limits.memroy\"")) << api.message;

  e = create_refused(R"({"argv": ["ls"]})");
  EXPECT_TRUE(e.message.starts_with(R"(unknown_field: unknown field "argv" (known: image, )"))
      << e.message;
  e = create_refused(R"({"mounts": [{"source": "/a", "target": "/b", "readonly": true}]})");
  EXPECT_EQ(e.message,
            R"(unknown_field: unknown field "mounts[0].readonly" (known: source, target, )"
            R"(writable))");
  e = create_refused(R"({"network": {"mode": "none", "defaults": "deny"}})");
  EXPECT_EQ(e.hint, "network.defaults");
  e = create_refused(R"({"limits": {"a b": 1}})");
  EXPECT_EQ(e.hint, R"(limits["a b"])");
}

TEST(ApiCreate, WrongTypeSaysExpectedAndFound) {
  Error e = create_refused(R"({"limits": {"pids": "12"}})");
  EXPECT_EQ(e.message, R"(wrong_type: limits.pids: expected an integer, found the string "12")");
  EXPECT_EQ(e.hint, "limits.pids");
  EXPECT_TRUE(to_api_error(e).is(ApiErrorCode::kWrongType)) << to_api_error(e).code;

  e = create_refused(R"({"limits": {"memory": 1.5}})");
  EXPECT_TRUE(e.message.starts_with("wrong_type: limits.memory: expected a size")) << e.message;
  EXPECT_TRUE(contains(e.message, "found the number 1.5")) << e.message;
  e = create_refused(R"({"limits": []})");
  EXPECT_EQ(e.message, "wrong_type: limits: expected an object, found an array");
  e = create_refused(R"({"root": "yes"})");
  EXPECT_EQ(e.message, R"(wrong_type: root: expected true or false, found the string "yes")");
  e = create_refused(R"({"env": {"A": 1}})");
  EXPECT_EQ(e.message, "wrong_type: env.A: expected a string value or null, found the number 1");
  e = create_refused(R"({"max_lifetime": true})");
  EXPECT_TRUE(e.message.starts_with("wrong_type: max_lifetime: expected a duration")) << e.message;
  e = create_refused(R"({"mounts": {}})");
  EXPECT_TRUE(e.message.starts_with("wrong_type: mounts: expected an array")) << e.message;
  e = create_refused(R"({"limits": {"cpus": null}})");
  EXPECT_TRUE(contains(e.message, "found null")) << e.message;
}

TEST(ApiCreate, BodyMustBeAnObject) {
  for (std::string_view body : {"[]", "1", "\"x\"", "null", "true"}) {
    Error e = create_refused(body);
    EXPECT_TRUE(e.message.starts_with("wrong_type: expected the body to be a JSON object, found "))
        << e.message;
    EXPECT_EQ(e.hint, "");
  }
}

TEST(ApiCreate, BadValuesSayWhatIsAllowed) {
  struct Case {
    std::string_view body;
    std::string_view field;
    std::string_view needle;
  };
  const Case cases[] = {
      {R"({"limits": {"memory": "1Mi"}})", "limits.memory", "must be at least 4Mi, found 1Mi"},
      {R"({"limits": {"memory": 0}})", "limits.memory", "must be greater than zero"},
      {R"({"limits": {"memory": -5}})", "limits.memory", "must be greater than zero, found -5"},
      {R"({"limits": {"memory": "2GG"}})", "limits.memory", R"(invalid size "2GG")"},
      {R"({"limits": {"disk": "512Ki"}})", "limits.disk", "must be at least 1Mi"},
      {R"({"limits": {"pids": 0}})", "limits.pids", "must be between 1 and 65536, found 0"},
      {R"({"limits": {"pids": 65537}})", "limits.pids", "must be between 1 and 65536"},
      {R"({"limits": {"pids": -1}})", "limits.pids", "found -1"},
      {R"({"limits": {"cpus": 0}})", "limits.cpus", "must be more than 0 and at most 1024"},
      {R"({"limits": {"cpus": 1024.5}})", "limits.cpus", "at most 1024"},
      {R"({"limits": {"cpus": "two"}})", "limits.cpus", R"(invalid CPU count "two")"},
      {R"({"limits": {"timeout": 0}})", "limits.timeout", "between 1ms and 168h"},
      {R"({"limits": {"timeout": "169h"}})", "limits.timeout", "found 169h"},
      {R"({"limits": {"timeout": "5x"}})", "limits.timeout", R"(invalid duration "5x")"},
      {R"({"limits": {"inodes": 0}})", "limits.inodes", "must be between 1 and"},
      {R"({"max_lifetime": "500ms"})", "max_lifetime", "between 1s and 168h (7 days), found 500ms"},
      {R"({"max_lifetime": 604801})", "max_lifetime", "(7 days)"},
      {R"({"hostname": "bad_name"})", "hostname", "is not a valid hostname"},
      {R"({"hostname": ""})", "hostname", "is not a valid hostname"},
      {R"({"network": {"mode": "bogus"}})", "network.mode", "is not a network mode"},
      {R"({"network": {"allow": ["ftp://x.test"]}})", "network.allow[0]", "unknown protocol"},
      {R"({"network": {"deny": ["a.test:99999"]}})", "network.deny[0]", "a.test:99999"},
      {R"({"network": {"timeout": 0}})", "network.timeout", "must be between"},
      {R"({"network": {"rate": {"burst": 3}}})", "network.rate.per_second", "is missing"},
      {R"({"network": {"rate": {"per_second": -1}}})", "network.rate.per_second",
       "must be between 0"},
      {R"({"env": {"1X": "v"}})", R"(env["1X"])", "[A-Za-z_][A-Za-z0-9_]*"},
      {R"({"env": {"A-B": "v"}})", R"(env["A-B"])", "invalid variable name"},
      {R"({"env": {"A": "x\u0000y"}})", "env.A", "NUL"},
      {R"({"workdir": "work"})", "workdir", "is not an absolute path"},
      {R"({"workdir": "/a/../b"})", "workdir", "contains a \"..\" component"},
      {R"({"image": "../etc"})", "image", "is not an image name"},
      {R"({"image": "Debian"})", "image", "is not an image name"},
      {R"({"mounts": [{"source": "/a", "target": "data"}]})", "mounts[0].target",
       "not an absolute path"},
      {R"({"mounts": [{"source": "/a", "target": "/proc/x"}]})", "mounts[0].target", "/proc"},
      {R"({"mounts": [{"source": "rel", "target": "/d"}]})", "mounts[0].source",
       "not an absolute path"},
      {R"({"mounts": [{"target": "/d"}]})", "mounts[0].source", "is missing"},
      {R"({"mounts": [{"source": "/a"}]})", "mounts[0].target", "is missing"},
      {R"({"mounts": [{"source": "/a", "target": "/d"}, {"source": "/b", "target": "/d/"}]})",
       "mounts[1].target", "a second mount on \"/d\""},
  };
  for (const auto& c : cases) {
    Error e = create_refused(c.body);
    EXPECT_TRUE(e.message.starts_with("invalid_value: ")) << c.body << " -> " << e.message;
    EXPECT_EQ(e.hint, c.field) << c.body << " -> " << e.message;
    EXPECT_TRUE(contains(e.message, c.needle)) << c.body << " -> " << e.message;
    EXPECT_EQ(to_api_error(e).field, c.field);
  }
}

TEST(ApiCreate, CountsAndStringsAreBounded) {
  std::string env = R"({"env": {)";
  for (int i = 0; i < 4097; ++i) {
    if (i > 0) env.append(",");
    env.append("\"V" + std::to_string(i) + "\": \"x\"");
  }
  env.append("}}");
  Error e = create_refused(env);
  EXPECT_TRUE(contains(e.message, "more than 4096")) << e.message;
  EXPECT_EQ(e.hint, "env");

  std::string mounts = R"({"mounts": [)";
  for (int i = 0; i < 65; ++i) {
    if (i > 0) mounts.append(",");
    mounts.append(R"({"source": "/s", "target": "/t)" + std::to_string(i) + "\"}");
  }
  mounts.append("]}");
  e = create_refused(mounts);
  EXPECT_TRUE(contains(e.message, "more than 64 mounts")) << e.message;

  std::string big = R"({"env": {"BIG": ")" + std::string(128 * 1024 + 1, 'x') + "\"}}";
  e = create_refused(big);
  EXPECT_TRUE(contains(e.message, "longer than 131072 bytes")) << e.message;
  EXPECT_EQ(e.hint, "env.BIG");
  std::string fits = R"({"env": {"BIG": ")" + std::string(128 * 1024, 'x') + "\"}}";
  EXPECT_EQ(create_ok(fits).env.at(0).second.size(), 128u * 1024);
}

TEST(ApiCreate, DeepNestingIsRefusedBeforeParsing) {
  std::string deep = R"({"env": )" + std::string(40, '[') + std::string(40, ']') + "}";
  Error e = create_refused(deep);
  EXPECT_EQ(e.message, "bad_json: nested deeper than 32 levels");
  EXPECT_TRUE(to_api_error(e).is(ApiErrorCode::kBadJson)) << to_api_error(e).code;
  // A million levels: refused just as cheaply (no recursion anywhere).
  e = create_refused(std::string(1'000'000, '['));
  EXPECT_EQ(e.message, "bad_json: nested deeper than 32 levels");
  // 32 levels are parsed (and then refused for what they contain).
  std::string ok = "{\"x\": " + std::string(31, '[') + std::string(31, ']') + "}";
  e = create_refused(ok);
  EXPECT_TRUE(e.message.starts_with("unknown_field:")) << e.message;
  // Brackets inside strings do not count.
  std::string in_string = R"({"hostname": ")" + std::string(100, '[') + R"("})";
  e = create_refused(in_string);
  EXPECT_TRUE(e.message.starts_with("invalid_value: hostname:")) << e.message;
}

TEST(ApiCreate, BadJsonSaysWhere) {
  Error e = create_refused(R"({"limits": {"memory": }})");
  EXPECT_TRUE(e.message.starts_with("bad_json: parse error at line 1, column 23")) << e.message;
  EXPECT_TRUE(to_api_error(e).is(ApiErrorCode::kBadJson)) << to_api_error(e).code;
  e = create_refused("");
  EXPECT_EQ(e.message, "bad_json: the body is empty; expected a JSON object");
  e = create_refused("{} {}");
  EXPECT_TRUE(e.message.starts_with("bad_json:")) << e.message;
  e = create_refused("{\"hostname\": \"a\xff\"}");
  EXPECT_TRUE(e.message.starts_with("bad_json:")) << e.message;
  for (char c : e.message) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << e.message;
  e = create_refused(R"({"root": false, /* comment */ })");
  EXPECT_TRUE(e.message.starts_with("bad_json:")) << e.message;
  e = create_refused(R"({"limits": {"memory": 1e400}})");
  EXPECT_TRUE(e.message.starts_with("bad_json:")) << e.message;
}

TEST(ApiCreate, DuplicateFieldsAreRefused) {
  Error e = create_refused(R"({"limits": {"pids": 1, "pids": 2}})");
  EXPECT_EQ(e.message,
            "bad_json: limits.pids: the field is given twice (each field may appear once)");
  EXPECT_EQ(e.hint, "limits.pids");
  e = create_refused(R"({"mounts": [{"source": "/a", "target": "/b"},
                                   {"source": "/a", "source": "/c", "target": "/d"}]})");
  EXPECT_EQ(e.hint, "mounts[1].source");
}

// ---- the stored spec ------------------------------------------------------------

TEST(ApiSpec, CanonicalFormHasEveryField) {
  std::string json = spec_to_json(SandboxSpec{});
  EXPECT_EQ(json,
            R"({"image":"","argv":[],"limits":{"memory_bytes":2147483648,"cpus":2.0,"pids":256,)"
            R"("disk_bytes":2147483648,"inodes":0,"timeout_ms":300000,"max_lifetime_ms":600000},)"
            R"("env":{},"mounts":[],"workdir":"/workspace","hostname":"sandbox","root":false,)"
            R"("network":{"mode":"none","allow":[],"deny":[],"allow_domains":[],"dns_servers":[],)"
            R"("gateway":[]},"secrets":[]})");
}

TEST(ApiSpec, RoundTrip) {
  SandboxSpec s = full_spec();
  s.argv = {"python3", "-c", "print(1)"};
  s.network.mode = "allowlist";
  s.network.allow_domains = {"pypi.org", "*.example.com"};
  s.network.dns_servers = {"10.0.0.53"};
  s.network.template_name = "code-exec@1";
  s.network.allow = {"tcp://db.test:5432"};
  s.network.deny = {"evil.test"};
  s.network.remove = {"pypi.org"};
  s.network.timeout_ms = 2500;
  s.network.rate_per_second = 5;
  s.network.rate_burst = 10;
  s.network.gateway = {"billing"};
  s.limits.cpus = 0.1 + 0.2;  // not exactly representable in decimal
  auto back = spec_from_json(spec_to_json(s));
  ASSERT_TRUE(back.has_value()) << back.error().message;
  expect_same_spec(*back, s);
  EXPECT_EQ(spec_to_json(*back), spec_to_json(s));

  auto defaults = spec_from_json(spec_to_json(SandboxSpec{}));
  ASSERT_TRUE(defaults.has_value());
  expect_same_spec(*defaults, SandboxSpec{});
}

TEST(ApiSpec, StoredFormIsStrict) {
  auto r = spec_from_json(R"({"limits": {"memory": 1}})");
  ASSERT_FALSE(r.has_value());
  EXPECT_TRUE(r.error().message.starts_with(R"(unknown_field: unknown field "limits.memory")"))
      << r.error().message;
  r = spec_from_json(R"({"limits": {"cpus": -1}})");
  ASSERT_FALSE(r.has_value());
  r = spec_from_json(R"({"root": 1})");
  ASSERT_FALSE(r.has_value());
  EXPECT_TRUE(r.error().message.starts_with("wrong_type: root:")) << r.error().message;
}

// ---- sandbox info and lists ---------------------------------------------------------

SandboxInfo full_info() {
  SandboxInfo info;
  info.id = "sb-0123abcd";
  info.state = "running";
  info.spec = full_spec();
  info.usage = SandboxUsage{100, 200, 300, 4, 5000, 60, 1, 2};
  info.created_at_ms = 1700000000000;
  info.updated_at_ms = 1700000001000;
  info.expires_at_ms = 1700000600000;
  info.error = "stage mounts: ENOENT";
  info.residue = {"cgroup /sys/fs/cgroup/corral/sb-0123abcd"};
  info.residue_bytes = 4096;
  return info;
}

void expect_same_info(const SandboxInfo& a, const SandboxInfo& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.state, b.state);
  expect_same_spec(a.spec, b.spec);
  ASSERT_EQ(a.usage.has_value(), b.usage.has_value());
  if (a.usage) {
    EXPECT_EQ(a.usage->memory_bytes, b.usage->memory_bytes);
    EXPECT_EQ(a.usage->memory_peak_bytes, b.usage->memory_peak_bytes);
    EXPECT_EQ(a.usage->cpu_ms, b.usage->cpu_ms);
    EXPECT_EQ(a.usage->pids, b.usage->pids);
    EXPECT_EQ(a.usage->disk_bytes, b.usage->disk_bytes);
    EXPECT_EQ(a.usage->disk_inodes, b.usage->disk_inodes);
    EXPECT_EQ(a.usage->oom_kills, b.usage->oom_kills);
    EXPECT_EQ(a.usage->pids_max_hits, b.usage->pids_max_hits);
  }
  EXPECT_EQ(a.created_at_ms, b.created_at_ms);
  EXPECT_EQ(a.updated_at_ms, b.updated_at_ms);
  EXPECT_EQ(a.expires_at_ms, b.expires_at_ms);
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.residue, b.residue);
  EXPECT_EQ(a.residue_bytes, b.residue_bytes);
}

TEST(ApiSandboxInfo, RoundTrip) {
  SandboxInfo full = full_info();
  auto back = parse_sandbox_info(to_json(full));
  ASSERT_TRUE(back.has_value()) << back.error().message;
  expect_same_info(*back, full);

  SandboxInfo minimal;
  minimal.id = "sb-1";
  minimal.state = "cleaned";
  std::string json = to_json(minimal);
  EXPECT_TRUE(contains(json, R"("usage":null)")) << json;
  EXPECT_TRUE(contains(json, R"("expires_at_ms":null)")) << json;
  EXPECT_TRUE(contains(json, R"("error":null)")) << json;
  back = parse_sandbox_info(json);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  expect_same_info(*back, minimal);
}

TEST(ApiSandboxInfo, ListRoundTrip) {
  std::vector<SandboxInfo> list = {full_info(), SandboxInfo{}};
  list[1].id = "sb-2";
  std::string json = to_json(list);
  EXPECT_TRUE(json.starts_with(R"({"sandboxes":[)")) << json;
  auto back = parse_sandbox_list(json);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  ASSERT_EQ(back->size(), 2u);
  expect_same_info((*back)[0], list[0]);
  expect_same_info((*back)[1], list[1]);
  auto empty = parse_sandbox_list(to_json(std::vector<SandboxInfo>{}));
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(empty->empty());
}

TEST(ApiSandboxInfo, ResponsesIgnoreUnknownFieldsButCheckTypes) {
  auto r = parse_sandbox_info(R"({"id": "sb-1", "state": "ready", "added_later": {"x": 1}})");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->id, "sb-1");
  r = parse_sandbox_info(R"({"id": "sb-1", "created_at_ms": "yesterday"})");
  ASSERT_FALSE(r.has_value());
  EXPECT_TRUE(r.error().message.starts_with("wrong_type: created_at_ms:")) << r.error().message;
  r = parse_sandbox_info(R"({"state": "ready"})");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().hint, "id");
  auto list = parse_sandbox_list(R"({"sandboxes": [{"id": "a"}, {"id": 7}]})");
  ASSERT_FALSE(list.has_value());
  EXPECT_EQ(list.error().hint, "sandboxes[1].id");
}

// ---- extend -----------------------------------------------------------------------

TEST(ApiExtend, RoundTrip) {
  ExtendRequest a;
  a.max_lifetime_ms = 1200'000;
  EXPECT_EQ(to_json(a), R"({"max_lifetime":1200})");
  auto back = parse_extend(to_json(a));
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->max_lifetime_ms, a.max_lifetime_ms);
  EXPECT_FALSE(back->extend_by_ms.has_value());

  ExtendRequest b;
  b.extend_by_ms = 1500;
  EXPECT_EQ(to_json(b), R"({"extend_by":"1500ms"})");
  back = parse_extend(to_json(b));
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->extend_by_ms, b.extend_by_ms);
  EXPECT_FALSE(back->max_lifetime_ms.has_value());

  back = parse_extend(R"({"extend_by": "5m"})");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->extend_by_ms, 300'000);
}

TEST(ApiExtend, ExactlyOne) {
  Error e = refused(parse_extend, "{}");
  EXPECT_TRUE(
      e.message.starts_with("invalid_value: no change given: give exactly one of "
                            "\"max_lifetime\""))
      << e.message;
  e = refused(parse_extend, R"({"max_lifetime": 60, "extend_by": 60})");
  EXPECT_TRUE(contains(e.message, "exactly one")) << e.message;
  e = refused(parse_extend, R"({"extend_by": "8d"})");
  EXPECT_TRUE(contains(e.message, "invalid duration")) << e.message;
  e = refused(parse_extend, R"({"max_lifetime": 700000})");
  EXPECT_TRUE(contains(e.message, "(7 days)")) << e.message;
  e = refused(parse_extend, R"({"extend": 60})");
  EXPECT_TRUE(e.message.starts_with(
      R"(unknown_field: unknown field "extend" (known: max_lifetime, extend_by))"))
      << e.message;
}

// ---- exec -------------------------------------------------------------------------

TEST(ApiExec, ArgvAndCmd) {
  auto r = parse_exec(R"({"argv": ["python3", "x.py"]})");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->argv, (std::vector<std::string>{"python3", "x.py"}));
  EXPECT_FALSE(r->cmd.has_value());
  EXPECT_EQ(r->max_output_bytes, 1024u * 1024);
  EXPECT_EQ(r->stream, "");

  r = parse_exec(R"({"cmd": "echo hi | wc -c"})");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->argv, (std::vector<std::string>{"/bin/sh", "-c", "echo hi | wc -c"}));
  EXPECT_EQ(r->cmd, "echo hi | wc -c");
}

TEST(ApiExec, BothOrNeitherCommandIsRefused) {
  Error e = exec_refused(R"({"argv": ["ls"], "cmd": "ls"})");
  EXPECT_EQ(e.message,
            "invalid_value: argv: give either \"argv\" (a list of arguments) or \"cmd\" (a shell "
            "command line), not both");
  EXPECT_EQ(e.hint, "argv");
  e = exec_refused(R"({"env": {"A": "1"}})");
  EXPECT_TRUE(e.message.starts_with("invalid_value: argv: no command: give \"argv\"")) << e.message;
  e = exec_refused("{}");
  EXPECT_TRUE(contains(e.message, "no command")) << e.message;
}

TEST(ApiExec, Refusals) {
  struct Case {
    std::string_view body;
    std::string_view prefix;
  };
  const Case cases[] = {
      {R"({"argv": []})", "invalid_value: argv: is empty"},
      {R"({"argv": ["", "x"]})", "invalid_value: argv[0]: is empty"},
      {R"({"argv": ["ls", 1]})", "wrong_type: argv[1]: expected a string, found the number 1"},
      {R"({"argv": "ls -l"})", "wrong_type: argv: expected an array of strings"},
      {R"({"argv": ["ls", "a\u0000b"]})", "invalid_value: argv[1]: contains a NUL byte"},
      {R"({"cmd": ""})", "invalid_value: cmd: is empty"},
      {R"({"cmd": ["ls"]})", "wrong_type: cmd: expected a string"},
      {R"({"argv": ["ls"], "cwd": "tmp"})", "invalid_value: cwd: \"tmp\" is not an absolute"},
      {R"({"argv": ["ls"], "env": {"=": "x"}})", "invalid_value: env[\"=\"]: invalid variable"},
      {R"({"argv": ["ls"], "timeout": 0})", "invalid_value: timeout: must be between 1ms"},
      {R"({"argv": ["ls"], "timeout": -3})", "invalid_value: timeout: must be between 1ms"},
      {R"({"argv": ["ls"], "timeout": 1.5})", "wrong_type: timeout: expected a duration"},
      {R"({"argv": ["ls"], "max_output_bytes": 67108865})",
       "invalid_value: max_output_bytes: must be between 0 and 67108864"},
      {R"({"argv": ["ls"], "max_output_bytes": "65Mi"})",
       "invalid_value: max_output_bytes: must be at most 64Mi"},
      {R"({"argv": ["ls"], "stream": "websocket"})", "invalid_value: stream: \"websocket\" is not"},
      {R"({"argv": ["ls"], "stdin": "a", "stdin_b64": "YQ=="})",
       "invalid_value: stdin: give either \"stdin\" or \"stdin_b64\", not both"},
      {R"({"argv": ["ls"], "stdin_b64": "YQ"})", "invalid_value: stdin_b64: invalid base64"},
      {R"({"argv": ["ls"], "Argv": ["x"]})",
       "unknown_field: unknown field \"Argv\" (known: argv, "},
  };
  for (const auto& c : cases) {
    Error e = exec_refused(c.body);
    EXPECT_TRUE(e.message.starts_with(c.prefix)) << c.body << " -> " << e.message;
  }
  std::string many = R"({"argv": [)";
  for (int i = 0; i < 4097; ++i) many.append(i ? ",\"a\"" : "\"a\"");
  many.append("]}");
  Error e = exec_refused(many);
  EXPECT_TRUE(e.message.starts_with("invalid_value: argv: more than 4096 entries")) << e.message;
}

TEST(ApiExec, RoundTrip) {
  ExecRequest a;
  a.argv = {"python3", "-c", "print('é')"};
  a.env = {{"B", "2"}, {"A", "1"}};
  a.cwd = "/workspace/sub";
  a.stdin_data = "line 1\nline 2\n";
  a.timeout_ms = 2500;
  a.max_output_bytes = 0;
  a.stream = "ndjson";
  auto back = parse_exec(to_json(a));
  ASSERT_TRUE(back.has_value()) << to_json(a) << ": " << back.error().message;
  EXPECT_EQ(back->argv, a.argv);
  EXPECT_EQ(back->cmd, a.cmd);
  EXPECT_EQ(back->env, a.env);  // order kept
  EXPECT_EQ(back->cwd, a.cwd);
  EXPECT_EQ(back->stdin_data, a.stdin_data);
  EXPECT_EQ(back->timeout_ms, a.timeout_ms);
  EXPECT_EQ(back->max_output_bytes, a.max_output_bytes);
  EXPECT_EQ(back->stream, a.stream);

  ExecRequest b;
  b.cmd = "cat > /tmp/x";
  b.argv = {"/bin/sh", "-c", *b.cmd};
  b.stdin_data = std::string("\x00\xff\xfe binary", 10);
  std::string json = to_json(b);
  EXPECT_TRUE(contains(json, R"("stdin_b64":")")) << json;
  back = parse_exec(json);
  ASSERT_TRUE(back.has_value()) << json << ": " << back.error().message;
  EXPECT_EQ(back->argv, b.argv);
  EXPECT_EQ(back->cmd, b.cmd);
  EXPECT_EQ(back->stdin_data, b.stdin_data);
  EXPECT_FALSE(back->timeout_ms.has_value());
  EXPECT_EQ(back->max_output_bytes, 1024u * 1024);
}

TEST(ApiExecResult, TextOutputsRoundTrip) {
  ExecResult r;
  r.exit_code = 0;
  r.stdout_data = "hello \xc3\xa9\n";
  r.stderr_data = "";
  r.duration_ms = 12;
  r.process_id = "p-1f";
  std::string json = to_json(r);
  EXPECT_EQ(json,
            "{\"exit_code\":0,\"signal\":null,\"timed_out\":false,\"stdout\":\"hello \xc3\xa9\\n\","
            "\"stderr\":\"\",\"stdout_truncated\":false,\"stderr_truncated\":false,"
            "\"duration_ms\":12,\"process_id\":\"p-1f\"}");
  auto back = parse_exec_result(json);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  expect_same_result(*back, r);
}

TEST(ApiExecResult, BinaryOutputsUseBase64) {
  ExecResult r;
  r.signal = 9;
  r.timed_out = true;
  r.stdout_data = std::string("\x89PNG\r\n\x1a\n\x00", 9);
  r.stderr_data = "ok \xff";
  r.stdout_truncated = true;
  r.stderr_truncated = true;
  r.duration_ms = 30000;
  std::string json = to_json(r);
  EXPECT_TRUE(contains(json, R"("stdout_b64":"iVBORw0KGgoA")")) << json;
  EXPECT_TRUE(contains(json, R"("stderr_b64":")")) << json;
  EXPECT_FALSE(contains(json, R"("stdout":)")) << json;
  auto back = parse_exec_result(json);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  expect_same_result(*back, r);

  auto both = parse_exec_result(R"({"stdout": "a", "stdout_b64": "YQ=="})");
  ASSERT_FALSE(both.has_value());
  EXPECT_TRUE(contains(both.error().message, "not both")) << both.error().message;
}

TEST(ApiExecEvent, EveryKindRoundTrips) {
  ExecEvent out;
  out.kind = ExecEvent::kStdout;
  out.data = "line\n";
  EXPECT_EQ(to_json(out), R"({"type":"stdout","data":"line\n"})");

  ExecEvent err;
  err.kind = ExecEvent::kStderr;
  err.data = std::string("\xff\x00", 2);
  EXPECT_EQ(to_json(err), R"({"type":"stderr","data_b64":"/wA="})");

  ExecEvent exit;
  exit.kind = ExecEvent::kExit;
  exit.result.exit_code = 124;
  exit.result.timed_out = true;
  exit.result.stdout_truncated = true;
  exit.result.duration_ms = 5000;
  exit.result.process_id = "p-2";
  std::string exit_json = to_json(exit);
  EXPECT_FALSE(contains(exit_json, "\"stdout\"")) << exit_json;

  ExecEvent error;
  error.kind = ExecEvent::kError;
  error.error =
      make_api_error(ApiErrorCode::kSandboxExpired, "the sandbox reached its max_lifetime");

  for (const ExecEvent* e : {&out, &err, &exit, &error}) {
    std::string line = to_json(*e);
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
    auto back = parse_exec_event(line);
    ASSERT_TRUE(back.has_value()) << line << ": " << back.error().message;
    EXPECT_EQ(back->kind, e->kind);
    EXPECT_EQ(back->data, e->data);
    expect_same_result(back->result, e->result);
    expect_same_error(back->error, e->error);
  }
}

TEST(ApiExecEvent, Refusals) {
  EXPECT_TRUE(refused(parse_exec_event, R"({"data": "x"})")
                  .message.starts_with("invalid_value: type: is missing"));
  EXPECT_TRUE(refused(parse_exec_event, R"({"type": "stdin", "data": "x"})")
                  .message.starts_with("invalid_value: type: \"stdin\" is not an event type"));
  EXPECT_TRUE(refused(parse_exec_event, R"({"type": "stdout"})")
                  .message.starts_with("invalid_value: data: is missing"));
  EXPECT_TRUE(refused(parse_exec_event, R"({"type": "stdout", "data_b64": "%%%%"})")
                  .message.starts_with("invalid_value: data_b64: invalid base64"));
  EXPECT_TRUE(refused(parse_exec_event, R"({"type": "exit", "exit_code": "0"})")
                  .message.starts_with("wrong_type: exit_code:"));
  EXPECT_TRUE(refused(parse_exec_event, R"({"type": "error"})")
                  .message.starts_with("invalid_value: error: is missing"));
  EXPECT_TRUE(refused(parse_exec_event, "{\"type\": \"stdout\", \"data\": \"x\"}\n{}")
                  .message.starts_with("bad_json:"));
}

// ---- processes ----------------------------------------------------------------------

TEST(ApiProcess, RoundTrip) {
  ProcessInfo running;
  running.id = "p-0a1b";
  running.sandbox_id = "sb-1";
  running.argv = {"sleep", "100"};
  running.state = "running";
  running.started_at_ms = 1700000000000;
  running.stdout_bytes = 10;
  running.stderr_bytes = 20;
  ProcessInfo done = running;
  done.id = "p-0a1c";
  done.state = "exited";
  done.exit_code = 3;
  done.signal = 15;
  done.timed_out = true;
  done.ended_at_ms = 1700000005000;

  for (const ProcessInfo* p : {&running, &done}) {
    auto back = parse_process_info(to_json(*p));
    ASSERT_TRUE(back.has_value()) << back.error().message;
    EXPECT_EQ(back->id, p->id);
    EXPECT_EQ(back->sandbox_id, p->sandbox_id);
    EXPECT_EQ(back->argv, p->argv);
    EXPECT_EQ(back->state, p->state);
    EXPECT_EQ(back->exit_code, p->exit_code);
    EXPECT_EQ(back->signal, p->signal);
    EXPECT_EQ(back->timed_out, p->timed_out);
    EXPECT_EQ(back->started_at_ms, p->started_at_ms);
    EXPECT_EQ(back->ended_at_ms, p->ended_at_ms);
    EXPECT_EQ(back->stdout_bytes, p->stdout_bytes);
    EXPECT_EQ(back->stderr_bytes, p->stderr_bytes);
  }
  std::string list = to_json(std::vector<ProcessInfo>{running, done});
  EXPECT_TRUE(list.starts_with(R"({"processes":[)")) << list;
  auto back = parse_process_list(list);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1].exit_code, 3);
  EXPECT_FALSE((*back)[0].exit_code.has_value());
}

TEST(ApiProcess, SignalRequest) {
  EXPECT_EQ(parse_signal_request(R"({"signal": "TERM"})"), 15);
  EXPECT_EQ(parse_signal_request(R"({"signal": "SIGKILL"})"), 9);
  EXPECT_EQ(parse_signal_request(R"({"signal": 2})"), 2);
  Error e = refused(parse_signal_request, R"({"signal": "TERMINATE"})");
  EXPECT_TRUE(e.message.starts_with("invalid_value: signal: \"TERMINATE\" is not a signal name"))
      << e.message;
  e = refused(parse_signal_request, R"({"signal": 0})");
  EXPECT_TRUE(e.message.starts_with("invalid_value: signal: must be between 1 and 64"))
      << e.message;
  e = refused(parse_signal_request, "{}");
  EXPECT_TRUE(e.message.starts_with("invalid_value: signal: is missing")) << e.message;
  e = refused(parse_signal_request, R"({"signal": true})");
  EXPECT_TRUE(e.message.starts_with("wrong_type: signal:")) << e.message;
}

// ---- files ------------------------------------------------------------------------

TEST(ApiFiles, EntryAndListRoundTrip) {
  FileEntry file{"data.csv", "file", 1234, 0644, 1700000000123, ""};
  FileEntry link{"latest", "symlink", 8, 0777, 1700000000000, "data.csv"};
  FileEntry odd{std::string("caf\xe9", 4), "other", 0, 0, -5, std::string("\xff", 1)};
  for (const FileEntry* e : {&file, &link, &odd}) {
    std::string json = to_json(*e);
    auto back = parse_file_entry(json);
    ASSERT_TRUE(back.has_value()) << json << ": " << back.error().message;
    EXPECT_EQ(back->name, e->name);
    EXPECT_EQ(back->type, e->type);
    EXPECT_EQ(back->size, e->size);
    EXPECT_EQ(back->mode, e->mode);
    EXPECT_EQ(back->mtime_ms, e->mtime_ms);
    EXPECT_EQ(back->link_target, e->link_target);
  }
  EXPECT_TRUE(contains(to_json(odd), R"("name_b64":"Y2Fm6Q==")")) << to_json(odd);

  std::string list = to_json(std::vector<FileEntry>{file, link}, true);
  bool truncated = false;
  auto back = parse_file_list(list, &truncated);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_TRUE(truncated);
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1].link_target, "data.csv");
  back = parse_file_list(to_json(std::vector<FileEntry>{}, false), nullptr);
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(back->empty());

  auto bad = parse_file_entry(R"({"name": "x", "type": "fifo"})");
  ASSERT_FALSE(bad.has_value());
  EXPECT_TRUE(contains(bad.error().message, "not one of file, directory, symlink, other"));
}

TEST(ApiFiles, Mkdir) {
  auto r = parse_mkdir(R"({"path": "/workspace/a/b", "parents": true, "mode": "0700"})");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->path, "/workspace/a/b");
  EXPECT_TRUE(r->parents);
  EXPECT_EQ(r->mode, 0700u);
  r = parse_mkdir(R"({"path": "rel/dir", "mode": 493})");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->mode, 0755u);
  EXPECT_FALSE(r->parents);
  r = parse_mkdir(R"({"path": "/x"})");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->mode, 0755u);

  MkdirRequest m{std::string("/w/\xff", 4), true, 0750};
  std::string json = to_json(m);
  EXPECT_TRUE(contains(json, R"("mode":"0750")")) << json;
  auto back = parse_mkdir(json);
  ASSERT_TRUE(back.has_value()) << json << ": " << back.error().message;
  EXPECT_EQ(back->path, m.path);
  EXPECT_EQ(back->parents, m.parents);
  EXPECT_EQ(back->mode, m.mode);

  EXPECT_TRUE(refused(parse_mkdir, R"({"path": "/x", "mode": "0855"})")
                  .message.starts_with("invalid_value: mode: \"0855\" is not a permission mode"));
  EXPECT_TRUE(refused(parse_mkdir, R"({"path": "/x", "mode": "01777"})")
                  .message.starts_with("invalid_value: mode:"));
  EXPECT_TRUE(refused(parse_mkdir, R"({"path": "/x", "mode": 512})")
                  .message.starts_with("invalid_value: mode: must be between 0 and 511"));
  EXPECT_TRUE(refused(parse_mkdir, R"({"path": "/x", "mode": 7.5})")
                  .message.starts_with("wrong_type: mode: expected an octal string"));
  EXPECT_TRUE(refused(parse_mkdir, R"({"parents": true})")
                  .message.starts_with("invalid_value: path: is missing"));
  EXPECT_TRUE(
      refused(parse_mkdir, R"({"path": ""})").message.starts_with("invalid_value: path: is empty"));
  EXPECT_TRUE(refused(parse_mkdir, R"({"path": "/a\u0000b"})")
                  .message.starts_with("invalid_value: path: contains a NUL byte"));
  EXPECT_TRUE(refused(parse_mkdir, R"({"path": "/x", "recursive": true})")
                  .message.starts_with("unknown_field: unknown field \"recursive\""));
}

TEST(ApiFiles, Rename) {
  RenameRequest r{"/workspace/a", "/workspace/b", true};
  auto back = parse_rename(to_json(r));
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->from, r.from);
  EXPECT_EQ(back->to, r.to);
  EXPECT_EQ(back->overwrite, r.overwrite);
  auto defaults = parse_rename(R"({"from": "a", "to": "b"})");
  ASSERT_TRUE(defaults.has_value());
  EXPECT_FALSE(defaults->overwrite);
  EXPECT_TRUE(refused(parse_rename, R"({"from": "a"})")
                  .message.starts_with("invalid_value: to: is missing"));
  EXPECT_TRUE(refused(parse_rename, R"({"from": "a", "to": 5})")
                  .message.starts_with("wrong_type: to: expected a string, found the number 5"));
  EXPECT_TRUE(refused(parse_rename, R"({"from": "a", "to": "b", "overwrite": "no"})")
                  .message.starts_with("wrong_type: overwrite: expected true or false"));
}

TEST(ApiFiles, UploadResultRoundTrip) {
  UploadResult u{"/workspace/in.txt", 42,
                 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"};
  auto back = parse_upload_result(to_json(u));
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->path, u.path);
  EXPECT_EQ(back->bytes, u.bytes);
  EXPECT_EQ(back->sha256, u.sha256);
}

// The design source's network block (its section 8.1), as JSON, means what
// it says there.
TEST(ApiCreate, TheSourcesNetworkFormIsAccepted) {
  auto r = parse_create_sandbox(
      R"({"network": {"default": "deny", "allow_domains": ["pypi.org", "registry.npmjs.org"],)"
      R"( "dns_servers": ["10.0.0.53"]}})");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->spec.network.mode, "");  // the domains decide: an allowlist
  EXPECT_EQ(r->spec.network.allow_domains,
            (std::vector<std::string>{"pypi.org", "registry.npmjs.org"}));
  EXPECT_EQ(r->spec.network.dns_servers, std::vector<std::string>{"10.0.0.53"});
  auto open = parse_create_sandbox(R"({"network": {"default": "allow"}})");
  ASSERT_TRUE(open.has_value());
  EXPECT_EQ(open->spec.network.mode, "open");
  auto none = parse_create_sandbox(R"({"network": {"default": "deny"}})");
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->spec.network.mode, "none");
  Error e = create_refused(R"({"network": {"default": "allow", "mode": "none"}})");
  EXPECT_EQ(e.hint, "network.mode");
  e = create_refused(R"({"network": {"default": "allow", "allow_domains": ["a.test"]}})");
  EXPECT_EQ(e.hint, "network.allow_domains");
  e = create_refused(R"({"network": {"default": "maybe"}})");
  EXPECT_EQ(e.hint, "network.default");
}

}  // namespace
// A rate without a burst gets twice the rate (at least 1), as the CLI's
// --network-rate; a slow rate below 1/s is accepted.
TEST(ApiModel, ANetworkRateWithoutBurstGetsTwiceTheRate) {
  auto five = parse_create_sandbox(R"({"network": {"rate": {"per_second": 5}}})");
  ASSERT_TRUE(five) << five.error().message;
  EXPECT_EQ(five->spec.network.rate_burst, 10);
  auto slow = parse_create_sandbox(R"({"network": {"rate": {"per_second": 0.2}}})");
  ASSERT_TRUE(slow) << slow.error().message;
  EXPECT_EQ(slow->spec.network.rate_burst, 1);
  auto off = parse_create_sandbox(R"({"network": {"rate": {"per_second": 0}}})");
  ASSERT_TRUE(off) << off.error().message;
  EXPECT_EQ(off->spec.network.rate_burst, 0);
  auto given = parse_create_sandbox(R"({"network": {"rate": {"per_second": 5, "burst": 7}}})");
  ASSERT_TRUE(given) << given.error().message;
  EXPECT_EQ(given->spec.network.rate_burst, 7);
}

}  // namespace corral::api

// Issue 5: the secrets of a create, both forms of a host, and the stored
// round trip; shapes are checked here, rules by the daemon.
TEST(ApiSecrets, CreateParsesSecretsAndTheStoredFormRoundTrips) {
  namespace api = corral::api;
  auto req = api::parse_create_sandbox(
      R"({"secrets": [{"name": "db"}, {"name": "openai", "tier": "high", "env_var": "OPENAI_API_KEY",)"
      R"( "hosts": ["api.openai.com", "x.example.com:8443", {"host": "y.example.com", "intercept": true}],)"
      R"( "ttl": "15m"}], "expected_duration": "10m"})");
  ASSERT_TRUE(req) << req.error().message;
  const auto& s = req->spec.secrets;
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].name, "db");
  EXPECT_TRUE(s[0].key.empty());
  EXPECT_EQ(s[1].tier, "high");
  EXPECT_EQ(s[1].env_var, "OPENAI_API_KEY");
  ASSERT_EQ(s[1].hosts.size(), 3u);
  EXPECT_EQ(s[1].hosts[0].port, 443);
  EXPECT_EQ(s[1].hosts[1].port, 8443);
  EXPECT_EQ(s[1].hosts[1].host, "x.example.com");
  EXPECT_TRUE(s[1].hosts[2].intercept);
  EXPECT_EQ(s[1].ttl_ms, 15 * 60 * 1000);
  EXPECT_EQ(req->spec.expected_duration_ms, 10 * 60 * 1000);
  auto back = api::spec_from_json(api::spec_to_json(req->spec));
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_EQ(back->secrets.size(), 2u);
  EXPECT_EQ(back->secrets[1].hosts[2].host, "y.example.com");
  EXPECT_TRUE(back->secrets[1].hosts[2].intercept);
  EXPECT_EQ(back->expected_duration_ms, req->spec.expected_duration_ms);

  for (const char* bad : {R"({"secrets": {"name": "x"}})", R"({"secrets": [{"tier": "low"}]})",
                          R"({"secrets": [{"name": "x", "hosts": ["h:0"]}]})",
                          R"({"secrets": [{"name": "x", "hosts": [{"port": 1}]}]})",
                          R"({"secrets": [{"name": "x", "value": "inline"}]})"}) {
    auto r = api::parse_create_sandbox(bad);
    EXPECT_FALSE(r) << bad;
  }
}
