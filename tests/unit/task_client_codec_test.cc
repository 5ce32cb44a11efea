// What a task client reads and writes (issue 15 point 10; the C++ SDK's
// RemoteProvider task calls, docs/cpp-sdk.md): the POST body made from a
// TaskRequest reads back as the same request, a page of GET /v1/tasks
// reads back with its cursor, nullable fields of a task refuse the wrong
// type, and a downloaded output's hash is checked against the header.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/task_model.h"
#include "base/sha256.h"
#include "sdk/remote_provider.h"

namespace corral {
namespace {

TEST(TaskClientCodec, TheRequestBodyReadsBackAsTheSameRequest) {
  auto parsed = api::parse_task_request(
      R"({"id": "c-1", "sh": "cat", "stdin_b64": "AP8=", "timeout": "1500ms",
          "sandbox": {"limits": {"memory": "64Mi"}}, "env": {"A": "1"}, "cwd": "/workspace",
          "inputs": [{"path": "/a", "content_b64": "AP8=", "sha256": null},
                     {"path": "/b", "object": "datasets/b.csv"}],
          "outputs": [{"path": "/o", "required": false, "max_size": "1Ki"}],
          "snapshot": "never", "keep_sandbox": true})",
      1 << 20);
  ASSERT_TRUE(parsed) << parsed.error().to_string();
  for (std::optional<std::int64_t> timeout :
       {std::optional<std::int64_t>(1500), std::optional<std::int64_t>(60'000),
        std::optional<std::int64_t>()}) {
    api::TaskRequest t = *parsed;
    t.timeout_ms = timeout;
    const std::string body = api::to_request_json(t);
    auto back = api::parse_task_request(body, 1 << 20);
    ASSERT_TRUE(back) << back.error().to_string() << "\n" << body;
    EXPECT_EQ(api::to_canonical_json(*back), api::to_canonical_json(t)) << body;
    EXPECT_EQ(back->timeout_ms, timeout);
    EXPECT_EQ(back->inputs[0].content, std::string("\0\xff", 2)) << body;
  }
  // argv instead of sh
  api::TaskRequest argv;
  argv.id = "c-2";
  argv.command = {"python3", "-c", "print(1)"};
  auto back = api::parse_task_request(api::to_request_json(argv), 1 << 20);
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(back->command, argv.command);
  EXPECT_FALSE(back->sh);
}

TEST(TaskClientCodec, APageReadsBackWithItsCursor) {
  api::TaskInfo a;
  a.id = "a";
  a.ns = "default";
  a.status = "succeeded";
  a.stage = "done";
  a.created_at_ms = 2000;
  api::TaskInfo b = a;
  b.id = "b";
  b.status = "failed";
  b.reason = "exit_code";
  b.exit_code = 3;
  b.created_at_ms = 1000;
  auto page = api::parse_task_page(api::to_json({a, b}, std::string("cursor-1")));
  ASSERT_TRUE(page) << page.error().to_string();
  ASSERT_EQ(page->tasks.size(), 2u);
  EXPECT_EQ(page->tasks[0].id, "a");
  EXPECT_TRUE(page->tasks[0].ok());
  EXPECT_EQ(page->tasks[1].reason, "exit_code");
  EXPECT_TRUE(page->tasks[1].finished());
  EXPECT_FALSE(page->tasks[1].ok());
  EXPECT_EQ(page->next_cursor, "cursor-1");
  auto last = api::parse_task_page(api::to_json(std::vector<api::TaskInfo>{}, std::nullopt));
  ASSERT_TRUE(last) << last.error().to_string();
  EXPECT_TRUE(last->tasks.empty());
  EXPECT_FALSE(last->next_cursor);
  for (const char* bad : {R"({"next_cursor": null})", R"({"tasks": {}})",
                          R"({"tasks": [], "next_cursor": 7})", R"({"tasks": [{"id": 1}]})", "[]"})
    EXPECT_FALSE(api::parse_task_page(bad)) << bad;
}

TEST(TaskClientCodec, QueuedAndRunningAreNotFinished) {
  api::TaskInfo t;
  for (const char* s : {"queued", "running"}) {
    t.status = s;
    EXPECT_FALSE(t.finished()) << s;
  }
  for (const char* s : {"succeeded", "failed", "timed_out", "cancelled"}) {
    t.status = s;
    EXPECT_TRUE(t.finished()) << s;
    EXPECT_EQ(t.ok(), std::string(s) == "succeeded");
  }
}

// The nullable strings and times of a task (one reader for all of them,
// shared with the sandbox codec): null or absent is empty, another type is
// an error naming the field.
TEST(TaskClientCodec, NullableFieldsRefuseTheWrongType) {
  const std::string base = R"("id": "x", "status": "failed", "stage": "done", "created_at_ms": 1)";
  auto ok = api::parse_task_info("{" + base + R"(, "reason": null, "started_at_ms": null})");
  ASSERT_TRUE(ok) << ok.error().to_string();
  EXPECT_FALSE(ok->reason);
  EXPECT_FALSE(ok->started_at_ms);
  for (const char* field : {R"("reason": 3)", R"("detail": [])", R"("snapshot_id": {})",
                            R"("started_at_ms": "soon")", R"("finished_at_ms": 1.5)",
                            R"("outputs": [{"path": "/o", "sha256": 5}])"}) {
    auto r = api::parse_task_info("{" + base + ", " + field + "}");
    EXPECT_FALSE(r) << field;
  }
  auto said = api::parse_sandbox_info(R"({"id": "sb-1", "state": "failed", "error": "boom"})");
  ASSERT_TRUE(said) << said.error().to_string();
  EXPECT_EQ(said->error, "boom");
  auto none = api::parse_sandbox_info(R"({"id": "sb-1", "state": "ready", "error": null})");
  ASSERT_TRUE(none) << none.error().to_string();
  EXPECT_FALSE(none->error);
  auto sb = api::parse_sandbox_info(R"({"id": "sb-1", "state": "failed", "error": 7})");
  ASSERT_FALSE(sb);
  EXPECT_NE(sb.error().to_string().find("error"), std::string::npos) << sb.error().to_string();
}

TEST(TaskClientCodec, AnOutputsHashMustMatchTheHeaderTheDaemonSent) {
  const std::string body = "bytes of an output";
  const std::string hex = sha256_hex(body);
  std::string upper = hex;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_TRUE(sdk::check_output_sha256(hex, {{"x-corral-sha256", hex}}, "output 0"));
  EXPECT_TRUE(sdk::check_output_sha256(hex, {{"X-Corral-Sha256", upper}}, "output 0"));
  auto changed = sdk::check_output_sha256(sha256_hex(body + "!"), {{"x-corral-sha256", hex}},
                                          "output 0 of task t");
  ASSERT_FALSE(changed);
  EXPECT_EQ(changed.error().code, ErrorCode::kSystem);
  EXPECT_NE(changed.error().message.find("output 0 of task t"), std::string::npos);
  EXPECT_NE(changed.error().message.find(hex), std::string::npos);
  // No header, or an empty one: nothing to check against is a failure.
  EXPECT_FALSE(sdk::check_output_sha256(hex, {}, "output 0"));
  EXPECT_FALSE(sdk::check_output_sha256(hex, {{"x-corral-sha256", ""}}, "output 0"));
  EXPECT_FALSE(sdk::check_output_sha256(hex, {{"digest", "sha-256=abc"}}, "output 0"));
}

}  // namespace
}  // namespace corral
