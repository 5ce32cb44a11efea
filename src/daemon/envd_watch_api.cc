// The facade's directory watches (envd's filesystem.Filesystem over
// Connect): WatchDir, a stream of the changes in a sandbox's directory
// (and, recursive, in the directories below it, those made later
// included), with keepalives; and the polling watchers (CreateWatcher,
// GetWatcherEvents, RemoveWatcher), the same watch kept between calls and
// read by the client. Changes made through the sandbox's root (its
// processes, the file API) are seen; names pass the sandbox's redactor.
// A stream ends at its deadline (Connect-Timeout-Ms), when the client goes
// away, when the watched directory goes, or with the sandbox; a polling
// watcher when it is removed or with the sandbox (its teardown drops it
// first). Each takes a ticket of the facade's WatchBudget.
#include <poll.h>

#include <chrono>
#include <vector>

#include "base/random.h"
#include "base/strings.h"
#include "daemon/e2b_facade_internal.h"
#include "daemon/envd_watcher.h"
#include "daemon/file_ops.h"
#include "daemon/sandbox_service.h"
#include "e2b/envd_messages.h"
#include "fs/confined_root.h"

namespace corral::daemon::e2b_internal {

namespace {

using Clock = std::chrono::steady_clock;
using e2b::ConnectCode;

std::string over_budget() {
  return "too many directory watches: at most " + std::to_string(WatchBudget::kPerSandbox) +
         " per sandbox and " + std::to_string(WatchBudget::kTotal) +
         " in all (docs/e2b.md); stop a WatchDir stream or remove a watcher first";
}

// A watch's start, shared by both kinds: the request parsed, the sandbox
// leased and its root opened, a ticket taken and the directory watched.
// Errors are answered (as a stream's when `stream`) and give nullopt.
struct WatchStart {
  SandboxLease lease;  // lease.sandbox(): the sandbox watched
  std::string path;
  bool recursive = false;
  std::unique_ptr<WatchBudget::Ticket> ticket;
};

// The root goes into *root and the watcher, which refers to it, into
// *watcher: the caller keeps both (a stream on its stack, a polling
// watcher in its sandbox's entry) and closes them before it lets the
// lease go (a teardown waits for the lease, then wipes the layer: nothing
// may hold its files then). On failure they are closed here.
std::optional<WatchStart> start_watch(EnvdCall& c, bool stream, std::optional<ConfinedRoot>* root,
                                      std::unique_ptr<DirWatcher>* watcher) {
  ApiContext& ctx = c.facade.context();
  auto fail = [&](ConnectCode code, const std::string& message) {
    watcher->reset();
    root->reset();
    if (stream)
      send_stream_error(c.r.out, code, message);
    else
      send_connect_error(c.r.out, code, message);
    return std::nullopt;
  };
  auto message = stream ? read_stream_request(c.r, ctx.limits.max_json_body)
                        : read_unary(c.r, ctx.limits.max_json_body);
  if (!message) return std::nullopt;
  auto req = e2b::parse_watch_dir(*message);
  if (!req) return fail(ConnectCode::kInvalidArgument, req.error().message);
  WatchStart w;
  w.recursive = req->recursive;
  // Leased with this connection (a destroy cuts a stream off).
  auto lease = ctx.sandboxes.lease(c.sandbox_id, c.r.out.fd());
  if (!lease) {
    const auto ce = connect_error_of(lease.error());
    return fail(ce.code, ce.message);
  }
  w.lease = std::move(*lease);
  const SandboxEntry& sandbox = *w.lease.sandbox();
  if (!user_allowed(c.r, sandbox)) return std::nullopt;
  auto opened = open_sandbox_root(ctx.sandboxes, sandbox);
  if (!opened) {
    const auto ce = connect_error_of(opened.error());
    return fail(ce.code, ce.message);
  }
  root->emplace(std::move(*opened));
  w.path = sandbox_path(sandbox, req->path);
  w.ticket = c.facade.watch_budget().take(sandbox.id);
  if (!w.ticket) return fail(ConnectCode::kResourceExhausted, over_budget());
  *watcher = std::make_unique<DirWatcher>(**root, w.path, w.recursive);
  if (!(*watcher)->ready()) return fail(ConnectCode::kResourceExhausted, "inotify_init1 failed");
  if (auto st = (*watcher)->add(""); !st) {
    const api::ApiError e = file_error(st.error());
    audit_refused(ctx.sandboxes, sandbox.id, "watch", w.path, e);
    auto ce = connect_error_of(FileRedactor(ctx.sandboxes, sandbox.id).error(e));
    if (st.error().code == ErrorCode::kResourceExhausted) ce.code = ConnectCode::kResourceExhausted;
    return fail(ce.code, ce.message);
  }
  return w;
}

// A polling watcher, kept in its sandbox's entry between calls.
struct PollingWatcher : SandboxEntry::HeldBetweenCalls {
  std::mutex mu;  // one GetWatcherEvents at a time
  std::optional<ConfinedRoot> root;
  std::unique_ptr<DirWatcher> watcher;  // refers to *root: declared after it
  std::unique_ptr<WatchBudget::Ticket> ticket;
  bool dir_gone = false;
};

std::shared_ptr<PollingWatcher> find_watcher(SandboxEntry& sandbox, const std::string& id) {
  std::lock_guard lock(sandbox.mu);
  auto it = sandbox.held.find(id);
  if (it == sandbox.held.end()) return nullptr;
  return std::dynamic_pointer_cast<PollingWatcher>(it->second);
}

// GetWatcherEvents and RemoveWatcher: the watcher id read, the sandbox
// leased (a short lease: a teardown waits for the call).
struct WatcherCall {
  SandboxLease lease;
  std::string id;
};

std::optional<WatcherCall> watcher_call(EnvdCall& c) {
  ApiContext& ctx = c.facade.context();
  auto message = read_unary(c.r, ctx.limits.max_json_body);
  if (!message) return std::nullopt;
  auto id = e2b::parse_watcher_id(*message);
  if (!id) {
    send_connect_error(c.r.out, ConnectCode::kInvalidArgument, id.error().message);
    return std::nullopt;
  }
  auto lease = ctx.sandboxes.lease(c.sandbox_id);
  if (!lease) {
    send_connect_error(c.r.out, lease.error());
    return std::nullopt;
  }
  if (!user_allowed(c.r, *lease->sandbox())) return std::nullopt;
  return WatcherCall{std::move(*lease), std::move(*id)};
}

void no_such_watcher(EnvdCall& c, const std::string& id) {
  send_connect_error(
      c.r.out, ConnectCode::kNotFound,
      "no watcher \"" + id + "\" in this sandbox (removed, or its directory went away)");
}

}  // namespace

void handle_watch_dir(EnvdCall& c) {
  ApiContext& ctx = c.facade.context();
  bool timeout_ok = true;
  const auto timeout = connect_timeout_ms(c.r, &timeout_ok);
  if (!timeout_ok)
    return send_stream_error(c.r.out, ConnectCode::kInvalidArgument,
                             "Connect-Timeout-Ms must be a count of milliseconds");
  std::optional<Clock::time_point> deadline;
  if (timeout) deadline = Clock::now() + std::chrono::milliseconds(*timeout);
  std::optional<WatchStart> w;  // its lease let go last
  std::optional<ConfinedRoot> root;
  std::unique_ptr<DirWatcher> watcher;
  w = start_watch(c, true, &root, &watcher);
  if (!w) return;
  const std::string& sandbox_id = w->lease.sandbox()->id;
  audit_file(ctx.sandboxes, sandbox_id, "watch", w->path, {{"recursive", w->recursive}});
  FileRedactor redactor(ctx.sandboxes, sandbox_id);
  if (!c.r.out.start(200, {{"content-type", "application/connect+json"}}, std::nullopt)) return;
  auto last_sent = Clock::now();
  auto send = [&](const std::string& json) {
    last_sent = Clock::now();
    return static_cast<bool>(c.r.out.write(e2b::envelope(0, json)));
  };
  if (!send(e2b::watch_start_json())) return;
  const auto interval = keepalive_interval(c.r);
  bool client_there = true;
  for (;;) {
    if (deadline && Clock::now() >= *deadline) break;
    pollfd pfd{watcher->fd(), POLLIN, 0};
    (void)poll(&pfd, 1, 200);
    const bool dir_alive = watcher->drain([&](const std::string& name, e2b::FsEventType type) {
      if (client_there && !send(e2b::watch_event_json(redactor.text(name), type)))
        client_there = false;
    });
    if (!client_there || c.r.out.peer_gone()) return;
    if (!dir_alive) break;
    if (Clock::now() - last_sent >= interval && !send(e2b::watch_keepalive_json())) return;
  }
  (void)c.r.out.write(e2b::end_stream_envelope(std::nullopt));
  (void)c.r.out.finish();
}

void handle_create_watcher(EnvdCall& c) {
  ApiContext& ctx = c.facade.context();
  std::optional<WatchStart> w;  // its lease let go last
  auto held = std::make_shared<PollingWatcher>();
  w = start_watch(c, false, &held->root, &held->watcher);
  if (!w) return;
  held->ticket = std::move(w->ticket);
  unsigned char bytes[16];
  fill_random(bytes, sizeof bytes);
  const std::string id = "watcher-" + to_hex(bytes, sizeof bytes);
  SandboxEntry& sandbox = *w->lease.sandbox();
  {
    std::lock_guard lock(sandbox.mu);
    if (sandbox.tearing_down)
      return send_connect_error(c.r.out, ConnectCode::kUnavailable, "the sandbox is going away");
    sandbox.held[id] = held;
  }
  audit_file(ctx.sandboxes, sandbox.id, "watch", w->path,
             {{"recursive", w->recursive}, {"watcher", id}});
  send_connect_json(c.r.out, e2b::watcher_created_json(id));
}

void handle_get_watcher_events(EnvdCall& c) {
  auto call = watcher_call(c);
  if (!call) return;
  SandboxEntry& sandbox = *call->lease.sandbox();
  auto held = find_watcher(sandbox, call->id);
  if (!held) return no_such_watcher(c, call->id);
  FileRedactor redactor(c.facade.context().sandboxes, sandbox.id);
  std::vector<e2b::FsEvent> events;
  {
    std::lock_guard lock(held->mu);
    if (!held->dir_gone)
      held->dir_gone = !held->watcher->drain([&](const std::string& name, e2b::FsEventType type) {
        events.push_back({redactor.text(name), type});
      });
  }
  // A watcher whose directory went is gone after this answer (envd ends
  // such a watch too): its last events are still given.
  if (held->dir_gone && events.empty()) {
    {
      std::lock_guard lock(sandbox.mu);
      sandbox.held.erase(call->id);
    }
    return no_such_watcher(c, call->id);
  }
  send_connect_json(c.r.out, e2b::watcher_events_json(events));
}

void handle_remove_watcher(EnvdCall& c) {
  auto call = watcher_call(c);
  if (!call) return;
  SandboxEntry& sandbox = *call->lease.sandbox();
  std::shared_ptr<SandboxEntry::HeldBetweenCalls> dropped;
  {
    std::lock_guard lock(sandbox.mu);
    auto it = sandbox.held.find(call->id);
    if (it == sandbox.held.end()) return no_such_watcher(c, call->id);
    dropped = std::move(it->second);
    sandbox.held.erase(it);
  }
  dropped.reset();  // its files closed, its ticket back (outside the lock)
  send_connect_json(c.r.out, "{}");
}

}  // namespace corral::daemon::e2b_internal
