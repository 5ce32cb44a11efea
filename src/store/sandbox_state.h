// SandboxState: the lifecycle of one sandbox (ARCHITECTURE.md "The path of
// one sandbox", REQUIREMENTS.md C2) and the transitions allowed between its
// states. The table is data (kTransitionTable) so that the store, the
// runtime, the docs and the tests all read the same edges.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace corral {

enum class SandboxState {
  kCreating,      // quota checked, id allocated; cgroup and writable layer being made
  kInitializing,  // netns, policy, secrets, mounts, PID 1 and its self-check
  kReady,         // up and idle: no exec running
  kRunning,       // at least one exec request is running
  kDestroying,    // being torn down: kill, unmount, remove, verify
  kCleaned,       // gone from the host, verified; final
  kFailed,        // a stage failed or timed out; still owes cleanup (-> kDestroying)
};

inline constexpr std::array<SandboxState, 7> kAllSandboxStates = {
    SandboxState::kCreating,   SandboxState::kInitializing, SandboxState::kReady,
    SandboxState::kRunning,    SandboxState::kDestroying,   SandboxState::kCleaned,
    SandboxState::kFailed,
};

// "creating", "initializing", "ready", "running", "destroying", "cleaned",
// "failed": the names stored in the database and shown by the API.
std::string_view sandbox_state_name(SandboxState state);
std::optional<SandboxState> parse_sandbox_state(std::string_view name);

// kCleaned and kFailed end the lifecycle: no more work is started in them.
// kFailed is still left for cleanup (kFailed -> kDestroying -> kCleaned).
bool is_terminal(SandboxState state);
// kCleaned only: nothing of the sandbox is left on the host.
bool is_final(SandboxState state);

struct TransitionEdge {
  SandboxState from;
  SandboxState to;
  std::string_view why;  // when the runtime takes this edge
};

// Every allowed edge, once. Anything not listed is refused.
std::span<const TransitionEdge> transition_table();

bool transition_allowed(SandboxState from, SandboxState to);

// "running, destroying, failed": the states reachable from `from`, for
// error messages.
std::string allowed_targets(SandboxState from);

}  // namespace corral
