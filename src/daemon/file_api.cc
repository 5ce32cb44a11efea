// Handlers of the file API (REQUIREMENTS.md F5, F6; docs/file-api.md).
// Every path is resolved inside the sandbox's root by ConfinedRoot
// (openat2 RESOLVE_IN_ROOT from /proc/<init>/root), bodies are streamed
// with one bounded buffer, and every operation is audited with its path,
// byte count and SHA-256. corral's secret files are never served, and what
// an answer says about names passes the sandbox's redactor (file_ops.h).
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "daemon/api_context.h"
#include "daemon/file_ops.h"
#include "daemon/sandbox_service.h"
#include "fs/confined_root.h"

namespace corral::daemon {

namespace {

using nlohmann::json;
constexpr std::size_t kBuffer = 1 << 20;

// Members in this order: the root (and the files a handler opens after
// it) are closed before the lease lets a teardown go on.
struct Target {
  SandboxLease lease;
  std::shared_ptr<SandboxEntry> sandbox;
  std::optional<ConfinedRoot> root;
};

enum class Op { kShort, kTransfer };

// The live sandbox, leased, and its confined root; sends the error
// otherwise. A transfer's connection is cut off by a teardown; a short
// operation is waited for.
std::optional<Target> open_target(ApiContext& ctx, ApiRequest& r, Op op = Op::kShort) {
  auto lease = ctx.sandboxes.lease(r.params[0], op == Op::kTransfer ? r.out.fd() : -1);
  if (!lease) {
    send_error(r.out, lease.error());
    return std::nullopt;
  }
  Target t{std::move(*lease), nullptr, std::nullopt};
  t.sandbox = t.lease.sandbox();
  auto root = open_sandbox_root(ctx.sandboxes, *t.sandbox);
  if (!root) {
    send_error(r.out, root.error());
    return std::nullopt;
  }
  t.root.emplace(std::move(*root));
  return t;
}

std::optional<std::string> path_param(ApiRequest& r, std::string_view name = "path") {
  auto p = r.query_value(name);
  if (!p || p->empty()) {
    send_error(r.out,
               api::make_api_error(api::ApiErrorCode::kInvalidValue,
                                   "the query parameter \"" + std::string(name) + "\" is required",
                                   std::string(name),
                                   "e.g. ?" + std::string(name) + "=/workspace/file.txt"));
    return std::nullopt;
  }
  return p;
}

// A path as a JSON string. A name may be any bytes (a file the sandbox made,
// a %-encoded query): invalid UTF-8 becomes U+FFFD rather than a throw.
std::string json_path(const std::string& path) {
  return json(path).dump(-1, ' ', false, json::error_handler_t::replace);
}

// Answers a refused operation, and audits it first: X1 wants every file
// operation in the log, refused ones (an escape attempt) above all. The
// answer passes the sandbox's redactor (the audit log has its own).
void refuse(ApiContext& ctx, ApiRequest& r, const Target& t, std::string_view op,
            const std::string& path, const api::ApiError& e, json extra = json::object()) {
  audit_refused(ctx.sandboxes, t.sandbox->id, op, path, e, std::move(extra));
  send_error(r.out, FileRedactor(ctx.sandboxes, t.sandbox->id).error(e));
}

// A path the client sent, echoed in an answer: redacted like a name.
std::string echo_path(ApiContext& ctx, const Target& t, const std::string& path) {
  return json_path(FileRedactor(ctx.sandboxes, t.sandbox->id).text(path));
}

api::FileEntry entry_of(FileInfo f, FileRedactor& redactor) {
  redactor.info(f);
  api::FileEntry e;
  e.name = f.name;
  e.type = f.type == FileType::kRegular     ? "file"
           : f.type == FileType::kDirectory ? "directory"
           : f.type == FileType::kSymlink   ? "symlink"
                                            : "other";
  e.size = f.size;
  e.mode = f.mode;
  e.mtime_ms = f.mtime_ns / 1000000;
  e.link_target = f.link_target;
  return e;
}

api::ApiError upload_too_large(std::string_view size, std::uint64_t limit) {
  return api::make_api_error(api::ApiErrorCode::kBodyTooLarge,
                             "the upload is " + std::string(size) +
                                 "; this daemon accepts at most " + std::to_string(limit) +
                                 " bytes per file (serve.max_upload)",
                             "", "split the file, or raise serve.max_upload");
}

}  // namespace

void handle_file_upload(ApiContext& ctx, ApiRequest& r) {
  auto path = path_param(r);
  if (!path) return;
  auto t = open_target(ctx, r, Op::kTransfer);
  if (!t) return;
  WriteOptions options;
  if (auto m = r.query_value("mode"); m) {
    char* end = nullptr;
    unsigned long mode = std::strtoul(m->c_str(), &end, 8);
    if (m->empty() || *end != '\0' || mode > 0777)
      return refuse(ctx, r, *t, "write", *path,
                    api::make_api_error(api::ApiErrorCode::kInvalidValue,
                                        "mode must be octal, 0 to 0777", "mode"));
    options.mode = static_cast<mode_t>(mode);
  }
  // serve.max_upload: a declared length over it is refused before the
  // file is opened (an existing file stays as it was) and before a byte of
  // the body is read (no "100 Continue" is sent).
  const std::uint64_t limit = ctx.limits.max_upload;
  if (auto declared = r.body.declared_length(); limit != 0 && declared && *declared > limit)
    return refuse(ctx, r, *t, "write", *path,
                  upload_too_large(std::to_string(*declared) + " bytes", limit), {{"bytes", 0}});
  auto fd = t->root->open_write(*path, options);
  if (!fd) return refuse(ctx, r, *t, "write", *path, file_error(fd.error()), {{"bytes", 0}});
  // Files land as the sandbox's user, not as an unmapped host root.
  const uid_t uid = file_owner(*t->sandbox);
  if (fchown(fd->get(), uid, uid) != 0)
    return refuse(ctx, r, *t, "write", *path,
                  api::make_api_error(api::ApiErrorCode::kInternal,
                                      "fchown: " + std::string(strerror(errno))),
                  {{"bytes", 0}});
  Sha256 hash;
  std::uint64_t total = 0;
  std::string buf(kBuffer, '\0');
  for (;;) {
    auto n = r.body.read(buf.data(), buf.size());
    if (!n) {
      (void)ftruncate(fd->get(), 0);
      const bool timeout = n.error().code == ErrorCode::kTimeout;
      return refuse(ctx, r, *t, "write", *path,
                    api::make_api_error(timeout ? api::ApiErrorCode::kRequestTimeout
                                                : api::ApiErrorCode::kInvalidValue,
                                        "upload interrupted: " + n.error().message),
                    {{"bytes", total}});
    }
    if (*n == 0) {
      t->lease.settle();  // the body is in: the answer is near
      break;
    }
    if (limit != 0 && *n > limit - total) {
      // A body without a length (chunked) that grows past the limit: none
      // of it past the limit is written, and the partial file is removed
      // (emptied first, in case its name was moved meanwhile).
      (void)ftruncate(fd->get(), 0);
      fd->reset();
      (void)t->root->remove(*path);
      return refuse(ctx, r, *t, "write", *path,
                    upload_too_large("more than " + std::to_string(limit) + " bytes", limit),
                    {{"bytes", total}});
    }
    hash.update(buf.data(), *n);
    if (auto err = write_upload_chunk(fd->get(), std::string_view(buf.data(), *n), total)) {
      (void)ftruncate(fd->get(), 0);  // give the space back
      return refuse(ctx, r, *t, "write", *path, *err, {{"bytes", total}});
    }
  }
  api::UploadResult result;
  result.path = FileRedactor(ctx.sandboxes, t->sandbox->id).text(*path);
  result.bytes = total;
  result.sha256 = Sha256::hex(hash.final());
  audit_file(ctx.sandboxes, t->sandbox->id, "write", *path,
             {{"bytes", total}, {"sha256", result.sha256}});
  send_json(r.out, 201, api::to_json(result));
}

void handle_file_download(ApiContext& ctx, ApiRequest& r) {
  auto path = path_param(r);
  if (!path) return;
  auto t = open_target(ctx, r, Op::kTransfer);
  if (!t) return;
  auto fd = t->root->open_read(*path);
  if (!fd) return refuse(ctx, r, *t, "read", *path, file_error(fd.error()));
  struct stat st;
  if (fstat(fd->get(), &st) != 0)
    return refuse(ctx, r, *t, "read", *path,
                  api::make_api_error(api::ApiErrorCode::kInternal, "fstat failed"));
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  Sha256 hash;
  // The record of a whole read goes out before the last byte (before the
  // head, for an empty file): a client that has the whole file has its
  // record even if the daemon dies right after (X1, docs/audit.md).
  auto record = [&](std::uint64_t bytes, bool complete) {
    audit_file(ctx.sandboxes, t->sandbox->id, "read", *path,
               {{"bytes", bytes}, {"sha256", Sha256::hex(hash.final())}, {"complete", complete}});
  };
  const bool head_only = r.head.method == "HEAD";
  if (size == 0 && !head_only) record(0, true);
  if (!r.out.start(200, {{"content-type", "application/octet-stream"}}, size)) {
    if (size != 0 || head_only)
      audit_file(ctx.sandboxes, t->sandbox->id, "read", *path, {{"bytes", 0}, {"complete", false}});
    return;
  }
  if (head_only) {
    // The size went out, none of the content: that is a stat.
    audit_file(ctx.sandboxes, t->sandbox->id, "stat", *path);
    (void)r.out.finish();
    return;
  }
  std::uint64_t sent = 0;
  std::string buf(kBuffer, '\0');
  // Exactly the length announced: a file that grows meanwhile is cut there.
  while (sent < size) {
    ssize_t n = read(fd->get(), buf.data(), std::min<std::uint64_t>(buf.size(), size - sent));
    if (n <= 0) break;
    hash.update(buf.data(), static_cast<size_t>(n));
    const bool last = sent + static_cast<std::uint64_t>(n) == size;
    if (last) record(size, true);
    if (!r.out.write(std::string_view(buf.data(), static_cast<size_t>(n)))) {
      if (last) return;  // recorded whole: the client may have all but the end
      break;
    }
    sent += static_cast<std::uint64_t>(n);
  }
  if (sent != size) {
    record(sent, false);
    return;
  }
  t->lease.settle();  // all sent, the record written: a teardown now waits for the end
  (void)r.out.finish();
}

void handle_file_delete(ApiContext& ctx, ApiRequest& r) {
  auto path = path_param(r);
  if (!path) return;
  auto t = open_target(ctx, r);
  if (!t) return;
  const bool recursive = query_flag(r, "recursive");
  if (auto st = t->root->remove(*path, recursive); !st)
    return refuse(ctx, r, *t, "delete", *path, file_error(st.error()), {{"recursive", recursive}});
  audit_file(ctx.sandboxes, t->sandbox->id, "delete", *path, {{"recursive", recursive}});
  send_json(r.out, 200, "{\"deleted\":" + echo_path(ctx, *t, *path) + "}");
}

void handle_file_list(ApiContext& ctx, ApiRequest& r) {
  auto path = path_param(r);
  if (!path) return;
  auto t = open_target(ctx, r);
  if (!t) return;
  auto listing = t->root->list(*path);
  if (!listing) return refuse(ctx, r, *t, "list", *path, file_error(listing.error()));
  std::vector<api::FileEntry> entries;
  FileRedactor redactor(ctx.sandboxes, t->sandbox->id);
  for (auto& f : listing->entries) entries.push_back(entry_of(std::move(f), redactor));
  audit_file(ctx.sandboxes, t->sandbox->id, "list", *path, {{"entries", entries.size()}});
  send_json(r.out, 200, api::to_json(entries, listing->truncated));
}

void handle_file_stat(ApiContext& ctx, ApiRequest& r) {
  auto path = path_param(r);
  if (!path) return;
  auto t = open_target(ctx, r);
  if (!t) return;
  auto info = t->root->stat(*path);
  if (!info) return refuse(ctx, r, *t, "stat", *path, file_error(info.error()));
  audit_file(ctx.sandboxes, t->sandbox->id, "stat", *path);
  FileRedactor redactor(ctx.sandboxes, t->sandbox->id);
  send_json(r.out, 200, api::to_json(entry_of(std::move(*info), redactor)));
}

void handle_file_mkdir(ApiContext& ctx, ApiRequest& r) {
  auto body = read_json_body(r, ctx.limits.max_json_body);
  if (!body) return send_error(r.out, body.error());
  auto request = api::parse_mkdir(*body);
  if (!request) return send_error(r.out, api::to_api_error(request.error()));
  auto t = open_target(ctx, r);
  if (!t) return;
  // Owned by the sandbox's user, like uploads.
  const uid_t uid = file_owner(*t->sandbox);
  if (auto st = t->root->mkdir(request->path, request->mode, request->parents, uid, uid); !st)
    return refuse(ctx, r, *t, "mkdir", request->path, file_error(st.error()),
                  {{"parents", request->parents}});
  audit_file(ctx.sandboxes, t->sandbox->id, "mkdir", request->path,
             {{"parents", request->parents}});
  send_json(r.out, 201, "{\"path\":" + echo_path(ctx, *t, request->path) + "}");
}

void handle_file_rename(ApiContext& ctx, ApiRequest& r) {
  auto body = read_json_body(r, ctx.limits.max_json_body);
  if (!body) return send_error(r.out, body.error());
  auto request = api::parse_rename(*body);
  if (!request) return send_error(r.out, api::to_api_error(request.error()));
  auto t = open_target(ctx, r);
  if (!t) return;
  if (auto st = t->root->rename(request->from, request->to, !request->overwrite); !st)
    return refuse(ctx, r, *t, "rename", request->from, file_error(st.error()),
                  {{"to", request->to}});
  audit_file(ctx.sandboxes, t->sandbox->id, "rename", request->from, {{"to", request->to}});
  send_json(r.out, 200,
            "{\"from\":" + echo_path(ctx, *t, request->from) +
                ",\"to\":" + echo_path(ctx, *t, request->to) + "}");
}

}  // namespace corral::daemon
