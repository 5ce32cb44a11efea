// The facade's filesystem.Filesystem service (Stat, MakeDir, Move,
// ListDir, Remove over Connect with JSON) and envd's /files routes (GET
// a file's bytes, POST multipart uploads). Every path goes through the
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
constexpr std::size_t kBuffer = 1 << 20;
// A multipart upload is read whole before it is parsed: at most this much
// unless serve.max_upload says less.
constexpr std::uint64_t kMaxMultipartUpload = 256ull << 20;
constexpr std::size_t kMaxListed = 10000;

struct Target {
  SandboxLease lease;
  std::shared_ptr<SandboxEntry> sandbox;
  std::optional<ConfinedRoot> root;
};

// The sandbox leased, with its confined root; nullopt when the error was
// answered (`connect`: as a Connect error, else as envd's JSON error).
std::optional<Target> open_target(EnvdCall& c, bool transfer, bool connect) {
  ApiContext& ctx = c.facade.context();
  auto lease = ctx.sandboxes.lease(c.sandbox_id, transfer ? c.r.out.fd() : -1);
  auto fail = [&](const api::ApiError& e) {
    if (connect) send_connect_error(c.r.out, e);
    else send_control_error(c.r.out, e);
  };
  if (!lease) {
    fail(lease.error());
    return std::nullopt;
  }
  Target t{std::move(*lease), nullptr, std::nullopt};
  t.sandbox = t.lease.sandbox();
  auto root = open_sandbox_root(ctx.sandboxes, *t.sandbox);
  if (!root) {
    fail(root.error());
    return std::nullopt;
  }
  t.root.emplace(std::move(*root));
  return t;
}

std::string owner_name(const Target& t, uid_t uid) {
  if (uid == file_owner(*t.sandbox)) return t.sandbox->spec.root ? "root" : "sandbox";
  if (uid == t.sandbox->live->identity().host_uid_base) return "root";
  return "nobody";
}

std::string join(const std::string& dir, const std::string& name) {
  if (!dir.empty() && dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

std::string last_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  auto slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

e2b::EntryInfo entry_of(const Target& t, FileInfo f, const std::string& path,
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
void refuse(EnvdCall& c, const Target& t, std::string_view op, const std::string& path,
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
  send_connect_json(c.r.out, e2b::entry_answer_json(entry_of(*t, std::move(*info), path, redactor)));
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
    return send_connect_error(c.r.out, dir ? ConnectCode::kAlreadyExists : ConnectCode::kInvalidArgument,
                              FileRedactor(ctx.sandboxes, t->sandbox->id).text(message));
  }
  const uid_t uid = file_owner(*t->sandbox);
  if (auto st = t->root->mkdir(path, 0755, true, uid, uid); !st)
    return refuse(c, *t, "mkdir", path, file_error(st.error()));
  audit_file(ctx.sandboxes, t->sandbox->id, "mkdir", path, {{"parents", true}});
  auto info = t->root->stat(path);
  if (!info) return refuse(c, *t, "stat", path, file_error(info.error()));
  FileRedactor redactor(ctx.sandboxes, t->sandbox->id);
  send_connect_json(c.r.out, e2b::entry_answer_json(entry_of(*t, std::move(*info), path, redactor)));
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
    return refuse(c, *t, "list", path,
                  api::make_api_error(api::ApiErrorCode::kInvalidValue,
                                      "path is not a directory: " + path));
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

// ---- /files ---------------------------------------------------------------------

void files_refuse(EnvdCall& c, const Target& t, std::string_view op, const std::string& path,
                  const api::ApiError& e) {
  audit_refused(c.facade.context().sandboxes, t.sandbox->id, op, path, e);
  send_control_error(c.r.out, FileRedactor(c.facade.context().sandboxes, t.sandbox->id).error(e));
}

void download(EnvdCall& c) {
  ApiContext& ctx = c.facade.context();
  auto raw = c.r.query_value("path");
  if (!raw || raw->empty())
    return send_control_error(c.r.out, 400, "the query parameter path is required");
  auto t = open_target(c, true, false);
  if (!t) return;
  if (!user_allowed(c.r, *t->sandbox)) return;
  const std::string path = sandbox_path(*t->sandbox, *raw);
  auto fd = t->root->open_read(path);
  if (!fd) {
    // envd: 404 for a missing file, 400 for a directory.
    auto info = t->root->stat(path);
    if (info && info->type == FileType::kDirectory)
      return files_refuse(c, *t, "read", path,
                          api::make_api_error(api::ApiErrorCode::kInvalidValue,
                                              "path is a directory: " + path));
    return files_refuse(c, *t, "read", path, file_error(fd.error()));
  }
  struct stat st;
  if (fstat(fd->get(), &st) != 0)
    return files_refuse(c, *t, "read", path,
                        api::make_api_error(api::ApiErrorCode::kInternal, "fstat failed"));
  const auto size = static_cast<std::uint64_t>(st.st_size);
  Sha256 hash;
  if (!c.r.out.start(200, {{"content-type", "application/octet-stream"}}, size)) return;
  std::uint64_t sent = 0;
  std::string buf(kBuffer, '\0');
  while (sent < size) {
    ssize_t n = read(fd->get(), buf.data(), std::min<std::uint64_t>(buf.size(), size - sent));
    if (n <= 0) break;
    hash.update(buf.data(), static_cast<std::size_t>(n));
    if (!c.r.out.write(std::string_view(buf.data(), static_cast<std::size_t>(n)))) break;
    sent += static_cast<std::uint64_t>(n);
  }
  audit_file(ctx.sandboxes, t->sandbox->id, "read", path,
             {{"bytes", sent}, {"sha256", Sha256::hex(hash.final())}, {"complete", sent == size}});
  if (sent == size) {
    t->lease.settle();
    (void)c.r.out.finish();
  }
}

// One file of an upload: parents made, the file written as the sandbox's
// user, audited. An error is answered and returned false.
bool write_one(EnvdCall& c, Target& t, const std::string& path, std::string_view bytes) {
  ApiContext& ctx = c.facade.context();
  const uid_t uid = file_owner(*t.sandbox);
  if (auto slash = path.rfind('/'); slash != std::string::npos && slash > 0) {
    const std::string parent = path.substr(0, slash);
    if (auto st = t.root->mkdir(parent, 0755, true, uid, uid); !st) {
      files_refuse(c, t, "write", path, file_error(st.error()));
      return false;
    }
  }
  auto fd = t.root->open_write(path);
  if (!fd) {
    files_refuse(c, t, "write", path, file_error(fd.error()));
    return false;
  }
  if (fchown(fd->get(), uid, uid) != 0) {
    files_refuse(c, t, "write", path,
                 api::make_api_error(api::ApiErrorCode::kInternal,
                                     "fchown: " + std::string(strerror(errno))));
    return false;
  }
  std::uint64_t written = 0;
  if (auto err = write_upload_chunk(fd->get(), bytes, written)) {
    (void)ftruncate(fd->get(), 0);
    files_refuse(c, t, "write", path, *err);
    return false;
  }
  audit_file(ctx.sandboxes, t.sandbox->id, "write", path,
             {{"bytes", written}, {"sha256", sha256_hex(bytes)}});
  return true;
}

// An upload whose body is the file (envd 0.5.7: application/octet-stream,
// possibly gzip-compressed), streamed into the file as it arrives.
void upload_raw(EnvdCall& c) {
  ApiContext& ctx = c.facade.context();
  auto raw_path = c.r.query_value("path");
  if (!raw_path || raw_path->empty())
    return send_control_error(c.r.out, 400, "a raw upload needs ?path=");
  const std::string encoding(c.r.head.header("content-encoding").value_or("identity"));
  const bool gzip = encoding == "gzip" || encoding == "x-gzip";
  if (!gzip && encoding != "identity")
    return send_control_error(c.r.out, 415,
                              "Content-Encoding " + encoding + " is not accepted (gzip or identity)");
  auto t = open_target(c, true, false);
  if (!t) return;
  if (!user_allowed(c.r, *t->sandbox)) return;
  const std::string path = sandbox_path(*t->sandbox, *raw_path);
  const uid_t uid = file_owner(*t->sandbox);
  if (auto slash = path.rfind('/'); slash != std::string::npos && slash > 0) {
    if (auto st = t->root->mkdir(path.substr(0, slash), 0755, true, uid, uid); !st)
      return files_refuse(c, *t, "write", path, file_error(st.error()));
  }
  auto fd = t->root->open_write(path);
  if (!fd) return files_refuse(c, *t, "write", path, file_error(fd.error()));
  if (fchown(fd->get(), uid, uid) != 0)
    return files_refuse(c, *t, "write", path,
                        api::make_api_error(api::ApiErrorCode::kInternal,
                                            "fchown: " + std::string(strerror(errno))));
  const std::uint64_t limit = ctx.limits.max_upload;
  std::optional<GzipInflater> inflater;
  if (gzip) inflater.emplace();
  Sha256 hash;
  std::uint64_t written = 0;
  std::string buf(kBuffer, '\0');
  std::string plain;
  auto fail = [&](const api::ApiError& e) {
    (void)ftruncate(fd->get(), 0);  // give the space back; nothing half-written stays
    files_refuse(c, *t, "write", path, e);
  };
  auto put = [&](std::string_view data) -> bool {
    if (limit != 0 && data.size() > limit - std::min(limit, written)) {
      fail(api::make_api_error(api::ApiErrorCode::kBodyTooLarge,
                               "the file is larger than this daemon's " + std::to_string(limit) +
                                   " bytes (serve.max_upload)"));
      return false;
    }
    hash.update(data.data(), data.size());
    if (auto err = write_upload_chunk(fd->get(), data, written)) {
      fail(*err);
      return false;
    }
    return true;
  };
  for (;;) {
    auto n = c.r.body.read(buf.data(), buf.size());
    if (!n) {
      fail(api::make_api_error(n.error().code == ErrorCode::kTimeout
                                   ? api::ApiErrorCode::kRequestTimeout
                                   : api::ApiErrorCode::kInvalidValue,
                               "upload interrupted: " + n.error().message));
      return;
    }
    if (*n == 0) break;
    const std::string_view chunk(buf.data(), *n);
    if (!inflater) {
      if (!put(chunk)) return;
      continue;
    }
    plain.clear();
    if (auto st = inflater->feed(chunk, plain); !st) {
      fail(api::make_api_error(api::ApiErrorCode::kInvalidValue,
                               "the gzip body is corrupt: " + st.error().message));
      return;
    }
    if (!plain.empty() && !put(plain)) return;
  }
  if (inflater && !inflater->done()) {
    fail(api::make_api_error(api::ApiErrorCode::kInvalidValue, "the gzip body is cut short"));
    return;
  }
  t->lease.settle();
  audit_file(ctx.sandboxes, t->sandbox->id, "write", path,
             {{"bytes", written}, {"sha256", Sha256::hex(hash.final())}, {"gzip", gzip}});
  FileRedactor redactor(ctx.sandboxes, t->sandbox->id);
  nlohmann::json answer = nlohmann::json::array(
      {{{"name", redactor.text(last_name(path))}, {"type", "file"}, {"path", redactor.text(path)}}});
  (void)c.r.out.send(200, {{"content-type", "application/json"}},
                     answer.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void upload(EnvdCall& c) {
  ApiContext& ctx = c.facade.context();
  auto ct = c.r.head.header("content-type");
  if (ct && std::string_view(*ct).substr(0, ct->find(';')) == "application/octet-stream")
    return upload_raw(c);
  if (!ct || !http::is_form_data(*ct))
    return send_control_error(c.r.out, 415,
                              "uploads are multipart/form-data (one \"file\" part per file) or "
                              "application/octet-stream with ?path=");
  auto boundary = http::form_data_boundary(*ct);
  if (!boundary) return send_control_error(c.r.out, 400, boundary.error().message);
  std::uint64_t limit = kMaxMultipartUpload;
  if (ctx.limits.max_upload != 0) limit = std::min<std::uint64_t>(limit, ctx.limits.max_upload + 64 * 1024);
  auto t = open_target(c, true, false);
  if (!t) return;
  if (!user_allowed(c.r, *t->sandbox)) return;
  auto body = c.r.body.read_all(limit);
  if (!body)
    return send_control_error(c.r.out,
                              body.error().code == ErrorCode::kResourceExhausted ? 413 : 400,
                              "could not read the upload: " + body.error().message +
                                  " (at most " + std::to_string(limit) + " bytes per request)");
  t->lease.settle();
  auto parts = http::parse_form_data(*body, *boundary);
  if (!parts) return send_control_error(c.r.out, 400, parts.error().message);
  auto query_path = c.r.query_value("path");
  nlohmann::json answer = nlohmann::json::array();
  FileRedactor redactor(ctx.sandboxes, t->sandbox->id);
  std::size_t files = 0;
  for (const http::FormPart& part : *parts) {
    if (part.name != "file") continue;
    std::string raw;
    if (query_path && !query_path->empty()) raw = *query_path;
    else if (part.filename && !part.filename->empty()) raw = *part.filename;
    else
      return send_control_error(c.r.out, 400,
                                "a file part without a path: give ?path= or the part's filename");
    if (query_path && files > 0)
      return send_control_error(c.r.out, 400, "?path= names one file, but more parts were sent");
    const std::string path = sandbox_path(*t->sandbox, raw);
    if (ctx.limits.max_upload != 0 && part.body.size() > ctx.limits.max_upload)
      return send_control_error(c.r.out, 413,
                                "a file of " + std::to_string(part.body.size()) +
                                    " bytes: this daemon takes at most " +
                                    std::to_string(ctx.limits.max_upload) + " (serve.max_upload)");
    if (!write_one(c, *t, path, part.body)) return;
    ++files;
    answer.push_back({{"name", redactor.text(last_name(path))},
                      {"type", "file"},
                      {"path", redactor.text(path)}});
  }
  if (files == 0) return send_control_error(c.r.out, 400, "no part named \"file\" was sent");
  (void)c.r.out.send(200, {{"content-type", "application/json"}},
                     answer.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace

void handle_filesystem_service(EnvdCall& c) {
  const std::string m = c.method.substr(std::string_view("filesystem.Filesystem/").size());
  if (m == "Stat") return stat(c);
  if (m == "MakeDir") return make_dir(c);
  if (m == "Move") return move(c);
  if (m == "ListDir") return list_dir(c);
  if (m == "Remove") return remove(c);
  if (m == "WatchDir") return handle_watch_dir(c);
  if (m == "CreateWatcher" || m == "GetWatcherEvents" || m == "RemoveWatcher")
    return send_connect_error(c.r.out, ConnectCode::kUnimplemented,
                              "filesystem.Filesystem/" + m +
                                  ": the polling watchers are not supported by corral's E2B "
                                  "facade; WatchDir streams the same events (docs/e2b.md)");
  send_connect_error(c.r.out, ConnectCode::kUnimplemented, "no method filesystem.Filesystem/" + m);
}

void handle_files(EnvdCall& c) {
  if (c.r.head.method == "GET" || c.r.head.method == "HEAD") return download(c);
  if (c.r.head.method == "POST") return upload(c);
  send_control_error(c.r.out, 405, "GET or POST /files");
}

}  // namespace corral::daemon::e2b_internal
