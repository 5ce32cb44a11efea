// The facade's filesystem.Filesystem/WatchDir (envd over Connect): a
// stream of the changes in a sandbox's directory (and, recursive, in the
// directories below it, those made later included), with keepalives.
// The directories are opened through the sandbox's ConfinedRoot and watched
// with inotify through /proc/self/fd, so a watch never reaches outside the
// sandbox's root, a kernel file system or corral's secret files. Changes
// made through the sandbox's root (its processes, the file API) are seen.
// Names pass the sandbox's redactor. It ends at its deadline
// (Connect-Timeout-Ms), when the client goes away, when the watched
// directory goes, or with the sandbox.
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <map>

#include "daemon/e2b_facade_internal.h"
#include "daemon/file_ops.h"
#include "daemon/sandbox_service.h"
#include "e2b/envd_messages.h"
#include "fs/confined_root.h"

namespace corral::daemon::e2b_internal {

namespace {

using Clock = std::chrono::steady_clock;
using e2b::ConnectCode;

// Directories one stream watches at most (each costs the kernel an
// inotify watch of the daemon's user: fs.inotify.max_user_watches).
constexpr std::size_t kMaxWatches = 1024;
constexpr std::uint32_t kMask = IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM |
                                IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF |
                                IN_ONLYDIR | IN_EXCL_UNLINK;

std::string join_rel(const std::string& dir, const char* name) {
  return dir.empty() ? std::string(name) : dir + "/" + name;
}

class Watcher {
 public:
  Watcher(const ConfinedRoot& root, std::string base, bool recursive)
      : root_(root), base_(std::move(base)), recursive_(recursive),
        fd_(inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {}
  int fd() const { return fd_.get(); }
  bool ready() const { return static_cast<bool>(fd_); }

  // Watches `rel` (relative to the base) and, recursive, what is below it.
  Status add(const std::string& rel) {
    std::deque<std::string> todo{rel};
    while (!todo.empty()) {
      const std::string dir = todo.front();
      todo.pop_front();
      if (dirs_.size() >= kMaxWatches)
        return make_error(ErrorCode::kResourceExhausted,
                          "more than " + std::to_string(kMaxWatches) + " directories to watch");
      const std::string path = dir.empty() ? base_ : base_ + "/" + dir;
      auto opened = root_.open_directory(path);
      if (!opened) {
        if (dir.empty()) return tl::unexpected(opened.error());
        continue;  // gone meanwhile, or not to be watched (a kernel fs, a secret)
      }
      const std::string proc = "/proc/self/fd/" + std::to_string(opened->get());
      const int wd = inotify_add_watch(fd_.get(), proc.c_str(), kMask);
      if (wd < 0) {
        if (dir.empty()) return errno_error("inotify_add_watch(" + path + ")");
        continue;
      }
      dirs_[wd] = dir;
      if (!recursive_) continue;
      auto listing = root_.list(path, kMaxWatches);
      if (!listing) continue;
      for (const FileInfo& f : listing->entries)
        if (f.type == FileType::kDirectory) todo.push_back(join_rel(dir, f.name.c_str()));
    }
    return ok();
  }

  // Reads what the kernel has; calls `emit(name, type)` for each change.
  // False when the watched directory itself went away.
  template <typename Emit>
  bool drain(Emit&& emit) {
    alignas(inotify_event) char buf[16 * 1024];
    for (;;) {
      ssize_t n = read(fd_.get(), buf, sizeof buf);
      if (n <= 0) return true;
      for (char* p = buf; p < buf + n;) {
        auto* ev = reinterpret_cast<inotify_event*>(p);
        p += sizeof(inotify_event) + ev->len;
        auto it = dirs_.find(ev->wd);
        if (ev->mask & IN_IGNORED) {
          if (it != dirs_.end() && it->second.empty()) return false;
          if (it != dirs_.end()) dirs_.erase(it);
          continue;
        }
        if (it == dirs_.end()) continue;
        if ((ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) && it->second.empty()) return false;
        if (ev->len == 0) continue;  // an event of the directory itself
        const std::string name = join_rel(it->second, ev->name);
        const bool dir = ev->mask & IN_ISDIR;
        if (ev->mask & IN_CREATE) emit(name, e2b::FsEventType::kCreate);
        if (ev->mask & (IN_MODIFY | IN_CLOSE_WRITE)) emit(name, e2b::FsEventType::kWrite);
        if (ev->mask & IN_DELETE) emit(name, e2b::FsEventType::kRemove);
        if (ev->mask & (IN_MOVED_FROM | IN_MOVED_TO)) emit(name, e2b::FsEventType::kRename);
        if (ev->mask & IN_ATTRIB) emit(name, e2b::FsEventType::kChmod);
        if (recursive_ && dir && (ev->mask & (IN_CREATE | IN_MOVED_TO))) (void)add(name);
      }
    }
  }

 private:
  const ConfinedRoot& root_;
  std::string base_;
  bool recursive_;
  UniqueFd fd_;
  std::map<int, std::string> dirs_;  // watch descriptor -> directory, relative to the base
};

}  // namespace

void handle_watch_dir(EnvdCall& c) {
  ApiContext& ctx = c.facade.context();
  auto message = read_stream_request(c.r, ctx.limits.max_json_body);
  if (!message) return;
  auto req = e2b::parse_watch_dir(*message);
  if (!req) return send_stream_error(c.r.out, ConnectCode::kInvalidArgument, req.error().message);
  bool timeout_ok = true;
  const auto timeout = connect_timeout_ms(c.r, &timeout_ok);
  if (!timeout_ok)
    return send_stream_error(c.r.out, ConnectCode::kInvalidArgument,
                             "Connect-Timeout-Ms must be a count of milliseconds");
  std::optional<Clock::time_point> deadline;
  if (timeout) deadline = Clock::now() + std::chrono::milliseconds(*timeout);
  // Leased with this connection: a destroy cuts the stream off.
  auto lease = ctx.sandboxes.lease(c.sandbox_id, c.r.out.fd());
  if (!lease) return send_stream_error(c.r.out, lease.error());
  const std::shared_ptr<SandboxEntry>& sandbox = lease->sandbox();
  if (!user_allowed(c.r, *sandbox)) return;
  auto root = open_sandbox_root(ctx.sandboxes, *sandbox);
  if (!root) return send_stream_error(c.r.out, root.error());
  const std::string path = sandbox_path(*sandbox, req->path);
  FileRedactor redactor(ctx.sandboxes, sandbox->id);
  Watcher watcher(*root, path, req->recursive);
  if (!watcher.ready()) return send_stream_error(c.r.out, ConnectCode::kResourceExhausted, "inotify_init1 failed");
  if (auto st = watcher.add(""); !st) {
    const api::ApiError e = file_error(st.error());
    audit_refused(ctx.sandboxes, sandbox->id, "watch", path, e);
    auto ce = connect_error_of(redactor.error(e));
    if (st.error().code == ErrorCode::kResourceExhausted) ce.code = ConnectCode::kResourceExhausted;
    return send_stream_error(c.r.out, ce.code, ce.message);
  }
  audit_file(ctx.sandboxes, sandbox->id, "watch", path, {{"recursive", req->recursive}});
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
    pollfd pfd{watcher.fd(), POLLIN, 0};
    (void)poll(&pfd, 1, 200);
    const bool dir_alive = watcher.drain([&](const std::string& name, e2b::FsEventType type) {
      if (client_there && !send(e2b::watch_event_json(redactor.text(name), type)))
        client_there = false;
    });
    if (!client_there || c.r.out.peer_gone()) return;
    if (!dir_alive) break;
    if (Clock::now() - last_sent >= interval &&
        !send(e2b::watch_keepalive_json()))
      return;
  }
  (void)c.r.out.write(e2b::end_stream_envelope(std::nullopt));
  (void)c.r.out.finish();
}

}  // namespace corral::daemon::e2b_internal
