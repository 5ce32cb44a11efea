#include "daemon/sandbox_service.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "base/random.h"
#include "daemon/sandbox_service_internal.h"

namespace corral::daemon {

namespace service_internal {

using nlohmann::json;

std::function<void()> transition_write(StateStore& store, AuditLog& audit, std::string id,
                                       SandboxState to, std::string reason) {
  return [&store, &audit, id = std::move(id), to, reason = std::move(reason)] {
    auto t = store.transition(id, to, reason);
    if (!t) return;
    json ev{{"type", "sandbox.transition"},
            {"sandbox", id},
            {"to", std::string(sandbox_state_name(to))},
            {"reason", reason}};
    if (t->from) ev["from"] = std::string(sandbox_state_name(*t->from));
    (void)audit.append(ev);
  };
}

void audit_in_order(Journal& journal, AuditLog& audit, const std::string& id, const json& event) {
  journal.flush(id);
  (void)audit.append(event);
}

void signal_event(ProcessEntry& p) {
  std::uint64_t one = 1;
  if (p.event) (void)!write(p.event.get(), &one, sizeof one);
  p.cv.notify_all();
}

json runtime_json(const LiveSandboxIdentity& id, const std::vector<std::string>& env,
                  std::optional<std::uint32_t> net_slot, const NetworkSpec* network,
                  const std::string& ns) {
  json j{{"init_pid", id.init_pid},
         {"init_start_time", id.init_start_time},
         {"host_uid_base", id.host_uid_base},
         {"cgroup", id.cgroup},
         {"env", env}};
  if (net_slot) j["net_slot"] = *net_slot;
  if (network != nullptr) j["network"] = json::parse(api::to_json(*network));
  if (ns != "default") j["ns"] = ns;  // whose diagnostics they are
  return j;
}

}  // namespace service_internal

using namespace service_internal;
using nlohmann::json;

std::uint64_t new_request_id() {
  std::uint64_t v = 0;
  while (v == 0) v = random_u64();  // 0 means "no request id"
  return v;
}

std::string process_id_for(std::uint64_t request_id) {
  char buf[32];
  snprintf(buf, sizeof buf, "p-%016llx", static_cast<unsigned long long>(request_id));
  return buf;
}

std::optional<std::uint64_t> request_id_of(std::string_view process_id) {
  if (process_id.size() != 18 || process_id.substr(0, 2) != "p-") return std::nullopt;
  std::uint64_t v = 0;
  for (char c : process_id.substr(2)) {
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (d < 0) return std::nullopt;
    v = v * 16 + static_cast<std::uint64_t>(d);
  }
  return v;
}

SandboxService::SandboxService(ServiceLimits limits, SandboxSpec defaults, StateStore& store,
                               AuditLog& audit, SandboxFactory& factory, CgroupManager& cgroups,
                               MetricsRegistry& metrics, NetworkService* network,
                               SecretService* secrets)
    : limits_(std::move(limits)),
      defaults_(std::move(defaults)),
      store_(store),
      audit_(audit),
      factory_(factory),
      cgroups_(cgroups),
      metrics_(metrics),
      network_(network),
      secrets_(secrets),
      registry_({limits_.max_sandboxes, limits_.max_memory_bytes, limits_.max_disk_bytes}),
      journal_(limits_.journal_queue) {
  epoll_ = UniqueFd(epoll_create1(EPOLL_CLOEXEC));
  wake_ = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = ~0ULL;
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
}

SandboxService::~SandboxService() { stop(); }

void SandboxService::stop() {
  if (stopping_.exchange(true)) return;
  std::uint64_t one = 1;
  (void)!write(wake_.get(), &one, sizeof one);
  reaper_cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  if (reaper_.joinable()) reaper_.join();
  // The monitor is the only thread that starts teardowns, and it is gone:
  // the list only shrinks now. A teardown in flight finishes (it waits on
  // the kernel, bounded) before the store, the network and the rest go.
  std::vector<TeardownThread> left;
  {
    std::lock_guard lock(teardowns_mu_);
    left.swap(teardowns_);
  }
  for (auto& t : left) t.thread.join();
}

std::size_t SandboxService::teardown_threads() {
  std::lock_guard lock(teardowns_mu_);
  return teardowns_.size();
}

std::size_t SandboxService::idempotency_locks_held() { return registry_.key_locks_held(); }

std::string SandboxService::start() {
  std::string summary = reconcile();
  monitor_ = std::thread([this] { monitor_loop(); });
  reaper_ = std::thread([this] { reaper_loop(); });
  return summary;
}

std::size_t SandboxService::live_count() { return registry_.size(); }

std::shared_ptr<SandboxEntry> SandboxService::entry(std::string_view id) {
  return registry_.find(id);
}

void SandboxService::transition_later(SandboxEntry* entry, const std::string& id, SandboxState to,
                                      std::string reason) {
  if (entry != nullptr) entry->state = to;
  journal_.post(id, transition_write(store_, audit_, id, to, std::move(reason)));
}

void SandboxService::audit_now(const json& event) {
  journal_.flush();
  (void)audit_.append(event);
}

bool SandboxService::audit_later(json event, bool droppable) {
  // Keyed by its sandbox, so that audit_in_order waits for it.
  auto it = event.find("sandbox");
  std::string key = it != event.end() && it->is_string() ? it->get<std::string>() : std::string();
  auto write = [this, event = std::move(event)] { (void)audit_.append(event); };
  if (droppable) return journal_.try_post(key, std::move(write));
  journal_.post(key, std::move(write));
  return true;
}

Status SandboxService::transition(SandboxEntry* entry, std::string_view id, SandboxState to,
                                  std::string_view reason) {
  journal_.flush();
  auto t = store_.transition(id, to, reason);
  if (!t) return tl::unexpected(t.error());
  if (entry != nullptr) entry->state = to;
  json ev{{"type", "sandbox.transition"},
          {"sandbox", std::string(id)},
          {"to", std::string(sandbox_state_name(to))},
          {"reason", std::string(reason)}};
  if (t->from) ev["from"] = std::string(sandbox_state_name(*t->from));
  (void)audit_.append(ev);
  return ok();
}

// ---- read -------------------------------------------------------------------

ApiResult<api::SandboxInfo> SandboxService::info_of(const SandboxRecord& record,
                                                    const std::shared_ptr<SandboxEntry>& e) {
  api::SandboxInfo info;
  info.id = record.id;
  info.state = std::string(sandbox_state_name(record.state));
  info.node = record.node;
  // Its node was marked lost (issue 18): until that node comes back and
  // destroys it, nobody can reach it.
  if (record.lost_at_ms && !is_final(record.state)) info.state = "lost";
  auto spec = api::spec_from_json(record.spec_json);
  if (spec) info.spec = *spec;
  info.created_at_ms = record.created_at_ms;
  info.updated_at_ms = record.updated_at_ms;
  info.expires_at_ms = record.expires_at_ms;
  info.error = record.error;
  LiveSandbox* live = nullptr;
  if (e) {
    // e->live is set by its create, while this may run on another request.
    std::lock_guard lock(e->mu);
    live = e->live.get();
  }
  if (live != nullptr && takes_work(record.state)) {
    api::SandboxUsage u;
    if (auto st = live->stats(); st) {
      u.memory_bytes = st->memory_current_bytes;
      u.memory_peak_bytes = st->memory_peak_bytes;
      u.cpu_ms = st->cpu_usage_ns / 1000000;
      u.pids = st->pids_current;
      u.oom_kills = st->oom_kills;
      u.pids_max_hits = st->pids_max_hits;
    }
    if (auto du = live->disk_usage(); du) {
      u.disk_bytes = du->bytes;
      u.disk_inodes = du->inodes;
    }
    info.usage = u;
    if (network_ != nullptr) info.network = network_->status(record.id);
    std::lock_guard lock(e->mu);
    info.spec.network = e->spec.network;  // PUT .../network may have changed it
    if (e->self_check) {
      const SelfCheckReport& r = *e->self_check;
      info.self_check = api::SelfCheckStatus{r.ok, r.failed, r.checks, r.took.count()};
    }
  }
  return info;
}

std::optional<std::uint64_t> SandboxService::oom_kills(SandboxEntry& e) {
  std::lock_guard one_at_a_time(e.teardown_mu);  // a teardown in progress ends first
  if (e.final_stats) return e.final_stats->oom_kills;
  LiveSandbox* live = nullptr;
  {
    std::lock_guard lock(e.mu);
    if (!e.torn) live = e.live.get();
  }
  if (live == nullptr) return std::nullopt;
  auto st = live->stats();
  if (!st) return std::nullopt;
  return st->oom_kills;
}

ApiResult<api::SandboxInfo> SandboxService::get(std::string_view id) {
  auto record = store_.get(id);
  if (!record) {
    if (record.error().code == ErrorCode::kNotFound ||
        record.error().code == ErrorCode::kInvalidArgument)
      return api_fail(api::ApiErrorCode::kNotFound,
                      "no sandbox with id \"" + std::string(id) + "\"", "",
                      "list sandboxes with GET /v1/sandboxes");
    return api_fail(record.error());
  }
  auto e = entry(id);
  if (e && is_pooled(*e))
    return api_fail(api::ApiErrorCode::kNotFound, "no sandbox with id \"" + std::string(id) + "\"",
                    "", "list sandboxes with GET /v1/sandboxes");
  return info_of(*record, e);
}

ApiResult<std::vector<api::SandboxInfo>> SandboxService::list() {
  auto records = store_.list();
  if (!records) return api_fail(records.error());
  std::vector<api::SandboxInfo> out;
  for (const auto& r : *records) {
    auto e = entry(r.id);
    if (e && is_pooled(*e)) continue;  // not a caller's until claimed (ADR 0015)
    auto info = info_of(r, e);
    if (info) out.push_back(std::move(*info));
  }
  return out;
}

namespace {

// Whether a sandbox's destroy was its max_lifetime's (N7), from its stored
// transitions.
bool ended_by_lifetime(StateStore& store, std::string_view id) {
  auto ts = store.transitions(id);
  if (!ts) return false;
  for (const auto& t : *ts)
    if (t.to == SandboxState::kDestroying && t.reason == kLifetimeReason) return true;
  return false;
}

tl::unexpected<api::ApiError> expired_error(std::string_view id) {
  return api_fail(api::ApiErrorCode::kSandboxExpired,
                  "sandbox " + std::string(id) + " reached its max_lifetime and was destroyed", "",
                  "extend a sandbox's lifetime before it ends: POST /v1/sandboxes/{id}/timeout");
}

}  // namespace

ApiResult<std::shared_ptr<SandboxEntry>> SandboxService::live(std::string_view id) {
  auto e = entry(id);
  if (!e) {
    auto record = store_.get(id);
    // Ended by its lifetime: say so, with its own code (N7).
    if (record && !takes_work(record->state) && ended_by_lifetime(store_, id))
      return expired_error(id);
    if (record)
      return api_fail(api::ApiErrorCode::kConflict,
                      "sandbox " + std::string(id) + " is " +
                          std::string(sandbox_state_name(record->state)) +
                          " and takes no more work",
                      "", "create a new sandbox");
    return api_fail(api::ApiErrorCode::kNotFound, "no sandbox with id \"" + std::string(id) + "\"");
  }
  SandboxState state;
  {
    std::lock_guard lock(e->mu);
    // An unclaimed pooled sandbox takes no caller's work (ADR 0015).
    if (e->pooled)
      return api_fail(api::ApiErrorCode::kNotFound,
                      "no sandbox with id \"" + std::string(id) + "\"");
    if (takes_work(e->state) && e->live) return e;
    state = e->state;
  }
  // The same answer while the ended sandbox's entry lingers as after it
  // is gone: an expired one is 410 either way.
  if (!takes_work(state) && ended_by_lifetime(store_, id)) return expired_error(id);
  return api_fail(api::ApiErrorCode::kConflict,
                  "sandbox " + std::string(id) + " is " + std::string(sandbox_state_name(state)) +
                      " and takes no more work",
                  "", state == SandboxState::kDestroying ? "it is being destroyed" : "");
}

ApiResult<SandboxLease> SandboxService::lease(std::string_view id, int connection) {
  auto found = live(id);
  if (!found) return tl::unexpected(found.error());
  const std::shared_ptr<SandboxEntry>& e = *found;
  std::lock_guard lock(e->mu);
  // Checked again with the lease taken under the same lock: a teardown
  // that starts after this waits for it.
  if (!takes_work(e->state) || e->tearing_down)
    return api_fail(api::ApiErrorCode::kConflict,
                    "sandbox " + std::string(id) + " is being destroyed and takes no more work", "",
                    "create a new sandbox");
  const std::uint64_t number = ++e->next_lease;
  e->leases.emplace(number, connection);
  return SandboxLease(e, number);
}

// ---- network and lifetime ----------------------------------------------------

ApiResult<api::SandboxInfo> SandboxService::set_network(std::string_view id,
                                                        const NetworkSpec& network) {
  auto found = live(id);
  if (!found) return tl::unexpected(found.error());
  const std::shared_ptr<SandboxEntry>& e = *found;
  if (network_ == nullptr)
    return api_fail(api::ApiErrorCode::kNetworkUnavailable,
                    "this daemon serves sandboxes without network only", "network");
  std::lock_guard one_update(e->network_mu);
  auto policy = network_->resolve(network);
  if (!policy)
    return api_fail(api::ApiErrorCode::kInvalidValue, policy.error().message, "",
                    policy.error().hint);
  policy->dry_run = e->spec.dry_run;  // X2: a new policy never ends a dry run
  if (!e->net_slot) {
    if (policy->has_network())
      return api_fail(api::ApiErrorCode::kConflict,
                      "sandbox " + std::string(id) +
                          " was created without network: a network cannot be added to it later",
                      "",
                      "create a sandbox with the network it needs (a policy can be narrowed "
                      "to nothing and widened again, but only on a sandbox that has one)");
  } else if (auto st = network_->update(e->id, *policy); !st) {
    return api_fail(st.error());
  }
  NetworkSpec before;
  {
    std::lock_guard lock(e->mu);
    before = e->spec.network;
    e->spec.network = network;
  }
  // Stored for a re-attaching daemon, and audited, before the answer.
  auto rt = runtime_json(e->live->identity(), e->env, e->net_slot, &network, e->ns);
  if (auto st = store_.set_runtime(id, json_text(rt)); !st) return api_fail(st.error());
  audit_now(json{{"type", "sandbox.network"},
                 {"sandbox", std::string(id)},
                 {"from", json::parse(api::to_json(before))},
                 {"to", json::parse(api::to_json(network))},
                 {"mode", net::network_mode_name(policy->mode)},
                 {"rules", policy->rules.size()}});
  return get(id);
}

ApiResult<api::SandboxInfo> SandboxService::extend(std::string_view id,
                                                   const api::ExtendRequest& request) {
  auto e = live(id);
  if (!e) return tl::unexpected(e.error());
  std::int64_t expires;
  {
    std::lock_guard lock((*e)->mu);
    expires = request.max_lifetime_ms ? now_ms() + *request.max_lifetime_ms
                                      : (*e)->expires_at_ms + request.extend_by_ms.value_or(0);
    (*e)->expires_at_ms = expires;
  }
  if (auto st = store_.set_expiry(id, expires); !st) return api_fail(st.error());
  (*e)->live->set_deadline(expires);
  audit_now(
      json{{"type", "sandbox.extend"}, {"sandbox", std::string(id)}, {"expires_at_ms", expires}});
  reaper_cv_.notify_all();
  return get(id);
}

}  // namespace corral::daemon
