// The processes of each sandbox: spawn (registered, stored and audited
// before the zygote hears of it), kill, lookup, and the end of a process
// (finished, or lost after a restart).
#include <signal.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/crash_point.h"
#include "base/scope_guard.h"
#include "daemon/sandbox_service.h"
#include "daemon/sandbox_service_internal.h"
#include "daemon/sandbox_terminal.h"
#include "secrets/secret_value.h"
#include "sys/syscalls.h"

namespace corral::daemon {

using namespace service_internal;
using nlohmann::json;

ApiResult<std::shared_ptr<ProcessEntry>> SandboxService::spawn(
    const std::shared_ptr<SandboxEntry>& sandbox, const api::ExecRequest& request, bool background,
    UniqueFd stdio[3], std::uint64_t request_id, std::optional<std::string> tag) {
  SpawnRequest req;
  req.request_id = request_id != 0 ? request_id : new_request_id();
  req.argv = request.argv;
  req.env = sandbox->env;
  for (const auto& [k, v] : request.env) {
    std::string prefix = k + "=";
    bool replaced = false;
    for (auto& e : req.env) {
      if (e.rfind(prefix, 0) == 0) {
        e = prefix + v;
        replaced = true;
      }
    }
    if (!replaced) req.env.push_back(prefix + v);
  }
  // The spec's workdir (a claim of a pooled sandbox binds its own: ADR 0015).
  req.cwd = request.cwd.value_or(sandbox->spec.workdir);
  req.new_session = true;
  req.controlling_tty = request.terminal.has_value();
  const auto timeout =
      std::chrono::milliseconds(request.timeout_ms.value_or(sandbox->spec.limits.timeout.count()));
  req.timeout_ms = static_cast<std::uint32_t>(std::min<std::int64_t>(timeout.count(), UINT32_MAX));
  // A sandbox granted gateway services (N5) gets a fresh token per
  // process, valid as long as the process may run (and a minute more).
  if (network_ != nullptr && sandbox->net_slot) {
    const std::int64_t until = now_ms() / 1000 + timeout.count() / 1000 + 60;
    if (auto token = network_->gateway_token(sandbox->id, until)) {
      const std::string prefix = "CORRAL_GATEWAY_TOKEN=";
      bool given = false;
      for (const auto& e : req.env) given |= e.rfind(prefix, 0) == 0;
      if (!given) req.env.push_back(prefix + *token);
    }
  }
  // Env-mode secrets and broker tokens (issue 5): in every process corral
  // starts, never in init's environment, the store or the audit log. A
  // variable the request sets itself wins (its value is the caller's).
  ScopeGuard wipe_env([&req] {
    for (auto& e : req.env) secrets::wipe(e);
  });
  if (secrets_ != nullptr) {
    for (auto& kv : secrets_->env(sandbox->id)) {
      const std::string prefix = kv.substr(0, kv.find('=') + 1);
      bool given = false;
      for (const auto& e : req.env) given |= e.rfind(prefix, 0) == 0;
      if (!given) req.env.push_back(std::move(kv));
      secrets::wipe(kv);
    }
  }
  if (auto st = validate_spawn_request(req); !st)
    return api_fail(api::ApiErrorCode::kInvalidValue, st.error().message);

  auto p = std::make_shared<ProcessEntry>();
  p->id = process_id_for(req.request_id);
  p->sandbox_id = sandbox->id;
  p->request_id = req.request_id;
  p->argv = req.argv;
  p->background = background;
  p->has_terminal = request.terminal.has_value();
  p->tag = std::move(tag);
  p->started_at_ms = now_ms();
  p->started = Clock::now();
  p->deadline = p->started + timeout;
  // Only an exec's own request polls it; a background process has none.
  if (!background) p->event = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));

  {
    std::lock_guard lock(sandbox->mu);
    if (!takes_work(sandbox->state))
      return api_fail(api::ApiErrorCode::kConflict,
                      "sandbox " + sandbox->id + " is " +
                          std::string(sandbox_state_name(sandbox->state)) +
                          " and takes no more work");
    sandbox->processes[req.request_id] = p;
    if (sandbox->running++ == 0 && sandbox->state == SandboxState::kReady) {
      // Idle for less than kIdleAfter: its `running -> ready` is still held
      // back, and dropping it leaves the store at running, as it should be.
      if (journal_.cancel(sandbox->id))
        sandbox->state = SandboxState::kRunning;
      else
        transition_later(sandbox.get(), sandbox->id, SandboxState::kRunning, "a process started");
    }
  }
  if (background) {
    journal_.flush();
    ProcessRecord rec;
    rec.id = p->id;
    rec.sandbox_id = sandbox->id;
    rec.argv = p->argv;
    rec.state = ProcessState::kStarting;
    rec.started_at_ms = p->started_at_ms;
    rec.deadline_at_ms = p->started_at_ms + timeout.count();
    rec.tag = p->tag;
    if (auto st = store_.add_process(rec); !st) {
      std::lock_guard lock(sandbox->mu);
      sandbox->processes.erase(req.request_id);
      --sandbox->running;
      return api_fail(st.error());
    }
  }
  json started{{"type", "exec.start"},
               {"sandbox", sandbox->id},
               {"process", p->id},
               {"argv", p->argv},
               {"background", background}};
  // Written before the process exists: whatever it does, and whenever the
  // daemon dies, the log has its start (for a background process, before
  // the 201 that acknowledges it).
  if (background) {
    audit_now(started);
  } else {
    audit_in_order(journal_, audit_, sandbox->id, started);
  }
  const int fds[3] = {stdio[0].get(), stdio[1].get(), stdio[2].get()};
  auto sent = sandbox->live->send_spawn(req, fds);
  for (int i = 0; i < 3; ++i) stdio[i].reset();
  if (!sent) {
    std::lock_guard lock(p->mu);
    p->phase = ProcessEntry::Phase::kFailed;
    p->failure = sent.error().message;
    p->exit_code = 125;
    finish_process(*sandbox, *p);
    return api_fail(api::ApiErrorCode::kConflict,
                    "sandbox " + sandbox->id + " cannot start processes: " + sent.error().message);
  }
  metrics_.counter("corral_exec_total", "Processes started in sandboxes").inc();
  return p;
}

void SandboxService::kill_process(ProcessEntry& p, int sig) {
  std::lock_guard lock(p.mu);
  if (p.finished()) return;
  if (!p.pidfd) {
    // Not started yet (or by an earlier daemon): applied when "started"
    // arrives, so a kill is never lost to that race.
    if (p.phase == ProcessEntry::Phase::kStarting) p.pending_signal = sig;
    return;
  }
  // The process leads its own session and group: the group goes too.
  if (p.host_pid > 0) kill(-p.host_pid, sig);
  sys::pidfd_send_signal(p.pidfd.get(), sig, nullptr, 0);
}

std::vector<std::shared_ptr<ProcessEntry>> SandboxService::processes(const SandboxEntry& sandbox) {
  std::lock_guard lock(const_cast<SandboxEntry&>(sandbox).mu);
  std::vector<std::shared_ptr<ProcessEntry>> out;
  for (const auto& [rid, p] : sandbox.processes) out.push_back(p);
  // Oldest first; a tie by id, so that the order is the same after a restart.
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a->started_at_ms != b->started_at_ms ? a->started_at_ms < b->started_at_ms
                                                : a->request_id < b->request_id;
  });
  return out;
}

std::shared_ptr<ProcessEntry> SandboxService::find_process(SandboxEntry& sandbox,
                                                           std::string_view id) {
  auto rid = request_id_of(id);
  if (!rid) return nullptr;
  std::lock_guard lock(sandbox.mu);
  auto it = sandbox.processes.find(*rid);
  return it == sandbox.processes.end() ? nullptr : it->second;
}

// Called with process.mu held; sandbox.mu is taken under it (the lock order
// of docs/adr/0007-daemon-threads.md: a process's mu before its sandbox's).
void SandboxService::finish_process(SandboxEntry& sandbox, ProcessEntry& p) {
  p.ended_at_ms = now_ms();
  const double seconds = std::chrono::duration<double>(Clock::now() - p.started).count();
  json ev{{"type", "exec.exit"},
          {"sandbox", sandbox.id},
          {"process", p.id},
          {"duration_ms", static_cast<std::int64_t>(seconds * 1000)},
          {"timed_out", p.timed_out}};
  if (p.exit_code) ev["exit_code"] = *p.exit_code;
  if (p.signal) ev["signal"] = *p.signal;
  if (!p.failure.empty()) ev["failure"] = p.failure;
  // Written before anyone hears of the end (the exec's response, a wait):
  // an acknowledged exit is in the log. Before the store too: a restarted
  // daemon answers a wait from the store, so a kill between the two must
  // leave the record without the stored exit, never the other way round
  // (the process is then found gone and reported lost, a second record).
  audit_in_order(journal_, audit_, sandbox.id, ev);
  crash_point("exec.exit.audited");
  if (p.background) {
    journal_.flush();
    // The whole result, as the API reports it: a restarted daemon lists
    // the process with the same answer (docs/api.md).
    (void)store_.update_process(p.id, ProcessState::kExited, p.exit_code, p.signal, p.timed_out,
                                p.ended_at_ms);
  }
  signal_event(p);
  // Diagnostics (T1): its timeout, a SIGXFSZ, the layer full as it ended.
  bool full = false;
  if (sandbox.live) {
    if (auto u = sandbox.live->disk_usage(); u)
      full = layer_full(u->bytes, sandbox.spec.limits.disk_bytes, u->inodes,
                        effective_inodes(sandbox.spec.limits));
  }
  diagnostics_book_.process_ended(sandbox.id, p.timed_out, p.signal, full);
  if (p.background) {
    // A finished background process stays listed (its output can still be
    // read) but keeps no fds: many short ones must not run the daemon out.
    // (p.mu is held here, by every caller.)
    p.pidfd.reset();
    p.stdin_writer.reset();
    p.terminal.reset();
    if (p.terminal_pump) p.terminal_pump->process_ended();
  }
  // After the waiters are woken: the lookup by name is not free.
  metrics_
      .histogram("corral_exec_duration_seconds", "Wall time of processes in sandboxes",
                 {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600})
      .observe(seconds);
  {
    std::lock_guard lock(sandbox.mu);
    // Execs are forgotten once finished; background processes stay listed.
    if (!p.background) sandbox.processes.erase(p.request_id);
    if (sandbox.running > 0 && --sandbox.running == 0 && sandbox.state == SandboxState::kRunning) {
      // Ready at once for the daemon; in the store after kIdleAfter unless a
      // process starts before (spawn cancels it). Anything that needs the
      // stored state (a destroy, a failure) flushes the journal first, which
      // writes it. A crash before it is written leaves `running`, which a
      // restart turns into `ready` like any running sandbox it re-attaches.
      sandbox.state = SandboxState::kReady;
      journal_.defer(sandbox.id, kIdleAfter,
                     transition_write(store_, audit_, sandbox.id, SandboxState::kReady,
                                      "the last process ended (idle for 100 ms)"));
    }
  }
}

void SandboxService::lose_process(SandboxEntry& sandbox, ProcessEntry& p, const std::string& why) {
  {
    std::lock_guard lock(p.mu);
    if (p.finished()) return;  // its exit was reported after all
    p.phase = ProcessEntry::Phase::kExited;
    p.ended_at_ms = now_ms();
    p.deadline.reset();
    // Audited before it is stored, as an exit is (finish_process).
    audit_in_order(journal_, audit_, sandbox.id,
                   json{{"type", "exec.exit"},
                        {"sandbox", sandbox.id},
                        {"process", p.id},
                        {"lost", true},
                        {"failure", "lost after a daemon restart: " + why}});
    journal_.flush();
    (void)store_.update_process(p.id, ProcessState::kLost, std::nullopt, std::nullopt, p.timed_out,
                                p.ended_at_ms);
    signal_event(p);
    p.pidfd.reset();  // as finish_process: a finished entry keeps no fds
    p.stdin_writer.reset();
    p.terminal.reset();
    if (p.terminal_pump) p.terminal_pump->process_ended();
  }
  std::lock_guard lock(sandbox.mu);
  if (sandbox.running > 0) --sandbox.running;
}

}  // namespace corral::daemon
