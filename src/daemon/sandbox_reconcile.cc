// Reconcile, when a daemon starts: every sandbox the store says may still
// exist is re-attached (its init, its background processes, its network
// and secrets served again) or, when that cannot be done, destroyed by its
// cgroup; then cgroups of sandboxes the store never heard of are removed.
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "base/paths.h"
#include "daemon/sandbox_service.h"
#include "daemon/sandbox_service_internal.h"
#include "sys/syscalls.h"

namespace corral::daemon {

namespace {

using nlohmann::json;

// Why a sandbox of a node the fleet marked lost is destroyed (issue 18).
const std::string kMarkedLostReason = "its node was marked lost";

bool same_pid_namespace(pid_t a, pid_t b) {
  struct stat sa;
  struct stat sb;
  return stat(("/proc/" + std::to_string(a) + "/ns/pid").c_str(), &sa) == 0 &&
         stat(("/proc/" + std::to_string(b) + "/ns/pid").c_str(), &sb) == 0 &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// A background process of a re-attached sandbox, found again by the host
// pid and start time its first daemon recorded: a pidfd on it, or why the
// process with that pid is not (or no longer) the one we started.
Result<UniqueFd> reopen_process(pid_t pid, std::uint64_t start_time, pid_t init_pid) {
  const std::string what = "finding process " + std::to_string(pid) + " again";
  UniqueFd fd(sys::pidfd_open(pid, 0));
  if (!fd) return errno_error("pidfd_open(" + std::to_string(pid) + ")", errno);
  // The pidfd holds whatever has this pid now. The start time, read after
  // it, tells whether that is still our process: a process that got the
  // pid later started later. (Ours cannot have gone and come back.)
  const std::uint64_t now_start = process_start_time(pid);
  if (now_start != start_time)
    return make_error(ErrorCode::kNotFound,
                      what + ": the pid now belongs to another process (start time " +
                          std::to_string(now_start) + ", recorded " + std::to_string(start_time) +
                          ")");
  // And it must still be inside the sandbox: in its init's pid namespace.
  if (!same_pid_namespace(pid, init_pid))
    return make_error(ErrorCode::kNotFound,
                      what + ": it is not in the pid namespace of the sandbox's init " +
                          std::to_string(init_pid));
  return fd;
}

std::optional<std::uint32_t> net_slot_of(const json& rt) {
  if (!rt.is_object() || !rt.contains("net_slot") || !rt["net_slot"].is_number_unsigned())
    return std::nullopt;
  return rt["net_slot"].get<std::uint32_t>();
}

}  // namespace

using namespace service_internal;

// One reconcile: the counts for the summary, and the steps for one record.
class SandboxService::Reconciler {
 public:
  explicit Reconciler(SandboxService& service) : s_(service) {}
  std::string run();
  // destroy_unadopted for one record outside a reconcile (release_lost).
  void destroy_one(const SandboxRecord& r, const json& rt) { destroy_unadopted(r, rt); }

 private:
  // `rt`: the record's runtime_json, parsed (null if absent or broken).
  std::unique_ptr<LiveSandbox> attach(const SandboxRecord& r, const json& rt);
  std::shared_ptr<SandboxEntry> entry_of(const SandboxRecord& r, const json& rt,
                                         std::unique_ptr<LiveSandbox> live);
  using Unverified = std::vector<std::pair<std::shared_ptr<ProcessEntry>, std::string>>;
  Unverified readopt_processes(SandboxEntry& e, const SandboxRecord& r);
  void settle_unannounced(const std::shared_ptr<SandboxEntry>& e);
  void reattach(const SandboxRecord& r, const json& rt, std::unique_ptr<LiveSandbox> live);
  Status serve_network_again(SandboxEntry& e);
  void destroy_unadopted(const SandboxRecord& r, const json& rt);
  void remove_orphan_cgroups(const std::vector<std::string>& known);

  SandboxService& s_;
  int attached_ = 0, destroyed_ = 0, orphans_ = 0;
};

std::string SandboxService::reconcile() { return Reconciler(*this).run(); }

std::string SandboxService::release_lost() {
  auto records = store_.sandboxes_to_reconcile();
  if (!records) return "could not list this node's sandboxes: " + records.error().message;
  int released = 0;
  for (const SandboxRecord& r : *records) {
    if (!r.lost_at_ms || is_final(r.state)) continue;
    if (entry(r.id)) {
      (void)destroy(r.id, kMarkedLostReason);
    } else {
      json rt = r.runtime_json ? json::parse(*r.runtime_json, nullptr, false) : json();
      Reconciler(*this).destroy_one(r, rt);
    }
    ++released;
  }
  return std::to_string(released) + " sandboxes marked lost destroyed";
}

std::string SandboxService::Reconciler::run() {
  auto records = s_.store_.sandboxes_to_reconcile();
  std::vector<std::string> known;
  if (records) {
    for (const SandboxRecord& r : *records) {
      known.push_back(r.id);
      json rt = r.runtime_json ? json::parse(*r.runtime_json, nullptr, false) : json();
      // Marked lost while this node was away: the fleet was told it is
      // gone, so it is destroyed rather than served again (issue 18).
      if (r.lost_at_ms) {
        destroy_unadopted(r, rt);
        continue;
      }
      if (auto live = attach(r, rt)) {
        reattach(r, rt, std::move(live));
      } else {
        destroy_unadopted(r, rt);
      }
    }
  }
  // Sandboxes of other nodes sharing the store are known too: on a host
  // that runs several nodes (tests), their cgroups are not orphans.
  if (auto all = s_.store_.list(); all)
    for (const SandboxRecord& r : *all)
      if (r.node != s_.store_.node() && !is_final(r.state)) known.push_back(r.id);
  remove_orphan_cgroups(known);
  return "reconciled: " + std::to_string(attached_) + " re-attached, " +
         std::to_string(destroyed_) + " destroyed, " + std::to_string(orphans_) +
         " orphan cgroups removed";
}

// The sandbox's init found again (by pid and start time), if it takes work.
std::unique_ptr<LiveSandbox> SandboxService::Reconciler::attach(const SandboxRecord& r,
                                                                const json& rt) {
  if (!takes_work(r.state) || !rt.is_object()) return nullptr;
  LiveSandboxIdentity ident;
  ident.id = r.id;
  ident.init_pid = rt.value("init_pid", -1);
  ident.init_start_time = rt.value("init_start_time", std::uint64_t{0});
  ident.host_uid_base = rt.value("host_uid_base", 0u);
  ident.cgroup = rt.value("cgroup", r.id);
  auto attached_or = LiveSandbox::attach(ident, s_.cgroups_);
  if (!attached_or) return nullptr;
  return std::move(*attached_or);
}

std::shared_ptr<SandboxEntry> SandboxService::Reconciler::entry_of(
    const SandboxRecord& r, const json& rt, std::unique_ptr<LiveSandbox> live) {
  auto e = std::make_shared<SandboxEntry>();
  e->id = r.id;
  if (auto spec = api::spec_from_json(r.spec_json); spec) e->spec = *spec;
  e->env = rt.value("env", std::vector<std::string>{});
  e->ns = rt.value("ns", std::string("default"));
  // Counted again from here (what the previous daemon counted died with it).
  s_.diagnostics_book_.open(e->id, e->ns);
  e->net_slot = net_slot_of(rt);
  if (rt.contains("network")) {
    // The policy last set (a live update may have narrowed the create's).
    // One that cannot be read leaves the sandbox without network, never
    // with the create's wider one.
    if (auto n = api::network_from_json(json_text(rt["network"])); n) {
      e->spec.network = std::move(*n);
    } else {
      e->spec.network = NetworkSpec{};
      e->spec.network.mode = "none";
      s_.audit_now(json{{"type", "sandbox.network"},
                        {"sandbox", r.id},
                        {"reason", "the stored policy could not be read after a restart (" +
                                       n.error().message + "): no network"},
                        {"mode", "none"}});
    }
  }
  e->expires_at_ms = r.expires_at_ms.value_or(now_ms());
  e->state = r.state;
  e->live = std::move(live);
  return e;
}

// Background processes, as the store has them. Those that had ended stay
// listed with their stored result (their output is still in the layer).
// Those that were running: their exits may be waiting in the spawn
// channel, or still to come. Those whose host pid was recorded are found
// again (pidfd), so they can be signalled and timed out as before; their
// stdin ended with the previous daemon. Returns those whose pid no longer
// names them, with why.
SandboxService::Reconciler::Unverified SandboxService::Reconciler::readopt_processes(
    SandboxEntry& e, const SandboxRecord& r) {
  Unverified unverified;
  auto procs = s_.store_.list_processes(r.id);
  if (!procs) return unverified;
  for (const auto& pr : *procs) {
    auto rid = request_id_of(pr.id);
    if (!rid) continue;
    auto p = std::make_shared<ProcessEntry>();
    p->id = pr.id;
    p->sandbox_id = r.id;
    p->request_id = *rid;
    p->argv = pr.argv;
    p->background = true;
    p->tag = pr.tag;
    p->reattached = true;
    p->started_at_ms = pr.started_at_ms;
    p->started = Clock::now();
    p->timed_out = pr.timed_out;
    if (pr.state == ProcessState::kExited || pr.state == ProcessState::kLost) {
      // Ended: no fds, not counted as running, never signalled again.
      p->phase = ProcessEntry::Phase::kExited;
      p->exit_code = pr.exit_code;
      p->signal = pr.signal;
      p->ended_at_ms = pr.ended_at_ms.value_or(pr.started_at_ms);
      e.processes[*rid] = p;
      continue;
    }
    p->phase = ProcessEntry::Phase::kRunning;
    if (pr.deadline_at_ms)
      p->deadline = p->started + std::chrono::milliseconds(
                                     std::max<std::int64_t>(0, *pr.deadline_at_ms - now_ms()));
    if (pr.host_pid && pr.host_start_time) {
      auto fd = reopen_process(static_cast<pid_t>(*pr.host_pid), *pr.host_start_time,
                               e.live->identity().init_pid);
      if (fd) {
        p->pidfd = std::move(*fd);
        p->host_pid = static_cast<pid_t>(*pr.host_pid);
        (void)pid_of_pidfd(p->pidfd.get(), &p->ns_pid);
      } else {
        unverified.emplace_back(p, fd.error().message);
      }
    }
    e.processes[*rid] = p;
    ++e.running;
  }
  return unverified;
}

// Processes stored as starting or running whose host pid was never
// recorded and of which no report was waiting: the old daemon died between
// storing one and sending its request to the zygote, or after reading the
// zygote's kStarted (the pidfd came with it) or kExited and before storing
// it. Nothing may ever arrive for them, and without a pidfd no timeout can
// end them: a task waiting for one would wait for its whole timeout. A
// barrier asks the zygote: once it is answered, every request the old
// daemon sent has had its answer, and one still without a start is lost.
void SandboxService::Reconciler::settle_unannounced(const std::shared_ptr<SandboxEntry>& e) {
  std::vector<std::shared_ptr<ProcessEntry>> all, unseen;
  {
    std::lock_guard lock(e->mu);
    for (auto& [rid, p] : e->processes) all.push_back(p);
  }
  for (auto& p : all) {
    std::lock_guard lock(p->mu);  // a process's mu alone (ADR 0007's order)
    if (!p->finished() && !p->pidfd) unseen.push_back(p);
  }
  if (unseen.empty()) return;
  const std::uint64_t barrier = new_request_id();
  bool answered = false, broken = !e->live->send_barrier(barrier);
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (!answered && !broken && Clock::now() < give_up) {
    pollfd pfd{e->live->spawn_fd(), POLLIN, 0};
    (void)poll(&pfd, 1, 100);
    for (;;) {
      auto reply = e->live->read_reply();
      if (!reply) broken = true;
      if (!reply || !*reply) break;
      if ((*reply)->reply.request_id == barrier) {
        answered = true;
        break;
      }
      s_.on_reply(e, std::move(**reply));
    }
  }
  if (!answered) {
    // Left running: a start may still come. The zygote that does not
    // answer is gone or stuck, and its sandbox ends with it or is deleted.
    fprintf(stderr,
            "corral serve: sandbox %s: its zygote did not answer a barrier; %zu processes whose "
            "start was never recorded stay running\n",
            e->id.c_str(), unseen.size());
    return;
  }
  std::size_t lost = 0;
  for (auto& p : unseen) {
    bool still;
    {
      std::lock_guard lock(p->mu);
      still = !p->finished() && !p->pidfd;
    }
    if (!still) continue;
    s_.lose_process(*e, *p,
                    "its start was never recorded and the sandbox has no report of it (the "
                    "daemon died before the process started, or before storing its start)");
    ++lost;
  }
  if (lost > 0)
    fprintf(stderr,
            "corral serve: sandbox %s: %zu processes whose start was never recorded are lost\n",
            e->id.c_str(), lost);
}

void SandboxService::Reconciler::reattach(const SandboxRecord& r, const json& rt,
                                          std::unique_ptr<LiveSandbox> live) {
  std::shared_ptr<SandboxEntry> e = entry_of(r, rt, std::move(live));
  Unverified unverified = readopt_processes(*e, r);
  // What the zygote reported while no daemon listened: exits, and
  // starts (with their pidfds) of processes caught starting.
  for (;;) {
    auto reply = e->live->read_reply();
    if (!reply || !*reply) break;
    s_.on_reply(e, std::move(**reply));
  }
  // A recorded process that is not on the host any more and whose
  // exit was not reported (the old daemon read it and died before
  // storing it): lost. One whose pid now names another process is
  // lost too, and never signalled.
  for (auto& [p, why] : unverified) s_.lose_process(*e, *p, why);
  settle_unannounced(e);
  if (e->running == 0 && e->state == SandboxState::kRunning)
    (void)s_.transition(e.get(), r.id, SandboxState::kReady, "re-attached after a daemon restart");
  // It counts against the capacity whether it fits or not: it runs.
  s_.registry_.add(e, s_.registry_.capacity().adopt(e->spec.limits));
  // Its network is served again by this daemon's engine; a sandbox
  // whose network cannot be served is destroyed rather than left
  // with an address nobody answers on.
  if (e->net_slot) {
    if (Status served = serve_network_again(*e); !served) {
      s_.watch(e);
      s_.audit_now(json{{"type", "sandbox.reattach"}, {"sandbox", r.id}});
      s_.teardown(e, r.id, "its network could not be served again: " + served.error().message,
                  false);
      ++destroyed_;
      return;
    }
  }
  // Its secrets too: a sandbox that cannot have them back is
  // destroyed (its files are wiped) rather than left half-served.
  if (!e->spec.secrets.empty()) {
    Status got = s_.secrets_ == nullptr
                     ? Status(make_error(ErrorCode::kUnavailable, "no secret service"))
                     : s_.secrets_->reattach(r.id, e->spec);
    if (!got) {
      s_.watch(e);
      s_.audit_now(json{{"type", "sandbox.reattach"}, {"sandbox", r.id}});
      s_.teardown(e, r.id, "its secrets could not be served again: " + got.error().message, false);
      ++destroyed_;
      return;
    }
  }
  s_.watch(e);
  s_.audit_now(json{{"type", "sandbox.reattach"}, {"sandbox", r.id}});
  ++attached_;
}

Status SandboxService::Reconciler::serve_network_again(SandboxEntry& e) {
  if (s_.network_ == nullptr) return make_error(ErrorCode::kUnavailable, "no network engine");
  auto policy = s_.network_->resolve(e.spec.network);
  if (!policy) return tl::unexpected(policy.error());
  policy->dry_run = e.spec.dry_run;  // X2: still answered locally after a restart
  return s_.network_->reattach(e.id, *e.net_slot, e.live->identity().init_pid, *policy);
}

// Not re-attachable: kill whatever is left of it, by its cgroup.
void SandboxService::Reconciler::destroy_unadopted(const SandboxRecord& r, const json& rt) {
  std::string cg_name = r.cgroup.value_or(r.id);
  const std::string cause = r.lost_at_ms ? kMarkedLostReason : "daemon restarted";
  if (r.state != SandboxState::kFailed && r.state != SandboxState::kDestroying)
    (void)s_.store_.transition(r.id, SandboxState::kFailed,
                               cause + " while it was " + std::string(sandbox_state_name(r.state)));
  if (r.state != SandboxState::kDestroying)
    (void)s_.store_.transition(r.id, SandboxState::kDestroying,
                               r.lost_at_ms ? kMarkedLostReason : "reconcile after restart");
  std::vector<std::string> residue = s_.remove_unadopted(r.id, cg_name);
  if (auto slot = net_slot_of(rt); slot && s_.network_ != nullptr) {
    for (auto& left : s_.network_->detach(r.id, slot)) residue.push_back(left);
  }
  if (auto procs = s_.store_.list_processes(r.id); procs) {
    for (const auto& pr : *procs) {
      if (pr.state == ProcessState::kRunning || pr.state == ProcessState::kStarting)
        (void)s_.store_.update_process(pr.id, ProcessState::kLost, std::nullopt, std::nullopt);
    }
  }
  // Audited before it is stored as cleaned: a kill between the two leaves
  // it destroying, and the next start destroys (and audits) it again.
  s_.audit_now(
      json{{"type", "sandbox.reconcile_destroy"}, {"sandbox", r.id}, {"residue", residue}});
  if (residue.empty()) {
    (void)s_.store_.transition(r.id, SandboxState::kCleaned, "destroyed on reconcile");
  } else {
    (void)s_.store_.transition(r.id, SandboxState::kFailed, residue.front());
  }
  ++destroyed_;
}

// Cgroups of daemon sandboxes the store never heard of (a crash between
// the factory's clone and the store's write cannot happen: the row comes
// first; but a crash of an older daemon might): their lock tells.
void SandboxService::Reconciler::remove_orphan_cgroups(const std::vector<std::string>& known) {
  auto names = s_.cgroups_.list();
  if (!names) return;
  for (const std::string& name : *names) {
    if (name.rfind("sb-", 0) != 0) continue;
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    const std::string lock_path = run_dir() + "/sandboxes/" + name + ".lock";
    UniqueFd lock(open(lock_path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
    if (lock && flock(lock.get(), LOCK_EX | LOCK_NB) != 0) continue;  // alive: not ours to judge
    auto cg = s_.cgroups_.open(name);
    if (!cg) continue;
    if (!lock) {
      auto procs = (*cg)->processes();
      if (!procs || !procs->empty()) continue;
    }
    if ((*cg)->destroy()) {
      unlink(lock_path.c_str());
      ++orphans_;
    }
  }
}

}  // namespace corral::daemon
