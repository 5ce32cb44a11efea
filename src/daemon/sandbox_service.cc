#include "daemon/sandbox_service.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "base/json_text.h"
#include "base/paths.h"
#include "base/scope_guard.h"
#include "daemon/metrics.h"
#include "image/image_store.h"
#include "jail/sandbox_planner.h"
#include "jail/stage.h"
#include "secrets/secret_value.h"
#include "sys/syscalls.h"

namespace corral::daemon {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::int64_t now_ms() { return StateStore::now_ms(); }

constexpr std::string_view kLifetimeReason = "max_lifetime reached";

// epoll tokens: sandbox index in the low bits, what kind of fd in bit 0.
enum class Watch : std::uint64_t { kSpawn = 0, kInit = 1 };

// The exec path: one open and read, no streams (on every process start).
pid_t pid_of_pidfd(int pidfd) {
  char path[48];
  snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
  UniqueFd fd(open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) return -1;
  char buf[1024];
  ssize_t n = read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* pid = strstr(buf, "\nPid:");  // never the first line ("pos:")
  return pid != nullptr ? static_cast<pid_t>(std::atoi(pid + 5)) : -1;
}

// How long a sandbox stays `running` in the store after its last process
// ended: a process that starts within it finds the sandbox still running,
// and neither `running -> ready` nor `ready -> running` is written. A
// sandbox running one command after another is stored (and audited) as
// running once, not twice per command.
constexpr std::chrono::milliseconds kIdleAfter{100};

// The journal write of a transition: stored, then audited.
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

// An audit record about sandbox `id`, written now (kill -9 safe once this
// returns) and after the sandbox's own records still in the journal. Unlike
// audit_now it waits for nothing else (the group commit's fdatasync, other
// sandboxes' records), and writes held back stay held back.
void audit_in_order(Journal& journal, AuditLog& audit, const std::string& id, const json& event) {
  journal.flush(id);
  (void)audit.append(event);
}

void signal_event(ProcessEntry& p) {
  std::uint64_t one = 1;
  if (p.event) (void)!write(p.event.get(), &one, sizeof one);
  p.cv.notify_all();
}

bool takes_work(SandboxState s) { return s == SandboxState::kReady || s == SandboxState::kRunning; }

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

// `network`: the network set by PUT .../network since the create (the
// stored spec keeps what the create asked for).
json runtime_json(const LiveSandboxIdentity& id, const std::vector<std::string>& env,
                  std::optional<std::uint32_t> net_slot, const NetworkSpec* network = nullptr) {
  json j{{"init_pid", id.init_pid},
         {"init_start_time", id.init_start_time},
         {"host_uid_base", id.host_uid_base},
         {"cgroup", id.cgroup},
         {"env", env}};
  if (net_slot) j["net_slot"] = *net_slot;
  if (network != nullptr) j["network"] = json::parse(api::to_json(*network));
  return j;
}

std::optional<std::uint32_t> net_slot_of(const json& rt) {
  if (!rt.is_object() || !rt.contains("net_slot") || !rt["net_slot"].is_number_unsigned())
    return std::nullopt;
  return rt["net_slot"].get<std::uint32_t>();
}

}  // namespace

std::uint64_t new_request_id() {
  std::uint64_t v = 0;
  while (v == 0) {
    if (getrandom(&v, sizeof v, 0) != sizeof v) v = 0;
  }
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

std::size_t SandboxService::idempotency_locks_held() {
  std::lock_guard lock(mu_);
  return idem_locks_.size();
}

// Holds the lock of one idempotency key; the map entry goes with its last
// user, so that the map holds only keys with a create in progress.
class SandboxService::IdemGuard {
 public:
  IdemGuard(SandboxService& service, const std::string& key) : service_(service) {
    {
      std::lock_guard lock(service_.mu_);
      auto& slot = service_.idem_locks_[key];
      if (!slot) slot = std::make_unique<IdemLock>();
      ++slot->users;
      it_ = service_.idem_locks_.find(key);
    }
    // Not under mu_: a create holds this for its whole length.
    it_->second->mu.lock();
  }
  ~IdemGuard() {
    it_->second->mu.unlock();
    std::lock_guard lock(service_.mu_);
    if (--it_->second->users == 0) service_.idem_locks_.erase(it_);
  }
  IdemGuard(const IdemGuard&) = delete;
  IdemGuard& operator=(const IdemGuard&) = delete;

 private:
  SandboxService& service_;
  // std::map iterators stay valid while the entry lives (users > 0).
  std::map<std::string, std::unique_ptr<IdemLock>, std::less<>>::iterator it_;
};

std::string SandboxService::start() {
  std::string summary = reconcile();
  monitor_ = std::thread([this] { monitor_loop(); });
  reaper_ = std::thread([this] { reaper_loop(); });
  return summary;
}

std::size_t SandboxService::live_count() {
  std::lock_guard lock(mu_);
  return entries_.size();
}

std::shared_ptr<SandboxEntry> SandboxService::entry(std::string_view id) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : it->second;
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

// ---- create -----------------------------------------------------------------

ApiResult<SandboxService::Created> SandboxService::create(
    const api::CreateSandboxRequest& request, std::optional<std::string> idempotency_key) {
  const auto t0 = Clock::now();
  SandboxSpec spec = request.spec;
  spec.argv.clear();
  if (!spec.mounts.empty() && limits_.mount_roots.empty())
    return api_fail("invalid_value",
                    "this daemon allows no host mounts (serve.mount_roots is empty)", "mounts",
                    "list the host directories sandboxes may mount under serve.mount_roots");
  for (const auto& m : spec.mounts) {
    if (m.source.empty() || m.source[0] != '/')
      return api_fail("invalid_value",
                      "mount source \"" + m.source + "\" must be an absolute host path", "mounts");
  }

  // The network policy, also before anything is reserved: a wrong rule or
  // template is the request's fault, an engine that is not running the
  // daemon's.
  std::optional<net::NetworkPolicy> policy;
  if (network_ != nullptr) {
    auto p = network_->resolve(spec.network);
    if (!p) return api_fail("invalid_value", p.error().message, "network", p.error().hint);
    if (p->has_network()) {
      if (auto why = network_->unavailable())
        return api_fail("network_unavailable",
                        "this daemon cannot give sandboxes a network: " + *why, "network",
                        "see the daemon's start-up log; `corral doctor` checks nftables");
      policy = std::move(*p);
    }
  } else if (spec.network.mode != "none") {
    return api_fail("network_unavailable", "this daemon serves sandboxes without network only",
                    "network", "create it with network mode \"none\"");
  }

  // The secrets, checked against the store: a missing key or a broken rule
  // is the request's fault (issue 5; never a value in the message).
  std::shared_ptr<secrets::ResolvedSecrets> resolved_secrets;
  if (!spec.secrets.empty()) {
    if (secrets_ == nullptr)
      return api_fail("invalid_value", "this daemon serves no secrets", "secrets",
                      "create it without secrets");
    auto r = secrets_->prepare(spec);
    if (!r && r.error().code == ErrorCode::kUnavailable)
      return api_fail("unavailable", r.error().message, "secrets", r.error().hint);
    if (!r) return api_fail("invalid_value", r.error().message, "secrets", r.error().hint);
    resolved_secrets = std::move(*r);
  }

  // Resolve the image before anything is reserved.
  RunOptions options;
  options.long_lived = true;
  options.cwd = "/";
  options.mount_roots = limits_.mount_roots;
  if (!spec.image.empty()) {
    ImageStore images(ImageStore::default_dir());
    auto info = images.get(spec.image);
    if (!info) return api_fail("invalid_value", info.error().message, "image", info.error().hint);
    options.base.rootfs = info->rootfs;
    options.base.env = info->env;
    options.base.passwd_source = info->rootfs + "/etc";
    if (!info->workdir.empty() && spec.workdir == SandboxSpec{}.workdir)
      spec.workdir = info->workdir;
  }

  // One create per idempotency key at a time: a retry racing the original
  // waits for it and then finds its sandbox.
  std::optional<IdemGuard> idem_lock;
  if (idempotency_key) idem_lock.emplace(*this, *idempotency_key);

  const std::string id = new_sandbox_id();
  const std::string spec_json = api::spec_to_json(spec);
  // A retry is answered before capacity is counted: it asks for nothing new.
  if (idempotency_key) {
    auto earlier = store_.find_by_idempotency_key(*idempotency_key);
    if (!earlier) return api_fail(earlier.error());
    if (*earlier) {
      if (json::parse((*earlier)->spec_json, nullptr, false) !=
          json::parse(spec_json, nullptr, false))
        return api_fail(
            "idempotency_mismatch",
            "Idempotency-Key \"" + *idempotency_key + "\" was used before with a different request",
            "", "use a new key for a different sandbox");
      auto info = info_of(**earlier, entry((*earlier)->id));
      if (!info) return tl::unexpected(info.error());
      return Created{*info, false};
    }
  }
  // Capacity (C2): refuse now rather than accept and kill later.
  {
    std::lock_guard lock(mu_);
    {
      if (entries_.size() >= limits_.max_sandboxes)
        return api_fail("over_capacity",
                        "the daemon already runs " + std::to_string(entries_.size()) +
                            " sandboxes, its limit (serve.capacity.max_sandboxes)",
                        "", "destroy sandboxes you no longer need, or raise the limit");
      if (limits_.max_memory_bytes != 0 &&
          reserved_memory_ + spec.limits.memory_bytes > limits_.max_memory_bytes)
        return api_fail("over_capacity",
                        "memory limit " + std::to_string(spec.limits.memory_bytes) +
                            " bytes does not fit: " + std::to_string(reserved_memory_) + " of " +
                            std::to_string(limits_.max_memory_bytes) +
                            " bytes are already promised to live sandboxes",
                        "limits.memory", "ask for less memory or destroy idle sandboxes");
      if (limits_.max_disk_bytes != 0 &&
          reserved_disk_ + spec.limits.disk_bytes > limits_.max_disk_bytes)
        return api_fail("insufficient_storage",
                        "disk limit " + std::to_string(spec.limits.disk_bytes) +
                            " bytes does not fit: " + std::to_string(reserved_disk_) + " of " +
                            std::to_string(limits_.max_disk_bytes) +
                            " bytes are already promised to live sandboxes",
                        "limits.disk", "ask for a smaller disk or destroy idle sandboxes");
    }
  }

  const std::int64_t expires = now_ms() + spec.limits.max_lifetime.count();
  auto created = store_.create_sandbox(id, spec_json, idempotency_key, expires);
  if (!created) {
    if (created.error().code == ErrorCode::kAlreadyExists)
      return api_fail(
          "idempotency_mismatch",
          "Idempotency-Key \"" + *idempotency_key + "\" was used before with a different request",
          "", "use a new key for a different sandbox");
    return api_fail(created.error());
  }
  if (!created->created) {
    auto existing = store_.get(created->sandbox.id);
    if (!existing) return api_fail(existing.error());
    auto info = info_of(*existing, entry(existing->id));
    if (!info) return tl::unexpected(info.error());
    return Created{*info, false};
  }

  auto e = std::make_shared<SandboxEntry>();
  e->id = id;
  e->spec = spec;
  e->expires_at_ms = expires;
  {
    std::lock_guard lock(mu_);
    entries_[id] = e;
    reserved_memory_ += spec.limits.memory_bytes;
    reserved_disk_ += spec.limits.disk_bytes;
  }
  // Bookkeeping that can trail the work goes through the journal; the
  // journal is flushed before the create is acknowledged.
  audit_later(json{{"type", "sandbox.create"},
                   {"sandbox", id},
                   {"spec", json::parse(spec_json)},
                   {"idempotency_key", idempotency_key ? json(*idempotency_key) : json()}});
  metrics_.counter("corral_sandbox_creations_total", "Sandbox create requests accepted").inc();

  auto fail_create = [&](std::string code, std::string message, std::string hint,
                         std::string field) -> ApiResult<Created> {
    {
      std::lock_guard lock(e->mu);
      (void)transition(e.get(), id, SandboxState::kFailed, message);
    }
    teardown(e, id, "setup failed", true);
    metrics_.counter("corral_sandbox_create_failures_total", "Sandbox creates that failed").inc();
    return api_fail(code, message, field, hint);
  };

  {
    std::lock_guard lock(e->mu);
    transition_later(e.get(), id, SandboxState::kInitializing, "id, cgroup and layer next");
  }
  options.sandbox_id = id;
  // File-mode secrets: the sandbox's own tmpfs, bound at /run/secrets by
  // init like any mount (the stored spec does not list it).
  SandboxSpec factory_spec = spec;
  if (resolved_secrets) {
    auto m = secrets_->mounts(id, *resolved_secrets);
    if (!m) return fail_create("setup_failed", "secrets: " + m.error().message, m.error().hint, "");
    for (auto& mount : *m) factory_spec.mounts.push_back(std::move(mount));
    options.mount_roots.push_back(secrets_->mounts_root());
    options.mount_roots.push_back(secrets_->trust_root());
  }
  SetupFailure failure;
  auto made = factory_.create(factory_spec, options, expires, &failure, limits_.setup_timeout);
  if (!made && made.error().code == ErrorCode::kUnavailable)
    return fail_create("unavailable", made.error().message, made.error().hint, "");
  if (!made && made.error().code == ErrorCode::kTimeout)  // the factory stage's timeout
    return fail_create("setup_failed", made.error().message, made.error().hint, "");
  if (!made) {
    bool user_error = failure.stage == Stage::kPlan || failure.stage == Stage::kMountSources ||
                      failure.stage == Stage::kBaseLayer;
    return fail_create(user_error ? "invalid_value" : "setup_failed",
                       made.error().message.empty() ? failure.message : made.error().message,
                       made.error().hint, "");
  }
  const std::vector<std::string> env = made->env;
  if (made->net_slot >= 0) e->net_slot = static_cast<std::uint32_t>(made->net_slot);
  auto live = LiveSandbox::adopt(std::move(*made), cgroups_);
  if (!live) return fail_create("setup_failed", live.error().message, "", "");
  {
    // Under mu: a GET or list (info_of) may look at the entry meanwhile.
    std::lock_guard lock(e->mu);
    e->live = std::move(*live);
    e->env = env;
  }
  // Its proxy and DNS listen on the host end before its first process runs.
  if (e->net_slot) {
    if (!policy || network_ == nullptr)
      return fail_create("setup_failed", "the sandbox got a network it did not ask for", "", "");
    if (auto st = network_->attach(id, *e->net_slot, *policy); !st)
      return fail_create("setup_failed", "network: " + st.error().message, st.error().hint, "");
  } else if (policy) {
    return fail_create("setup_failed", "the sandbox got no network slot", "", "");
  }
  // Files written for its user, reads watched, tokens issued: before its
  // first process can run.
  if (resolved_secrets) {
    if (auto st = secrets_->inject(id, resolved_secrets); !st)
      return fail_create("setup_failed", "secrets: " + st.error().message, st.error().hint, "");
  }
  const auto& ident = e->live->identity();
  journal_.post([this, id, ident, rt = json_text(runtime_json(ident, env, e->net_slot))] {
    (void)store_.set_resources(id, ident.host_uid_base, ident.cgroup);
    (void)store_.set_runtime(id, rt);
  });

  SetupFailure ready_failure;
  if (auto st = e->live->wait_ready(limits_.setup_timeout, &ready_failure); !st) {
    std::string msg = ready_failure.message.empty() ? st.error().message : ready_failure.message;
    return fail_create("setup_failed", msg, ready_failure.hint, "");
  }
  {
    std::lock_guard lock(e->mu);
    transition_later(e.get(), id, SandboxState::kReady, "PID 1 and zygote up");
  }
  journal_.flush();  // acknowledged below: everything about it is written
  watch(e);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  metrics_
      .histogram("corral_sandbox_create_seconds", "Time to create a sandbox",
                 {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10})
      .observe(seconds);
  auto record = store_.get(id);
  if (!record) return api_fail(record.error());
  auto info = info_of(*record, e);
  if (!info) return tl::unexpected(info.error());
  return Created{*info, true};
}

// ---- read -------------------------------------------------------------------

ApiResult<api::SandboxInfo> SandboxService::info_of(const SandboxRecord& record,
                                                    const std::shared_ptr<SandboxEntry>& e) {
  api::SandboxInfo info;
  info.id = record.id;
  info.state = std::string(sandbox_state_name(record.state));
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
  }
  return info;
}

ApiResult<api::SandboxInfo> SandboxService::get(std::string_view id) {
  auto record = store_.get(id);
  if (!record) {
    if (record.error().code == ErrorCode::kNotFound ||
        record.error().code == ErrorCode::kInvalidArgument)
      return api_fail("not_found", "no sandbox with id \"" + std::string(id) + "\"", "",
                      "list sandboxes with GET /v1/sandboxes");
    return api_fail(record.error());
  }
  return info_of(*record, entry(id));
}

ApiResult<std::vector<api::SandboxInfo>> SandboxService::list() {
  auto records = store_.list();
  if (!records) return api_fail(records.error());
  std::vector<api::SandboxInfo> out;
  for (const auto& r : *records) {
    auto info = info_of(r, entry(r.id));
    if (info) out.push_back(std::move(*info));
  }
  return out;
}

ApiResult<std::shared_ptr<SandboxEntry>> SandboxService::live(std::string_view id) {
  auto e = entry(id);
  if (!e) {
    auto record = store_.get(id);
    if (record && !takes_work(record->state)) {
      // Ended by its lifetime: say so, with its own code (N7).
      if (auto ts = store_.transitions(id); ts) {
        for (const auto& t : *ts) {
          if (t.to == SandboxState::kDestroying && t.reason == kLifetimeReason)
            return api_fail(
                "sandbox_expired",
                "sandbox " + std::string(id) + " reached its max_lifetime and was destroyed", "",
                "extend a sandbox's lifetime before it ends: POST /v1/sandboxes/{id}/timeout");
        }
      }
    }
    if (record)
      return api_fail("conflict",
                      "sandbox " + std::string(id) + " is " +
                          std::string(sandbox_state_name(record->state)) +
                          " and takes no more work",
                      "", "create a new sandbox");
    return api_fail("not_found", "no sandbox with id \"" + std::string(id) + "\"");
  }
  std::lock_guard lock(e->mu);
  if (!takes_work(e->state) || !e->live)
    return api_fail("conflict",
                    "sandbox " + std::string(id) + " is " +
                        std::string(sandbox_state_name(e->state)) + " and takes no more work",
                    "", e->state == SandboxState::kDestroying ? "it is being destroyed" : "");
  return e;
}

// ---- lifetime and destroy ----------------------------------------------------

ApiResult<api::SandboxInfo> SandboxService::set_network(std::string_view id,
                                                        const NetworkSpec& network) {
  auto found = live(id);
  if (!found) return tl::unexpected(found.error());
  const std::shared_ptr<SandboxEntry>& e = *found;
  if (network_ == nullptr)
    return api_fail("network_unavailable", "this daemon serves sandboxes without network only",
                    "network");
  std::lock_guard one_update(e->network_mu);
  auto policy = network_->resolve(network);
  if (!policy) return api_fail("invalid_value", policy.error().message, "", policy.error().hint);
  if (!e->net_slot) {
    if (policy->has_network())
      return api_fail("conflict",
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
  auto rt = runtime_json(e->live->identity(), e->env, e->net_slot, &network);
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

ApiResult<api::SandboxInfo> SandboxService::destroy(std::string_view id, std::string_view reason) {
  auto e = entry(id);
  if (!e) {
    auto record = store_.get(id);
    if (!record) return api_fail("not_found", "no sandbox with id \"" + std::string(id) + "\"");
    return info_of(*record, nullptr);  // already gone: DELETE is idempotent
  }
  {
    std::lock_guard lock(e->mu);
    if (e->tearing_down) {
      // Someone else (another DELETE, the reaper) is tearing it down: wait
      // for it, bounded, and report where it is.
      e->torn_down.wait_for(e->mu, std::chrono::seconds(30), [&] { return e->torn; });
    } else {
      e->tearing_down = true;
      (void)transition(e.get(), id, SandboxState::kDestroying, reason);
    }
  }
  {
    std::unique_lock lock(e->mu);
    if (e->torn) {
      lock.unlock();
      return get(id);
    }
  }
  api::SandboxInfo info = teardown(e, id, reason, false);
  return info;
}

api::SandboxInfo SandboxService::teardown(const std::shared_ptr<SandboxEntry>& e,
                                          std::string_view id, std::string_view reason,
                                          bool failed) {
  {
    std::lock_guard lock(e->mu);
    e->tearing_down = true;
    if (failed && e->state == SandboxState::kFailed)
      (void)transition(e.get(), id, SandboxState::kDestroying, "cleanup of a failed create");
  }
  unwatch(*e);
  DestroyReport report;
  if (e->live) {
    report = e->live->destroy();
  } else {
    // A create that failed before the daemon got the sandbox (the factory
    // hung and was stopped): what the factory made is found by the id.
    report.residue = remove_unadopted(std::string(id), std::string(id));
  }
  // After init is gone (its namespace takes the veth pair along): the
  // listeners go, and the host end must be gone too.
  if (network_ != nullptr && (e->net_slot || network_->serves(std::string(id)))) {
    for (auto& r : network_->detach(std::string(id), e->net_slot)) report.residue.push_back(r);
  }
  // Tokens revoked, the read watch stopped, the files overwritten and
  // unmounted (S6): after init, so nothing in the sandbox still reads them.
  if (secrets_ != nullptr) {
    for (auto& r : secrets_->remove(std::string(id))) report.residue.push_back(r);
  }
  // Every process the sandbox had is gone now.
  std::vector<std::shared_ptr<ProcessEntry>> procs;
  {
    std::lock_guard lock(e->mu);
    for (auto& [rid, p] : e->processes) procs.push_back(p);
  }
  for (auto& p : procs) {
    std::lock_guard lock(p->mu);
    if (p->finished()) continue;
    p->phase = ProcessEntry::Phase::kExited;
    p->signal = SIGKILL;
    p->ended_at_ms = now_ms();
    if (p->background)
      (void)store_.update_process(p->id, ProcessState::kExited, std::nullopt, SIGKILL);
    signal_event(*p);
  }
  if (report.final_stats) {
    if (report.final_stats->oom_kills > 0)
      metrics_.counter("corral_limit_hits_total", "Limit hits", {{"limit", "memory"}})
          .add(static_cast<double>(report.final_stats->oom_kills));
    if (report.final_stats->pids_max_hits > 0)
      metrics_.counter("corral_limit_hits_total", "Limit hits", {{"limit", "pids"}})
          .add(static_cast<double>(report.final_stats->pids_max_hits));
  }
  metrics_.counter("corral_destroy_residue_bytes_total", "Bytes left in writable layers after wipe")
      .add(static_cast<double>(report.residue_bytes));
  metrics_.counter("corral_destroy_residue_items_total", "Host resources left after teardown")
      .add(static_cast<double>(report.residue.size()));
  {
    std::lock_guard lock(e->mu);
    if (report.residue.empty()) {
      (void)transition(e.get(), id, SandboxState::kCleaned, "teardown verified");
    } else {
      std::string what;
      for (const auto& r : report.residue) what += (what.empty() ? "" : "; ") + r;
      (void)transition(e.get(), id, SandboxState::kFailed, "teardown left: " + what);
    }
  }
  audit_now(json{{"type", "sandbox.destroy"},
                 {"sandbox", std::string(id)},
                 {"reason", std::string(reason)},
                 {"disk_used_bytes", report.disk_used_bytes},
                 {"residue_bytes", report.residue_bytes},
                 {"residue", report.residue}});
  {
    std::lock_guard lock(mu_);
    if (entries_.erase(std::string(id)) > 0) {
      reserved_memory_ -= std::min(reserved_memory_, e->spec.limits.memory_bytes);
      reserved_disk_ -= std::min(reserved_disk_, e->spec.limits.disk_bytes);
    }
  }
  {
    std::lock_guard lock(e->mu);
    e->torn = true;
  }
  e->torn_down.notify_all();
  api::SandboxInfo info;
  if (auto record = store_.get(id); record) {
    if (auto i = info_of(*record, nullptr); i) info = *i;
  }
  info.residue = report.residue;
  info.residue_bytes = report.residue_bytes;
  return info;
}

// ---- processes ---------------------------------------------------------------

ApiResult<std::shared_ptr<ProcessEntry>> SandboxService::spawn(
    const std::shared_ptr<SandboxEntry>& sandbox, const api::ExecRequest& request, bool background,
    UniqueFd stdio[3], std::uint64_t request_id) {
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
  req.cwd = request.cwd.value_or("");
  req.new_session = true;
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
    return api_fail("invalid_value", st.error().message);

  auto p = std::make_shared<ProcessEntry>();
  p->id = process_id_for(req.request_id);
  p->sandbox_id = sandbox->id;
  p->request_id = req.request_id;
  p->argv = req.argv;
  p->background = background;
  p->started_at_ms = now_ms();
  p->started = Clock::now();
  p->deadline = p->started + timeout;
  // Only an exec's own request polls it; a background process has none.
  if (!background) p->event = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));

  {
    std::lock_guard lock(sandbox->mu);
    if (!takes_work(sandbox->state))
      return api_fail("conflict", "sandbox " + sandbox->id + " is " +
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
    return api_fail("conflict",
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
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a->started_at_ms < b->started_at_ms; });
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
  if (p.background) {
    journal_.flush();
    (void)store_.update_process(p.id, ProcessState::kExited, p.exit_code, p.signal);
  }
  json ev{{"type", "exec.exit"},
          {"sandbox", sandbox.id},
          {"process", p.id},
          {"duration_ms", static_cast<std::int64_t>(seconds * 1000)},
          {"timed_out", p.timed_out}};
  if (p.exit_code) ev["exit_code"] = *p.exit_code;
  if (p.signal) ev["signal"] = *p.signal;
  if (!p.failure.empty()) ev["failure"] = p.failure;
  // Written before anyone hears of the end (the exec's response, a wait):
  // an acknowledged exit is in the log.
  audit_in_order(journal_, audit_, sandbox.id, ev);
  signal_event(p);
  if (p.background) {
    // A finished background process stays listed (its output can still be
    // read) but keeps no fds: many short ones must not run the daemon out.
    // (p.mu is held here, by every caller.)
    p.pidfd.reset();
    p.stdin_writer.reset();
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
    journal_.flush();
    (void)store_.update_process(p.id, ProcessState::kLost, std::nullopt, std::nullopt);
    audit_later(json{{"type", "exec.exit"},
                     {"sandbox", sandbox.id},
                     {"process", p.id},
                     {"lost", true},
                     {"failure", "lost after a daemon restart: " + why}});
    signal_event(p);
    p.pidfd.reset();  // as finish_process: a finished entry keeps no fds
    p.stdin_writer.reset();
  }
  std::lock_guard lock(sandbox.mu);
  if (sandbox.running > 0) --sandbox.running;
}

// ---- monitor -------------------------------------------------------------------

void SandboxService::watch(const std::shared_ptr<SandboxEntry>& e) {
  // Tokens: the entry's address with bit 0 telling spawn fd from pidfd.
  // The entry outlives its registration (unwatch runs before it is freed).
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 =
      reinterpret_cast<std::uint64_t>(e.get()) | static_cast<std::uint64_t>(Watch::kSpawn);
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, e->live->spawn_fd(), &ev);
  ev.data.u64 = reinterpret_cast<std::uint64_t>(e.get()) | static_cast<std::uint64_t>(Watch::kInit);
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, e->live->pidfd(), &ev);
}

void SandboxService::unwatch(const SandboxEntry& e) {
  if (!e.live) return;
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, e.live->spawn_fd(), nullptr);
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, e.live->pidfd(), nullptr);
}

void SandboxService::monitor_loop() {
  epoll_event events[64];
  while (!stopping_) {
    int n = epoll_wait(epoll_.get(), events, 64, 1000);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == ~0ULL) continue;  // wake
      auto* raw = reinterpret_cast<SandboxEntry*>(events[i].data.u64 & ~1ULL);
      const bool is_init = (events[i].data.u64 & 1ULL) != 0;
      std::shared_ptr<SandboxEntry> e;
      {
        std::lock_guard lock(mu_);
        for (auto& [id, candidate] : entries_) {
          if (candidate.get() == raw) {
            e = candidate;
            break;
          }
        }
      }
      if (!e || !e->live) continue;
      if (is_init) {
        on_init_exit(e);
        continue;
      }
      for (;;) {
        auto reply = e->live->read_reply();
        if (!reply) {
          // The zygote is gone: init follows it, and its pidfd will tell.
          epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, e->live->spawn_fd(), nullptr);
          break;
        }
        if (!*reply) break;
        on_reply(e, std::move(**reply));
      }
    }
  }
}

void SandboxService::on_reply(const std::shared_ptr<SandboxEntry>& e, ReceivedReply r) {
  if (r.reply.type == SpawnReplyType::kReady) return;
  std::shared_ptr<ProcessEntry> p;
  {
    std::lock_guard lock(e->mu);
    auto it = e->processes.find(r.reply.request_id);
    if (it != e->processes.end()) p = it->second;
  }
  if (!p) return;  // e.g. an exec whose request was abandoned
  std::lock_guard lock(p->mu);
  // Already ended: recorded as lost after a restart, or ended with its
  // sandbox. A late report changes nothing.
  if (p->finished()) return;
  switch (r.reply.type) {
    case SpawnReplyType::kStarted:
      p->pidfd = std::move(r.pidfd);
      p->host_pid = p->pidfd ? pid_of_pidfd(p->pidfd.get()) : -1;
      if (p->phase == ProcessEntry::Phase::kStarting) p->phase = ProcessEntry::Phase::kRunning;
      if (p->pending_signal != 0 && p->pidfd) {
        if (p->host_pid > 0) kill(-p->host_pid, p->pending_signal);
        sys::pidfd_send_signal(p->pidfd.get(), p->pending_signal, nullptr, 0);
        p->pending_signal = 0;
      }
      if (p->background) {
        // Who it is on the host, for a daemon that restarts while it runs.
        // The start time is ours if the pidfd still names the same pid
        // after reading it (not yet reaped, so the pid is not reused).
        std::uint64_t start = p->host_pid > 0 ? process_start_time(p->host_pid) : 0;
        if (start != 0 && pid_of_pidfd(p->pidfd.get()) != p->host_pid) start = 0;
        if (start != 0)
          (void)store_.set_process_host(p->id, p->host_pid, start);
        else
          (void)store_.update_process(p->id, ProcessState::kRunning, std::nullopt, std::nullopt);
      }
      // The eventfd tells an exec's request of the end only: waking it now
      // would be a wasted round on the exec path. Waiters on cv hear it.
      p->cv.notify_all();
      break;
    case SpawnReplyType::kFailed: {
      const Stage stage = static_cast<Stage>(r.reply.stage);
      p->phase = ProcessEntry::Phase::kFailed;
      if (stage == Stage::kExec) {
        p->exit_code = r.reply.err == ENOENT ? 127 : 126;
        p->failure =
            std::string(r.reply.detail) + ": " +
            (r.reply.err == ENOENT ? "command not found in the sandbox" : strerror(r.reply.err));
      } else {
        p->exit_code = 125;
        p->failure = "process setup failed at stage " + std::string(stage_name(stage)) + " (" +
                     r.reply.detail + "): " + std::string(errno_name(r.reply.err));
      }
      finish_process(*e, *p);
      break;
    }
    case SpawnReplyType::kExited:
      p->phase = ProcessEntry::Phase::kExited;
      p->wait_status = r.reply.status;
      if (WIFEXITED(r.reply.status)) p->exit_code = WEXITSTATUS(r.reply.status);
      if (WIFSIGNALED(r.reply.status)) p->signal = WTERMSIG(r.reply.status);
      if (p->timed_out) p->exit_code = 124;
      finish_process(*e, *p);
      break;
    default:
      break;
  }
}

void SandboxService::on_init_exit(const std::shared_ptr<SandboxEntry>& e) {
  unwatch(*e);
  {
    std::lock_guard lock(e->mu);
    if (!takes_work(e->state)) return;  // a destroy of ours
    (void)transition(e.get(), e->id, SandboxState::kFailed,
                     "the sandbox's init exited (its zygote died or it was killed)");
  }
  // Tear down off the monitor thread (it waits on the kernel), on a thread
  // stop() joins: it uses the store, the network and the journal, which go
  // after stop() returns.
  std::unique_lock lock(teardowns_mu_);
  std::erase_if(teardowns_, [](TeardownThread& t) {
    if (!t.done->load()) return false;
    t.thread.join();  // it has returned from teardown(): only its exit is left
    return true;
  });
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread thread;
  try {
    thread = std::thread([this, e, done] {
      teardown(e, e->id, "init exited", true);
      done->store(true);
    });
  } catch (const std::system_error&) {
    // No thread to be had (EAGAIN): tear down here, on the monitor, rather
    // than let the exception end the daemon.
    lock.unlock();
    teardown(e, e->id, "init exited", true);
    return;
  }
  teardowns_.push_back(TeardownThread{std::move(thread), std::move(done)});
}

// ---- reaper --------------------------------------------------------------------

void SandboxService::reaper_loop() {
  while (!stopping_) {
    {
      std::unique_lock lock(reaper_mu_);
      reaper_cv_.wait_for(lock, std::chrono::milliseconds(100));
    }
    if (stopping_) break;
    // The audit log's group commit (a no-op cost when nothing was written).
    journal_.post([this] { (void)audit_.sync(); });
    std::vector<std::shared_ptr<SandboxEntry>> all;
    {
      std::lock_guard lock(mu_);
      for (auto& [id, e] : entries_) all.push_back(e);
    }
    const std::int64_t now = now_ms();
    const auto steady = Clock::now();
    for (auto& e : all) {
      bool expired = false;
      std::vector<std::shared_ptr<ProcessEntry>> late;
      {
        std::lock_guard lock(e->mu);
        if (!takes_work(e->state)) continue;
        expired = e->expires_at_ms <= now;
        for (auto& [rid, p] : e->processes) {
          if (p->deadline && *p->deadline <= steady) late.push_back(p);
        }
      }
      if (expired) {
        metrics_.counter("corral_sandbox_expired_total", "Sandboxes ended by max_lifetime").inc();
        (void)destroy(e->id, kLifetimeReason);
        continue;
      }
      for (auto& p : late) {
        {
          std::lock_guard lock(p->mu);
          if (p->finished() || p->timed_out) continue;
          // Re-attached without a pidfd (its host pid was never recorded):
          // it cannot be killed; keep the deadline for a pidfd that may
          // still arrive with its "started" report.
          if (!p->pidfd && p->phase == ProcessEntry::Phase::kRunning) continue;
          p->timed_out = true;
          p->deadline.reset();
        }
        kill_process(*p, SIGKILL);
      }
    }
  }
}

// ---- reconcile -------------------------------------------------------------------

std::vector<std::string> SandboxService::remove_unadopted(const std::string& id,
                                                          const std::string& cgroup_name) {
  std::vector<std::string> residue;
  if (auto cg = cgroups_.open(cgroup_name); cg) {
    if (auto st = (*cg)->destroy(); !st) residue.push_back(st.error().message);
  }
  const std::string lock_path = run_dir() + "/sandboxes/" + id + ".lock";
  unlink(lock_path.c_str());
  if (secrets_ != nullptr) {
    for (auto& r : secrets_->remove(id)) residue.push_back(r);
  }
  return residue;
}

std::string SandboxService::reconcile() {
  int attached = 0, destroyed = 0, orphans = 0;
  auto records = store_.sandboxes_to_reconcile();
  std::vector<std::string> known;
  if (records) {
    for (const SandboxRecord& r : *records) {
      known.push_back(r.id);
      std::unique_ptr<LiveSandbox> live;
      json rt = r.runtime_json ? json::parse(*r.runtime_json, nullptr, false) : json();
      if (takes_work(r.state) && rt.is_object()) {
        LiveSandboxIdentity ident;
        ident.id = r.id;
        ident.init_pid = rt.value("init_pid", -1);
        ident.init_start_time = rt.value("init_start_time", std::uint64_t{0});
        ident.host_uid_base = rt.value("host_uid_base", 0u);
        ident.cgroup = rt.value("cgroup", r.id);
        auto attached_or = LiveSandbox::attach(ident, cgroups_);
        if (attached_or) live = std::move(*attached_or);
      }
      if (live) {
        auto e = std::make_shared<SandboxEntry>();
        e->id = r.id;
        if (auto spec = api::spec_from_json(r.spec_json); spec) e->spec = *spec;
        e->env = rt.value("env", std::vector<std::string>{});
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
            audit_now(json{{"type", "sandbox.network"},
                           {"sandbox", r.id},
                           {"reason", "the stored policy could not be read after a restart (" +
                                          n.error().message + "): no network"},
                           {"mode", "none"}});
          }
        }
        e->expires_at_ms = r.expires_at_ms.value_or(now_ms());
        e->state = r.state;
        e->live = std::move(live);
        // Background processes that were running: their exits may be
        // waiting in the spawn channel, or still to come. Those whose host
        // pid was recorded are found again (pidfd), so they can be
        // signalled and timed out as before; their stdin ended with the
        // previous daemon.
        std::vector<std::pair<std::shared_ptr<ProcessEntry>, std::string>> unverified;
        if (auto procs = store_.list_processes(r.id); procs) {
          for (const auto& pr : *procs) {
            if (pr.state != ProcessState::kRunning && pr.state != ProcessState::kStarting) continue;
            auto rid = request_id_of(pr.id);
            if (!rid) continue;
            auto p = std::make_shared<ProcessEntry>();
            p->id = pr.id;
            p->sandbox_id = r.id;
            p->request_id = *rid;
            p->argv = pr.argv;
            p->background = true;
            p->reattached = true;
            p->started_at_ms = pr.started_at_ms;
            p->started = Clock::now();
            p->phase = ProcessEntry::Phase::kRunning;
            if (pr.deadline_at_ms)
              p->deadline = p->started + std::chrono::milliseconds(std::max<std::int64_t>(
                                             0, *pr.deadline_at_ms - now_ms()));
            if (pr.host_pid && pr.host_start_time) {
              auto fd = reopen_process(static_cast<pid_t>(*pr.host_pid), *pr.host_start_time,
                                       e->live->identity().init_pid);
              if (fd) {
                p->pidfd = std::move(*fd);
                p->host_pid = static_cast<pid_t>(*pr.host_pid);
              } else {
                unverified.emplace_back(p, fd.error().message);
              }
            }
            e->processes[*rid] = p;
            ++e->running;
          }
        }
        // What the zygote reported while no daemon listened: exits, and
        // starts (with their pidfds) of processes caught starting.
        for (;;) {
          auto reply = e->live->read_reply();
          if (!reply || !*reply) break;
          on_reply(e, std::move(**reply));
        }
        // A recorded process that is not on the host any more and whose
        // exit was not reported (the old daemon read it and died before
        // storing it): lost. One whose pid now names another process is
        // lost too, and never signalled.
        for (auto& [p, why] : unverified) lose_process(*e, *p, why);
        if (e->running == 0 && e->state == SandboxState::kRunning)
          (void)transition(e.get(), r.id, SandboxState::kReady,
                           "re-attached after a daemon restart");
        {
          std::lock_guard lock(mu_);
          entries_[r.id] = e;
          reserved_memory_ += e->spec.limits.memory_bytes;
          reserved_disk_ += e->spec.limits.disk_bytes;
        }
        // Its network is served again by this daemon's engine; a sandbox
        // whose network cannot be served is destroyed rather than left
        // with an address nobody answers on.
        if (e->net_slot) {
          Status served = network_ == nullptr
                              ? Status(make_error(ErrorCode::kUnavailable, "no network engine"))
                              : [&]() -> Status {
            auto policy = network_->resolve(e->spec.network);
            if (!policy) return tl::unexpected(policy.error());
            return network_->reattach(r.id, *e->net_slot, e->live->identity().init_pid, *policy);
          }();
          if (!served) {
            watch(e);
            audit_now(json{{"type", "sandbox.reattach"}, {"sandbox", r.id}});
            teardown(e, r.id, "its network could not be served again: " + served.error().message,
                     false);
            ++destroyed;
            continue;
          }
        }
        // Its secrets too: a sandbox that cannot have them back is
        // destroyed (its files are wiped) rather than left half-served.
        if (!e->spec.secrets.empty()) {
          Status got = secrets_ == nullptr
                           ? Status(make_error(ErrorCode::kUnavailable, "no secret service"))
                           : secrets_->reattach(r.id, e->spec);
          if (!got) {
            watch(e);
            audit_now(json{{"type", "sandbox.reattach"}, {"sandbox", r.id}});
            teardown(e, r.id, "its secrets could not be served again: " + got.error().message,
                     false);
            ++destroyed;
            continue;
          }
        }
        watch(e);
        audit_now(json{{"type", "sandbox.reattach"}, {"sandbox", r.id}});
        ++attached;
        continue;
      }
      // Not re-attachable: kill whatever is left of it, by its cgroup.
      std::string cg_name = r.cgroup.value_or(r.id);
      if (r.state != SandboxState::kFailed && r.state != SandboxState::kDestroying)
        (void)store_.transition(
            r.id, SandboxState::kFailed,
            "daemon restarted while it was " + std::string(sandbox_state_name(r.state)));
      if (r.state != SandboxState::kDestroying)
        (void)store_.transition(r.id, SandboxState::kDestroying, "reconcile after restart");
      std::vector<std::string> residue = remove_unadopted(r.id, cg_name);
      if (auto slot = net_slot_of(rt); slot && network_ != nullptr) {
        for (auto& left : network_->detach(r.id, slot)) residue.push_back(left);
      }
      if (auto procs = store_.list_processes(r.id); procs) {
        for (const auto& pr : *procs) {
          if (pr.state == ProcessState::kRunning || pr.state == ProcessState::kStarting)
            (void)store_.update_process(pr.id, ProcessState::kLost, std::nullopt, std::nullopt);
        }
      }
      if (residue.empty()) {
        (void)store_.transition(r.id, SandboxState::kCleaned, "destroyed on reconcile");
      } else {
        (void)store_.transition(r.id, SandboxState::kFailed, residue.front());
      }
      audit_now(
          json{{"type", "sandbox.reconcile_destroy"}, {"sandbox", r.id}, {"residue", residue}});
      ++destroyed;
    }
  }
  // Cgroups of daemon sandboxes the store never heard of (a crash between
  // the factory's clone and the store's write cannot happen: the row comes
  // first; but a crash of an older daemon might): their lock tells.
  if (auto names = cgroups_.list(); names) {
    for (const std::string& name : *names) {
      if (name.rfind("sb-", 0) != 0) continue;
      if (std::find(known.begin(), known.end(), name) != known.end()) continue;
      const std::string lock_path = run_dir() + "/sandboxes/" + name + ".lock";
      UniqueFd lock(open(lock_path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
      if (lock && flock(lock.get(), LOCK_EX | LOCK_NB) != 0) continue;  // alive: not ours to judge
      auto cg = cgroups_.open(name);
      if (!cg) continue;
      if (!lock) {
        auto procs = (*cg)->processes();
        if (!procs || !procs->empty()) continue;
      }
      if ((*cg)->destroy()) {
        unlink(lock_path.c_str());
        ++orphans;
      }
    }
  }
  return "reconciled: " + std::to_string(attached) + " re-attached, " + std::to_string(destroyed) +
         " destroyed, " + std::to_string(orphans) + " orphan cgroups removed";
}

}  // namespace corral::daemon
