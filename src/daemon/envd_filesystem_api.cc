// The facade's filesystem.Filesystem service (Stat, MakeDir, Move,
// ListDir, Remove over Connect with JSON; WatchDir and the polling
// watchers are envd_watch_api.cc,
// the /files routes envd_files_api.cc). Every path goes through the
// sandbox's ConfinedRoot as corral's file API does (relative paths are
// under the sandbox's workdir), corral's secret files are never served,
// names pass the sandbox's redactor, and each operation is audited.
#include <sys/stat.h>
#include <unistd.h>

#include <deque>
#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "daemon/e2b_facade_internal.h"
#include "daemon/file_ops.h"
#include "daemon/gzip_inflater.h"
#include "daemon/sandbox_service.h"
#include "e2b/control_messages.h"
#include "e2b/envd_messages.h"
#include "fs/confined_root.h"
#include "http/multipart.h"

namespace corral::daemon::e2b_internal {

namespace {

using e2b::ConnectCode;
constexpr std::size_t kMaxListed = 10000;

std::string owner_name(const EnvdTarget& t, uid_t uid) {
  if (uid == file_owner(*t.sandbox)) return t.sandbox->spec.root ? "root" : "sandbox";
  if (uid == t.sandbox->live->identity().host_uid_base) return "root";
  return "nobody";
}

std::string join(const std::string& dir, const std::string& name) {
  if (!dir.empty() && dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

e2b::EntryInfo entry_of(const EnvdTarget& t, FileInfo f, const std::string& path,
                        FileRedactor& redactor) {
  redactor.info(f);
  e2b::EntryInfo e;
  e.name = f.name.empty() ? last_name(path) : f.name;
  e.type = f.type == FileType::kRegular     ? e2b::FileType::kFile
           : f.type == FileType::kDirectory ? e2b::FileType::kDirectory
           : f.type == FileType::kSymlink   ? e2b::FileType::kSymlink
                                            : e2b::FileType::kUnspecified;
  e.path = redactor.text(path);
  e.size = f.size;
  const mode_t kind = f.type == FileType::kDirectory ? S_IFDIR
                      : f.type == FileType::kSymlink ? S_IFLNK
                      : f.type == FileType::kRegular ? S_IFREG
                                                     : 0;
  e.mode = kind | (f.mode & 07777);
  e.owner = owner_name(t, f.uid);
  e.group = e.owner;
  e.modified_ms = f.mtime_ns / 1000000;
  if (f.type == FileType::kSymlink) e.symlink_target = f.link_target;
  return e;
}

// A refused operation: audited, then answered as Connect says it.
void refuse(EnvdCall& c, const EnvdTarget& t, std::string_view op, const std::string& path,
            const api::ApiError& e) {
  audit_refused(c.facade.context().sandboxes, t.sandbox->id, op, path, e);
  send_connect_error(c.r.out, FileRedactor(c.facade.context().sandboxes, t.sandbox->id).error(e));
}

std::optional<std::string> unary_path(EnvdCall& c) {
  auto body = read_unary(c.r, c.facade.context().limits.max_json_body);
  if (!body) return std::nullopt;
  auto path = e2b::parse_path_request(*body);
  if (!path) {
    send_connect_error(c.r.out, ConnectCode::kInvalidArgument, path.error().message);
    return std::nullopt;
  }
  return std::move(*path);
}

void stat(EnvdCall& c) {
  auto raw = unary_path(c);
  if (!raw) return;
  auto t = open_target(c, false, true);
  if (!t) return;
  const std::string path = sandbox_path(*t->sandbox, *raw);
  auto info = t->root->stat(path);
  if (!info) return refuse(c, *t, "stat", path, file_error(info.error()));
  audit_file(c.facade.context().sandboxes, t->sandbox->id, "stat", path);
  FileRedactor redactor(c.facade.context().sandboxes, t->sandbox->id);
  send_connect_json(c.r.out,
                    e2b::entry_answer_json(entry_of(*t, std::move(*info), path, redactor)));
}

void make_dir(EnvdCall& c) {
  auto raw = unary_path(c);
  if (!raw) return;
  auto t = open_target(c, false, true);
  if (!t) return;
  ApiContext& ctx = c.facade.context();
  const std::string path = sandbox_path(*t->sandbox, *raw);
  if (auto existing = t->root->stat(path); existing) {
    // envd: already_exists for a directory (the SDK's makeDir gives false),
    // invalid_argument for anything else there.
    const bool dir = existing->type == FileType::kDirectory;
    const std::string message = (dir ? "directory already exists: " : "a file exists at: ") + path;
    audit_refused(ctx.sandboxes, t->sandbox->id, "mkdir", path,
                  api::make_api_error(api::ApiErrorCode::kConflict, message));
    return send_connect_error(c.r.out,
                              dir ? ConnectCode::kAlreadyExists : ConnectCode::kInvalidArgument,
                              FileRedactor(ctx.sandboxes, t->sandbox->id).text(message));
  }
  const uid_t uid = file_owner(*t->sandbox);
  if (auto st = t->root->mkdir(path, 0755, true, uid, uid); !st)
    return refuse(c, *t, "mkdir", path, file_error(st.error()));
  audit_file(ctx.sandboxes, t->sandbox->id, "mkdir", path, {{"parents", true}});
  auto info = t->root->stat(path);
  if (!info) return refuse(c, *t, "stat", path, file_error(info.error()));
  FileRedactor redactor(ctx.sandboxes, t->sandbox->id);
  send_connect_json(c.r.out,
                    e2b::entry_answer_json(entry_of(*t, std::move(*info), path, redactor)));
}

void move(EnvdCall& c) {
  ApiContext& ctx = c.facade.context();
  auto body = read_unary(c.r, ctx.limits.max_json_body);
  if (!body) return;
  auto req = e2b::parse_move(*body);
  if (!req) return send_connect_error(c.r.out, ConnectCode::kInvalidArgument, req.error().message);
  auto t = open_target(c, false, true);
  if (!t) return;
  const std::string from = sandbox_path(*t->sandbox, req->source);
  const std::string to = sandbox_path(*t->sandbox, req->destination);
  // envd renames as os.Rename does: an existing destination is replaced.
  if (auto st = t->root->rename(from, to, false); !st)
    return refuse(c, *t, "rename", from, file_error(st.error()));
  audit_file(ctx.sandboxes, t->sandbox->id, "rename", from, {{"to", to}});
  auto info = t->root->stat(to);
  if (!info) return refuse(c, *t, "stat", to, file_error(info.error()));
  FileRedactor redactor(ctx.sandboxes, t->sandbox->id);
  send_connect_json(c.r.out, e2b::entry_answer_json(entry_of(*t, std::move(*info), to, redactor)));
}

void list_dir(EnvdCall& c) {
  ApiContext& ctx = c.facade.context();
  auto body = read_unary(c.r, ctx.limits.max_json_body);
  if (!body) return;
  auto req = e2b::parse_list_dir(*body);
  if (!req) return send_connect_error(c.r.out, ConnectCode::kInvalidArgument, req.error().message);
  auto t = open_target(c, false, true);
  if (!t) return;
  const std::string path = sandbox_path(*t->sandbox, req->path);
  auto top = t->root->stat(path);
  if (!top) return refuse(c, *t, "list", path, file_error(top.error()));
  if (top->type != FileType::kDirectory)
    return refuse(
        c, *t, "list", path,
        api::make_api_error(api::ApiErrorCode::kInvalidValue, "path is not a directory: " + path));
  FileRedactor redactor(ctx.sandboxes, t->sandbox->id);
  std::vector<e2b::EntryInfo> entries;
  // Breadth first, `depth` levels, never through a symlink; bounded.
  std::deque<std::pair<std::string, std::uint32_t>> todo{{path, 1}};
  while (!todo.empty() && entries.size() < kMaxListed) {
    auto [dir, level] = todo.front();
    todo.pop_front();
    auto listing = t->root->list(dir, kMaxListed - entries.size());
    if (!listing) {
      if (dir == path) return refuse(c, *t, "list", path, file_error(listing.error()));
      continue;  // a subdirectory that went away or cannot be read
    }
    for (FileInfo& f : listing->entries) {
      const std::string child = join(dir, f.name);
      const bool descend = f.type == FileType::kDirectory && level < req->depth;
      entries.push_back(entry_of(*t, std::move(f), child, redactor));
      if (descend) todo.emplace_back(child, level + 1);
    }
  }
  audit_file(ctx.sandboxes, t->sandbox->id, "list", path,
             {{"entries", entries.size()}, {"depth", req->depth}});
  send_connect_json(c.r.out, e2b::entries_answer_json(entries));
}

void remove(EnvdCall& c) {
  auto raw = unary_path(c);
  if (!raw) return;
  auto t = open_target(c, false, true);
  if (!t) return;
  const std::string path = sandbox_path(*t->sandbox, *raw);
  // envd removes as os.RemoveAll does: recursive, a missing path is fine.
  if (auto st = t->root->remove(path, true); !st && st.error().sys_errno != ENOENT)
    return refuse(c, *t, "delete", path, file_error(st.error()));
  audit_file(c.facade.context().sandboxes, t->sandbox->id, "delete", path, {{"recursive", true}});
  send_connect_json(c.r.out, "{}");
}

}  // namespace

// The sandbox leased, with its confined root; nullopt when the error was
// answered (`connect`: as a Connect error, else as envd's JSON error).
std::optional<EnvdTarget> open_target(EnvdCall& c, bool transfer, bool connect) {
  ApiContext& ctx = c.facade.context();
  auto lease = ctx.sandboxes.lease(c.sandbox_id, transfer ? c.r.out.fd() : -1);
  auto fail = [&](const api::ApiError& e) {
    if (connect)
      send_connect_error(c.r.out, e);
    else
      send_control_error(c.r.out, e);
  };
  if (!lease) {
    fail(lease.error());
    return std::nullopt;
  }
  EnvdTarget t{std::move(*lease), nullptr, std::nullopt};
  t.sandbox = t.lease.sandbox();
  auto root = open_sandbox_root(ctx.sandboxes, *t.sandbox);
  if (!root) {
    fail(root.error());
    return std::nullopt;
  }
  t.root.emplace(std::move(*root));
  return t;
}

std::string last_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  auto slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

void handle_filesystem_service(EnvdCall& c) {
  const std::string m = c.method.substr(std::string_view("filesystem.Filesystem/").size());
  if (m == "Stat") return stat(c);
  if (m == "MakeDir") return make_dir(c);
  if (m == "Move") return move(c);
  if (m == "ListDir") return list_dir(c);
  if (m == "Remove") return remove(c);
  if (m == "WatchDir") return handle_watch_dir(c);
  if (m == "CreateWatcher") return handle_create_watcher(c);
  if (m == "GetWatcherEvents") return handle_get_watcher_events(c);
  if (m == "RemoveWatcher") return handle_remove_watcher(c);
  send_connect_error(c.r.out, ConnectCode::kUnimplemented, "no method filesystem.Filesystem/" + m);
}

}  // namespace corral::daemon::e2b_internal
