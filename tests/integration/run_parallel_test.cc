// Two `corral run` at the same time: both succeed, get different sandbox
// ids, and do not see each other's writable layer.
#include <string>
#include <thread>
#include <vector>

#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

TEST(run_parallel, TwoSandboxesAtOnce) {
  // Each writes its own marker, waits long enough for the other to run at
  // the same time, then shows what /workspace holds.
  auto body = [](const std::string& name) -> std::vector<std::string> {
    return {"sh", "-c", "echo " + name + " > /workspace/" + name + "; sleep 1; ls /workspace"};
  };
  RunOutcome a, b;
  std::thread ta([&] { a = run_sandbox({}, body("first")); });
  std::thread tb([&] { b = run_sandbox({}, body("second")); });
  ta.join();
  tb.join();

  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, "first\n");
  EXPECT_EQ(b.out, "second\n");
  ASSERT_TRUE(a.report.is_object()) << a.err;
  ASSERT_TRUE(b.report.is_object()) << b.err;
  std::string id_a = a.report.value("sandbox_id", std::string());
  std::string id_b = b.report.value("sandbox_id", std::string());
  EXPECT_FALSE(id_a.empty());
  EXPECT_FALSE(id_b.empty());
  EXPECT_NE(id_a, id_b);
  expect_sandbox_cleaned_up(a.report, "first of two parallel runs");
  expect_sandbox_cleaned_up(b.report, "second of two parallel runs");
}

}  // namespace
}  // namespace corral::testing
