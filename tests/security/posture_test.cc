// The sandbox's own view of its privileges (ARCHITECTURE.md "Isolation"):
// no capability for the default user, the documented small set for
// --root, no_new_privs, a seccomp filter, its own session, hostname and
// identity. The same facts are checked from the host in
// host_posture_test.cc.
#include <gtest/gtest.h>

#include <bitset>

#include "jail/capabilities.h"
#include "security/probe_session.h"

namespace corral::testing {
namespace {

// The --root capability set, from the engine's own table
// (src/jail/capabilities.h; docs/cli.md "--root").
std::uint64_t documented_root_caps() {
  std::uint64_t mask = 0;
  for (const auto& c : kRootCapabilities) mask |= 1ULL << c.value;
  return mask;
}

// The set the brief of the security suite names, as a cross-check of the
// table: a change to either must be deliberate.
TEST(Posture, RootCapabilityTableIsTheReviewedSet) {
  const std::uint64_t reviewed = (1ULL << CAP_CHOWN) | (1ULL << CAP_DAC_OVERRIDE) |
                                 (1ULL << CAP_FOWNER) | (1ULL << CAP_FSETID) |
                                 (1ULL << CAP_KILL) | (1ULL << CAP_SETGID) |
                                 (1ULL << CAP_SETUID) | (1ULL << CAP_NET_BIND_SERVICE);
  EXPECT_EQ(documented_root_caps(), reviewed)
      << "kRootCapabilities changed; update docs/cli.md and this test together";
}

std::string caps_names(std::uint64_t mask) {
  std::string out;
  for (int i = 0; i < 64; ++i) {
    if (mask & (1ULL << i)) out += (out.empty() ? "" : ",") + std::to_string(i);
  }
  return out.empty() ? "none" : out;
}

// Every line "inside outside count" of an id map starts above host id 0.
void expect_map_avoids_host_root(const std::string& map, const char* what) {
  std::istringstream in(map);
  long inside = -1, outside = -1, count = -1;
  int lines = 0;
  while (in >> inside >> outside >> count) {
    ++lines;
    EXPECT_GT(outside, 0) << what << " maps onto host id 0: " << map;
  }
  EXPECT_GE(lines, 1) << what << " unreadable or empty: '" << map << "'";
}

TEST(Posture, DefaultUserHasNoPrivilege) {
  if (!is_root()) CORRAL_SKIP_OR_FAIL("security tests run as root");
  ProbeRun run = run_probe({}, {"status"});
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  json s = run.first("status");
  ASSERT_TRUE(s.is_object()) << run.describe();

  // docs/cli.md "Inside": user sandbox, uid/gid 1000.
  EXPECT_EQ(s["uid"], 1000);
  EXPECT_EQ(s["euid"], 1000);
  EXPECT_EQ(s["gid"], 1000);
  EXPECT_EQ(s["egid"], 1000);
  EXPECT_EQ(s["HOME"], "/home/sandbox");
  EXPECT_EQ(s["hostname"], "sandbox");
  EXPECT_EQ(s["cwd"], "/workspace");

  // All capabilities dropped: effective, permitted, ambient, inheritable,
  // and the bounding set too (nothing can be regained by exec).
  for (const char* set : {"CapEff", "CapPrm", "CapAmb", "CapInh", "CapBnd"}) {
    EXPECT_EQ(cap_mask(s.value(set, "")), 0u)
        << set << " = " << s.value(set, "") << " (caps " << caps_names(cap_mask(s.value(set, "")))
        << ")";
  }
  EXPECT_EQ(s["NoNewPrivs"], 1);
  EXPECT_EQ(s["Seccomp"], 2) << "2 = SECCOMP_MODE_FILTER";
  EXPECT_GE(s.value("Seccomp_filters", 0), 1);
  // Its own session: no controlling terminal of the caller (TIOCSTI target).
  EXPECT_EQ(s["dev_tty_opens"], false);
  EXPECT_EQ(s["sid"], s["pid"]) << "the workload should lead its own session (setsid)";
  // The uid map inside shows the sandbox's own host range, never host root.
  expect_map_avoids_host_root(s.value("uid_map", ""), "uid_map");
  expect_map_avoids_host_root(s.value("gid_map", ""), "gid_map");
}

TEST(Posture, RootHasOnlyTheDocumentedCapabilities) {
  if (!is_root()) CORRAL_SKIP_OR_FAIL("security tests run as root");
  ProbeRun run = run_probe({"--root"}, {"status"});
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  json s = run.first("status");
  ASSERT_TRUE(s.is_object()) << run.describe();

  EXPECT_EQ(s["uid"], 0);
  EXPECT_EQ(s["gid"], 0);
  EXPECT_EQ(s["HOME"], "/root");
  const std::uint64_t want = documented_root_caps();
  std::uint64_t eff = cap_mask(s.value("CapEff", ""));
  std::uint64_t prm = cap_mask(s.value("CapPrm", ""));
  std::uint64_t bnd = cap_mask(s.value("CapBnd", ""));
  EXPECT_EQ(eff, want) << "CapEff caps " << caps_names(eff) << ", want " << caps_names(want);
  EXPECT_EQ(prm, want) << "CapPrm caps " << caps_names(prm) << ", want " << caps_names(want);
  EXPECT_EQ(bnd & ~want, 0u) << "bounding set holds more than the documented set: "
                             << caps_names(bnd & ~want);
  EXPECT_EQ(cap_mask(s.value("CapAmb", "")), 0u);
  EXPECT_EQ(cap_mask(s.value("CapInh", "")), 0u);
  EXPECT_EQ(s["NoNewPrivs"], 1);
  EXPECT_EQ(s["Seccomp"], 2);
  EXPECT_EQ(s["dev_tty_opens"], false);
  // uid 0 inside is not uid 0 outside.
  expect_map_avoids_host_root(s.value("uid_map", ""), "uid_map");
  expect_map_avoids_host_root(s.value("gid_map", ""), "gid_map");
}

// Custom hostname (docs/cli.md --hostname) is applied and only
// inside: the host's name is unchanged.
TEST(Posture, HostnameIsPrivate) {
  if (!is_root()) CORRAL_SKIP_OR_FAIL("security tests run as root");
  char before[256] = {0};
  gethostname(before, sizeof before - 1);
  ProbeRun run = run_probe({"--hostname", "probe-host"}, {"status"});
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  EXPECT_EQ(run.first("status")["hostname"], "probe-host");
  char after[256] = {0};
  gethostname(after, sizeof after - 1);
  EXPECT_STREQ(before, after);
}

}  // namespace
}  // namespace corral::testing
