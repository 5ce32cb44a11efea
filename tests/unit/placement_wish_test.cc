// The create body's "placement" (issue 18, docs/api.md and docs/fleet.md
// "Placement"): taken out of the body before the create codec reads it,
// each mistake refused with its field; and the share a stored spec takes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "daemon/sandbox_placer.h"

namespace corral::daemon {
namespace {

TEST(PlacementWish, IsTakenOutOfTheBodyAndTheRestIsLeftAsItWas) {
  auto none = take_placement_wish(R"({"image":"py"})");
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_EQ(none->body, R"({"image":"py"})") << "a body without placement is not rewritten";
  EXPECT_TRUE(none->wish.empty());
  auto empty = take_placement_wish("");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->wish.empty());
  // Not an object: the create codec says what is wrong with it.
  auto garbage = take_placement_wish("[1,2");
  ASSERT_TRUE(garbage);
  EXPECT_EQ(garbage->body, "[1,2");

  auto both = take_placement_wish(
      R"({"limits":{"memory":"64Mi"},"placement":{"node":"node-b","labels":{"zone":"eu-1","gpu":"a100"}}})");
  ASSERT_TRUE(both) << both.error().message;
  EXPECT_EQ(nlohmann::json::parse(both->body),
            nlohmann::json::parse(R"({"limits":{"memory":"64Mi"}})"));
  EXPECT_EQ(both->wish.node, "node-b");
  EXPECT_EQ(both->wish.labels,
            (std::map<std::string, std::string>{{"gpu", "a100"}, {"zone", "eu-1"}}));
  auto null = take_placement_wish(R"({"placement":null})");
  ASSERT_TRUE(null);
  EXPECT_TRUE(null->wish.empty());
  EXPECT_EQ(null->body, "{}");
}

TEST(PlacementWish, MistakesAreRefusedWithTheirField) {
  struct Case {
    const char* body;
    const char* code;  // the wire name
    const char* field;
  };
  const std::string long_value(64, 'v');
  std::string many = R"({"placement":{"labels":{)";
  for (int i = 0; i < 33; ++i) many += (i ? "," : "") + ("\"k" + std::to_string(i) + "\":\"v\"");
  many += "}}}";
  const std::string too_long = R"({"placement":{"labels":{"k":")" + long_value + R"("}}})";
  const std::vector<Case> cases = {
      {R"({"placement":"node-b"})", "wrong_type", "placement"},
      {R"({"placement":{"rack":"7"}})", "unknown_field", "placement.rack"},
      {R"({"placement":{"node":7}})", "wrong_type", "placement.node"},
      {R"({"placement":{"node":"Node_B"}})", "invalid_value", "placement.node"},
      {R"({"placement":{"node":""}})", "invalid_value", "placement.node"},
      {R"({"placement":{"labels":["zone"]}})", "wrong_type", "placement.labels"},
      {R"({"placement":{"labels":{"zone":1}}})", "invalid_value", "placement.labels.zone"},
      {R"({"placement":{"labels":{"":"x"}}})", "invalid_value", "placement.labels."},
      {too_long.c_str(), "invalid_value", "placement.labels.k"},
      {many.c_str(), "invalid_value", "placement.labels"},
  };
  for (const Case& c : cases) {
    auto r = take_placement_wish(c.body);
    ASSERT_FALSE(r) << c.body;
    EXPECT_EQ(r.error().code, std::string(c.code)) << c.body << ": " << r.error().message;
    EXPECT_EQ(r.error().field, c.field) << c.body;
  }
}

TEST(PlacementWish, AStoredSpecTakesItsMemoryAndDiskLimits) {
  const SandboxShare s =
      share_of_spec(R"({"limits":{"memory_bytes":67108864,"disk_bytes":16777216,"cpus":1}})");
  EXPECT_EQ(s.memory_bytes, 67108864u);
  EXPECT_EQ(s.disk_bytes, 16777216u);
  // A spec this corral cannot read takes a slot and nothing more.
  for (const char* odd : {"", "{}", "[]", R"({"limits":7})", R"({"limits":{"memory_bytes":-1}})"}) {
    const SandboxShare z = share_of_spec(odd);
    EXPECT_EQ(z.memory_bytes, 0u) << odd;
    EXPECT_EQ(z.disk_bytes, 0u) << odd;
  }
}

}  // namespace
}  // namespace corral::daemon
