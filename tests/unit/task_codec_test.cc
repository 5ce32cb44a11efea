// The POST /v1/tasks codec (src/api/task_model.h; docs/tasks.md; D6, F6):
// strict parsing that names the offending field, the canonical form an
// idempotent repeat is compared with, and the task JSON's round trip.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/api_error.h"
#include "api/task_model.h"
#include "store/task_record.h"

namespace corral::api {
namespace {

Result<TaskRequest> parse(const std::string& body) { return parse_task_request(body, 1 << 20); }

// The field a refused body is refused for, from its error's hint.
std::string refused_field(const std::string& body) {
  auto r = parse(body);
  EXPECT_FALSE(r) << body;
  if (r) return "(accepted)";
  return to_api_error(r.error()).field;
}

TEST(TaskCodec, AcceptsTheContractExample) {
  auto r = parse(R"({"id": "build-42", "sandbox": {"limits": {"memory": "64Mi"}},
    "inputs": [{"path": "/workspace/in.txt", "content": "text"},
               {"path": "/workspace/a.bin", "content_b64": "AAEC"},
               {"path": "/workspace/data.csv", "object": "datasets/data.csv",
                "sha256": "0000000000000000000000000000000000000000000000000000000000000000"}],
    "command": ["python3", "main.py"], "env": {"A": "1"}, "cwd": "/workspace",
    "stdin": "text", "timeout": "10m",
    "outputs": [{"path": "/workspace/out.txt", "required": true, "max_size": "10MiB"}],
    "snapshot": "always", "keep_sandbox": true})");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->id, "build-42");
  ASSERT_EQ(r->inputs.size(), 3u);
  EXPECT_EQ(r->inputs[1].content, std::string("\0\1\2", 3));
  EXPECT_EQ(r->inputs[2].source, TaskInput::Source::kObject);
  EXPECT_EQ(r->timeout_ms, 600000);
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].max_size, 10u << 20);
  EXPECT_EQ(r->argv(), (std::vector<std::string>{"python3", "main.py"}));
}

// A volume input's volume_path is relative to the volume's root and normal
// (the daemon then walks it with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS).
TEST(TaskCodec, AVolumeInputNeedsANormalRelativeVolumePath) {
  auto input = [](const std::string& volume_path) {
    return R"({"id": "t", "command": ["true"], "inputs": [{"path": "/workspace/v",
      "volume": "v1", "volume_path": )" + volume_path + "}]}";
  };
  auto ok = parse(input(R"("dir/in.txt")"));
  ASSERT_TRUE(ok) << ok.error().to_string();
  EXPECT_EQ(ok->inputs[0].source, TaskInput::Source::kVolume);
  EXPECT_EQ(ok->inputs[0].volume, "v1");
  EXPECT_EQ(ok->inputs[0].volume_path, "dir/in.txt");
  for (const char* bad : {R"("")", R"("/dir/in.txt")", R"("../x")", R"("dir/../x")",
                          R"("dir//x")", R"("dir/./x")", R"("dir/")", R"("a\u0000b")", "7"})
    EXPECT_EQ(refused_field(input(bad)), "inputs[0].volume_path") << bad;
  EXPECT_EQ(refused_field(R"({"id": "t", "command": ["true"], "inputs": [{"path": "/w",
      "volume": "v1"}]})"),
            "inputs[0].volume_path");
}

TEST(TaskCodec, RefusesBadIdsByName) {
  for (const char* id : {"\"\"", "\"a/b\"", "\"..\"", "\"a b\"", "\"x\\u0000\"", "7", "null"})
    EXPECT_EQ(refused_field(std::string(R"({"id": )") + id + R"(, "command": ["true"]})"), "id")
        << id;
  EXPECT_EQ(refused_field(R"({"id": ")" + std::string(129, 'a') + R"(", "command": ["true"]})"),
            "id");
  EXPECT_TRUE(parse(R"({"id": ")" + std::string(128, 'a') + R"(", "command": ["true"]})"));
  EXPECT_TRUE(parse(R"({"id": "A.b_c:d-9", "command": ["true"]})"));
}

TEST(TaskCodec, UnknownFieldsAnywhereAreNamed) {
  EXPECT_EQ(refused_field(R"({"id": "t", "command": ["true"], "retries": 3})"), "retries");
  EXPECT_EQ(refused_field(R"({"id": "t", "command": ["true"],
                              "inputs": [{"path": "/a", "content": "", "mode": 1}]})"),
            "inputs[0].mode");
  EXPECT_EQ(refused_field(R"({"id": "t", "command": ["true"],
                              "outputs": [{"path": "/a", "size": 1}]})"),
            "outputs[0].size");
  EXPECT_EQ(refused_field(R"({"id": "t", "command": ["true"], "sandbox": {"memry": "1Gi"}})"),
            "sandbox.memry");
  EXPECT_EQ(refused_field(R"({"id": "t", "command": ["true"],
                              "sandbox": {"limits": {"memory": "1k"}}})"),
            "sandbox.limits.memory");
}

TEST(TaskCodec, ExactlyOneCommand) {
  EXPECT_EQ(refused_field(R"({"id": "t"})"), "command");
  EXPECT_EQ(refused_field(R"({"id": "t", "command": ["a"], "sh": "b"})"), "command");
  EXPECT_EQ(refused_field(R"({"id": "t", "command": []})"), "command");
  EXPECT_EQ(refused_field(R"({"id": "t", "sh": ""})"), "sh");
  auto sh = parse(R"({"id": "t", "sh": "echo hi | wc -c"})");
  ASSERT_TRUE(sh);
  EXPECT_EQ(sh->argv(), (std::vector<std::string>{"/bin/sh", "-c", "echo hi | wc -c"}));
}

// F6: every path a task names is absolute and already normal.
TEST(TaskCodec, HostilePathsAreRefused) {
  const std::vector<std::string> hostile = {"relative/x", "/a/../etc/shadow", "/..", "/a/./b",
                                            "/a//b", "/a/", "/", "", std::string("/a\0b", 4)};
  for (const std::string& p : hostile) {
    std::string path = nlohmann::json(p).dump();
    EXPECT_EQ(refused_field(R"({"id": "t", "command": ["true"], "inputs": [{"path": )" + path +
                            R"(, "content": "x"}]})"),
              "inputs[0].path")
        << p;
    EXPECT_EQ(refused_field(R"({"id": "t", "command": ["true"], "outputs": [{"path": )" + path +
                            R"(}]})"),
              "outputs[0].path")
        << p;
  }
}

TEST(TaskCodec, InputSourcesAndHashes) {
  EXPECT_EQ(refused_field(R"({"id": "t", "command": ["true"], "inputs": [{"path": "/a"}]})"),
            "inputs[0].content");
  EXPECT_EQ(refused_field(R"({"id": "t", "command": ["true"],
                              "inputs": [{"path": "/a", "content": "x", "object": "k"}]})"),
            "inputs[0].content");
  for (const char* key : {"../x", "/abs", "a//b", "a/", "a b", "a/./b"})
    EXPECT_EQ(refused_field(std::string(R"({"id": "t", "command": ["true"],
                              "inputs": [{"path": "/a", "object": ")") +
                            key + R"("}]})"),
              "inputs[0].object")
        << key;
  EXPECT_EQ(refused_field(R"({"id": "t", "command": ["true"],
                              "inputs": [{"path": "/a", "content": "x", "sha256": "ABC"}]})"),
            "inputs[0].sha256");
}

TEST(TaskCodec, CountsAndInlineBytesAreBounded) {
  std::string many = R"({"id": "t", "command": ["true"], "outputs": [)";
  for (std::size_t i = 0; i <= kMaxTaskOutputs; ++i)
    many += (i ? "," : "") + std::string(R"({"path": "/o)") + std::to_string(i) + "\"}";
  EXPECT_EQ(refused_field(many + "]}"), "outputs");
  std::string big(2000, 'x');
  auto r = parse_task_request(R"({"id": "t", "command": ["true"], "inputs": [
      {"path": "/a", "content": ")" + big + R"("}, {"path": "/b", "content": ")" + big + R"("}]})",
                              3000);
  ASSERT_FALSE(r);
  EXPECT_EQ(to_api_error(r.error()).field, "inputs[1].content");
  EXPECT_EQ(refused_field(R"({"id": "t", "command": ["true"],
                              "outputs": [{"path": "/a"}, {"path": "/a"}]})"),
            "outputs[1].path");
}

// D6: the explicit defaults and their absence compare equal; units do not
// matter; a real difference is found by first_differing_field.
TEST(TaskCodec, CanonicalFormFillsDefaultsAndUnits) {
  auto a = parse(R"({"id": "t", "command": ["true"], "outputs": [{"path": "/o"}],
                     "timeout": "10m"})");
  auto b = parse(R"({"keep_sandbox": false, "snapshot": "on_failure", "id": "t", "env": {},
                     "inputs": [], "volumes": [], "command": ["true"], "timeout": 600,
                     "outputs": [{"path": "/o", "required": true}]})");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(to_canonical_json(*a), to_canonical_json(*b));
  auto c = parse(R"({"id": "t", "command": ["true"], "outputs": [{"path": "/o", "max_size": 5}],
                     "timeout": "10m"})");
  ASSERT_TRUE(c);
  EXPECT_EQ(first_differing_field(to_canonical_json(*a), to_canonical_json(*c)),
            "outputs[0].max_size");
  auto text = parse(R"({"id": "t", "command": ["true"], "inputs": [{"path": "/a", "content": "abc"}]})");
  auto b64 = parse(R"({"id": "t", "command": ["true"], "inputs": [{"path": "/a", "content_b64": "YWJj"}]})");
  ASSERT_TRUE(text && b64);
  EXPECT_EQ(to_canonical_json(*text), to_canonical_json(*b64));
}

TEST(TaskCodec, StoredFormReadsBackToTheSameRequest) {
  auto r = parse(R"({"id": "t", "sh": "cat", "stdin_b64": "AP8=", "timeout": "1500ms",
                     "sandbox": {"limits": {"memory": "64Mi"}},
                     "inputs": [{"path": "/a", "content_b64": "AP8="}],
                     "outputs": [{"path": "/o", "required": false, "max_size": "1Ki"}]})");
  ASSERT_TRUE(r);
  const std::string canonical = to_canonical_json(*r);
  auto back = parse_stored_task_request(canonical);
  ASSERT_TRUE(back) << back.error().to_string() << "\n" << canonical;
  EXPECT_EQ(to_canonical_json(*back), canonical);
  EXPECT_EQ(back->timeout_ms, 1500);
  EXPECT_EQ(back->stdin_data, std::string("\0\xff", 2));
}

// An inline input's bytes are not in the stored request: it names them by
// hash and size (the state store keeps them, StateStore::task_input_content),
// so the row read at every transition and answer stays small. Other bytes
// give another hash; a request cannot claim a hash in place of bytes.
TEST(TaskCodec, StoredFormNamesInlineBytesByTheirHash) {
  const std::string big(1 << 16, 'q');
  auto r = parse(R"({"id": "t", "command": ["true"], "inputs": [{"path": "/a", "content": ")" +
                 big + R"("}]})");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->inputs[0].content_held);
  EXPECT_EQ(r->inputs[0].content_size, big.size());
  EXPECT_EQ(r->inputs[0].content_sha256.size(), 64u);
  const std::string canonical = to_canonical_json(*r);
  EXPECT_LT(canonical.size(), 1024u) << "the bytes are not in the canonical form";
  EXPECT_EQ(canonical.find("qqqq"), std::string::npos);
  auto back = parse_stored_task_request(canonical);
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_FALSE(back->inputs[0].content_held);
  EXPECT_TRUE(back->inputs[0].content.empty());
  EXPECT_EQ(back->inputs[0].content_sha256, r->inputs[0].content_sha256);
  EXPECT_EQ(back->inputs[0].content_size, big.size());
  EXPECT_EQ(to_canonical_json(*back), canonical);

  auto other = parse(R"({"id": "t", "command": ["true"], "inputs": [{"path": "/a", "content": ")" +
                     big + R"(x"}]})");
  ASSERT_TRUE(other);
  EXPECT_EQ(first_differing_field(canonical, to_canonical_json(*other)), "inputs[0].content_sha256");

  for (const char* claim : {R"("content_sha256": ")" "0000000000000000000000000000000000000000000000000000000000000000" R"(", "content_size": 1)",
                            R"("content": "x", "content_size": 1)"}) {
    const std::string body = std::string(R"({"id": "t", "command": ["true"], "inputs": [{"path": "/a", )") +
                             claim + "}]}";
    auto refused = parse(body);
    ASSERT_FALSE(refused) << body;
    EXPECT_EQ(to_api_error(refused.error()).code, "unknown_field") << body;
  }
}

TEST(TaskCodec, TaskInfoRoundTrip) {
  TaskInfo t;
  t.id = "x";
  t.ns = "default";
  t.status = "failed";
  t.stage = "done";
  t.reason = "output_missing";
  t.exit_code = 0;
  t.attempt = 2;
  t.created_at_ms = 1764583200123;
  t.started_at_ms = 1764583201000;
  t.finished_at_ms = 1764583202500;
  t.outputs.push_back({0, "/o", true, 3, std::string(64, 'a'), "tasks/x/2/outputs/0"});
  const std::string json = to_json(t);
  EXPECT_NE(json.find("\"created_at_ms\":1764583200123"), std::string::npos) << json;
  EXPECT_NE(json.find("\"duration_ms\":1500"), std::string::npos) << json;
  auto back = parse_task_info(json);
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(back->created_at_ms, t.created_at_ms);
  EXPECT_EQ(back->finished_at_ms, t.finished_at_ms);
  EXPECT_EQ(back->reason, t.reason);
  ASSERT_EQ(back->outputs.size(), 1u);
  EXPECT_EQ(back->outputs[0].stored_at, t.outputs[0].stored_at);
  EXPECT_EQ(to_json(*back), json);
}

TEST(TaskCodec, TimesParse) {
  EXPECT_EQ(parse_time_ms("2025-12-01T10:00:00Z").value_or(-1), 1764583200000);
  EXPECT_EQ(parse_time_ms("2025-12-01T10:00:00.5Z").value_or(-1), 1764583200500);
  EXPECT_EQ(parse_time_ms("1764583200000").value_or(-1), 1764583200000);
  for (const char* bad : {"", "yesterday", "2025-12-01", "2025-12-01T10:00:00+01:00",
                          "2025-13-01T10:00:00Z", "2025-12-01T10:00:00.Z"})
    EXPECT_FALSE(parse_time_ms(bad)) << bad;
}

}  // namespace
}  // namespace corral::api
