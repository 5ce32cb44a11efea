#include "store/sandbox_state.h"

namespace corral {
namespace {

using S = SandboxState;

constexpr TransitionEdge kTransitionTable[] = {
    // The forward path of C2.
    {S::kCreating, S::kInitializing, "id, cgroup and writable layer allocated"},
    {S::kInitializing, S::kReady, "network, secrets, mounts and PID 1 up; self-check passed"},
    {S::kReady, S::kRunning, "an exec request started a process"},
    {S::kRunning, S::kReady, "the last running process ended; the sandbox is idle again"},
    // Deletion: asked by the client or by the lifetime reaper (N7), at any
    // point before the sandbox is torn down. Setup stops where it is.
    {S::kCreating, S::kDestroying, "deleted (or expired) while its resources were allocated"},
    {S::kInitializing, S::kDestroying, "deleted (or expired) during initialization"},
    {S::kReady, S::kDestroying, "deleted, or max_lifetime reached while idle"},
    {S::kRunning, S::kDestroying, "deleted, or max_lifetime reached; processes are killed"},
    {S::kDestroying, S::kCleaned, "teardown done and verified: no process, mount, cgroup, bytes"},
    // Failure: a stage failed or timed out. Reachable from every state that
    // is not terminal; the reason is kept in sandboxes.error.
    {S::kCreating, S::kFailed, "allocation failed or the create stage timed out"},
    {S::kInitializing, S::kFailed, "a setup step failed or the init stage timed out"},
    {S::kReady, S::kFailed, "PID 1 died or the sandbox was found broken (e.g. on reconcile)"},
    {S::kRunning, S::kFailed, "PID 1 died or the sandbox was found broken (e.g. on reconcile)"},
    {S::kDestroying, S::kFailed, "teardown failed or timed out; cleanup will be retried"},
    // The one way out of kFailed: a failed stage always reaches cleanup.
    {S::kFailed, S::kDestroying, "cleanup of a failed sandbox started (again)"},
};

}  // namespace

std::string_view sandbox_state_name(SandboxState state) {
  switch (state) {
    case S::kCreating: return "creating";
    case S::kInitializing: return "initializing";
    case S::kReady: return "ready";
    case S::kRunning: return "running";
    case S::kDestroying: return "destroying";
    case S::kCleaned: return "cleaned";
    case S::kFailed: return "failed";
  }
  return "unknown";
}

std::optional<SandboxState> parse_sandbox_state(std::string_view name) {
  for (SandboxState s : kAllSandboxStates) {
    if (sandbox_state_name(s) == name) return s;
  }
  return std::nullopt;
}

bool is_terminal(SandboxState state) { return state == S::kCleaned || state == S::kFailed; }

bool is_final(SandboxState state) { return state == S::kCleaned; }

std::span<const TransitionEdge> transition_table() { return kTransitionTable; }

bool transition_allowed(SandboxState from, SandboxState to) {
  for (const TransitionEdge& e : kTransitionTable) {
    if (e.from == from && e.to == to) return true;
  }
  return false;
}

std::string allowed_targets(SandboxState from) {
  std::string out;
  for (const TransitionEdge& e : kTransitionTable) {
    if (e.from != from) continue;
    if (!out.empty()) out += ", ";
    out += sandbox_state_name(e.to);
  }
  return out.empty() ? std::string("none") : out;
}

}  // namespace corral
