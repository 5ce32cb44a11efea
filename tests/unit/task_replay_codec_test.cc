// The POST /v1/tasks/{id}/replay body (src/api/task_model.h; docs/tasks.md
// "Replay"; T2): every field optional, unknown ones refused by name, the
// network a word or a create's network object, and the canonical form a
// repeat with the same explicit id is compared with.
#include <gtest/gtest.h>

#include <string>

#include "api/api_error.h"
#include "api/task_model.h"
#include "store/task_record.h"

namespace corral::api {
namespace {

std::string refused_field(const std::string& body) {
  auto r = parse_task_replay(body);
  EXPECT_FALSE(r) << body;
  if (r) return "(accepted)";
  return to_api_error(r.error()).field;
}

TEST(TaskReplayCodec, AnEmptyBodyIsTheDefaultReplay) {
  for (const char* body : {"", "  \n", "{}"}) {
    auto r = parse_task_replay(body);
    ASSERT_TRUE(r) << body << ": " << r.error().to_string();
    EXPECT_FALSE(r->id);
    EXPECT_EQ(r->network, TaskReplayRequest::Network::kNone);
    EXPECT_FALSE(r->from_snapshot);
    EXPECT_FALSE(r->timeout_ms);
  }
  EXPECT_EQ(to_canonical_json(*parse_task_replay("")), to_canonical_json(*parse_task_replay("{}")));
  EXPECT_EQ(to_canonical_json(*parse_task_replay("{}")),
            to_canonical_json(*parse_task_replay(R"({"network": "none", "from_snapshot": false})")));
}

TEST(TaskReplayCodec, ReadsEveryField) {
  auto r = parse_task_replay(
      R"({"id": "build-42-again", "network": "as_original", "from_snapshot": true, "timeout": "2m"})");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->id, "build-42-again");
  EXPECT_EQ(r->network, TaskReplayRequest::Network::kAsOriginal);
  EXPECT_TRUE(r->from_snapshot);
  EXPECT_EQ(r->timeout_ms, 120000);
  auto net = parse_task_replay(R"({"network": {"mode": "allowlist", "allow": ["pypi.org"]}})");
  ASSERT_TRUE(net) << net.error().to_string();
  EXPECT_EQ(net->network, TaskReplayRequest::Network::kExplicit);
  EXPECT_EQ(net->network_spec.mode, "allowlist");
  ASSERT_EQ(net->network_spec.allow.size(), 1u);
}

TEST(TaskReplayCodec, RefusesNamingTheField) {
  EXPECT_EQ(refused_field(R"({"colour": "red"})"), "colour");
  EXPECT_EQ(refused_field(R"({"id": "a/b"})"), "id");
  EXPECT_EQ(refused_field(R"({"id": ""})"), "id");
  EXPECT_EQ(refused_field(R"({"id": 7})"), "id");
  EXPECT_EQ(refused_field(R"({"network": "open"})"), "network");
  EXPECT_EQ(refused_field(R"({"network": 1})"), "network");
  EXPECT_EQ(refused_field(R"({"network": {"mode": "bridge"}})"), "network.mode");
  EXPECT_EQ(refused_field(R"({"network": {"mode": "allowlist", "allow": ["not a rule!"]}})"),
            "network.allow[0]");
  EXPECT_EQ(refused_field(R"({"network": {"colour": 1}})"), "network.colour");
  EXPECT_EQ(refused_field(R"({"from_snapshot": "yes"})"), "from_snapshot");
  EXPECT_EQ(refused_field(R"({"timeout": "30d"})"), "timeout");
  EXPECT_EQ(refused_field(R"({"timeout": 0})"), "timeout");
  EXPECT_FALSE(parse_task_replay("[]"));
  EXPECT_FALSE(parse_task_replay("{"));
  EXPECT_FALSE(parse_task_replay(R"({"id": "a", "id": "b"})"));
}

TEST(TaskReplayCodec, TheCanonicalFormComparesMeaningNotSpelling) {
  auto a = parse_task_replay(R"({"id": "x", "timeout": "10m"})");
  auto b = parse_task_replay(R"({"timeout": 600, "id": "x", "network": "none"})");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(to_canonical_json(*a), to_canonical_json(*b));
  auto c = parse_task_replay(R"({"id": "x", "timeout": "10m", "network": "as_original"})");
  ASSERT_TRUE(c);
  EXPECT_EQ(first_differing_field(to_canonical_json(*a), to_canonical_json(*c)), "network");
  auto d = parse_task_replay(R"({"id": "x", "timeout": "10m", "from_snapshot": true})");
  ASSERT_TRUE(d);
  EXPECT_EQ(first_differing_field(to_canonical_json(*a), to_canonical_json(*d)), "from_snapshot");
}

}  // namespace
}  // namespace corral::api
