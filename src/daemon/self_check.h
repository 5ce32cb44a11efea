// The self-check before a sandbox is handed out (REQUIREMENTS T3, issue 16
// point 2): the writable layer takes a write and gives it back; with a
// network, the sandbox's own resolver answers from inside its namespace,
// a name the policy denies (the canary) gets no address, and the egress
// proxy accepts a connection; each secret is present in its mode. Every
// check runs from the host side (no process is started in the sandbox),
// and none ever reads a secret's value into a message, a log line, an
// audit record or a metric. A sandbox that fails is never handed out: the
// cold create destroys it and answers 503 self_check_failed naming the
// check (sandbox_create.cc); a pool replaces it (SelfCheckStage::kClaim).
// docs/operations.md says what each failure means.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace corral::daemon {

class SandboxService;
struct SandboxEntry;

enum class SelfCheckStage { kCreate, kClaim };
std::string_view self_check_stage_name(SelfCheckStage stage);  // "create", "claim"

struct SelfCheckReport {
  bool ok = true;
  std::string failed;  // the first check that failed: "layer", "dns", "proxy", "canary",
                       // "secret_env", "secret_file", "secret_broker" (empty when ok)
  std::string detail;  // a sentence for people; never a secret value
  std::chrono::microseconds took{0};
  std::vector<std::pair<std::string, bool>> checks;  // every check run, in order
};

// Runs every check that applies to the sandbox's spec, in the order above,
// and stops at the first failure; never throws. The sandbox must be
// running (its init up, its network attached and its secrets injected).
SelfCheckReport run_self_check(SandboxService& service, SandboxEntry& sandbox,
                               SelfCheckStage stage);

// Counts and audits a report: corral_self_check_seconds (histogram, by
// stage) always; on failure corral_self_check_failures_total{check,stage}
// and an audit record sandbox.self_check_failed with the check, the
// detail and the checks run (names, never values).
void record_self_check(SandboxService& service, const std::string& sandbox_id,
                       const SelfCheckReport& report, SelfCheckStage stage);

// The name the canary check asks the sandbox's resolver for: in .invalid
// (RFC 6761), so no resolver on the internet has an address for it either.
inline constexpr std::string_view kSelfCheckCanary = "self-check-canary.corral.invalid";

}  // namespace corral::daemon
