// What the files of SandboxService (sandbox_service.h lists them) share
// and nothing else includes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/journal.h"
#include "daemon/process_entry.h"
#include "runtime/live_sandbox.h"
#include "spec/sandbox_spec.h"
#include "store/audit_log.h"
#include "store/state_store.h"

namespace corral::daemon::service_internal {

using Clock = std::chrono::steady_clock;

inline std::int64_t now_ms() { return StateStore::now_ms(); }

// The destroy reason of a sandbox ended by its lifetime (the reaper writes
// it; live() looks for it to answer sandbox_expired).
inline constexpr std::string_view kLifetimeReason = "max_lifetime reached";

// How long a sandbox stays `running` in the store after its last process
// ended: a process that starts within it finds the sandbox still running,
// and neither `running -> ready` nor `ready -> running` is written. A
// sandbox running one command after another is stored (and audited) as
// running once, not twice per command.
inline constexpr std::chrono::milliseconds kIdleAfter{100};

inline bool takes_work(SandboxState s) {
  return s == SandboxState::kReady || s == SandboxState::kRunning;
}

// The journal write of a transition: stored, then audited.
std::function<void()> transition_write(StateStore& store, AuditLog& audit, std::string id,
                                       SandboxState to, std::string reason);

// An audit record about sandbox `id`, written now (kill -9 safe once this
// returns) and after the sandbox's own records still in the journal. Unlike
// audit_now it waits for nothing else (the group commit's fdatasync, other
// sandboxes' records), and writes held back stay held back.
void audit_in_order(Journal& journal, AuditLog& audit, const std::string& id,
                    const nlohmann::json& event);

// The pid a pidfd names on the host (-1: unknown), and into *in_sandbox
// the pid its sandbox sees (the last number of the fdinfo's NSpid line).
// One open and read, no streams: it runs on every process start.
pid_t pid_of_pidfd(int pidfd, std::uint32_t* in_sandbox = nullptr);

// Wakes whoever waits for a process: its exec's eventfd and its cv.
void signal_event(ProcessEntry& p);

// What a re-attaching daemon needs to find a sandbox again (the store's
// runtime_json). `network`: the network set by PUT .../network since the
// create (the stored spec keeps what the create asked for). `ns`: the
// creating caller's namespace.
nlohmann::json runtime_json(const LiveSandboxIdentity& id, const std::vector<std::string>& env,
                            std::optional<std::uint32_t> net_slot,
                            const NetworkSpec* network = nullptr,
                            const std::string& ns = "default");

}  // namespace corral::daemon::service_internal
