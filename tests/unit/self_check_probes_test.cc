// SelfCheckProbes (T3, issue 16): an announced probe of the self-check is
// recognised once, for its own sandbox, layer and name only, so that a
// sandbox's own requests are still counted as blocked.
#include "daemon/self_check_probes.h"

#include <gtest/gtest.h>

namespace corral::daemon {
namespace {

TEST(SelfCheckProbes, AnAnnouncedProbeIsTakenOnceForItsSandboxLayerAndName) {
  SelfCheckProbes probes;
  EXPECT_FALSE(probes.take("sb-a", "dns", "self-check-canary.corral.invalid"));
  probes.expect("sb-a", "dns", "self-check-canary.corral.invalid");
  probes.expect("sb-a", "proxy", "");
  EXPECT_FALSE(probes.take("sb-b", "dns", "self-check-canary.corral.invalid"));  // another sandbox
  EXPECT_FALSE(probes.take("sb-a", "dns", "denied.test"));                        // another name
  EXPECT_FALSE(probes.take("sb-a", "gateway", ""));                               // another layer
  EXPECT_TRUE(probes.take("sb-a", "dns", "self-check-canary.corral.invalid"));
  // The sandbox's own query of the same name later is its own.
  EXPECT_FALSE(probes.take("sb-a", "dns", "self-check-canary.corral.invalid"));
  EXPECT_TRUE(probes.take("sb-a", "proxy", ""));
  EXPECT_FALSE(probes.take("sb-a", "proxy", ""));
}

TEST(SelfCheckProbes, TwoChecksOfOneSandboxAnnounceTwoProbes) {
  SelfCheckProbes probes;
  probes.expect("sb-a", "dns", "gateway.corral.internal");  // at create
  probes.expect("sb-a", "dns", "gateway.corral.internal");  // at claim
  EXPECT_TRUE(probes.take("sb-a", "dns", "gateway.corral.internal"));
  EXPECT_TRUE(probes.take("sb-a", "dns", "gateway.corral.internal"));
  EXPECT_FALSE(probes.take("sb-a", "dns", "gateway.corral.internal"));
}

}  // namespace
}  // namespace corral::daemon
